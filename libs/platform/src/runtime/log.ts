import pino from 'pino';
import { prettyFactory } from 'pino-pretty';
import type { LogFields, Logger } from '@neatroots/ports';

/**
 * The one logger every process uses (STYLE: operable logs). Structured: each line carries its
 * level, the service that wrote it and, where there is one, the project and run ids, so a log
 * pipeline can filter on them. JSON lines in the distributed deployment (what log collectors
 * read), readable lines on a terminal.
 */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LOG_FORMATS = ['json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];


export interface LoggerOptions {
  level?: LogLevel;
  format?: LogFormat;
  /** Where lines go (one call per line, without the newline); default standard error. */
  write?: (line: string) => void;
  /** Fields on every line. */
  base?: LogFields;
}

/** The format to use when none is configured: readable on a terminal, JSON otherwise. */
export function defaultLogFormat(stream: { isTTY?: boolean } = process.stderr): LogFormat {
  return stream.isTTY ? 'pretty' : 'json';
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const write = opts.write ?? ((line: string) => process.stderr.write(`${line}\n`));
  const format = opts.format ?? defaultLogFormat();
  // pino-pretty's formatter runs in this thread on each line (no transport worker), so the
  // lines of `neatroots start` stay in order with what the CLI prints.
  const pretty = format === 'pretty' ? prettyFactory({
          colorize: false,
          translateTime: 'SYS:HH:MM:ss.l',
          ignore: 'pid,hostname,service',
          singleLine: true,
          messageFormat: '{if service}{service}: {end}{msg}',
        }) : undefined;
  const root = pino(
    { level: opts.level ?? 'info', base: opts.base ?? {}, timestamp: pino.stdTimeFunctions.isoTime, formatters: { level: (label) => ({ level: label }) } },
    { write: (s: string) => write((pretty ? pretty(s) : s).replace(/\n$/, '')) },
  );
  return wrap(root);
}

export type { LogFields, Logger };

function wrap(p: pino.Logger): Logger {
  return {
    debug: (msg, fields) => p.debug(fields ?? {}, msg),
    info: (msg, fields) => p.info(fields ?? {}, msg),
    warn: (msg, fields) => p.warn(fields ?? {}, msg),
    error: (msg, err, fields) => p.error({ ...fields, ...(err !== undefined && err !== '' ? { err: errorFields(err) } : {}) }, msg),
    child: (fields) => wrap(p.child(fields)),
  };
}

function errorFields(err: unknown): unknown {
  if (err instanceof Error) return { type: err.name, message: err.message, stack: err.stack, ...((err as { code?: unknown }).code !== undefined ? { code: (err as { code?: unknown }).code } : {}) };
  return err;
}

/** A logger that drops everything (tests, benchmarks). */
export const silentLogger: Logger = createLogger({ level: 'silent', format: 'json', write: () => undefined });

/**
 * Runs `fn`, warning every `everyMs` while it is not done (a stop step waiting on something that
 * does not end: which one it is, in the log, before a supervisor kills the process).
 */
export async function warnWhileSlow<T>(log: Pick<Logger, 'warn'>, what: string, fn: () => T | Promise<T>, everyMs = 15_000): Promise<T> {
  const t0 = Date.now();
  const timer = setInterval(() => log.warn(`${what}: not done after ${Math.round((Date.now() - t0) / 1000)} s`), everyMs);
  timer.unref();
  try {
    return await fn();
  } finally {
    clearInterval(timer);
  }
}
