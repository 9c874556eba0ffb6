import * as path from 'node:path';
import { compileFiles, formatIssue, readFolder } from '@neatroots/sop';
import { UsageError } from './args';
import { API_FLAGS, API_HELP, apiTarget, reportApiError, workspaceCall } from './api-client';
import type { Command } from './cli';

/**
 * `sopops push DIR --workspace WS`: the folder becomes the workspace's head, as a whole (a CI
 * job in the team's repository runs it after a merge). Compiled here first, so a folder that
 * does not compile is refused with sopc's errors before anything is sent; the server compiles
 * it again and keeps head unchanged if it refuses.
 */
export const pushCommand: Command = {
  usage: 'sopops push DIR --workspace WS [--url URL] [--key KEY]',
  summary: "save a procedures folder as the workspace's head (unpublished until sopops publish)",
  help: `Sends every file of DIR (procedures/*.md, agents/*.yaml, groups/*.yaml) to the workspace as
its head: files not in DIR are removed from head. Nothing is published: sopops publish makes
head the next live release. Prints what changed against the live release.

${API_HELP}

Exit status: 0 saved; 1 refused (sopc's errors, FILE:LINE: message, or the server's answer);
2 for a folder that cannot be read or wrong options.`,
  flags: API_FLAGS,
  async run(p, io) {
    if (p.positional.length !== 1) throw new UsageError(`needs one folder, got ${p.positional.length}`);
    const target = apiTarget(p, io);
    const dir = path.resolve(io.cwd, p.positional[0]);
    const files = readFolder(dir);
    const compiled = compileFiles(files);
    if (compiled.errors.length) {
      for (const e of compiled.errors) io.err(formatIssue(e));
      io.err(`sopops push: ${p.positional[0]} does not compile (${compiled.errors.length} error${compiled.errors.length === 1 ? '' : 's'}); nothing was sent`);
      return 1;
    }
    try {
      const saved = await workspaceCall<{ files: { path: string; version: string }[] }>(target, 'PUT', '/head', {
        json: { files: [...files.entries()].map(([p2, text]) => ({ path: p2, text })) },
      });
      const head = await workspaceCall<{ changed: { path: string; change: string }[]; live_release: { number: number } | null }>(target, 'GET', '/head');
      io.out(`pushed ${saved.files.length} file${saved.files.length === 1 ? '' : 's'} to ${target.workspace}`);
      const against = head.live_release ? `release ${head.live_release.number}` : 'no release yet';
      if (!head.changed.length) io.out(`nothing unpublished (head is ${against})`);
      else {
        io.out(`unpublished against ${against}:`);
        for (const c of head.changed) io.out(`  ${c.change.padEnd(7)} ${c.path}`);
      }
      return 0;
    } catch (err) {
      return reportApiError('sopops push', err, io);
    }
  },
};

/** `sopops publish --workspace WS`: head becomes the next numbered release, live. */
export const publishCommand: Command = {
  usage: 'sopops publish --workspace WS [--url URL] [--key KEY]',
  summary: 'publish head as the next numbered release and make it live',
  help: `Publishes the workspace's head as the next numbered release and makes it live: sessions
that name no release are checked against it from now on. Prints the release's number and id.

${API_HELP}

Exit status: 0 published; 1 refused (head does not compile, or there is nothing at head);
2 for wrong options.`,
  flags: API_FLAGS,
  async run(p, io) {
    if (p.positional.length) throw new UsageError(`takes no arguments, got ${p.positional.join(' ')}`);
    const target = apiTarget(p, io);
    try {
      const r = await workspaceCall<{ id: string; number: number; procedures: unknown[] }>(target, 'POST', '/releases');
      io.out(`published release ${r.number} (${r.id}) of ${target.workspace}: ${r.procedures.length} procedure${r.procedures.length === 1 ? '' : 's'}, live`);
      return 0;
    } catch (err) {
      return reportApiError('sopops publish', err, io);
    }
  },
};
