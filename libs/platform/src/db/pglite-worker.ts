import * as fs from 'node:fs';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import type { Db, QueryResult, Queryable, Statement } from '@neatroots/ports';

/**
 * PGlite on its own thread. PGlite is Postgres compiled to WASM and runs on the thread that
 * calls it; in the embedded deployment that thread also decodes gRPC and runs the rule
 * engine, so storing spans competed with checking them. Here the database runs in a
 * worker thread (the machine's second core) and the main thread only posts queries.
 *
 * Semantics are PGlite's: one connection, calls in order, and a transaction holds the
 * connection, so a call made outside `transaction()` waits until the transaction ends.
 */
export interface PgliteWorkerOptions {
  /** A folder to keep the database in; in memory when absent. */
  dataDir?: string;
  /**
   * With a data folder: a checkpoint once this much WAL was written since the last one (0: only
   * PGlite's own). PGlite runs Postgres as a single user with no checkpointer process and
   * `max_wal_size` fixed at 1 GB, so without this the folder's `pg_wal` grows to about 1 GB and a
   * start after a crash replays all of it. Default 64 MB.
   */
  checkpointWalBytes?: number;
  /** How often the WAL written since the last checkpoint is looked at (default 5 s). */
  checkpointPollMs?: number;
  /** Each checkpoint taken: the WAL it covered and how long it held the database. */
  onCheckpoint?: (c: WalCheckpoint) => void;
  /** A failed look or checkpoint (the next poll tries again). */
  onCheckpointError?: (err: unknown) => void;
  /**
   * Keeping the planner's statistics (ANALYZE): on unless false. PGlite has no autovacuum, so
   * without this a table is never analyzed and the planner guesses every table holds a few rows:
   * with 100,000 findings Home's list took 8-16 s a page, a nested loop over all of them.
   */
  analyze?: AnalyzeOptions | false;
  /**
   * Faults to inject, for tests: `walSync`, an error code the next sync of a call's WAL fails
   * with; `abortOn`, a statement on which PGlite is made to abort (its WebAssembly traps).
   */
  faults?: { walSync?: string; abortOn?: string };
}

export interface WalCheckpoint {
  walBytes: number;
  ms: number;
}

/**
 * When the embedded database analyzes its tables (the autovacuum daemon's analyze, which PGlite
 * lacks): when asked (`analyze()`, the platform's after migrating, in the background), and at a
 * look every `pollMs` once `walBytes` of WAL were written since the last analysis, or `everyMs`
 * passed with at least `minWalBytes` written. An analysis goes table by table, each ANALYZE a call
 * in turn with the others (sampled: about 1.3 s for the largest table of a 350 MB database on this
 * project's loaded machine), and a close stops it after the table in hand.
 */
export interface AnalyzeOptions {
  /** How often the WAL written since the last analysis is looked at (default 60 s). */
  pollMs?: number;
  /** An analysis at the next look past this much WAL (default a tenth of the database's size at the last analysis, at least 16 MB). */
  walBytes?: number;
  /** And at the next look this long after the last analysis (default 10 min)... */
  everyMs?: number;
  /** ...when at least this much WAL was written since (default 1 MB). */
  minWalBytes?: number;
  /** Each analysis done (or stopped by a close). */
  onAnalyze?: (a: Analysis) => void;
  /** A failed look or analysis (the next look tries again). */
  onAnalyzeError?: (err: unknown) => void;
}

export interface Analysis {
  /** asked: analyze() (after migrations); written: walBytes reached; timer: everyMs passed. */
  why: 'asked' | 'written' | 'timer';
  /** The tables analyzed, and how many there were. */
  analyzed: number;
  tables: number;
  ms: number;
  /** The table that took longest, and how long. */
  longest?: { table: string; ms: number };
  /** A close stopped it before the last table. */
  stopped: boolean;
}

/** The embedded database: a Db, and its analysis and syncs. */
export interface PgliteWorkerDb extends Db {
  /** Analyzes every table now, one by one between other calls (the one under way if there is one). */
  analyze(): Promise<Analysis>;
  syncs(): Promise<DbSyncs>;
}

