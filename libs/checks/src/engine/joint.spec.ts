import { MemoryWindowStore } from '@neatroots/platform';
import type { Envelope, Span } from '@neatroots/spans';
import { DisabledChecks } from '../match/disabled';
import { SafeMatching } from '../match/safe-matching';
import type { CheckSource, FindingEvent, RuleCheck, SpanFilter } from '../types';
import type { TextMatcher } from './compile';
import { RuleEngine } from './engine';
import { compileRuleSet } from './ruleset';
import type { RunWindow } from './window';

/** The `match` patterns of a span tested together (joint.ts): same findings as one by one, fewer passes. */
const match = (id: string, pattern: string, source: CheckSource, span: SpanFilter = {}, fields: ('input' | 'output')[] = ['input', 'output']): RuleCheck => ({
  id,
  kind: 'rule',
  title: id,
  rule: { type: 'match', span, pattern, in: fields },
  action: 'flag',
  source,
});

const CHECKS = [
  match('key', '\\bAKIA[0-9A-Z]{16}\\b|\\bsk-[A-Za-z0-9]{20,}', 'library', { type: ['tool'] }),
  match('card', '\\b4[0-9]{3}[ -]?[0-9]{4}[ -]?[0-9]{4}[ -]?[0-9]{4}\\b', 'user'),
  match('secret', '(?i)(api[_-]?key|secret)\\s*[:=]\\s*\\w{8,}', 'project', { type: ['tool'] }),
  match('refund', '^refund', 'user', { type: ['tool'], name: ['issue_refund'] }),
  match('out-only', 'done$', 'user', {}, ['output']),
  // Texts that are parts of input and output, read in its pass unless they assert an edge of
  // the text the part does not share with the whole.
  match('out-start', '^all', 'user', {}, ['output']),
  match('in-end', 'logs$', 'user', {}, ['input']),
  match('in-start', '^card', 'user', {}, ['input']),
  match('out-key', 'AKIA[0-9A-Z]{16}', 'user', {}, ['output']),
  match('out-word', '(?i)\\bSECRET\\b', 'project', {}, ['output']),
];

const TEXTS = [
  'nothing to see',
  'AKIAABCDEFGHIJKLMNOP in the logs',
  'card 4111 1111 1111 1111 and api_key = abcdefgh12',
  'refund of 12',
  'Secret: supersecretvalue and sk-abcdefghijklmnopqrstuvwx',
  'all done',
  'x'.repeat(60_000) + ' 4111-1111-1111-1111', // too long for an inline pass with the user's patterns
];

function spans(): Envelope[] {
  const out: Envelope[] = [];
  let n = 0;
  for (const type of ['tool', 'llm'] as const) {
    for (const input of TEXTS) {
      for (const output of [...TEXTS.slice(0, 6), '']) {
        const span: Span = { run_id: `r${n % 5}`, span_id: `s${n++}`, type, name: n % 3 ? 'lookup' : 'issue_refund', status: 'ok', input, output };
        if (type === 'tool') span.tool = span.name;
        out.push({ project: 'p', received_ms: 1_000 + n, item: { kind: 'span', span } });
      }
    }
  }
  return out;
}

async function run(matcher: (c: RuleCheck, p: string) => TextMatcher): Promise<string[]> {
  const set = compileRuleSet(CHECKS, matcher);
  const engine = new RuleEngine({ windows: new MemoryWindowStore<RunWindow>(), rules: () => set });
  const found: FindingEvent[] = [];
  const envs = spans();
  for (let i = 0; i < envs.length; i += 7) {
    const out = await engine.process(envs.slice(i, i + 7));
    found.push(...out.findings);
    await out.commit();
  }
  return found.map((f) => `${f.check_id} ${f.run_id} ${f.status} ${f.count} ${f.span_ids.join(',')}`);
}

