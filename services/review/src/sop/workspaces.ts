import { compileFiles, contentVersion, toLock, type Lock } from '@neatroots/sop';
import { unifiedDiffFiles } from '@neatroots/review-domain';
import { cursorJson, doesNotCompile, SopError, WorkspaceRepo, type HeadFileView, type HeadView, type ReleaseRecord, type ReleasesPage, type ReleasesQuery, type ReleaseView, type SopFile } from '@neatroots/store';
import type { Db, Queryable } from '@neatroots/ports';

/** Where a file of the procedures folder may live: the folder decides how it is read. */
const HEAD_PATH = /^(procedures\/[a-z0-9][a-z0-9-]*\.md|agents\/[a-z0-9][a-z0-9-]*\.yaml|groups\/[a-z0-9][a-z0-9-]*\.yaml)$/;
/** A file the API takes at once: procedures are pages, not data sets. */
export const MAX_HEAD_FILE_BYTES = 256 * 1024;
export const MAX_HEAD_FILES = 2000;

/** Called after a release is published. */
export type OnPublished = (workspace: string, release: ReleaseRecord<Lock>, previous: ReleaseRecord<Lock> | null) => Promise<void>;
/** Called inside the publish's transaction, through its `tx` only (rule lineage stores its links there). */
export type AtPublish = (tx: Queryable, workspace: string, release: ReleaseRecord<Lock>, previous: ReleaseRecord<Lock> | null) => Promise<void>;

/**
 * A workspace's head and releases: files saved only when head still compiles with sopc,
 * releases published from head (numbered, one live), each keeping its files and its lock.
 */
export class SopWorkspaces {
  private readonly repo: WorkspaceRepo;
  /** Releases read for checks, by id, least recently used first. */
  private readonly published = new Map<string, CheckedRelease>();
  private readonly reading = new Map<string, Promise<ReleaseRecord<Lock> | null>>();

  constructor(
    db: Db,
    private readonly onPublished?: OnPublished,
    private readonly atPublish?: AtPublish,
  ) {
    this.repo = new WorkspaceRepo(db);
  }

  /** `ifVersion`: saved only while the file at head is still that version (null: not there), else a 409 head_changed. */
  async saveFile(workspace: string, path: string, text: string, opts: { ifVersion?: string | null } = {}): Promise<{ path: string; version: string }> {
    checkPath(path);
    checkText(path, text);
    const file = { path, text, version: contentVersion(text) };
    const expect = opts.ifVersion === undefined ? undefined : [{ path, version: opts.ifVersion }];
    await this.repo.updateHead(workspace, { put: [file], expect }, (head) => compiles(head, `head with ${path}`));
    return { path, version: file.version };
  }

  async deleteFile(workspace: string, path: string): Promise<void> {
    checkPath(path);
    const head = await this.repo.headFiles(workspace);
    if (!head.some((f) => f.path === path)) throw new SopError(404, 'not_found', `${path} is not in head`);
    await this.repo.updateHead(workspace, { remove: [path] }, (next) => compiles(next, `head without ${path}`));
  }

  async file(workspace: string, path: string): Promise<HeadFileView> {
    checkPath(path);
    const found = (await this.repo.headFiles(workspace)).find((f) => f.path === path);
    if (!found) throw new SopError(404, 'not_found', `${path} is not in head`);
    return { path: found.path, text: found.text, version: found.version, updated_at: found.updated_at };
  }

  /** sopops push: the folder becomes head as a whole (files not in it are removed). */
  async push(workspace: string, files: { path: string; text: string }[]): Promise<{ files: { path: string; version: string }[] }> {
    if (files.length > MAX_HEAD_FILES) throw new SopError(400, 'too_many_files', `a push has at most ${MAX_HEAD_FILES} files, got ${files.length}`);
    const seen = new Set<string>();
    const put = files.map((f) => {
      checkPath(f.path);
      checkText(f.path, f.text);
      if (seen.has(f.path)) throw new SopError(400, 'duplicate_path', `${f.path} appears twice`);
      seen.add(f.path);
      return { path: f.path, text: f.text, version: contentVersion(f.text) };
    });
    const saved = await this.repo.updateHead(workspace, { put, replaceAll: true }, (head) => compiles(head, 'the pushed folder'));
    return { files: saved.map(({ path, version }) => ({ path, version })) };
  }

