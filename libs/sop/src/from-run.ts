import type { Session, ToolCall, Turn } from './session';

/**
 * A neatroots run as a sopops session (the formats' "a neatroots run becomes a session the
 * same way at its run_end when its workflow names an agent of the workspace"), so one span
 * stream feeds both the live checks and the SOP checks. The shapes are the span format's
 * fields this needs, nothing more: this package does not depend on the span library.
 *
 *   turns        the run's user message (user), then each LLM call's output (agent), then
 *                the final output if it is not the last thing the agent already said
 *   tool_calls   each tool and MCP tool span, in order, on the agent turn before it (turn 0
 *                when it came before the agent spoke)
 */
export interface RunSpanLike {
  type: string;
  name?: string;
  tool?: string;
  input?: unknown;
  output?: unknown;
  error?: string | null;
  status?: string;
}

export interface RunLike {
  run_id: string;
  workflow: string | null;
  started_at: string | null;
  user_message?: string | null;
  final_output?: unknown;
  /** In the order they happened. */
  spans: readonly RunSpanLike[];
}

/** Where a session made from a run says it came from (its external_id). */
export function runExternalId(runId: string): string {
  return `run:${runId}`;
}

export function sessionFromRun(run: RunLike, opts: { transcriptRef?: string | null } = {}): Session {
  const turns: Turn[] = [];
  const tool_calls: ToolCall[] = [];
  if (run.user_message) turns.push({ role: 'user', text: run.user_message });
  const lastAgentTurn = () => {
    for (let i = turns.length - 1; i >= 0; i--) if (turns[i].role === 'agent') return i;
    return 0;
  };
  for (const s of run.spans) {
    if (s.type === 'llm') {
      const text = textOf(s.output);
      if (text) turns.push({ role: 'agent', text });
    } else if (s.type === 'tool' || s.type === 'mcp_tool') {
      tool_calls.push({
        turn: lastAgentTurn(),
        tool: s.tool ?? s.name ?? 'tool',
        input: s.input ?? null,
        output: s.output ?? null,
        error: s.error ?? (s.status === 'error' ? 'error' : null),
      });
    }
  }
  const final = textOf(run.final_output);
  const last = turns[turns.length - 1];
  if (final && !(last?.role === 'agent' && last.text === final)) turns.push({ role: 'agent', text: final });
  // A tool call needs a turn to point at: a run with calls and nothing said gets an empty user turn.
  if (!turns.length && tool_calls.length) turns.push({ role: 'user', text: '' });
  return {
    external_id: runExternalId(run.run_id),
    agent: run.workflow,
    release_id: null,
    started_at: run.started_at,
    transcript_ref: opts.transcriptRef ?? null,
    turns,
    tool_calls,
  };
}

/** Keys of a chat message or a content part: an object with one of them is read for its text alone. */
const MESSAGE_KEYS = ['role', 'type', 'content', 'tool_calls', 'function_call', 'refusal', 'message', 'choices', 'candidates', 'parts', 'functionCall'];

/**
 * What an LLM call said: a string as is; a chat completion's message content; content parts'
 * text joined (OpenAI- and Anthropic-style, Gemini's parts). A message or part with no text (a
 * call that only calls tools: `content: null` with `tool_calls`, a `tool_use` part) says
 * nothing, so it makes no agent turn: its calls are the tool spans. Any other value (a
 * structured output) as compact JSON.
 */
function textOf(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v.trim();
  if (Array.isArray(v)) return v.map(textOf).filter(Boolean).join('\n');
  if (typeof v === 'object') {
    const o = v as Record<string, unknown>;
    if (typeof o.text === 'string') return o.text.trim();
    if (typeof o.content === 'string' || Array.isArray(o.content)) return textOf(o.content);
    if (o.content && typeof o.content === 'object') return textOf(o.content);
    if (o.message && typeof o.message === 'object') return textOf(o.message);
    if (Array.isArray(o.choices) && o.choices.length) return textOf(o.choices[0]);
    if (Array.isArray(o.candidates) && o.candidates.length) return textOf(o.candidates[0]);
    if (Array.isArray(o.parts)) return textOf(o.parts);
    if (MESSAGE_KEYS.some((k) => k in o)) return '';
  }
  return JSON.stringify(v);
}
