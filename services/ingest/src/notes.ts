import type { Note } from '@neatroots/messages';

/**
 * Where notes and halts go once a replica of ingest has them: to the open Subscribe streams of
 * the note's run and of its whole project, and, when no stream of the run is open here, into a
 * small per-run mailbox that the next Export touching the run empties (piggybacked delivery).
 *
 * Every replica reads every note (one consumer group per replica), so with several replicas a
 * note can be handed out by more than one of them; notes carry an id and the SDK ignores the
 * ones it has seen. The mailboxes are bounded (runs and notes per run, oldest out first) and
 * expire, so an agent that never comes back costs a bounded amount of memory.
 *
 * One note per group per run: checks in one group are one problem (docs/checks.md), and the
 * rule engine and the question service each keep that within their own findings only, so a
 * rule and a question of one group (the library's `tool-result`, `loop`, `ending`) would each
 * send theirs. The first note of a group in a run goes out; a later one of the same group with
 * another id is held back (`onGrouped`). Halts always go. Notes of a run arrive in one order
 * at every replica (the notes topic is keyed by run), so replicas agree on which went. What
 * the hub remembers is bounded (`maxGroupedRuns`, least recently noted out first) and kept
 * `groupTtlMs` after a run's last grouped note: past either, a later note of the group goes.
 */
export interface NoteHubOptions {
  /** Notes kept per run (oldest dropped first). Default 32. */
  maxPerRun?: number;
  /** Runs with kept notes (least recently touched dropped first). Default 10,000. */
  maxRuns?: number;
  /** How long a kept note waits for its run's next export. Default 10 minutes. */
  ttlMs?: number;
  now?: () => number;
  /** Told how many kept notes were dropped (expiry or bounds). */
  onDropped?: (n: number) => void;
  /** Runs whose noted groups are remembered (least recently noted dropped first). Default 50,000. */
  maxGroupedRuns?: number;
  /** How long a run's noted groups are remembered after its last grouped note. Default 6 hours. */
  groupTtlMs?: number;
  /** Told of a note held back because its group already sent one in the run. */
  onGrouped?: (note: Note) => void;
}

export interface NoteStream {
  project: string;
  /** Empty: every run of the project. */
  runId: string;
  write(note: Note): void;
}

interface Mailbox {
  notes: { note: Note; expires: number }[];
}

/** A run's groups that sent a note: group -> the note's id. */
interface Noted {
  groups: Map<string, string>;
  expires: number;
}

function key(project: string, runId: string): string {
  return `${project}\u0000${runId}`;
}

export class NoteHub {
  private readonly streams = new Set<NoteStream>();
  private readonly mailboxes = new Map<string, Mailbox>();
  private readonly maxPerRun: number;
  private readonly maxRuns: number;
  private readonly ttlMs: number;
  private readonly now: () => number;
  private readonly onDropped: (n: number) => void;
  private readonly noted = new Map<string, Noted>();
  private readonly maxGroupedRuns: number;
  private readonly groupTtlMs: number;
  private readonly onGrouped: (note: Note) => void;

  constructor(opts: NoteHubOptions = {}) {
    this.maxPerRun = opts.maxPerRun ?? 32;
    this.maxRuns = opts.maxRuns ?? 10_000;
    this.ttlMs = opts.ttlMs ?? 10 * 60_000;
    this.now = opts.now ?? Date.now;
    this.onDropped = opts.onDropped ?? (() => undefined);
    this.maxGroupedRuns = opts.maxGroupedRuns ?? 50_000;
    this.groupTtlMs = opts.groupTtlMs ?? 6 * 60 * 60_000;
    this.onGrouped = opts.onGrouped ?? (() => undefined);
  }

  get streamCount(): number {
    return this.streams.size;
  }

  /** Registers a Subscribe stream; returns the notes kept for its run (now handed to it) and how to remove it. */
  addStream(stream: NoteStream): { kept: Note[]; remove: () => void } {
    this.streams.add(stream);
    const kept = stream.runId ? this.take(stream.project, [stream.runId]) : [];
    return { kept, remove: () => this.streams.delete(stream) };
  }

  /** The open streams a note goes to. */
  private targets(note: Note): NoteStream[] {
    const out: NoteStream[] = [];
    for (const s of this.streams) {
      if (s.project !== note.project) continue;
      // A project-wide stream takes every note of the project; a run's stream its run's notes,
      // and notes addressed to the whole project (empty run_id).
      if (!s.runId || !note.run_id || s.runId === note.run_id) out.push(s);
    }
    return out;
  }