  async head(workspace: string): Promise<HeadView> {
    const files = await this.repo.headFiles(workspace);
    const live = await this.repo.release<Lock>(workspace, 'live');
    const published = live ? await this.repo.releaseFiles(live.id) : [];
    const before = new Map(published.map((f) => [f.path, f.text]));
    const after = new Map(files.map((f) => [f.path, f.text]));
    const changed: HeadView['changed'] = [];
    for (const p of [...new Set([...before.keys(), ...after.keys()])].sort()) {
      const was = before.get(p);
      const now = after.get(p);
      if (was === now) continue;
      changed.push({ path: p, change: was === undefined ? 'added' : now === undefined ? 'removed' : 'changed' });
    }
    return {
      workspace,
      files: files.map(({ path, version, updated_at }) => ({ path, version, updated_at })),
      live_release: live ? { id: live.id, number: live.number } : null,
      changed,
      diff: unifiedDiffFiles(before, after),
    };
  }

  /** Publishes head as the next release and makes it live. */
  async publish(workspace: string): Promise<ReleaseView> {
    let previous: ReleaseRecord<Lock> | null = null;
    const release = await this.repo.publish<Lock>(workspace, (head, prev) => {
      previous = prev;
      if (!head.length) throw new SopError(409, 'nothing_to_publish', `workspace ${workspace} has no files at head: save or push procedures first`);
      const compiled = compileFiles(new Map(head.map((f) => [f.path, f.text])));
      if (compiled.errors.length) throw doesNotCompile('head', compiled.errors);
      return toLock(compiled);
    }, this.atPublish && ((tx, rel, prev) => this.atPublish!(tx, workspace, rel, prev)));
    await this.onPublished?.(workspace, release, previous);
    return releaseView(release);
  }

  async releases(workspace: string): Promise<ReleaseView[]> {
    return (await this.repo.releases<Lock>(workspace)).map(releaseView);
  }

  /**
   * GET .../releases: newest first, whole or summed up (`fields: 'summary'`), every one (no
   * limit) or a page of `limit` after `cursor`, with the next page's cursor (null: the last).
   */
  async releasesPage(workspace: string, q: ReleasesQuery = {}): Promise<ReleasesPage> {
    const at = { before: q.cursor === undefined ? undefined : releasesCursorNumber(q.cursor), limit: q.limit === undefined ? undefined : q.limit + 1 };
    const rows = q.fields === 'summary'
      ? (await this.repo.releaseSummaries(workspace, at)).map(({ workspace: _ws, ...r }) => r)
      : (await this.repo.releases<Lock>(workspace, at)).map(releaseView);
    const more = q.limit !== undefined && rows.length > q.limit;
    const items = more ? rows.slice(0, q.limit) : rows;
    const last = items[items.length - 1];
    return { items, next_cursor: more && last ? Buffer.from(JSON.stringify(['releases', last.number]), 'utf8').toString('base64url') : null } as ReleasesPage;
  }

  /** `ref`: the id, the number, or "live". */
  async release(workspace: string, ref: string): Promise<ReleaseView> {
    const r = await this.repo.release<Lock>(workspace, ref);
    if (!r) throw new SopError(404, 'not_found', ref === 'live' ? `workspace ${workspace} has no live release: publish one first` : `no release ${ref} in workspace ${workspace}`);
    return releaseView(r);
  }

  /** The live release's record (the checker reads its lock), or the one asked for; null when there is none. */
  releaseRecord(workspace: string, ref: string): Promise<ReleaseRecord<Lock> | null> {
    return this.repo.release<Lock>(workspace, ref);
  }

