import type { Db } from '@neatroots/ports';
import { isoNonNull, text } from '../sql';
import { SecretBox } from './secret-box';

/** A workspace's GitHub connection as the API shows it: the token only as a hint. */
export interface RepoConnection {
  workspace: string;
  owner: string;
  repo: string;
  branch: string;
  /** The procedures folder in the repository ('' for its root). */
  folder: string;
  api_url: string;
  has_token: boolean;
  /** "…" and the token's last four characters ("…3f9a"), to tell which one is stored. */
  token_hint: string;
  updated_at: string;
}

export interface RepoConnectionInput {
  owner: string;
  repo: string;
  branch: string;
  folder: string;
  api_url: string;
  /** Required the first time; left out later, the stored token is kept. */
  token?: string;
}

/** The connection with its token decrypted: for the code that calls GitHub, never for an API answer. */
export interface RepoConnectionWithToken extends RepoConnection {
  token: string;
}

interface Row {
  workspace: string;
  owner: string;
  repo: string;
  branch: string;
  folder: string;
  api_url: string;
  token_encrypted: Uint8Array;
  token_last4: string;
  updated_at: unknown;
}

/** Thrown when a first connection comes without a token. */
export class RepoConnectionInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RepoConnectionInputError';
  }
}

/** Repository connections, tokens encrypted with AES-256-GCM under the configured secret key. */
export class RepoConnectionsRepo {
  private readonly box: SecretBox;

  constructor(private readonly db: Db, secretKey: Buffer) {
    this.box = new SecretBox(secretKey);
  }

  async put(workspace: string, c: RepoConnectionInput): Promise<RepoConnection> {
    return this.db.transaction(async (tx) => {
      await tx.query('INSERT INTO projects (name) VALUES ($1) ON CONFLICT (name) DO NOTHING', [text(workspace)]);
      const fields = [workspace, text(c.owner), text(c.repo), text(c.branch), text(c.folder), text(c.api_url)];
      let res;
      if (c.token !== undefined) {
        res = await tx.query<Row>(
          `INSERT INTO sop_repo_connections (workspace, owner, repo, branch, folder, api_url, token_encrypted, token_last4)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
           ON CONFLICT (workspace) DO UPDATE SET owner = $2, repo = $3, branch = $4, folder = $5, api_url = $6,
             token_encrypted = $7, token_last4 = $8, updated_at = now()
           RETURNING *`,
          [...fields, this.box.seal(c.token), c.token.slice(-4)],
        );
      } else {
        res = await tx.query<Row>(
          `UPDATE sop_repo_connections SET owner = $2, repo = $3, branch = $4, folder = $5, api_url = $6, updated_at = now()
           WHERE workspace = $1 RETURNING *`,
          fields,
        );
        if (res.rows.length === 0) throw new RepoConnectionInputError(`workspace ${workspace} has no GitHub connection yet: token is required`);
      }
      return view(res.rows[0]);
    });
  }

  async get(workspace: string): Promise<RepoConnection | null> {
    const row = await this.row(workspace);
    return row ? view(row) : null;
  }

  /** Throws SecretKeyError, naming the workspace, when the key is not the one the token was stored with. */
  async withToken(workspace: string): Promise<RepoConnectionWithToken | null> {
    const row = await this.row(workspace);
    if (!row) return null;
    return { ...view(row), token: this.box.open(row.token_encrypted, `the GitHub token of workspace ${workspace}`) };
  }

  /** True when there was one. */
  async delete(workspace: string): Promise<boolean> {
    const res = await this.db.query('DELETE FROM sop_repo_connections WHERE workspace = $1 RETURNING workspace', [workspace]);
    return res.rows.length > 0;
  }

  private async row(workspace: string): Promise<Row | null> {
    const res = await this.db.query<Row>('SELECT * FROM sop_repo_connections WHERE workspace = $1', [workspace]);
    return res.rows[0] ?? null;
  }
}

function view(r: Row): RepoConnection {
  return {
    workspace: r.workspace,
    owner: r.owner,
    repo: r.repo,
    branch: r.branch,
    folder: r.folder,
    api_url: r.api_url,
    has_token: true,
    token_hint: `…${r.token_last4}`,
    updated_at: isoNonNull(r.updated_at),
  };
}