export const DEFAULT_ANALYZE: Required<Omit<AnalyzeOptions, 'walBytes' | 'onAnalyze' | 'onAnalyzeError'>> = {
  pollMs: 60_000,
  everyMs: 10 * 60_000,
  minWalBytes: 2 ** 20,
};
const MIN_ANALYZE_WAL_BYTES = 16 * 2 ** 20;

/** The tables an analysis covers: every one outside the system's schemas, smallest first. */
const TABLES_SQL = `SELECT format('%I.%I', n.nspname, c.relname) AS name
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind IN ('r', 'p', 'm') AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
  ORDER BY pg_relation_size(c.oid), 1`;
/** Where the WAL is (bytes from its start) and how large the database is. */
const WAL_SQL = `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint AS wal, pg_database_size(current_database())::bigint AS bytes`;

/** A call the analysis makes after the database closed: it stops there. */
class Closed extends Error {}

/**
 * What a data folder's database synced to disk since it opened: `wal`, the WAL files synced
 * before answering a call that wrote to them; `files`, Postgres's own fsync calls (a checkpoint's
 * data files, a new WAL segment, a folder); `synced`, the files and folders synced since the last
 * look (relative to the folder).
 */
export interface DbSyncs {
  wal: number;
  files: number;
  synced: string[];
}

export const DEFAULT_CHECKPOINT_WAL_BYTES = 64 * 1024 * 1024;

interface Reply {
  id: number;
  ok: boolean;
  rows?: unknown[];
  affectedRows?: number;
  /** A batch's results, one a statement. */
  results?: { rows: Record<string, unknown>[]; affectedRows?: number }[];
  syncs?: DbSyncs;
  /** The database takes no more calls (a failed WAL sync). */
  fatal?: boolean;
  error?: { message: string; code?: string; detail?: string; hint?: string };
}