  /**
   * The release a session is checked on, by id or number (null: none, or none live when the
   * caller resolved "live" to null). Kept by id, and by number when asked by number, once read:
   * releases are never deleted and a published release's number and lock never change, so no
   * cache here can go stale, in this process or any other; "live" is never kept (the caller
   * reads the live id fresh for every session). Its `live` flag is left out, being the one
   * thing that changes.
   */
  async releaseForCheck(workspace: string, ref: string | null): Promise<CheckedRelease | null> {
    if (ref === null) return null;
    // Numbers are the workspace's own; ids (rel_…) are unique anywhere.
    const keptAs = NUMBER_REF.test(ref) ? `${workspace}\0#${Number(ref)}` : ref;
    const kept = ref === 'live' ? undefined : this.published.get(keptAs);
    if (kept && kept.workspace === workspace) {
      // Most recently used last, so the oldest is the one dropped.
      this.published.delete(keptAs);
      this.published.set(keptAs, kept);
      return kept;
    }
    // Jobs starting together on a release not yet kept share one read.
    const key = `${workspace}\0${ref}`;
    let reading = this.reading.get(key);
    if (!reading) {
      reading = this.repo.release<Lock>(workspace, ref).finally(() => this.reading.delete(key));
      this.reading.set(key, reading);
    }
    const r = await reading;
    if (!r) return null;
    const release: CheckedRelease = { id: r.id, workspace: r.workspace, number: r.number, lock: r.lock };
    this.published.set(r.id, release);
    if (keptAs !== ref) this.published.set(keptAs, release);
    while (this.published.size > KEPT_RELEASES) this.published.delete(this.published.keys().next().value as string);
    return release;
  }
}

/** A release as a check needs it: what never changes once it is published. */
export type CheckedRelease = Pick<ReleaseRecord<Lock>, 'id' | 'workspace' | 'number' | 'lock'>;

/** Release locks kept in memory by id (a lock is the release's compiled procedures: kilobytes). */
const KEPT_RELEASES = 64;

/** A release named by its number, as the store reads it ("1", "01"; more digits are an id). */
const NUMBER_REF = /^\d{1,9}$/;

/** The number a releases cursor stops below (["releases", n], base64url); 400 for any other cursor. */
function releasesCursorNumber(cursor: string): number {
  const parsed = cursorJson(cursor);
  if (!Array.isArray(parsed) || parsed.length !== 2 || parsed[0] !== 'releases' || !Number.isSafeInteger(parsed[1]) || parsed[1] < 1) {
    throw new SopError(400, 'invalid_cursor', 'cursor is not one this list returned');
  }
  return parsed[1] as number;
}

function releaseView(r: ReleaseRecord<Lock>): ReleaseView {
  return { id: r.id, number: r.number, live: r.live, created_at: r.created_at, procedures: r.lock.procedures, agents: r.lock.agents };
}

function checkPath(path: string): void {
  if (!HEAD_PATH.test(path)) {
    throw new SopError(400, 'invalid_path', `${JSON.stringify(path)} is not a file of a procedures folder: procedures/<id>.md, agents/<name>.yaml or groups/<name>.yaml (a-z, 0-9, -)`);
  }
}

function checkText(path: string, text: string): void {
  if (Buffer.byteLength(text, 'utf8') > MAX_HEAD_FILE_BYTES) throw new SopError(400, 'file_too_large', `${path} is larger than ${MAX_HEAD_FILE_BYTES} bytes`);
  if (text.includes('\u0000')) throw new SopError(400, 'invalid_text', `${path} contains a NUL character`);
}

function compiles(head: SopFile[], what: string): void {
  const compiled = compileFiles(new Map(head.map((f) => [f.path, f.text])));
  if (compiled.errors.length) throw doesNotCompile(what, compiled.errors);
}
