import { strings, UsageError, type FlagSpec, type Parsed } from './args';
import type { Io } from './cli';
import { send, SendTimeout, type Sent } from './http-send';

/**
 * The CLI's client of a running server's REST API (sopops push, publish, and the commands
 * that act on a workspace). Where: --url, else NEATROOTS_URL, else the local default. Which
 * key: --key, else NEATROOTS_API_KEY. Every refusal is printed as the API words it (with
 * sopc's FILE:LINE lines for a folder that does not compile) and exits 1; an unreachable
 * server says where it looked.
 */
export const API_FLAGS: Record<string, FlagSpec> = {
  url: { value: true },
  key: { value: true },
  workspace: { value: true },
};

export const API_HELP = `Server: --url URL (default NEATROOTS_URL, else http://127.0.0.1:8080); API key: --key KEY
(default NEATROOTS_API_KEY); workspace: --workspace WS (default NEATROOTS_WORKSPACE).`;

export interface ApiTarget {
  url: string;
  key: string;
  workspace: string;
}

/** A check problem as the checks endpoints give it (`error.problems`). */
export interface ApiCheckProblem {
  check_id?: string;
  field?: string;
  reason: string;
  line?: number;
  message: string;
}

export class ApiCallError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly lines: string[] = [],
    /** A check that did not validate: each problem, with its field and YAML line. */
    readonly problems: ApiCheckProblem[] = [],
    /** The API's error code (`invalid_check`, `refused`...). */
    readonly code?: string,
  ) {
    super(message);
    this.name = 'ApiCallError';
  }
}

function one(p: Parsed, name: string): string | undefined {
  const v = strings(p, name);
  return v.length ? v[v.length - 1] : undefined;
}

export function apiTarget(p: Parsed, io: Io): ApiTarget {
  const url = (one(p, 'url') ?? io.env.NEATROOTS_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]+/.test(url)) throw new UsageError(`--url must be an http(s) URL, got ${url}`);
  const key = one(p, 'key') ?? io.env.NEATROOTS_API_KEY;
  if (!key) throw new UsageError('an API key is needed: --key KEY or NEATROOTS_API_KEY');
  const workspace = one(p, 'workspace') ?? io.env.NEATROOTS_WORKSPACE;
  if (!workspace) throw new UsageError('which workspace: --workspace WS or NEATROOTS_WORKSPACE');
  return { url, key, workspace };
}

/**
 * How long a call waits for its answer. Most answer at once; recluster and calibrate run a job
 * that calls the models, and the API answers when it is done: the review service lets a
 * recluster run 10 minutes and the api waits 11 for it, so these wait 12.
 */
export const CALL_WAIT_MS = 5 * 60_000;
export const LONG_CALL_WAIT_MS = 12 * 60_000;

/** One call to the workspace's API; resolves with the JSON answer, or throws ApiCallError. */
export function workspaceCall<T>(t: ApiTarget, method: string, path: string, body?: { json: unknown } | { text: string }, opts?: { waitMs?: number }): Promise<T> {
  return apiCall<T>(t, method, `/v1/workspaces/${encodeURIComponent(t.workspace)}${path}`, body, opts);
}

/** One call to the API at `path` (from /v1 on); resolves with the JSON answer, or throws ApiCallError. */
export async function apiCall<T>(
  t: { url: string; key: string },
  method: string,
  path: string,
  body?: { json: unknown } | { text: string },
  /** `afterTimeout`: what the message says when no answer came in time (default: the server may still be working on it). */
  opts?: { waitMs?: number; afterTimeout?: string },
): Promise<T> {
  const url = `${t.url}${path}`;
  let res: Sent;
  try {
    res = await send(url, {
      method,
      headers: {
        'x-api-key': t.key,
        ...(body ? { 'content-type': 'json' in body ? 'application/json' : 'text/plain; charset=utf-8' } : {}),
      },
      body: body ? ('json' in body ? JSON.stringify(body.json) : body.text) : undefined,
      waitMs: opts?.waitMs ?? CALL_WAIT_MS,
    });
  } catch (err) {
    if (err instanceof SendTimeout) throw new ApiCallError(`${method} ${url}: ${err.message}: ${opts?.afterTimeout ?? 'the server may still be working on it'}`, 0);
    const e = err as { code?: string; message?: string };
    throw new ApiCallError(`cannot reach the neatroots API at ${t.url} (${e.code ?? e.message}): is the server running (neatroots start) and --url right?`, 0);
  }
  const text = res.text;
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (res.status >= 200 && res.status < 300) return parsed as T;
  const error = (parsed as { error?: { code?: string; message?: string; issues?: { file: string; line: number; message: string }[]; problems?: ApiCheckProblem[] } } | null)?.error;
  const lines = (error?.issues ?? []).map((i) => `${i.file}:${i.line}: ${i.message}`);
  throw new ApiCallError(
    `${method} ${url}: ${res.status} ${error?.code ?? ''}${error?.message ? `: ${error.message}` : text ? `: ${text.slice(0, 200)}` : ''}`,
    res.status,
    lines,
    error?.problems ?? [],
    error?.code,
  );
}

/** Prints an ApiCallError as the command's failure (exit 1); anything else is rethrown. */
export function reportApiError(prog: string, err: unknown, io: Io): number {
  if (!(err instanceof ApiCallError)) throw err;
  io.err(`${prog}: ${err.message}`);
  for (const l of err.lines) io.err(l);
  return 1;
}
