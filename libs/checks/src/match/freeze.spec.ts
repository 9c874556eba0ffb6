import { performance } from 'node:perf_hooks';
import { MemoryWindowStore } from '@neatroots/platform';
import { normalizeItem, type Envelope } from '@neatroots/spans';
import { RuleEngine } from '../engine/engine';
import { compileRuleSet } from '../engine/ruleset';
import type { RunWindow } from '../engine/window';
import type { RuleCheck } from '../types';
import { DisabledChecks } from './disabled';
import { SafeMatching } from './safe-matching';

/**
 * The fault: an 863-byte check, `([a-z]{1,1000}x)` fifty times, and one span of
 * 200,000 characters blocked every project for ~9.5 s. Validation now rejects that pattern
 * (regex.spec.ts); here it is let through on purpose (bounds lifted), standing for whatever
 * slow pattern the bounds do not catch: the time limit must hold on its own.
 */
const FREEZING = '([a-z]{1,1000}x)'.repeat(50);
const LIMIT_MS = 50;
/**
 * Room for a busy machine: two cores shared by several test runs stall a 5 ms timer for half a
 * second now and then. The fault blocked the loop for the whole RE2 run (~9.5 s on this span),
 * so a bound of two seconds still fails without the time limit.
 */
const MARGIN_MS = 2_000;

const userMatch = (id: string, pattern: string, project?: string): RuleCheck => ({
  id,
  kind: 'rule',
  title: id,
  rule: { type: 'match', span: {}, pattern, in: ['output'] },
  action: 'flag',
  source: 'user',
  ...(project ? { applies_to: { project: [project] } } : {}),
});

let seq = 0;
const spanEnv = (project: string, output: string): Envelope => {
  seq++;
  return {
    project,
    received_ms: 1_000_000 + seq,
    item: normalizeItem({ run_id: `${project}-run`, span_id: `s${seq}`, type: 'tool', tool: 'read_file', name: 'read_file', output }),
  };
};

describe('a pattern that would freeze RE2', () => {
  let matching: SafeMatching;
  afterEach(() => matching.close());

  it('costs its own check, not the process: other work goes on, the check is disabled with its reason', async () => {
    const disabled = new DisabledChecks();
    const warnings: string[] = [];
    matching = new SafeMatching({
      limitMs: LIMIT_MS,
      disabled,
      warn: (m) => warnings.push(m),
      bounds: { maxChars: 10_000, maxProgram: Infinity, maxCount: 1000 },
    });
    // The slow check is project a's own; both projects have the other one.
    const set = compileRuleSet([userMatch('frozen', FREEZING, 'a'), userMatch('needle', 'needle')], matching.matcher);
    const engine = () => new RuleEngine({ windows: new MemoryWindowStore<RunWindow>(), rules: () => set, steering: () => false });
    // Two engines, as two partitions of the rule engine in one process: project a's runs and project b's.
    const slowSide = engine();
    const otherSide = engine();

    // The event loop's responsiveness: a 5 ms timer, and the longest it had to wait.
    let last = performance.now();
    let worstGap = 0;
    const probe = setInterval(() => {
      const now = performance.now();
      worstGap = Math.max(worstGap, now - last);
      last = now;
    }, 5);

    try {
      // 200,000 characters: all that `match` reads of a span.
      const big = 'needle ' + 'a'.repeat(200_000 - 7);
      const slow = slowSide.process([spanEnv('a', big)]).then((out) => ({ out, at: performance.now() }));
      // Meanwhile project b's spans are checked, batch after batch.
      const other: string[] = [];
      for (let i = 0; i < 5; i++) {
        const out = await otherSide.process([spanEnv('b', `line ${i}: a needle in the output`)]);
        other.push(...out.findings.map((f) => `${f.check_id}:${f.status}`));
        await out.commit();
      }
      const otherDoneAt = performance.now();
      const { out, at: slowDoneAt } = await slow;

      expect(worstGap).toBeLessThan(LIMIT_MS + MARGIN_MS);
      // b did not wait for a's slow span.
      expect(otherDoneAt).toBeLessThan(slowDoneAt);
      expect(other).toEqual(['needle:raised', 'needle:updated', 'needle:updated', 'needle:updated', 'needle:updated']);
      // On the same span, the other check still answered; the slow one found nothing and is off.
      expect(out.findings.map((f) => f.check_id)).toEqual(['needle']);
    } finally {
      clearInterval(probe);
    }

    expect(disabled.list()).toEqual([
      expect.objectContaining({
        check_id: 'frozen',
        pattern: FREEZING,
        source: 'user',
        limit_ms: LIMIT_MS,
        reason: expect.stringMatching(/^pattern took (over )?\d+ ms on one span \(limit 50 ms\); skipped until neatroots restarts$/),
      }),
    ]);
    expect(warnings).toEqual([expect.stringMatching(/^check frozen: pattern took/)]);

    // Later spans skip it without running it; reloading the checks does not turn it back on.
    const reloaded = compileRuleSet([userMatch('frozen', FREEZING, 'a')], matching.matcher);
    const matcher = reloaded.rules[0].data as { test(t: Buffer): boolean | Promise<boolean> };
    expect(matcher.test(Buffer.from('a'.repeat(200_000)))).toBe(false);
    expect(warnings).toHaveLength(1);
  }, 30_000);
});
