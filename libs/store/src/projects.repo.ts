import { createHash, randomBytes } from 'node:crypto';
import type { Queryable, Statement } from '@neatroots/ports';
import { isoNonNull, text } from './sql';

export interface ProjectRecord {
  name: string;
  /** Halts act only with steering on (the seed: action: halt). */
  steering: boolean;
  created_at: string;
}

export interface CreatedApiKey {
  /** Shown once: only its sha256 is stored. */
  key: string;
  key_hash: string;
  project: string;
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

  /** Turns steering (halts acting) on or off; creates the project if needed. */
  async setSteering(name: string, on: boolean): Promise<void> {
    await this.db.query(
      `INSERT INTO projects (name, steering) VALUES ($1, $2)
       ON CONFLICT (name) DO UPDATE SET steering = EXCLUDED.steering`,
      [text(name), on],
    );
  }

  async steering(name: string): Promise<boolean> {
    return (await this.get(name))?.steering ?? false;
  }

  /** A new API key for the project (created if needed). The key is returned once. */
  async createApiKey(project: string, label?: string): Promise<CreatedApiKey> {
    await this.ensure(project);
    const key = `nr_${randomBytes(24).toString('base64url')}`;
    const key_hash = hashApiKey(key);
    await this.db.query('INSERT INTO api_keys (key_hash, project, label) VALUES ($1, $2, $3)', [key_hash, project, text(label ?? null)]);
    return { key, key_hash, project };
  }

  /** Stores a key chosen elsewhere (configuration, tests); idempotent. */
  async addApiKey(project: string, key: string, label?: string): Promise<void> {
    await this.ensure(project);
    await this.db.query(
      'INSERT INTO api_keys (key_hash, project, label) VALUES ($1, $2, $3) ON CONFLICT (key_hash) DO NOTHING',
      [hashApiKey(key), project, text(label ?? null)],
    );
  }

  /**
   * Makes the keys stored with `label` exactly `keys` (a configuration's, NEATROOTS_API_KEYS):
   * each opens its project (a key stored for another project, or revoked, is moved or opened
   * again), and every other key stored with that label is revoked. Keys made otherwise (the
   * demo's, createApiKey) are left alone unless listed. Returns how many were revoked.
   */
  async syncLabelledKeys(label: string, keys: readonly { project: string; key: string }[]): Promise<{ revoked: number }> {
    await this.ensureMany([...new Set(keys.map((k) => k.project))]);
    for (const { project, key } of keys) {
      await this.db.query(
        `INSERT INTO api_keys (key_hash, project, label) VALUES ($1, $2, $3)
         ON CONFLICT (key_hash) DO UPDATE SET project = EXCLUDED.project, label = EXCLUDED.label, revoked_at = NULL
         WHERE api_keys.project <> EXCLUDED.project OR api_keys.revoked_at IS NOT NULL`,
        [hashApiKey(key), project, text(label)],
      );
    }
    const res = await this.db.query<{ key_hash: string }>(
      `UPDATE api_keys SET revoked_at = now() WHERE label = $1 AND revoked_at IS NULL AND NOT (key_hash = ANY($2::text[])) RETURNING key_hash`,
      [text(label), keys.map((k) => hashApiKey(k.key))],
    );
    return { revoked: res.rows.length };
  }

  /** The project a key opens, or null for an unknown or revoked key. */
  async resolveApiKey(key: string): Promise<string | null> {
    const res = await this.db.query<{ project: string }>(
      'SELECT project FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL',
      [hashApiKey(key)],
    );
    return res.rows[0]?.project ?? null;
  }

  async revokeApiKey(key: string): Promise<boolean> {
    const res = await this.db.query<{ key_hash: string }>(
      'UPDATE api_keys SET revoked_at = now() WHERE key_hash = $1 AND revoked_at IS NULL RETURNING key_hash',
      [hashApiKey(key)],
    );
    return res.rows.length > 0;
  }
}
