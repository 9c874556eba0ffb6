import { createHash, randomBytes } from 'node:crypto';
import type { Queryable, Statement } from '@neatroots/ports';
import { isoNonNull, text } from './sql';

export interface ProjectRecord {
  name: string;
  /** Halts act only with steering on (the seed: action: halt). */
  steering: boolean;
  created_at: string;
}

/**
 * What a key may do. `api`: everything (the REST API, MCP, and what `ingest` may), every key
 * made before scopes. `ingest`: what an agent needs at run time (send spans over OTLP or
 * neatroots.v1 Export, Subscribe to its runs' notes and halts, PreCheck) and nothing of the API.
 */
export type ApiKeyScope = 'api' | 'ingest';

/** What a valid key opens: its project, and what it may do there. */
export interface ApiKeyGrant {
  project: string;
  scope: ApiKeyScope;
}

export interface CreatedApiKey {
  /** Shown once: only its sha256 is stored. */
  key: string;
  key_hash: string;
  project: string;
  scope: ApiKeyScope;
}

/** API keys are stored as the sha256 (hex) of the key. */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** The statement that creates the projects of the list not there yet (the writer sends it with each batch). */
export function ensureProjectsStatements(names: readonly string[]): Statement[] {
  if (!names.length) return [];
  // in name order, as every writer takes them, so two writers' inserts cannot wait on each other in a circle
  const sorted = [...new Set(names.map((n) => text(n) as string))].sort();
  return [{ sql: 'INSERT INTO projects (name) SELECT unnest($1::text[]) ON CONFLICT (name) DO NOTHING', params: [sorted] }];
}

export class ProjectsRepo {
  constructor(private readonly db: Queryable) {}

  /** Creates the project if it does not exist; returns it either way. */
  async ensure(name: string): Promise<ProjectRecord> {
    await this.db.query('INSERT INTO projects (name) VALUES ($1) ON CONFLICT (name) DO NOTHING', [text(name)]);
    const p = await this.get(name);
    if (!p) throw new Error(`project ${name} vanished while being created`);
    return p;
  }

  /** Creates every project of the list that does not exist yet. */
  async ensureMany(names: readonly string[]): Promise<void> {
    for (const st of ensureProjectsStatements(names)) await this.db.query(st.sql, st.params);
  }

  async get(name: string): Promise<ProjectRecord | null> {
    const res = await this.db.query<{ name: string; steering: boolean; created_at: unknown }>(
      'SELECT name, steering, created_at FROM projects WHERE name = $1',
      [name],
    );
    const r = res.rows[0];
    return r ? { name: r.name, steering: r.steering, created_at: isoNonNull(r.created_at) } : null;
  }

  async list(): Promise<ProjectRecord[]> {
    const res = await this.db.query<{ name: string; steering: boolean; created_at: unknown }>(
      'SELECT name, steering, created_at FROM projects ORDER BY name',
    );
    return res.rows.map((r) => ({ name: r.name, steering: r.steering, created_at: isoNonNull(r.created_at) }));
  }

  /**
   * Turns steering (halts acting) on or off, by a way other than a setting: `source` names which
   * (the demo's by default). Switched on so, it stays on whatever syncSettingSteering is given;
   * switched off, it has no source. Creates the project if needed.
   */
  async setSteering(name: string, on: boolean, source = 'demo'): Promise<void> {
    await this.db.query(
      `INSERT INTO projects (name, steering, steering_source) VALUES ($1, $2, $3)
       ON CONFLICT (name) DO UPDATE SET steering = EXCLUDED.steering, steering_source = EXCLUDED.steering_source`,
      [text(name), on, on ? text(source) : null],
    );
  }

  /**
   * Makes the projects `source` (a setting, NEATROOTS_STEERING) turns steering on in exactly
   * `names`: each is switched on (created if needed), and every project it switched on before
   * and no longer lists is switched off. A project switched on another way (setSteering, the
   * demo) stays on, listed or not. A listed project on with no source (switched on by a version
   * before steering_source, which leaves it NULL, e.g. after a rollback) is `claimed`: the
   * setting's from then on, switched off once it is no longer listed. Returns the projects
   * switched on, claimed and switched off.
   */
  async syncSettingSteering(source: string, names: readonly string[]): Promise<{ on: string[]; claimed: string[]; off: string[] }> {
    const listed = [...new Set(names.map((n) => text(n) as string))].sort();
    const claimed = await this.db.query<{ name: string }>(
      `UPDATE projects SET steering_source = $2 WHERE steering AND steering_source IS NULL AND name = ANY($1::text[]) RETURNING name`,
      [listed, text(source)],
    );
    const on = await this.db.query<{ name: string }>(
      `INSERT INTO projects (name, steering, steering_source) SELECT unnest($1::text[]), true, $2
       ON CONFLICT (name) DO UPDATE SET steering = true, steering_source = EXCLUDED.steering_source WHERE NOT projects.steering
       RETURNING name`,
      [listed, text(source)],
    );
    const off = await this.db.query<{ name: string }>(
      `UPDATE projects SET steering = false, steering_source = NULL
       WHERE steering AND steering_source = $1 AND NOT (name = ANY($2::text[])) RETURNING name`,
      [text(source), listed],
    );
    const sorted = (r: { rows: { name: string }[] }) => r.rows.map((x) => x.name).sort();
    return { on: sorted(on), claimed: sorted(claimed), off: sorted(off) };
  }

