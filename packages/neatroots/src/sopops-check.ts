import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  checkSession,
  compileFolder,
  formatIssue,
  noModelDecider,
  parseSession,
  UnknownAgentError,
  type Decider,
  type Reviewer,
  sessionAsStored,
  type Session,
} from '@neatroots/sop';
import { UsageError } from './args';
import type { Command } from './cli';

export interface CheckDeps {
  /** Who answers the checker's yes/no questions; no model by default. */
  decider?: Decider;
  reviewer?: Reviewer;
}

/**
 * `sopops check --procedures DIR [--agent NAME] FILE.json...`: the real checker over session
 * files, printing exactly the body of GET /v1/workspaces/{ws}/sessions/{id} per session.
 * Every file is read and validated before anything is printed, so bad input never leaves
 * half an answer.
 */
export function checkCommand(deps: CheckDeps = {}): Command {
  return {
    usage: 'sopops check --procedures DIR [--agent NAME] FILE.json...',
    summary: 'check session files against a procedures folder',
    help: `Checks each session file (one session as JSON: external_id, agent, turns [{role, text}],
tool_calls [{turn, tool, input, output, error}]) against the procedures its agent lists in
DIR, directly or through groups, and prints one JSON line per session: the session's result
and one check per procedure, exactly as GET /v1/workspaces/{ws}/sessions/{id} returns them.

Without a model, only what the session's facts decide is checked:
  - a [tool: X, required] step is done when X was called (evidence: the turn of its first
    call); when it was not, it is skipped if a later step was done, else not_reached;
  - done steps are out_of_order when the order of their first evidence turns says so;
  - a procedure without Applies when: applies; one with it is not checked;
  - every other rule is not_checked, its reason saying so, and a procedure with one is never
    "followed" (docs/procedures.md);
  - a session where the agent never spoke is not_measurable.

Options:
  --procedures DIR   the procedures folder (as for sopc)
  --agent NAME       check every file as this agent's session (default: each file's "agent")

Exit status: 0; 2 for an unreadable or invalid session file, an agent not in the folder, or
a folder that does not compile (the reason on standard error).`,
    flags: { procedures: { value: true }, agent: { value: true } },
    async run(p, io) {
      const dir = p.flags.procedures;
      if (typeof dir !== 'string') throw new UsageError('--procedures DIR is required');
      if (!p.positional.length) throw new UsageError('no session file given');
      const agent = typeof p.flags.agent === 'string' ? p.flags.agent : undefined;
      const folder = compileFolder(path.resolve(io.cwd, dir));
      if (folder.errors.length) {
        io.err(`sopops check: ${dir} does not compile:`);
        for (const issue of folder.errors) io.err(formatIssue(issue));
        return 2;
      }
      const sessions: { file: string; session: Session }[] = [];
      for (const file of p.positional) {
        const session = readSession(path.resolve(io.cwd, file), file);
        if (typeof session === 'string') {
          io.err(`sopops check: ${session}`);
          return 2;
        }
        const name = agent ?? session.agent;
        if (!name) {
          io.err(`sopops check: ${file}: the session names no agent (give one with --agent NAME)`);
          return 2;
        }
        if (!folder.agents.some((a) => a.agent === name)) {
          const known = folder.agents.map((a) => a.agent).join(', ') || 'none';
          io.err(`sopops check: ${file}: agent "${name}" is not in ${dir} (agents: ${known})`);
          return 2;
        }
        sessions.push({ file, session });
      }
      const decider = deps.decider ?? noModelDecider('no model is configured for sopops check');
      for (const { file, session } of sessions) {
        try {
          const body = await checkSession(folder, session, { decider, reviewer: deps.reviewer, agent, releaseId: null });
          io.out(JSON.stringify(sessionAsStored(body, { started_at: asStoredTime(session.started_at), transcript_ref: session.transcript_ref })));
        } catch (e) {
          if (!(e instanceof UnknownAgentError)) throw e;
          io.err(`sopops check: ${file}: ${e.message}`);
          return 2;
        }
      }
      return 0;
    },
  };
}

/**
 * started_at as the stored session's GET gives it: the same instant in UTC, to the millisecond
 * (what the database keeps and toISOString writes), not the offset it was sent with.
 * parseSession has checked it is an ISO 8601 time with its offset.
 */
function asStoredTime(v: string | null): string | null {
  return v === null ? null : new Date(v).toISOString();
}

/** The session in the file, or why it cannot be read (a message naming the file). */
function readSession(abs: string, file: string): Session | string {
  let text: string;
  try {
    text = fs.readFileSync(abs, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return `${file}: ${code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'a folder, not a session file' : (e as Error).message}`;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return `${file}: not JSON: ${(e as Error).message}`;
  }
  try {
    return parseSession(value);
  } catch (e) {
    return `${file}: ${(e as Error).message}`;
  }
}
