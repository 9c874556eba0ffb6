import { UsageError } from './args';
import { API_FLAGS, API_HELP, apiTarget, reportApiError, workspaceCall } from './api-client';
import type { Command } from './cli';

/** The list's largest page. */
export const PAGE = 500;

interface Listed {
  id: string;
  pr_url: string | null;
}

interface Read extends Listed {
  status: string;
  note: string | null;
  error: string | null;
}

/**
 * `sopops pr-status [--workspace WS]`: the sopops_pr_status pass from cron, for a server without
 * its own schedule. It reads each suggestion whose pull request is open: reading one looks at
 * its pull request on GitHub (at most once a minute), so a merged one becomes merged and one
 * closed without merging dismissed ("PR closed"). Prints one line per pull request.
 */
export const prStatusCommand: Command = {
  usage: 'sopops pr-status [--workspace WS] [--url URL] [--key KEY]',
  summary: 'follow the pull requests of applied suggestions (merged, closed) once, e.g. from cron',
  help: `Looks at every open pull request of the workspace's suggestions on GitHub, through the server
(the same as the server's sopops_pr_status job, every 15 minutes with SOPOPS_PR_STATUS_CRON): a
merged pull request makes its suggestion merged; one closed without merging, dismissed with the
note "PR closed". A pull request looked at in the last minute is not looked at again.

${API_HELP}

Exit status: 0 every open pull request was looked at; 1 some could not be read (said on stderr:
a refused token, GitHub away) or the server refused; 2 for wrong options.`,
  flags: API_FLAGS,
  async run(p, io) {
    if (p.positional.length) throw new UsageError(`pr-status takes no arguments, got ${p.positional.join(' ')}`);
    const target = apiTarget(p, io);
    try {
      // Every open one, a page at a time (the list gives at most PAGE).
      const items: Listed[] = [];
      for (let before: string | null = null; ; ) {
        const page: { items: Listed[] } = await workspaceCall<{ items: Listed[] }>(target, 'GET', `/suggestions?status=pr_open&limit=${PAGE}${before ? `&before=${encodeURIComponent(before)}` : ''}`);
        items.push(...page.items);
        if (page.items.length < PAGE) break;
        before = page.items[page.items.length - 1].id;
      }
      const open = { items };
      let failed = 0;
      for (const s of open.items) {
        const now = await workspaceCall<Read>(target, 'GET', `/suggestions/${encodeURIComponent(s.id)}`);
        if (now.status === 'pr_open' && now.error) {
          failed++;
          io.err(`sopops pr-status: ${s.id} (${s.pr_url ?? 'no pull request'}): ${now.error}`);
        } else io.out(`${s.id} ${now.status}${now.note ? ` (${now.note})` : ''} ${s.pr_url ?? ''}`.trimEnd());
      }
      if (!open.items.length) io.out(`no open pull requests in ${target.workspace}`);
      return failed ? 1 : 0;
    } catch (err) {
      return reportApiError('sopops pr-status', err, io);
    }
  },
};
