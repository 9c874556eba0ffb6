import type { Io } from './cli';
import { calibrateCommand } from './sopops-calibrate';
import { checkCommand, type CheckDeps } from './sopops-check';
import { lineageCommand } from './sopops-lineage';
import { mergeCommand } from './sopops-merge';
import { patternsCommand } from './sopops-patterns';
import { prStatusCommand } from './sopops-pr-status';
import { publishCommand, pushCommand } from './sopops-push';
import { recheckCommand } from './sopops-recheck';
import { reclusterCommand } from './sopops-recluster';
import { processIo, runProgram, type Program } from './subcommands';

/**
 * `sopops`: the sopops side from the command line. Each command lives in its own
 * sopops-<name>.ts; adding one is that file and one line in the table below.
 */
export function sopops(deps: CheckDeps = {}): Program {
  return {
    name: 'sopops',
    about: 'sopops checks agent sessions against standard operating procedures.',
    commands: {
      check: checkCommand(deps),
      merge: mergeCommand,
      lineage: lineageCommand,
      push: pushCommand,
      publish: publishCommand,
      patterns: patternsCommand,
      calibrate: calibrateCommand,
      'pr-status': prStatusCommand,
      recluster: reclusterCommand,
      recheck: recheckCommand,
    },
  };
}

export function main(argv: readonly string[], io: Io = processIo, deps: CheckDeps = {}): Promise<number> {
  return runProgram(sopops(deps), argv, io);
}