// Runs in the worker. Plain JavaScript in a string, so it works from the TypeScript sources
// (tests) and from the build alike; PGlite loads its WASM with import(), which a worker allows.
const THREAD = `
const fs = require('node:fs');
const path = require('node:path');
const { parentPort, workerData } = require('node:worker_threads');
const { PGlite } = require(workerData.pglite);
let pg;
// A data folder's syncs (see durable() below); none in memory.
const noSync = () => undefined;
let syncWal = noSync;
const syncs = { wal: 0, files: 0, synced: new Set() };
const ready = (workerData.dataDir ? openFolder(workerData.dataDir) : PGlite.create()).then((p) => {
  pg = p;
  if (workerData.dataDir) syncWal = durable(p);
});

// PGlite's initdb writes in place and marks nothing complete, so a first start stopped during it
// (a signal, kill -9, a full disk) left a folder that looked like a database and could never be
// opened. A new database is now made with a marker beside it, <dir>.initdb, written (and synced)
// before initdb starts and removed once the database it made is synced, before any call is
// answered: a folder with the marker beside it holds nothing but an unfinished initdb and is made
// afresh. A folder without the marker is never removed.
async function openFolder(dir) {
  const marker = dir + '.initdb';
  const unfinished = fs.existsSync(marker);
  if (!unfinished && (fs.existsSync(path.join(dir, 'PG_VERSION')) || !isEmptyOrAbsent(dir))) return PGlite.create(dir);
  if (!unfinished) {
    fs.writeFileSync(marker, 'an initdb under way: the database beside this file is unfinished and is made again at the next start');
    syncDir(path.dirname(dir));
  }
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const made = await PGlite.create(dir);
  syncTree(dir);
  fs.unlinkSync(marker);
  syncDir(path.dirname(dir));
  return made;
}
function isEmptyOrAbsent(dir) {
  try { return fs.readdirSync(dir).length === 0; } catch (e) { if (e && e.code === 'ENOENT') return true; throw e; }
}
function syncDir(dir) {
  const fd = fs.openSync(dir, 'r');
  try { fs.fsyncSync(fd); } finally { fs.closeSync(fd); }
}
function syncTree(dir) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) syncTree(p);
    else if (e.isFile()) { const fd = fs.openSync(p, 'r'); try { fs.fsyncSync(fd); } finally { fs.closeSync(fd); } }
  }
  syncDir(dir);
}

// PGlite's file system (Emscripten's NODEFS) makes fsync and fdatasync no-ops: what Postgres
// wrote sits in the page cache, and a power cut (not a process crash) could take committed rows
// and corrupt the files. Here Postgres's own fsync() calls (checkpoints, new WAL segments, the
// folders it renames in) reach the disk, and the WAL a call wrote is synced before the call is
// answered: Postgres flushes its WAL at commit with fdatasync(), which stays a no-op inside the
// WASM, so the WAL files written to are noted and synced here instead.
function durable(p) {
  const NODEFS = p.Module.FS.filesystems.NODEFS;
  const FS = p.Module.FS;
  const ops = NODEFS.stream_ops;
  const rel = (node) => { const real = NODEFS.realPath(node); return path.relative(node.mount.opts.root, real); };
  const note = (stream) => { if (syncs.synced.size < 10000) syncs.synced.add(rel(stream.node)); };
  const dirty = new Set();
  ops.fsync = (stream) => NODEFS.tryFSOperation(() => {
    if (FS.isDir(stream.node.mode)) {
      const fd = fs.openSync(NODEFS.realPath(stream.node), 'r');
      try { fs.fsyncSync(fd); } finally { fs.closeSync(fd); }
    } else if (stream.nfd !== undefined) {
      fs.fsyncSync(stream.nfd);
      dirty.delete(stream);
    }
    syncs.files++;
    note(stream);
    return 0;
  });
  const write = ops.write;
  ops.write = (stream, buffer, offset, length, position) => {
    const n = write(stream, buffer, offset, length, position);
    if (stream.nrWal === undefined) stream.nrWal = rel(stream.node).startsWith('pg_wal' + path.sep);
    if (stream.nrWal) dirty.add(stream);
    return n;
  };
  const close = ops.close;
  ops.close = (stream) => {
    if (dirty.delete(stream)) NODEFS.tryFSOperation(() => { fs.fdatasyncSync(stream.nfd); syncs.wal++; note(stream); });
    return close(stream);
  };
  const sync = () => {
    for (const stream of dirty) {
      fs.fdatasyncSync(stream.nfd);
      syncs.wal++;
      note(stream);
    }
    dirty.clear();
  };
  sync.pending = () => dirty.size > 0;
  return sync;
}

// The reply to a call, once the WAL it wrote is on disk. A sync that fails fails the call, and
// every later one: after a failed fsync the kernel may have dropped the pages it could not write
// and a second try can succeed without them, so, as Postgres does, the database stops there (the
// process reports it as failing, and a start replays the log that did reach the disk).
let broken;
let brokenCode;
function answer(m, reply) {
  try {
    if (workerData.faults && workerData.faults.walSync && syncWal.pending && syncWal.pending()) {
      const e = new Error(workerData.faults.walSync + ': injected');
      e.code = workerData.faults.walSync;
      throw e;
    }
    syncWal();
  } catch (e) {
    broken = 'the embedded database could not sync its write-ahead log (' + String(e && e.message || e) + '); it takes no more calls until the process starts again';
    brokenCode = '58030';
    // SQLSTATE 58030 (io_error): a dependency that is down, never the records' fault (bus/set-aside.ts).
    reply = { id: m.id, ok: false, fatal: true, error: { message: broken, code: '58030' } };
  }
  parentPort.postMessage(reply);
}

parentPort.on('message', async (m) => {
  if (broken && m.op !== 'syncs' && m.op !== 'close') {
    parentPort.postMessage({ id: m.id, ok: false, fatal: true, error: { message: broken, code: brokenCode } });
    return;
  }
  try {
    await ready;
    if (workerData.faults && m.sql !== undefined && m.sql === workerData.faults.abortOn) throw new WebAssembly.RuntimeError('Aborted(). Build with -sASSERTIONS for more info.');
    if (m.op === 'query') {
      const r = await pg.query(m.sql, m.params);
      answer(m, { id: m.id, ok: true, rows: r.rows, affectedRows: r.affectedRows });
    } else if (m.op === 'batch') {
      // one transaction, one message each way: PGlite's transaction() rolls back on an error
      // A statement is run only when the one before answered rows (Statement.when), as
      // runStatements in @neatroots/ports does: this thread's code is a string of its own (no
      // imports, and a function's source put in it would break under a coverage run or a
      // bundler), so the rule is written here again; the Db contract test runs both.
      const results = await pg.transaction(async (tx) => {
        const out = [];
        for (const st of m.statements) {
          if (st.when === 'rows' && !(out.length && out[out.length - 1].rows.length)) {
            out.push({ rows: [], affectedRows: 0 });
            continue;
          }
          const r = await tx.query(st.sql, st.params);
          out.push({ rows: r.rows, affectedRows: r.affectedRows });
        }
        return out;
      });
      answer(m, { id: m.id, ok: true, results });
    } else if (m.op === 'exec') {
      await pg.exec(m.sql);
      answer(m, { id: m.id, ok: true });
    } else if (m.op === 'syncs') {
      parentPort.postMessage({ id: m.id, ok: true, syncs: { wal: syncs.wal, files: syncs.files, synced: [...syncs.synced] } });
      syncs.synced.clear();
    } else if (m.op === 'close') {
      await pg.close();
      parentPort.postMessage({ id: m.id, ok: true });
    }
  } catch (e) {
    // PGlite aborted (its WebAssembly trapped, as on some disk errors): it answers nothing more.
    if (e instanceof WebAssembly.RuntimeError) {
      broken = 'the embedded database stopped (PGlite: ' + e.message + '); it takes no more calls until the process starts again';
      brokenCode = '58000';
      parentPort.postMessage({ id: m.id, ok: false, fatal: true, error: { message: broken, code: '58000' } });
      return;
    }
    answer(m, { id: m.id, ok: false, error: { message: String(e && e.message || e), code: e && e.code, detail: e && e.detail, hint: e && e.hint } });
  }
});
`;

