/** Builders for the questions specs. Named *.test.ts: a helper, neither run by jest nor built. */
import { parseCheck, type QuestionCheck } from '@neatroots/checks';
import type { WindowSave, WindowStore } from '@neatroots/ports';
import type { Envelope, Span, ToolInfo } from '@neatroots/spans';

export const T0 = 1_700_000_000_000;

export function question(raw: Record<string, unknown>, source: 'user' | 'library' | 'database' = 'user'): QuestionCheck {
  const c = parseCheck({ kind: 'yes_no', scope: 'trace', ask: 'Did something go wrong?', ...raw }, 'test.yaml', source);
  if (c.kind === 'rule') throw new Error('not a question');
  return c;
}

export function span(run: string, id: string, over: Partial<Span> = {}, at = T0): Envelope {
  const s: Span = { run_id: run, span_id: id, type: 'tool', name: over.tool ?? 'search', tool: 'search', status: 'ok', input: { q: id }, output: `result ${id}`, start_ms: at, end_ms: at + 5, ...over };
  return { project: 'p', received_ms: at, item: { kind: 'span', span: s } };
}

export function runStart(run: string, over: { workflow?: string; tools?: ToolInfo[]; system_prompt?: string; user_message?: string; session_id?: string } = {}, at = T0): Envelope {
  return { project: 'p', received_ms: at, item: { kind: 'run_start', run: { event: 'run_start', run_id: run, ...over } } };
}

export function runEnd(run: string, final_output: unknown = 'done', at = T0 + 10_000, status: 'ok' | 'error' | 'no_output' | 'interrupted' = 'ok'): Envelope {
  return { project: 'p', received_ms: at, item: { kind: 'run_end', run: { event: 'run_end', run_id: run, status, final_output, ts_ms: at } } };
}

/** Every entry saved to `windows` from now on, in order (the store still saves them). */
export function recordSaves<W>(windows: WindowStore<W>): WindowSave<W>[] {
  const saved: WindowSave<W>[] = [];
  const save = windows.save.bind(windows);
  windows.save = async (entries) => {
    saved.push(...entries);
    return save(entries);
  };
  return saved;
}