  /** The projects `source` (a setting, NEATROOTS_STEERING) has switched steering on in, by name. */
  async settingSteering(source: string): Promise<string[]> {
    const res = await this.db.query<{ name: string }>('SELECT name FROM projects WHERE steering AND steering_source = $1 ORDER BY name', [text(source)]);
    return res.rows.map((r) => r.name);
  }

  /**
   * The projects with steering on and no source, by name: switched on by a version before
   * steering_source (which leaves it NULL), so no setting switches them off until one lists them.
   */
  async unsourcedSteering(): Promise<string[]> {
    const res = await this.db.query<{ name: string }>('SELECT name FROM projects WHERE steering AND steering_source IS NULL ORDER BY name');
    return res.rows.map((r) => r.name);
  }

  async steering(name: string): Promise<boolean> {
    return (await this.get(name))?.steering ?? false;
  }

  /** A new API key for the project (created if needed), full (`api`) unless said. The key is returned once. */
  async createApiKey(project: string, label?: string, scope: ApiKeyScope = 'api'): Promise<CreatedApiKey> {
    await this.ensure(project);
    const key = `nr_${randomBytes(24).toString('base64url')}`;
    const key_hash = hashApiKey(key);
    await this.db.query('INSERT INTO api_keys (key_hash, project, label, scope) VALUES ($1, $2, $3, $4)', [key_hash, project, text(label ?? null), scope]);
    return { key, key_hash, project, scope };
  }

  /** Stores a key chosen elsewhere (configuration, tests), full (`api`) unless said; idempotent. */
  async addApiKey(project: string, key: string, label?: string, scope: ApiKeyScope = 'api'): Promise<void> {
    await this.ensure(project);
    await this.db.query(
      'INSERT INTO api_keys (key_hash, project, label, scope) VALUES ($1, $2, $3, $4) ON CONFLICT (key_hash) DO NOTHING',
      [hashApiKey(key), project, text(label ?? null), scope],
    );
  }

  /**
   * Makes the keys stored with `label` exactly `keys` (a configuration's, NEATROOTS_API_KEYS):
   * each opens its project with its scope (absent: `api`; a key stored for another project,
   * with another scope, or revoked, is moved, changed or opened again), and every other key
   * stored with that label is revoked. Keys made otherwise (the demo's, createApiKey) are left
   * alone unless listed. An empty list revokes nothing unless `none` says it is meant (a setting
   * missing from one process's environment must not lock everyone out): the keys it would have
   * revoked are counted as `kept`. Returns how many were revoked and kept so.
   */
  async syncLabelledKeys(label: string, keys: readonly { project: string; key: string; scope?: ApiKeyScope }[], opts: { none?: boolean } = {}): Promise<{ revoked: number; kept: number }> {
    if (!keys.length && !opts.none) {
      const live = await this.db.query<{ n: number | string }>('SELECT count(*) AS n FROM api_keys WHERE label = $1 AND revoked_at IS NULL', [text(label)]);
      return { revoked: 0, kept: Number(live.rows[0]?.n ?? 0) };
    }
    await this.ensureMany([...new Set(keys.map((k) => k.project))]);
    for (const { project, key, scope } of keys) {
      await this.db.query(
        `INSERT INTO api_keys (key_hash, project, label, scope) VALUES ($1, $2, $3, $4)
         ON CONFLICT (key_hash) DO UPDATE SET project = EXCLUDED.project, label = EXCLUDED.label, scope = EXCLUDED.scope, revoked_at = NULL
         WHERE api_keys.project <> EXCLUDED.project OR api_keys.scope <> EXCLUDED.scope OR api_keys.revoked_at IS NOT NULL`,
        [hashApiKey(key), project, text(label), scope ?? 'api'],
      );
    }
    const res = await this.db.query<{ key_hash: string }>(
      `UPDATE api_keys SET revoked_at = now() WHERE label = $1 AND revoked_at IS NULL AND NOT (key_hash = ANY($2::text[])) RETURNING key_hash`,
      [text(label), keys.map((k) => hashApiKey(k.key))],
    );
    return { revoked: res.rows.length, kept: 0 };
  }

  /** The project a key opens and its scope, or null for an unknown or revoked key. */
  async resolveApiKey(key: string): Promise<ApiKeyGrant | null> {
    const res = await this.db.query<{ project: string; scope: string }>(
      'SELECT project, scope FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL',
      [hashApiKey(key)],
    );
    const r = res.rows[0];
    // Anything but 'ingest' (the column allows no other) is the full scope it always was.
    return r ? { project: r.project, scope: r.scope === 'ingest' ? 'ingest' : 'api' } : null;
  }

  async revokeApiKey(key: string): Promise<boolean> {
    const res = await this.db.query<{ key_hash: string }>(
      'UPDATE api_keys SET revoked_at = now() WHERE key_hash = $1 AND revoked_at IS NULL RETURNING key_hash',
      [hashApiKey(key)],
    );
    return res.rows.length > 0;
  }
}