/** An error from the database, with Postgres's SQLSTATE `code` kept (23505 and so on). */
export class DbError extends Error {
  constructor(
    message: string,
    readonly code?: string,
    readonly detail?: string,
  ) {
    super(message);
    this.name = 'DbError';
  }
}

/** A full disk makes PGlite abort with no word of why: said when little room is left. */
function diskHint(dir: string): string {
  try {
    const st = fs.statfsSync(fs.existsSync(dir) ? dir : path.dirname(dir));
    const free = st.bavail * st.bsize;
    return free < 64 * 2 ** 20 ? ` (the disk holding it has ${(free / 2 ** 20).toFixed(1)} MB free: make room, then start again)` : '';
  } catch {
    return '';
  }
}

export async function openPgliteWorker(opts: PgliteWorkerOptions = {}): Promise<PgliteWorkerDb> {
  const worker = new Worker(THREAD, {
    eval: true,
    workerData: { dataDir: opts.dataDir, pglite: require.resolve('@electric-sql/pglite'), faults: opts.faults },
  });
  const db = new WorkerDb(worker, opts.analyze === false ? undefined : opts.analyze ?? {});
  // Fails here (not on the first real query) when the database cannot open; its thread must not
  // outlive the failure (it would keep the process from exiting).
  try {
    await db.query('SELECT 1');
  } catch (err) {
    await worker.terminate().catch(() => undefined);
    if (!opts.dataDir) throw err;
    throw new DbError(`the embedded database in ${opts.dataDir} cannot be opened: ${(err as Error).message}${diskHint(opts.dataDir)}`, (err as DbError).code);
  }
  const walBytes = opts.checkpointWalBytes ?? DEFAULT_CHECKPOINT_WAL_BYTES;
  if (opts.dataDir && walBytes > 0) db.checkpointEvery(walBytes, opts.checkpointPollMs ?? 5_000, opts);
  if (opts.analyze !== false) {
    try {
      await db.analyzeEvery();
    } catch (err) {
      await db.close().catch(() => undefined);
      throw err;
    }
  }
  return db;
}

