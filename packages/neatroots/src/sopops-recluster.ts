import { strings, UsageError } from './args';
import { API_FLAGS, API_HELP, apiTarget, LONG_CALL_WAIT_MS, reportApiError, workspaceCall } from './api-client';
import type { Command } from './cli';

/**
 * `sopops recluster [--workspace WS] [--procedure P] [--rule R] [--force]`: failure modes and
 * themes made again by the server (POST /patterns/recluster), as the daily job does; from cron
 * where the server has no Redis for its own schedule. Prints what was done, and on stderr what
 * could not be (no reasoning model, a model error).
 */
export const reclusterCommand: Command = {
  usage: 'sopops recluster [--workspace WS] [--procedure P] [--rule R] [--force] [--url URL] [--key KEY]',
  summary: "split rules into failure modes and group them into themes again (the server's models)",
  help: `Assigns the workspace's findings that wait for a pattern or a failure mode, splits every rule
that is due (8 findings for the first split; 25 new since the last, or "other" over 25% with 5
new) into failure modes with the reasoning model, and regroups each procedure's rule patterns
into themes. --procedure and --rule (a rule id: its lineage) narrow it; --force splits every rule
with 8 or more findings, due or not. It waits for the models, up to 12 minutes (the server
gives a recluster 10).

${API_HELP}

Exit status: 0 all done; 1 something could not be done (no reasoning model, a model error: said
on stderr) or the server refused (a --procedure or --rule the workspace does not know: 404
not_in_release, naming it); 2 for wrong options.`,
  flags: { ...API_FLAGS, procedure: { value: true }, rule: { value: true }, force: {} },
  async run(p, io) {
    if (p.positional.length) throw new UsageError(`recluster takes no arguments, got ${p.positional.join(' ')}`);
    const target = apiTarget(p, io);
    const body: Record<string, unknown> = {};
    for (const k of ['procedure', 'rule'] as const) {
      const v = strings(p, k).pop();
      if (v !== undefined) body[k] = v;
    }
    if (p.flags.force === true) body.force = true;
    try {
      const r = await workspaceCall<{ assigned: number; reclustered: number; themed: number; reason: string | null }>(target, 'POST', '/patterns/recluster', { json: body }, { waitMs: LONG_CALL_WAIT_MS });
      const n = (k: number, what: string) => `${k} ${what}${k === 1 ? '' : 's'}`;
      io.out(`${target.workspace}: assigned ${n(r.assigned, 'finding')}, split ${n(r.reclustered, 'rule')} into failure modes, grouped the themes of ${n(r.themed, 'procedure')}`);
      if (!r.reason) return 0;
      io.err(`sopops recluster: ${r.reason}`);
      return 1;
    } catch (err) {
      return reportApiError('sopops recluster', err, io);
    }
  },
};
