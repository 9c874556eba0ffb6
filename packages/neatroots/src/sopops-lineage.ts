import * as path from 'node:path';
import { compareReleases } from '@neatroots/review-domain';
import { compileFolder, formatIssue, FolderError, type Procedure } from '@neatroots/sop';
import { UsageError } from './args';
import { API_FLAGS, API_HELP, apiTarget, reportApiError, workspaceCall } from './api-client';
import type { Command, Io } from './cli';

/**
 * `sopops lineage diff OLD_DIR NEW_DIR`: rule lineage between two versions of a procedures
 * folder, as a publish works it out (without suggestions), one JSON line per rule.
 * `sopops lineage rebuild [--workspace WS]`: a running server recomputes a workspace's stored
 * links from its releases (POST /v1/workspaces/{ws}/rules/lineage/rebuild).
 */
export const lineageCommand: Command = {
  usage: 'sopops lineage diff OLD_DIR NEW_DIR | sopops lineage rebuild [--workspace WS] [--url URL] [--key KEY]',
  summary: 'which rule each reworded rule replaced: between two procedures folders, or rebuilt on the server',
  help: `Compiles both procedures folders (as sopc does) and matches their rules as a publish does,
without suggestions: within one procedure and one kind, one to one, a rule whose id is in both is
"same"; then a changed rule is "matched" to the new rule at its position when their similarity is
at least 0.35, then to the best remaining rule anywhere in the procedure at 0.5 or more (moved
and reworded). Similarity is token Jaccard over lowercase words without a few function words.
Unmatched new rules are "new", unmatched old ones "removed".

Prints one JSON line per rule, procedures in id order, each procedure's steps, never rules and
warning signs in their new order, its removed rules after them:
  {"procedure_id","kind","old_rule_id","new_rule_id","old_text","new_text","how","similarity"}

Exit status: 0; 2 when a folder cannot be read or does not compile, with sopc's errors
(FILE:LINE: message, FILE relative to that folder) on standard error.

rebuild: has the server recompute the workspace's stored lineage from its releases, each
against the one before it by number (links made by hand stay), and move rule patterns to
match. Running it again changes nothing. Prints how many links and procedures it has.
${API_HELP}
Exit status: 0; 1 when the server refuses or cannot be reached; 2 for wrong options.`,
  flags: { ...API_FLAGS },
  async run(p, io) {
    const [sub, ...dirs] = p.positional;
    if (sub === 'rebuild') {
      if (dirs.length) throw new UsageError(`rebuild takes no folders, got ${dirs.join(' ')}`);
      const target = apiTarget(p, io);
      try {
        const r = await workspaceCall<{ workspace: string; links: number; procedures: number }>(target, 'POST', '/rules/lineage/rebuild');
        io.out(`rebuilt the rule lineage of ${r.workspace}: ${r.links} link${r.links === 1 ? '' : 's'} in ${r.procedures} procedure${r.procedures === 1 ? '' : 's'}`);
        return 0;
      } catch (err) {
        return reportApiError('sopops lineage rebuild', err, io);
      }
    }
    if (sub !== 'diff') throw new UsageError(sub === undefined ? 'needs a subcommand: diff or rebuild' : `unknown subcommand "${sub}" (known: diff, rebuild)`);
    const given = Object.keys(API_FLAGS).filter((f) => p.flags[f] !== undefined);
    if (given.length) throw new UsageError(`diff reads two folders, not a server: --${given[0]} is for rebuild`);
    if (dirs.length !== 2) throw new UsageError(`diff needs two folders (OLD_DIR NEW_DIR), got ${dirs.length}`);
    const olds = compiled(io, dirs[0]);
    const news = compiled(io, dirs[1]);
    if (!olds || !news) return 2;
    for (const row of compareReleases(olds, news)) io.out(JSON.stringify(row));
    return 0;
  },
};

/** The folder's procedures, or undefined after saying on standard error why there are none. */
function compiled(io: Io, dir: string): Procedure[] | undefined {
  try {
    const c = compileFolder(path.resolve(io.cwd, dir));
    if (c.errors.length === 0) return c.procedures;
    io.err(`sopops lineage: ${dir} does not compile:`);
    for (const issue of c.errors) io.err(formatIssue(issue));
  } catch (e) {
    if (!(e instanceof FolderError)) throw e;
    io.err(`sopops lineage: ${e.message}`);
  }
  return undefined;
}
