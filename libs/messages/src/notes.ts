import type { NoteOut } from '@neatroots/checks';
import type { v1 } from '@neatroots/proto';

/**
 * A note or halt on its way to an agent (neatroots.v1.Note): the one the engine raises with a
 * finding (@neatroots/checks owns its fields). Its run_id is empty for every run of the project.
 */
export type Note = NoteOut;

/** `halt` asks the agent to stop; anything else is advice. */
export type NoteKind = Note['kind'];

/** Published by ingest when a note reached an agent: the finding becomes active. */
export interface NoteDelivered {
  note_id: string;
  finding_id: string;
  project: string;
  at_ms: number;
}

export function noteFromProto(msg: v1.Note): Note {
  // An unknown kind is delivered as advice: stopping an agent takes an explicit halt.
  const kind: NoteKind = msg.kind === 'halt' ? 'halt' : 'note';
  return { ...msg, kind };
}