describe('joint match passes', () => {
  let matching: SafeMatching;
  let disabled: DisabledChecks;
  beforeEach(() => {
    disabled = new DisabledChecks();
    matching = new SafeMatching({ disabled, warn: () => undefined });
  });
  afterEach(() => matching.close());

  /** The same matchers without `joint`: each pattern tested alone, as before passes existed. */
  const alone = (c: RuleCheck, p: string): TextMatcher => {
    const m = matching.matcher(c, p);
    return { test: (t) => m.test(t) };
  };

  it('finds exactly what testing each pattern alone finds, long texts and name filters included', async () => {
    const together = await run(matching.matcher);
    expect(together.length).toBeGreaterThan(20);
    expect(together).toEqual(await run(alone));
  });

  /** An engine over these checks, each pattern as the engine compiles it. */
  const engineOver = (checks: RuleCheck[]) => {
    const set = compileRuleSet(checks, matching.matcher);
    return new RuleEngine({ windows: new MemoryWindowStore<RunWindow>(), rules: () => set });
  };

  /** An engine over CHECKS whose patterns record each time one is asked alone (not in a pass). */
  const countingEngine = () => {
    const calls: string[] = [];
    const counted = (c: RuleCheck, p: string): TextMatcher => {
      const m = matching.matcher(c, p);
      return { joint: m.joint, test: (t) => (calls.push(c.id), m.test(t)) };
    };
    const set = compileRuleSet(CHECKS, counted);
    return { calls, engine: new RuleEngine({ windows: new MemoryWindowStore<RunWindow>(), rules: () => set }) };
  };

  it('tests the patterns of a span once together; a pattern is asked alone only when the pass hit or cannot run', async () => {
    const { calls, engine } = countingEngine();
    const span: Span = { run_id: 'r', span_id: 'a', type: 'tool', tool: 'lookup', name: 'lookup', status: 'ok', input: 'nothing', output: 'here' };
    const out = await engine.process([{ project: 'p', received_ms: 1, item: { kind: 'span', span } }]);
    expect(out.findings).toEqual([]);
    // key, card and secret read the same text: one pass, none asked alone. out-only, in-start,
    // out-key and out-word read a part of it, in the same pass; out-start and in-end assert an
    // edge of the text their part does not share with the whole: alone.
    expect(calls).toEqual(['out-start', 'in-end']);
  });

  it('asks a pattern of a part alone when the pass over the whole hit elsewhere in it', async () => {
    const { calls, engine } = countingEngine();
    // The key is in the input, not in the output out-key reads.
    const span: Span = { run_id: 'r', span_id: 'a', type: 'llm', name: 'chat', status: 'ok', input: 'AKIAABCDEFGHIJKLMNOP', output: 'here' };
    const out = await engine.process([{ project: 'p', received_ms: 1, item: { kind: 'span', span } }]);
    expect(out.findings).toEqual([]);
    expect(calls).toEqual(['out-start', 'in-end', 'out-key']);
  });

  it('asks a part alone when the whole text was cut at 200,000 characters', async () => {
    const checks = [
      match('whole', 'nothing-here', 'library', {}, ['input', 'output']),
      match('part', 'AKIA[0-9A-Z]{16}', 'library', {}, ['output']),
    ];
    const engine = engineOver(checks);
    const span: Span = { run_id: 'r', span_id: 'a', type: 'tool', tool: 't', name: 't', status: 'ok', input: 'x'.repeat(200_000), output: 'AKIAABCDEFGHIJKLMNOP' };
    const out = await engine.process([{ project: 'p', received_ms: 1, item: { kind: 'span', span } }]);
    expect(out.findings.map((f) => f.check_id)).toEqual(['part']);
  });

  it('answers a part with no text as the pattern answers no text, whatever the whole holds', async () => {
    // `\B` matches the empty text (no word on either side), not `a` (a word on one side of each place).
    const checks = [
      match('whole', 'nothing-here', 'library', {}, ['input', 'output']),
      match('part', '\\B', 'library', {}, ['output']),
    ];
    const engine = engineOver(checks);
    const span: Span = { run_id: 'r', span_id: 'a', type: 'tool', tool: 't', name: 't', status: 'ok', input: 'a', output: '' };
    const out = await engine.process([{ project: 'p', received_ms: 1, item: { kind: 'span', span } }]);
    expect(out.findings.map((f) => f.check_id)).toEqual(['part']);
  });

  it('builds a span\'s text only when a match filter passes', async () => {
    let built = 0;
    const input = { toJSON: () => (built++, { q: 'x' }) };
    const set = compileRuleSet([match('only-llm', 'x', 'user', { type: ['llm'] })], matching.matcher);
    const engine = new RuleEngine({ windows: new MemoryWindowStore<RunWindow>(), rules: () => set });
    const span: Span = { run_id: 'r', span_id: 'a', type: 'tool', tool: 't', name: 't', status: 'ok', input };
    await engine.process([{ project: 'p', received_ms: 1, item: { kind: 'span', span } }]);
    expect(built).toBe(0);
    await engine.process([{ project: 'p', received_ms: 2, item: { kind: 'span', span: { ...span, span_id: 'b', type: 'llm' } } }]);
    expect(built).toBe(1);
  });

  it('leaves a disabled pattern out of the pass; the others still find', async () => {
    const before = await run(matching.matcher);
    expect(before.some((f) => f.startsWith('card '))).toBe(true);
    disabled.add({ check_id: 'card', pattern: (CHECKS[1].rule as { pattern: string }).pattern, source: 'user', reason: 'slow', ms: 60, limit_ms: 50, since: new Date().toISOString() });
    const after = await run(matching.matcher);
    expect(after.some((f) => f.startsWith('card '))).toBe(false);
    expect(after).toEqual(before.filter((f) => !f.startsWith('card ')));
  });
});
