import type { CounterPort } from '@neatroots/ports';
import type { ModelOutcome } from '@neatroots/questions';

/** Every outcome a model request may have (neatroots_model_requests_total's `outcome` label). */
export const MODEL_OUTCOMES: readonly ModelOutcome[] = ['ok', 'timeout', 'rate_limited', 'server', 'connection', 'rejected', 'malformed', 'aborted'];

/** How often a failing model is said in the log, at most: one line per endpoint a minute. */
export const MODEL_WARNING_EVERY_MS = 60_000;

const WHAT: Record<Exclude<ModelOutcome, 'ok' | 'aborted'>, string> = {
  timeout: 'timed out',
  rate_limited: 'rate-limited requests',
  server: 'failed requests',
  connection: 'could not be reached',
  rejected: 'rejected requests',
  malformed: 'gave replies that could not be read',
};

/** The log line of a failed request: `the decision model rejected requests (HTTP 401): Incorrect API key provided`. */
export function modelFailureLine(endpoint: string, outcome: Exclude<ModelOutcome, 'ok' | 'aborted'>, err: unknown): string {
  const e = err as { message?: unknown; status?: unknown } | undefined;
  const status = typeof e?.status === 'number' ? e.status : undefined;
  let message = typeof e?.message === 'string' ? e.message : String(err ?? 'no reason given');
  // The adapter writes an HTTP failure "HTTP 401: what the server said"; the status is said once.
  if (status !== undefined && message.startsWith(`HTTP ${status}: `)) message = message.slice(`HTTP ${status}: `.length);
  return `the ${endpoint} model ${WHAT[outcome]}${status !== undefined ? ` (HTTP ${status})` : ''}: ${message.slice(0, 300).replace(/[\s.]+$/, '')}`;
}

/**
 * What the question service does with each model request's outcome (ModelQueueOptions.onRequest):
 * counts it in neatroots_model_requests_total{endpoint,outcome}, and says a failure in the log,
 * one line per endpoint a minute at most (the next one counts those left out). A caller that
 * gave up (`aborted`) is counted, not logged: the model did nothing wrong. The error's message
 * is the adapter's, which never holds the key.
 */
export function modelRequestWatch(opts: {
  counter: CounterPort;
  warn: (msg: string, fields: Record<string, unknown>) => void;
  everyMs?: number;
  now?: () => number;
}): (endpoint: string, outcome: ModelOutcome, err?: unknown) => void {
  const everyMs = opts.everyMs ?? MODEL_WARNING_EVERY_MS;
  const now = opts.now ?? Date.now;
  const said = new Map<string, { at: number; since: number }>();
  return (endpoint, outcome, err) => {
    opts.counter.inc({ endpoint, outcome });
    if (outcome === 'ok' || outcome === 'aborted') return;
    const t = now();
    const last = said.get(endpoint);
    if (last && t - last.at < everyMs) {
      last.since++;
      return;
    }
    const more = last?.since ? ` (${last.since} more failed request${last.since === 1 ? '' : 's'} to it since the last such line, not logged)` : '';
    said.set(endpoint, { at: t, since: 0 });
    const status = (err as { status?: unknown } | undefined)?.status;
    opts.warn(`${modelFailureLine(endpoint, outcome, err)}; what was asked of it is not checked or answered${more}`, {
      endpoint,
      outcome,
      ...(typeof status === 'number' ? { status } : {}),
    });
  };
}
