import { MemoryWindowStore } from '@neatroots/platform';
import { normalizeItem, type Envelope } from '@neatroots/spans';
import { GUIDANCE_PLACEHOLDERS, RULE_PLACEHOLDERS, UNKNOWN_VALUES } from '../guidance';
import { RULE_TYPES, type FindingEvent, type RuleCheck, type RuleSpec, type RuleType } from '../types';
import { RuleEngine } from './engine';
import { compileRuleSet } from './ruleset';
import type { RunWindow } from './window';

/**
 * RULE_PLACEHOLDERS (what `checks validate` warns against, and the table in docs/contracts.md
 * section 2 and docs/checks.md) is what the engine fills: for each rule type, a guidance naming
 * every placeholder comes out with exactly that type's filled and the others as the words for an
 * unknown value (UNKNOWN_VALUES), never as the raw placeholder.
 */

const ALL = GUIDANCE_PLACEHOLDERS.map((p) => `${p}=<{${p}}>`).join(' ');

const regexMatcher = (_c: RuleCheck, pattern: string) => {
  const re = new RegExp(pattern);
  return { test: (s: string) => re.test(s) };
};

const tool = (id: string, extra: Record<string, unknown> = {}) => ({
  run_id: 'r',
  span_id: id,
  type: 'tool',
  name: 'call-name',
  tool: 'issue_refund',
  input: { order: 7 },
  start_ms: 1_000,
  end_ms: 1_100,
  ...extra,
});

/** Each rule type, and spans (sent in turn, with the clock moved after each batch) that make it raise. */
const CASES: Record<RuleType, { spec: RuleSpec; batches: Record<string, unknown>[][] }> = {
  repeat: { spec: { type: 'repeat', span: {}, same: ['tool', 'input'], at_least: 2 }, batches: [[tool('a'), tool('b')]] },
  errors: { spec: { type: 'errors', span: {}, at_least: 2 }, batches: [[tool('a', { error: 'boom' }), tool('b', { error: 'boom' })]] },
  count: { spec: { type: 'count', span: {}, at_least: 2 }, batches: [[tool('a'), tool('b')]] },
  slow: { spec: { type: 'slow', span: {}, at_least_ms: 50 }, batches: [[tool('a')]] },
  threshold: { spec: { type: 'threshold', metric: 'spans', at_least: 1 }, batches: [[tool('a')]] },
  match: { spec: { type: 'match', span: {}, pattern: 'order', in: ['input'] }, batches: [[tool('a')]] },
  requires_before: { spec: { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } }, batches: [[tool('a')], []] },
  unrecovered_error: {
    spec: { type: 'unrecovered_error', span: {} },
    batches: [[tool('a', { error: 'boom' }), { event: 'run_end', run_id: 'r', status: 'ok', final_output: 'Your refund is on its way.' }]],
  },
  run_end: { spec: { type: 'run_end', ends: ['error'] }, batches: [[tool('a'), { event: 'run_end', run_id: 'r', status: 'error' }]] },
};

async function firstFinding(spec: RuleSpec, batches: Record<string, unknown>[][]): Promise<FindingEvent | undefined> {
  const check: RuleCheck = { id: 'c', kind: 'rule', title: 'c', rule: spec, action: 'flag', source: 'user', guidance: ALL };
  const set = compileRuleSet([check], regexMatcher);
  const engine = new RuleEngine({ windows: new MemoryWindowStore<RunWindow>(), rules: () => set });
  const findings: FindingEvent[] = [];
  let t = 1_000_000;
  for (const batch of batches) {
    const tick = await engine.tick(t);
    findings.push(...tick.findings);
    await tick.commit();
    const envs: Envelope[] = batch.map((raw) => ({ project: 'p', received_ms: t, item: normalizeItem(raw) }));
    const out = await engine.process(envs);
    findings.push(...out.findings);
    await out.commit();
    // Past requires_before's wait for a late required call.
    t += 10_000;
  }
  return findings.find((f) => f.status === 'raised');
}

describe('guidance placeholders per rule type', () => {
  it('covers every rule type', () => {
    expect(Object.keys(RULE_PLACEHOLDERS).sort()).toEqual([...RULE_TYPES].sort());
  });

  it.each(RULE_TYPES.map((t) => [t]))('%s fills exactly the placeholders RULE_PLACEHOLDERS names', async (type) => {
    const { spec, batches } = CASES[type];
    const finding = await firstFinding(spec, batches);
    expect(finding).toBeDefined();
    expect(finding!.guidance).not.toMatch(/\{[a-z_]+\}/);
    const filled = GUIDANCE_PLACEHOLDERS.filter((p) => !finding!.guidance.includes(`${p}=<${UNKNOWN_VALUES[p]}>`));
    expect(filled.sort()).toEqual([...RULE_PLACEHOLDERS[type]].sort());
  });
});
