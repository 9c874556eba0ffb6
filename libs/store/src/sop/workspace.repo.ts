import { randomBytes } from 'node:crypto';
import type { Db, Queryable } from '@neatroots/ports';
import { isoNonNull, json, text } from '../sql';
import { SopError } from './errors';

/** One file of a workspace's procedures folder (procedures/x.md, agents/x.yaml, groups/x.yaml). */
export interface SopFile {
  path: string;
  text: string;
  version: string;
}

export interface HeadFile extends SopFile {
  updated_at: string;
}

export interface ReleaseRecord<Lock = unknown> {
  id: string;
  workspace: string;
  number: number;
  live: boolean;
  /** What sopc exported for the release's files (procedures with their rules, agents). */
  lock: Lock;
  created_at: string;
}

/**
 * A workspace's head (the files as saved now) and its numbered releases, in Postgres (the
 * review service owns them). I/O only: whether head compiles, and what a release's lock
 * holds, is decided by the caller with sopc.
 */
export class WorkspaceRepo {
  constructor(private readonly db: Db) {}

  async headFiles(workspace: string, q: Queryable = this.db): Promise<HeadFile[]> {
    const res = await q.query<{ path: string; text: string; version: string; updated_at: unknown }>(
      'SELECT path, text, version, updated_at FROM sop_head_files WHERE workspace = $1 ORDER BY path',
      [workspace],
    );
    return res.rows.map((r) => ({ path: r.path, text: r.text, version: r.version, updated_at: isoNonNull(r.updated_at) }));
  }

  /**
   * Replaces head with `files` as a whole (sopops push), or saves and deletes single paths,
   * in one transaction after `check` accepted the resulting head (it throws to refuse: the
   * caller compiles it with sopc). Concurrent saves of one workspace are serialised by a row
   * lock on the workspace, so each check sees the head it is about to write. `expect` gives
   * the versions paths must have at head (null: not there), compared under that lock: when one
   * is not, nothing is written: a 409 head_changed.
   */
  async updateHead(
    workspace: string,
    change: { put?: SopFile[]; remove?: string[]; replaceAll?: boolean; expect?: { path: string; version: string | null }[] },
    check: (head: SopFile[]) => void | Promise<void>,
  ): Promise<SopFile[]> {
    return this.db.transaction(async (tx) => {
      await tx.query('INSERT INTO projects (name) VALUES ($1) ON CONFLICT (name) DO NOTHING', [text(workspace)]);
      await tx.query('SELECT name FROM projects WHERE name = $1 FOR UPDATE', [workspace]);
      if (change.expect?.length) {
        const now = new Map((await this.headFiles(workspace, tx)).map((f) => [f.path, f.version]));
        for (const e of change.expect) {
          const at = now.get(e.path) ?? null;
          if (at !== e.version) throw new SopError(409, 'head_changed', `${e.path} changed at head meanwhile (it is ${at ?? 'gone'}, not ${e.version ?? 'absent'}): nothing was saved`);
        }
      }
      const current = change.replaceAll ? [] : await this.headFiles(workspace, tx);
      const byPath = new Map<string, SopFile>(current.map((f) => [f.path, { path: f.path, text: f.text, version: f.version }]));
      for (const p of change.remove ?? []) byPath.delete(p);
      for (const f of change.put ?? []) byPath.set(f.path, f);
      const next = [...byPath.values()].sort((a, b) => (a.path < b.path ? -1 : 1));
      await check(next);
      if (change.replaceAll) await tx.query('DELETE FROM sop_head_files WHERE workspace = $1', [workspace]);
      for (const p of change.remove ?? []) await tx.query('DELETE FROM sop_head_files WHERE workspace = $1 AND path = $2', [workspace, p]);
      for (const f of change.replaceAll ? next : (change.put ?? [])) {
        await tx.query(
          `INSERT INTO sop_head_files (workspace, path, text, version) VALUES ($1, $2, $3, $4)
           ON CONFLICT (workspace, path) DO UPDATE SET text = EXCLUDED.text, version = EXCLUDED.version,
             updated_at = CASE WHEN sop_head_files.version = EXCLUDED.version THEN sop_head_files.updated_at ELSE now() END`,
          [workspace, f.path, text(f.text), f.version],
        );
      }
      return next;
    });
  }

  /**
   * Publishes: the next number, live, the previous live release no longer live, the files kept
   * as they are. `make` builds the lock from head's files inside the transaction (so head
   * cannot change between the compile and the insert) and may throw to refuse. `inTx` runs in
   * the same transaction once the release is written (rule lineage: links stored with the
   * release, or neither); it reads and writes through the `tx` it is given only.
   */
  async publish<Lock>(
    workspace: string,
    make: (head: SopFile[], previous: ReleaseRecord<Lock> | null) => Lock | Promise<Lock>,
    inTx?: (tx: Queryable, release: ReleaseRecord<Lock>, previous: ReleaseRecord<Lock> | null) => Promise<void>,
  ): Promise<ReleaseRecord<Lock>> {
    return this.db.transaction(async (tx) => {
      await tx.query('INSERT INTO projects (name) VALUES ($1) ON CONFLICT (name) DO NOTHING', [text(workspace)]);
      await tx.query('SELECT name FROM projects WHERE name = $1 FOR UPDATE', [workspace]);
      const head = (await this.headFiles(workspace, tx)).map(({ path, text: t, version }) => ({ path, text: t, version }));
      const previous = await this.release<Lock>(workspace, 'live', tx);
      const lock = await make(head, previous);
      const n = await tx.query<{ n: number }>('SELECT COALESCE(MAX(number), 0) + 1 AS n FROM sop_releases WHERE workspace = $1', [workspace]);
      const number = Number(n.rows[0].n);
      const id = `rel_${randomBytes(9).toString('base64url')}`;
      await tx.query('UPDATE sop_releases SET live = false WHERE workspace = $1 AND live', [workspace]);
      await tx.query('INSERT INTO sop_releases (id, workspace, number, live, lock) VALUES ($1, $2, $3, true, $4::jsonb)', [id, workspace, number, json(lock)]);
      for (const f of head) {
        await tx.query('INSERT INTO sop_release_files (release_id, path, text, version) VALUES ($1, $2, $3, $4)', [id, f.path, text(f.text), f.version]);
      }
      const rel = await this.release<Lock>(workspace, id, tx);
      if (!rel) throw new Error(`release ${id} vanished while being published`);
      await inTx?.(tx, rel, previous);
      return rel;
    });
  }

