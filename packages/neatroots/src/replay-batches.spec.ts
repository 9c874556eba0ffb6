import * as fs from 'node:fs';
import * as path from 'node:path';
import { defaultLibraryDir, loadChecks, parseCheck, type FindingEvent } from '@neatroots/checks';
import type { StreamItem } from '@neatroots/spans';
import { findingLine, readItems, Replayer } from './replay';

/**
 * Replay publishes the recording many items at a time, and the rule engine takes each item as
 * if it had come alone: the findings, and their order, must not depend on the batch size.
 * The recording interleaves every shipped example run, 100 ms apart, so within one batch a
 * refund's 250 ms wait runs out, and question findings (answered by the fast classifier) fall
 * between rule findings of later items.
 */
const refund = parseCheck(
  { id: 'refund-without-lookup', kind: 'rule', title: 'Refund without lookup', rule: { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } } },
  'mine.yaml',
  'user',
);
const checks = [...loadChecks({ home: false }).checks, refund];

async function recording(): Promise<StreamItem[]> {
  const examples = path.join(defaultLibraryDir(), 'examples');
  const files = fs
    .readdirSync(examples)
    .flatMap((d) => fs.readdirSync(path.join(examples, d)).filter((f) => f.endsWith('.jsonl') && f !== 'expected.jsonl').map((f) => path.join(examples, d, f)))
    .sort();
  const runs = new Map<string, StreamItem[]>();
  for await (const item of readItems(files)) {
    const run = item.kind === 'span' ? item.span.run_id : item.run.run_id;
    runs.set(run, [...(runs.get(run) ?? []), item]);
  }
  // Two runs of a refund without its lookup: its wait runs out 250 ms later, mid-batch.
  for (const run of ['refund-1', 'refund-2']) {
    runs.set(run, [
      { kind: 'run_start', run: { event: 'run_start', run_id: run, project: 'examples', ts_ms: 0 } },
      { kind: 'span', span: { run_id: run, span_id: 'r1', type: 'tool', name: 'issue_refund', tool: 'issue_refund', status: 'ok', input: { order: 7 } } },
      { kind: 'span', span: { run_id: run, span_id: 'r2', type: 'llm', name: 'chat', status: 'ok', output: 'Refunded.' } },
    ]);
  }
  // Round robin over the runs, each item 100 ms after the one before.
  const queues = [...runs.values()];
  const out: StreamItem[] = [];
  let t = 1_700_000_000_000;
  while (queues.some((q) => q.length)) {
    for (const q of queues) {
      const item = q.shift();
      if (!item) continue;
      t += 100;
      if (item.kind === 'span') out.push({ kind: 'span', span: { ...item.span, start_ms: t - 10, end_ms: t } });
      else out.push({ ...item, run: { ...item.run, ts_ms: t } } as StreamItem);
    }
  }
  return out;
}

async function replay(items: StreamItem[], batch: number): Promise<string[]> {
  const lines: string[] = [];
  const r = new Replayer({ checks, batch, onFinding: (f: FindingEvent) => lines.push(JSON.stringify(findingLine(f))), log: () => undefined });
  for (const item of items) await r.push(item);
  await r.end();
  return lines;
}

describe('replay in batches', () => {
  it('prints the same findings in the same order whatever the batch size', async () => {
    const items = await recording();
    const alone = await replay(items, 1);
    const ids = alone.map((l) => JSON.parse(l).check_id as string);
    // What makes the order depend on batching: a wait that runs out, and a question's finding
    // followed by a rule's of a later item.
    const questions = new Set(checks.filter((c) => c.kind !== 'rule').map((c) => c.id));
    expect(ids).toContain('refund-without-lookup');
    const firstQuestion = ids.findIndex((id) => questions.has(id));
    expect(firstQuestion).toBeGreaterThanOrEqual(0);
    expect(ids.slice(firstQuestion + 1).some((id) => !questions.has(id))).toBe(true);
    for (const batch of [7, 32, 5000]) expect(await replay(items, batch)).toEqual(alone);
  });
});
