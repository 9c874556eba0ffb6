import type { Topic } from '@neatroots/ports';
import { encodeMessage, v1 } from '@neatroots/proto';
import type { Envelope } from '@neatroots/spans';
import { envelopeFromBus, envelopeToProto } from './envelope';
import { findingFromProto, findingToProto, type FindingMessage } from './findings';
import { noteFromProto, type Note, type NoteDelivered } from './notes';
import { questionTasksBytes, questionTasksFromBytes, type QuestionTaskMessage } from './questions';

/** The bus topics: each a name and its codec, passed straight to the bus port. */
export interface Topics {
  /** Accepted spans and run events (Envelope), key run_id. */
  events: Topic<Envelope>;
  /** Finding events from the rule engine, key run_id. */
  findings: Topic<FindingMessage>;
  /** Notes and halts for agents, key run_id. */
  notes: Topic<Note>;
  /** Notes that reached an agent, key finding_id. */
  deliveries: Topic<NoteDelivered>;
  /**
   * Question checks that are due, from the rule engine to the question service, key run_id: a
   * record is one run's tasks from one step (QuestionTasks; see questionTaskRecords).
   */
  questions: Topic<QuestionTaskMessage[]>;
}

export const DEFAULT_TOPIC_PREFIX = 'neatroots';

function topic<T>(name: string, encode: (v: T) => Uint8Array, decode: (b: Uint8Array) => T): Topic<T> {
  return { name, encode, decode };
}

/**
 * The bus topics, named `<prefix>.events`, `<prefix>.findings`, `<prefix>.notes`,
 * `<prefix>.deliveries` and `<prefix>.questions` (several deployments can share one Kafka
 * cluster under different prefixes).
 */
export function makeTopics(prefix: string = DEFAULT_TOPIC_PREFIX): Topics {
  return {
    events: topic<Envelope>(
      `${prefix}.events`,
      (env) => encodeMessage(v1.Envelope, envelopeToProto(env)),
      (bytes) => envelopeFromBus(v1.Envelope.decode(bytes)),
    ),
    findings: topic<FindingMessage>(
      `${prefix}.findings`,
      (f) => encodeMessage(v1.FindingEvent, findingToProto(f)),
      (bytes) => findingFromProto(v1.FindingEvent.decode(bytes)),
    ),
    notes: topic<Note>(
      `${prefix}.notes`,
      // Wrapped in NoteEnvelope: routing fields (the check's group) travel beside the note.
      (n) => encodeMessage(v1.NoteEnvelope, { note: n, group: n.group ?? '' }),
      (bytes) => {
        const env = v1.NoteEnvelope.decode(bytes);
        if (!env.note) throw new Error('note envelope without a note');
        const note = noteFromProto(env.note);
        return env.group ? { ...note, group: env.group } : note;
      },
    ),
    deliveries: topic<NoteDelivered>(
      `${prefix}.deliveries`,
      (d) => encodeMessage(v1.NoteDelivered, d),
      (bytes) => v1.NoteDelivered.decode(bytes),
    ),
    questions: topic<QuestionTaskMessage[]>(
      `${prefix}.questions`,
      questionTasksBytes,
      questionTasksFromBytes,
    ),
  };
}

const DEFAULT_TOPICS = makeTopics();
export const EVENTS_TOPIC: Topic<Envelope> = DEFAULT_TOPICS.events;
export const FINDINGS_TOPIC: Topic<FindingMessage> = DEFAULT_TOPICS.findings;
export const NOTES_TOPIC: Topic<Note> = DEFAULT_TOPICS.notes;
export const DELIVERIES_TOPIC: Topic<NoteDelivered> = DEFAULT_TOPICS.deliveries;
export const QUESTIONS_TOPIC: Topic<QuestionTaskMessage[]> = DEFAULT_TOPICS.questions;
