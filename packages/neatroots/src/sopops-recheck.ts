import { strings, UsageError } from './args';
import { API_FLAGS, API_HELP, apiTarget, reportApiError, workspaceCall } from './api-client';
import type { Command } from './cli';

/**
 * `sopops recheck --session ID [--workspace WS]`: a session checked again as it is stored
 * (POST /sessions/{id}/recheck), without sending it: one made from a run, or any once the model
 * is back or its settings changed. Prints that it is queued; the check runs on the server.
 */
export const recheckCommand: Command = {
  usage: 'sopops recheck --session ID [--workspace WS] [--url URL] [--key KEY]',
  summary: 'check a stored session again (one made from a run, or once the model is back)',
  help: `Queues the session (its id, ses_…) to be checked again as it is stored, without sending it:
the way to check again a session made from a run, or any session once the model is back or its
settings changed. It is checked on the release it names, or on the one live when the check runs;
its results are replaced when the check is done (until then it is queued, GET
/v1/workspaces/WS/sessions/ID shows it).

${API_HELP}

Exit status: 0 queued; 1 the server refused (no such session; its transcript was let go by
transcript retention: send the session again instead); 2 for wrong options.`,
  flags: { ...API_FLAGS, session: { value: true, repeat: true } },
  async run(p, io) {
    if (p.positional.length) throw new UsageError(`recheck takes no arguments, got ${p.positional.join(' ')} (the session: --session ID)`);
    const sessions = strings(p, 'session');
    if (!sessions.length) throw new UsageError('which session: --session ID');
    if (sessions.length > 1) throw new UsageError(`one --session at a time, got ${sessions.length}`);
    const target = apiTarget(p, io);
    try {
      const r = await workspaceCall<{ id: string; external_id: string; status: string }>(target, 'POST', `/sessions/${encodeURIComponent(sessions[0])}/recheck`);
      io.out(`${r.id} (${r.external_id}) in ${target.workspace}: ${r.status}, to be checked again; its results are replaced when the check is done`);
      return 0;
    } catch (err) {
      return reportApiError('sopops recheck', err, io);
    }
  },
};
