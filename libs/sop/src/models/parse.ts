import type { Evidence } from '../body';

/**
 * A model's answer object to one decide-1 or check-5 question: the probability of yes, the
 * turns it cites, and its reason. Local models stray from the format (a probability as a
 * string, "answer": "yes" instead of "p", a bare turn number); what can be read is read, and
 * anything else is malformed, so the rule is not checked rather than guessed.
 */
export interface ModelAnswer {
  p: number;
  evidence: Evidence[];
  reason: string;
}

export class MalformedAnswer extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedAnswer';
  }
}

export function readModelAnswer(o: unknown): ModelAnswer {
  if (!o || typeof o !== 'object' || Array.isArray(o)) throw new MalformedAnswer('the answer is not a JSON object');
  const r = o as Record<string, unknown>;
  const p = probability(r);
  const reason = typeof r.reason === 'string' ? r.reason.trim() : '';
  return { p, evidence: evidenceOf(r.evidence), reason };
}

/** Why a model's answer object can't be read as a ModelAnswer, or undefined when it can. */
export function unusableModelAnswer(answer: object): string | undefined {
  try {
    readModelAnswer(answer);
    return undefined;
  } catch (e) {
    if (e instanceof MalformedAnswer) return e.message;
    throw e;
  }
}

/**
 * The answer checks a gateway across a process boundary knows by name (DecisionItem.answer_format):
 * a function cannot travel over gRPC, its name can.
 */
export const ANSWER_FORMATS: Readonly<Record<string, (answer: object) => string | undefined>> = {
  'sop-model-answer': unusableModelAnswer,
};

function probability(r: Record<string, unknown>): number {
  const raw = r.p ?? r.probability;
  if (raw !== undefined) {
    const n = typeof raw === 'number' ? raw : typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : NaN;
    if (!Number.isFinite(n) || n < 0 || n > 1) throw new MalformedAnswer(`"p" is not a probability from 0 to 1: ${JSON.stringify(raw).slice(0, 40)}`);
    return n;
  }
  const a = r.answer;
  if (a === true || (typeof a === 'string' && /^(yes|true)$/i.test(a.trim()))) return 1;
  if (a === false || (typeof a === 'string' && /^(no|false)$/i.test(a.trim()))) return 0;
  throw new MalformedAnswer('the answer has no "p"');
}

function evidenceOf(v: unknown): Evidence[] {
  if (!Array.isArray(v)) return [];
  const out: Evidence[] = [];
  for (const e of v) {
    if (typeof e === 'number' && Number.isInteger(e)) {
      out.push({ turn: e, quote: null, source: 'transcript' });
      continue;
    }
    if (!e || typeof e !== 'object') continue;
    const o = e as Record<string, unknown>;
    const turn = typeof o.turn === 'number' ? o.turn : typeof o.turn === 'string' ? Number(o.turn) : NaN;
    if (!Number.isInteger(turn)) continue;
    const quote = typeof o.quote === 'string' && o.quote.trim() ? o.quote.trim() : null;
    out.push({ turn, quote, source: o.source === 'tool_calls' ? 'tool_calls' : 'transcript' });
  }
  return out;
}