  /**
   * Hands a note to the open streams it belongs to; keeps it for piggybacking unless a stream of
   * its run took it (for a note to the whole project, a stream of any of its runs). A stream
   * watching the whole project (the app, a monitor) is not the agent: an agent without a stream
   * of its own (subscribe off, or its stream reconnecting) still gets the note, a halt too, on
   * its run's next export. Returns the number of streams that took it.
   */
  route(routed: Note): number {
    const { group, ...note } = routed;
    if (group && note.kind !== 'halt' && !this.firstOfGroup(note, group)) {
      this.onGrouped(note);
      return 0;
    }
    let delivered = 0;
    let toRun = false;
    for (const s of this.targets(note)) {
      try {
        s.write(note);
        delivered++;
        if (s.runId) toRun = true;
      } catch {
        // A stream that broke meanwhile: its close handler removes it.
      }
    }
    if (!toRun) this.keep(note);
    return delivered;
  }

  /**
   * Whether this note is its group's in the run: the first of the group seen, or the same note
   * again (a redelivery: the agent's SDK ignores ids it has seen).
   */
  private firstOfGroup(note: Note, group: string): boolean {
    const k = key(note.project, note.run_id);
    const now = this.now();
    let run = this.noted.get(k);
    if (run) this.noted.delete(k); // re-insert: Map order is the recency order
    if (!run || run.expires <= now) run = { groups: new Map(), expires: 0 };
    run.expires = now + this.groupTtlMs;
    this.noted.set(k, run);
    const first = run.groups.get(group);
    if (first === undefined) {
      run.groups.set(group, note.id);
      while (this.noted.size > this.maxGroupedRuns) this.noted.delete(this.noted.keys().next().value as string);
      return true;
    }
    return first === note.id;
  }

  private keep(note: Note): void {
    const k = key(note.project, note.run_id);
    let box = this.mailboxes.get(k);
    if (box) this.mailboxes.delete(k); // re-insert: Map order is the recency order
    else box = { notes: [] };
    if (box.notes.some((n) => n.note.id === note.id)) {
      this.mailboxes.set(k, box);
      return;
    }
    box.notes.push({ note, expires: this.now() + this.ttlMs });
    if (box.notes.length > this.maxPerRun) {
      const dropped = box.notes.length - this.maxPerRun;
      box.notes.splice(0, dropped);
      this.onDropped(dropped);
    }
    this.mailboxes.set(k, box);
    while (this.mailboxes.size > this.maxRuns) {
      const oldest = this.mailboxes.keys().next().value as string;
      this.onDropped(this.mailboxes.get(oldest)?.notes.length ?? 0);
      this.mailboxes.delete(oldest);
    }
  }

  /** Takes the kept notes of these runs (and the project-wide ones), oldest first. */
  take(project: string, runIds: Iterable<string>): Note[] {
    const now = this.now();
    const out: Note[] = [];
    const seen = new Set<string>();
    for (const runId of [...new Set(runIds), '']) {
      const k = key(project, runId);
      const box = this.mailboxes.get(k);
      if (!box) continue;
      this.mailboxes.delete(k);
      let expired = 0;
      for (const { note, expires } of box.notes) {
        if (expires <= now) expired++;
        else if (!seen.has(note.id)) {
          seen.add(note.id);
          out.push(note);
        }
      }
      if (expired) this.onDropped(expired);
    }
    return out.sort((a, b) => a.at_ms - b.at_ms);
  }

  /** Drops expired notes (called from a timer so idle runs do not hold memory until the bound). */
  sweep(): void {
    const now = this.now();
    for (const [k, run] of this.noted) if (run.expires <= now) this.noted.delete(k);
    for (const [k, box] of this.mailboxes) {
      const before = box.notes.length;
      box.notes = box.notes.filter((n) => n.expires > now);
      if (box.notes.length !== before) this.onDropped(before - box.notes.length);
      if (!box.notes.length) this.mailboxes.delete(k);
    }
  }

  /** Removes every stream and returns them (shutdown ends them). */
  drainStreams(): NoteStream[] {
    const all = [...this.streams];
    this.streams.clear();
    return all;
  }
}