class WorkerDb implements PgliteWorkerDb {
  readonly kind = 'pglite' as const;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (r: Reply) => void; reject: (e: unknown) => void }>();
  /** The connection's owner: a transaction, or nobody (plain calls then go in order). */
  private lock: Promise<void> = Promise.resolve();
  private closed = false;
  private failed: Error | undefined;
  /** close() was called: an analysis stops at the next table. */
  private closing = false;
  private poll: NodeJS.Timeout | undefined;
  private polling = false;
  private analyzePoll: NodeJS.Timeout | undefined;
  private analyzing: Promise<Analysis> | undefined;
  /** The last analysis (or the opening): when, the WAL's position then, and the database's size. */
  private analyzed = { at: 0, wal: 0, bytes: 0 };

  constructor(
    private readonly worker: Worker,
    private readonly analyzeOpts: AnalyzeOptions | undefined,
  ) {
    worker.on('message', (r: Reply) => {
      if (r.fatal && !this.failed) this.failed = new DbError(r.error?.message ?? 'the embedded database stopped', r.error?.code);
      const p = this.pending.get(r.id);
      if (!p) return;
      this.pending.delete(r.id);
      p.resolve(r);
    });
    const fail = (err: Error) => {
      this.failed ??= err;
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    };
    // SQLSTATE 58000 (system_error): the store's batches wait and retry, nothing is set aside for it (bus/set-aside.ts).
    worker.on('error', (err) => fail(new DbError(`the embedded database's thread failed (${err.message}); it takes no more calls until the process starts again`, '58000')));
    worker.on('exit', (code) => {
      if (!this.closed) fail(new DbError(`the embedded database's thread exited (code ${code}); it takes no more calls until the process starts again`, '58000'));
    });
  }

  failure(): string | undefined {
    return this.failed?.message;
  }

  /** What the database synced to disk (see DbSyncs); nothing in memory. */
  async syncs(): Promise<DbSyncs> {
    return (await this.send('syncs')).syncs ?? { wal: 0, files: 0, synced: [] };
  }

  private send(op: 'query' | 'exec' | 'close' | 'batch' | 'syncs', sql?: string, params?: readonly unknown[], statements?: readonly Statement[]): Promise<Reply> {
    if (this.failed) return Promise.reject(this.failed);
    const id = this.nextId++;
    return new Promise<Reply>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, op, sql, params: params ? [...params] : undefined, statements });
    }).then((r) => {
      if (!r.ok) throw new DbError(r.error?.message ?? 'database error', r.error?.code, r.error?.detail);
      return r;
    });
  }

  private async direct<R>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
    const r = await this.send('query', sql, params);
    return { rows: (r.rows ?? []) as R[], affectedRows: r.affectedRows };
  }

  /** Runs `fn` when no transaction holds the connection. */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.lock.then(fn);
    this.lock = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<QueryResult<R>> {
    return this.exclusive(() => this.direct<R>(sql, params));
  }

  exec(sql: string): Promise<void> {
    return this.exclusive(async () => {
      await this.send('exec', sql);
    });
  }

  /**
   * The statements in one transaction run by the database's thread: one message there and one
   * back, where `transaction()` waits for this thread between statements (BEGIN and COMMIT
   * included), and this thread is busy with ingest and the rule engine in the embedded default.
   */
  batch(statements: readonly Statement[]): Promise<QueryResult<Record<string, unknown>>[]> {
    const plain = statements.map((s) => ({ sql: s.sql, params: s.params ? [...s.params] : undefined, when: s.when }));
    return this.exclusive(async () => (await this.send('batch', undefined, undefined, plain)).results ?? []);
  }

  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.exclusive(async () => {
      await this.send('exec', 'BEGIN');
      const tx: Queryable & { exec(sql: string): Promise<void> } = {
        query: <R>(sql: string, params?: readonly unknown[]) => this.direct<R>(sql, params),
        exec: async (sql: string) => {
          await this.send('exec', sql);
        },
      };
      try {
        const out = await fn(tx);
        await this.send('exec', 'COMMIT');
        return out;
      } catch (err) {
        await this.send('exec', 'ROLLBACK').catch(() => undefined);
        throw err;
      }
    });
  }

  /**
   * Looks every `pollMs` at the WAL written since the last checkpoint's redo point and, past
   * `walBytes`, runs CHECKPOINT in turn with the other calls (never inside a transaction). A
   * checkpoint writes the dirty pages (at most shared_buffers, 128 MB) and lets the segments
   * before it be recycled: tens of milliseconds at 64 MB on this project's machine.
   */
  checkpointEvery(walBytes: number, pollMs: number, on: Pick<PgliteWorkerOptions, 'onCheckpoint' | 'onCheckpointError'> = {}): void {
    this.poll = setInterval(() => {
      if (this.polling || this.closed || this.failed) return;
      this.polling = true;
      this.exclusive(async () => {
        if (this.closed) return;
        const r = await this.direct<{ wal: string | number }>(
          'SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), redo_lsn)::bigint AS wal FROM pg_control_checkpoint()',
        );
        const wal = Number(r.rows[0]?.wal ?? 0);
        if (wal < walBytes) return;
        const t0 = performance.now();
        await this.send('exec', 'CHECKPOINT');
        on.onCheckpoint?.({ walBytes: wal, ms: performance.now() - t0 });
      })
        .catch((err: unknown) => {
          if (!this.closed) on.onCheckpointError?.(err);
        })
        .finally(() => (this.polling = false));
    }, pollMs);
    this.poll.unref();
  }

  analyze(): Promise<Analysis> {
    return this.analysis('asked');
  }

  private analysis(why: Analysis['why']): Promise<Analysis> {
    this.analyzing ??= this.analyzeTables(why).finally(() => (this.analyzing = undefined));
    return this.analyzing;
  }

  /** A call in turn with the others, unless the database closed meanwhile. */
  private whileOpen<R>(sql: string, exec = false): Promise<QueryResult<R>> {
    return this.exclusive(async () => {
      if (this.closing || this.closed) throw new Closed('closed');
      if (!exec) return this.direct<R>(sql);
      await this.send('exec', sql);
      return { rows: [] };
    });
  }

  private async analyzeTables(why: Analysis['why']): Promise<Analysis> {
    const t0 = performance.now();
    const out: Analysis = { why, analyzed: 0, tables: 0, ms: 0, stopped: false };
    try {
      const tables = (await this.whileOpen<{ name: string }>(TABLES_SQL)).rows.map((r) => r.name);
      out.tables = tables.length;
      for (const table of tables) {
        const t = performance.now();
        await this.whileOpen(`ANALYZE ${table}`, true);
        const ms = performance.now() - t;
        out.analyzed++;
        if (!out.longest || ms > out.longest.ms) out.longest = { table, ms: Math.round(ms) };
      }
      await this.markAnalyzed();
    } catch (err) {
      if (!(err instanceof Closed)) throw err;
      out.stopped = true;
    }
    out.ms = Math.round(performance.now() - t0);
    return out;
  }

  private async markAnalyzed(): Promise<void> {
    const r = (await this.whileOpen<{ wal: string | number; bytes: string | number }>(WAL_SQL)).rows[0];
    this.analyzed = { at: Date.now(), wal: Number(r?.wal ?? 0), bytes: Number(r?.bytes ?? 0) };
  }

  /**
   * Looks every pollMs at the WAL written since the last analysis (AnalyzeOptions) and analyzes
   * when due, in the background; the opening counts as the last analysis until one is made.
   */
  async analyzeEvery(): Promise<void> {
    const o = this.analyzeOpts ?? {};
    await this.markAnalyzed();
    const pollMs = o.pollMs ?? DEFAULT_ANALYZE.pollMs;
    this.analyzePoll = setInterval(() => {
      if (this.analyzing || this.closing || this.closed || this.failed) return;
      this.whileOpen<{ wal: string | number }>(WAL_SQL)
        .then((r) => {
          const written = Number(r.rows[0]?.wal ?? 0) - this.analyzed.wal;
          const bound = o.walBytes ?? Math.max(MIN_ANALYZE_WAL_BYTES, this.analyzed.bytes / 10);
          const why = written >= bound ? 'written'
            : written >= (o.minWalBytes ?? DEFAULT_ANALYZE.minWalBytes) && Date.now() - this.analyzed.at >= (o.everyMs ?? DEFAULT_ANALYZE.everyMs) ? 'timer'
            : undefined;
          if (why === undefined || this.analyzing) return;
          return this.analysis(why).then((a) => o.onAnalyze?.(a));
        })
        .catch((err: unknown) => {
          if (!(err instanceof Closed) && !this.closing && !this.closed) o.onAnalyzeError?.(err);
        });
    }, pollMs);
    this.analyzePoll.unref();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closing = true;
    clearInterval(this.analyzePoll);
    clearInterval(this.poll);
    await this.exclusive(async () => {
      this.closed = true;
      await this.send('close').catch(() => undefined);
      await this.worker.terminate();
    });
  }
}
