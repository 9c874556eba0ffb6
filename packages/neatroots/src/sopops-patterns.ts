import { UsageError } from './args';
import { API_FLAGS, API_HELP, apiTarget, reportApiError, workspaceCall } from './api-client';
import type { Command } from './cli';

/**
 * `sopops patterns rename [--workspace WS] [--all]`: has the reasoning model name the
 * workspace's rule patterns still named from their rule's text (every one with --all). The
 * server asks the model; this prints what it named and, when it could not name some, why.
 */
export const patternsCommand: Command = {
  usage: 'sopops patterns rename [--workspace WS] [--all] [--url URL] [--key KEY]',
  summary: "name rule patterns with the reasoning model (what the agent did wrong, in a few words)",
  help: `rename: asks the reasoning model, through the server's question service, to name each rule
pattern still named from its rule's text: what the agent did wrong, in a few plain words.
--all names every active rule pattern again. A pattern the model cannot name keeps its name.

${API_HELP}

Exit status: 0 every pattern asked about was named (or none needed it); 1 some could not be
named (no reasoning model, a model error, an unusable answer: said on stderr) or the server
refused; 2 for wrong options.`,
  flags: { ...API_FLAGS, all: {} },
  async run(p, io) {
    if (p.positional[0] !== 'rename' || p.positional.length !== 1) {
      throw new UsageError(p.positional.length ? `unknown patterns command: ${p.positional.join(' ')} (the one there is: rename)` : 'which patterns command: rename');
    }
    const target = apiTarget(p, io);
    const all = p.flags.all === true;
    try {
      const r = await workspaceCall<{ renamed: number; failed: number; reason: string | null }>(target, 'POST', '/patterns/rename', { json: all ? { all } : {} });
      const s = (n: number) => `${n} pattern${n === 1 ? '' : 's'}`;
      if (!r.renamed && !r.failed) io.out(`nothing to rename in ${target.workspace}${all ? '' : ' (every pattern has a name from the model; --all names them again)'}`);
      else io.out(`renamed ${s(r.renamed)} in ${target.workspace}`);
      if (!r.failed) return 0;
      io.err(`sopops patterns rename: ${s(r.failed)} kept ${r.failed === 1 ? 'its name' : 'their names'}: ${r.reason ?? 'the model could not name them'}`);
      return 1;
    } catch (err) {
      return reportApiError('sopops patterns rename', err, io);
    }
  },
};