  /** A release by id, by number ("3") or the live one ("live"); null when there is none. */
  async release<Lock = unknown>(workspace: string, ref: string, q: Queryable = this.db): Promise<ReleaseRecord<Lock> | null> {
    const where = ref === 'live' ? 'live' : /^\d{1,9}$/.test(ref) ? 'number = $2' : 'id = $2';
    const params = ref === 'live' ? [workspace] : [workspace, /^\d{1,9}$/.test(ref) ? Number(ref) : ref];
    const res = await q.query<RawRelease>(`SELECT id, workspace, number, live, lock, created_at FROM sop_releases WHERE workspace = $1 AND ${where}`, params);
    return res.rows[0] ? toRelease<Lock>(res.rows[0]) : null;
  }

  /** Newest first; `page`: at most `limit` of them, numbered below `before`. */
  async releases<Lock = unknown>(workspace: string, page: ReleasesPageAt = {}): Promise<ReleaseRecord<Lock>[]> {
    const { where, params } = pageAt(workspace, page);
    const res = await this.db.query<RawRelease>(`SELECT id, workspace, number, live, lock, created_at FROM sop_releases WHERE ${where}`, params);
    return res.rows.map((r) => toRelease<Lock>(r));
  }

  /**
   * The same releases summed up in Postgres: each procedure's id, name, version and number of
   * rules, and the number of agents; the rules' texts and the agents never leave the database.
   */
  async releaseSummaries(workspace: string, page: ReleasesPageAt = {}): Promise<ReleaseSummaryRecord[]> {
    const { where, params } = pageAt(workspace, page);
    const res = await this.db.query<Omit<RawRelease, 'lock'> & { procedures: unknown; agent_count: unknown }>(
      `SELECT id, workspace, number, live, created_at,
              COALESCE((SELECT jsonb_agg(jsonb_build_object('procedure_id', p.v->'procedure_id', 'name', p.v->'name', 'version', p.v->'version',
                                                            'rule_count', CASE WHEN jsonb_typeof(p.v->'rules') = 'array' THEN jsonb_array_length(p.v->'rules') ELSE 0 END) ORDER BY p.i)
                          FROM jsonb_array_elements(CASE WHEN jsonb_typeof(lock->'procedures') = 'array' THEN lock->'procedures' ELSE '[]'::jsonb END) WITH ORDINALITY AS p(v, i)),
                       '[]'::jsonb) AS procedures,
              CASE WHEN jsonb_typeof(lock->'agents') = 'array' THEN jsonb_array_length(lock->'agents') ELSE 0 END AS agent_count
         FROM sop_releases WHERE ${where}`,
      params,
    );
    return res.rows.map((r) => ({
      id: r.id,
      workspace: r.workspace,
      number: Number(r.number),
      live: r.live,
      created_at: isoNonNull(r.created_at),
      procedures: (typeof r.procedures === 'string' ? JSON.parse(r.procedures) : r.procedures) as ReleaseSummaryRecord['procedures'],
      agent_count: Number(r.agent_count),
    }));
  }

  async releaseFiles(releaseId: string): Promise<SopFile[]> {
    const res = await this.db.query<SopFile>('SELECT path, text, version FROM sop_release_files WHERE release_id = $1 ORDER BY path', [releaseId]);
    return res.rows;
  }
}

/** A page of releases, newest first: at most `limit`, numbered below `before` (none: from the newest). */
export interface ReleasesPageAt {
  limit?: number;
  before?: number;
}

/** A release summed up (WorkspaceRepo.releaseSummaries). */
export interface ReleaseSummaryRecord {
  id: string;
  workspace: string;
  number: number;
  live: boolean;
  created_at: string;
  procedures: { procedure_id: string; name: string; version: string; rule_count: number }[];
  agent_count: number;
}

function pageAt(workspace: string, page: ReleasesPageAt): { where: string; params: unknown[] } {
  const params: unknown[] = [workspace];
  let where = 'workspace = $1';
  if (page.before !== undefined) {
    params.push(page.before);
    where += ` AND number < $${params.length}`;
  }
  where += ' ORDER BY number DESC';
  if (page.limit !== undefined) {
    params.push(page.limit);
    where += ` LIMIT $${params.length}`;
  }
  return { where, params };
}

interface RawRelease {
  id: string;
  workspace: string;
  number: number;
  live: boolean;
  lock: unknown;
  created_at: unknown;
}

function toRelease<Lock>(r: RawRelease): ReleaseRecord<Lock> {
  return {
    id: r.id,
    workspace: r.workspace,
    number: Number(r.number),
    live: r.live,
    lock: (typeof r.lock === 'string' ? JSON.parse(r.lock) : r.lock) as Lock,
    created_at: isoNonNull(r.created_at),
  };
}
