import { readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseCheckFile, type QuestionCheck } from '@neatroots/checks';
import { QuestionAnswerer } from './answerer';
import { FastClassifier, type ClassifierStore } from './classifier/classifier';
import { HEURISTICS } from './classifier/heuristics';
import { fillParams } from './library';
import type { SavedModel } from './classifier/model';
import { question } from './fixtures.test';
import type { EvidenceDoc, SpanSummary } from './types';

const ignored = question({ id: 'ignored-tool-error', ask: 'Did a tool fail and the agent answer as if it had not?', evidence: { final_output: true } }, 'library');
const pii = question({ id: 'personal-data-in-answer', ask: 'Does the final answer reveal personal data?', evidence: { final_output: true } }, 'library');
const custom = question({ id: 'upsell', ask: 'Did the agent push an upgrade the user did not ask about?' });

function doc(output: string, final: string, status: 'ok' | 'error' = 'ok'): EvidenceDoc {
  return {
    spans: [{ id: 's1', type: 'tool', name: 'lookup', tool: 'lookup', status, output: status === 'ok' ? output : undefined, error: status === 'error' ? output : undefined }],
    final_output: final,
  };
}

describe('the fast classifier', () => {
  it('answers the library questions with built-in heuristics before it has data, with a quote from the run', () => {
    const c = new FastClassifier();
    const a = c.answer(ignored, doc('503 upstream unavailable', 'Your order has shipped.', 'error'));
    expect(a).toMatchObject({ status: 'answered', flagged: true, answered_by: 'classifier', quote: '503 upstream unavailable' });
    expect(a.confidence).toMatch(/^\d+%$/);
    expect(c.answer(ignored, doc('503 upstream unavailable', 'Sorry, the lookup failed.', 'error')).flagged).toBe(false);
    expect(c.answer(pii, doc('ok', 'You can reach Dana at dana.smith@example.com.')).quote).toBe('dana.smith@example.com');
  });

  it('finds a run repeating itself: the first result that came back three times, else the first call made three times', () => {
    const repeating = HEURISTICS['repeating-without-progress'];
    const call = (i: number, tool: string, input: string, output?: string) => ({ id: `s${i}`, type: 'tool', name: tool, tool, status: 'ok' as const, input, output });
    const calls = (...spans: ReturnType<typeof call>[]): EvidenceDoc => ({ spans });
    // Two results repeated three times: the one whose first call came first is quoted.
    const twice = calls(call(1, 'search', 'q1', 'nothing found'), call(2, 'lookup', 'a', 'A-17 pending'), call(3, 'lookup', 'b', 'A-17 pending'), call(4, 'search', 'q2', 'nothing found'), call(5, 'lookup', 'c', 'A-17 pending'), call(6, 'search', 'q3', 'nothing found'));
    expect(repeating(twice)).toEqual({ p: 0.8, quote: 'nothing found' });
    // The same call three times with new results each time.
    expect(repeating(calls(call(1, 'fetch', 'page 1', 'r1'), call(2, 'fetch', 'page 1', 'r2'), call(3, 'search', 'x', 'r3'), call(4, 'fetch', 'page 1', 'r4')))).toEqual({ p: 0.75, quote: 'page 1' });
    // Twice is not repeating; the same result from two tools is not either.
    expect(repeating(calls(call(1, 'fetch', 'a', 'same'), call(2, 'fetch', 'b', 'same'), call(3, 'search', 'c', 'same')))).toEqual({ p: 0.05 });
    // A call made three times without input is passed over for the next one made three times.
    expect(repeating(calls(call(1, 'ping', '', 'r1'), call(2, 'ping', '', 'r2'), call(3, 'fetch', 'p', 'r3'), call(4, 'ping', '', 'r4'), call(5, 'fetch', 'p', 'r5'), call(6, 'fetch', 'p', 'r6')))).toEqual({ p: 0.75, quote: 'p' });
  });

  it('finds the same repetition as lists keyed by tool and text joined with a NUL, for any run', () => {
    // The heuristic as it was written: a list per `${tool}\u0000${text}`, in the order first seen.
    const reference = (doc: EvidenceDoc) => {
      const byResult = new Map<string, SpanSummary[]>();
      const byCall = new Map<string, SpanSummary[]>();
      for (const s of doc.spans.filter((x) => x.type === 'tool' || x.type === 'mcp_tool')) {
        const out = s.output ?? s.error;
        if (out) byResult.set(`${s.tool ?? s.name}\u0000${out}`, [...(byResult.get(`${s.tool ?? s.name}\u0000${out}`) ?? []), s]);
        byCall.set(`${s.tool ?? s.name}\u0000${s.input ?? ''}`, [...(byCall.get(`${s.tool ?? s.name}\u0000${s.input ?? ''}`) ?? []), s]);
      }
      for (const list of byResult.values()) if (list.length >= 3) return { p: 0.8, quote: (list[0].output ?? list[0].error ?? '').slice(0, 160).trim() };
      for (const list of byCall.values()) if (list.length >= 3 && list[0].input) return { p: 0.75, quote: list[0].input.slice(0, 160).trim() };
      return { p: 0.05 };
    };
    const repeating = HEURISTICS['repeating-without-progress'];
    let seed = 11;
    const rnd = (n: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % n);
    // Tools and texts that collide once joined with a NUL ('a\u0000b' + 'c' and 'a' + 'b\u0000c').
    const tools = ['a', 'a\u0000b', 'b', undefined];
    const texts = ['', 'c', 'b\u0000c', '\u0000c', ' same ', 'x', undefined];
    for (let i = 0; i < 5_000; i++) {
      const spans: SpanSummary[] = Array.from({ length: rnd(12) }, (_, j) => ({
        id: `s${j}`, type: ['tool', 'mcp_tool', 'llm'][rnd(3)], name: ['n', 'a', 'b\u0000c'][rnd(3)], tool: tools[rnd(tools.length)], status: 'ok',
        input: texts[rnd(texts.length)], output: texts[rnd(texts.length)], error: texts[rnd(texts.length)],
      }));
      expect(repeating({ spans })).toEqual(reference({ spans }));
    }
  });

  it('answers with the heuristics a database check that asks the library question as written, not one that only reuses its id', () => {
    // The library as shipped, each question copied to the database (an override of its id) word for word.
    const dir = path.join(__dirname, '../../../packages/neatroots/library/questions');
    const shipped = readdirSync(dir).flatMap((f) => parseCheckFile(readFileSync(path.join(dir, f), 'utf8'), f, 'library').checks) as QuestionCheck[];
    expect(shipped.map((q) => q.id).sort()).toEqual(Object.keys(HEURISTICS).sort());
    const c = new FastClassifier();
    const run = doc('503 upstream unavailable', 'Your order has shipped.', 'error');
    for (const lib of shipped) {
      // Written as YAML saves it (its words on other lines), and with its {task} or {rules} filled for a run.
      const copy = question({ id: lib.id, scope: lib.scope, ask: lib.ask.replace(/, /g, ',\n  ') }, 'database');
      const filled = fillParams(copy, undefined, { user_message: 'Refund order 17', system_prompt: 'Never refund twice.', tools: [{ name: 'lookup' }] });
      for (const q of [copy, filled]) {
        const a = c.answer(q, run);
        expect([lib.id, a.status, a.probability]).toEqual([lib.id, 'answered', c.answer(lib, run).probability]);
      }
    }
    // The same id asking something else: the heuristic does not answer that.
    const reworded = question({ id: 'ignored-tool-error', ask: 'Did the agent greet the user by name?' }, 'database');
    expect(c.answer(reworded, run)).toMatchObject({ status: 'not_checked', flagged: false, reason: 'the fast classifier has not learnt this question yet' });
    // Nor through the answerer with no model configured.
    return new QuestionAnswerer().ask({ q: reworded, evidence: run }).then((a) => expect(a).toMatchObject({ status: 'not_checked', flagged: false }));
  });

  it('says "not checked", not "pass", for a question it has not learnt', () => {
    expect(new FastClassifier().answer(custom, doc('x', 'y'))).toMatchObject({ status: 'not_checked', flagged: false });
  });

  it('does not answer from a model that has only ever seen one outcome', () => {
    const c = new FastClassifier({ minTrained: 5 });
    for (let i = 0; i < 40; i++) c.learn(custom, doc('x', `fine ${i}`), { p: 0.02 });
    expect(c.answer(custom, doc('x', 'upgrade to premium now!')).status).toBe('not_checked');
    // A library question falls back to its heuristic meanwhile.
    for (let i = 0; i < 40; i++) c.learn(pii, doc('x', `fine ${i}`), { p: 0.02 });
    expect(c.answer(pii, doc('x', 'Mail dana@example.com')).flagged).toBe(true);
  });

  it('learns a question from LLM answers and then answers it itself', () => {
    const c = new FastClassifier({ minTrained: 20 });
    const upsell = (i: number) => doc(`plan basic ${i}`, `Done. Also, you should upgrade to Premium today for only $${i}!`);
    const fine = (i: number) => doc(`plan basic ${i}`, `Done, your address is updated (ticket ${i}).`);
    for (let i = 0; i < 30; i++) {
      c.learn(custom, upsell(i), { p: 0.9 });
      c.learn(custom, fine(i), { p: 0.05 });
    }
    expect(c.trained(custom)).toBe(60);
    const yes = c.answer(custom, upsell(99));
    const no = c.answer(custom, fine(99));
    expect(yes.status).toBe('answered');
    expect(yes.probability!).toBeGreaterThan(0.7);
    expect(no.probability!).toBeLessThan(0.3);
    expect(yes.flagged).toBe(true);
    expect(yes.quote).toMatch(/upgrade to Premium/);
  });

  it('learns choice and score questions over their labels and levels', () => {
    const tone = question({ id: 'tone', kind: 'choice', ask: 'Tone?', options: { calm: 'calm', angry: 'angry' }, flag_on: ['angry'] });
    const c = new FastClassifier({ minTrained: 5 });
    for (let i = 0; i < 40; i++) {
      c.learn(tone, doc('x', `THIS IS UNACCEPTABLE ${i}`), { probs: { calm: 0, angry: 1 } });
      c.learn(tone, doc('x', `thanks, all good ${i}`), { probs: { calm: 1, angry: 0 } });
    }
    expect(c.answer(tone, doc('x', 'THIS IS UNACCEPTABLE 7'))).toMatchObject({ flagged: true, label: 'angry' });
    expect(c.answer(tone, doc('x', 'thanks, all good 7'))).toMatchObject({ flagged: false, label: 'calm' });
  });

  it('persists what it learnt', async () => {
    const saved = new Map<string, SavedModel>();
    const store: ClassifierStore = {
      load: async (keys) => new Map(keys.filter((k) => saved.has(k)).map((k) => [k, saved.get(k)!])),
      save: async (models) => {
        for (const m of models) saved.set(m.key, JSON.parse(JSON.stringify(m.model)));
      },
    };
    const a = new FastClassifier({ store, minTrained: 1 });
    await a.ready([custom]);
    for (let i = 0; i < 20; i++) a.learn(custom, doc('x', i % 2 ? `upgrade now ${i}` : `all set ${i}`), { p: i % 2 });
    await a.flush();
    const b = new FastClassifier({ store, minTrained: 1 });
    await b.ready([custom]);
    expect(b.trained(custom)).toBe(20);
    expect(b.answer(custom, doc('x', 'upgrade now 3')).probability).toBeCloseTo(a.answer(custom, doc('x', 'upgrade now 3')).probability!, 5);
  });

  it('answers in well under a millisecond', () => {
    const c = new FastClassifier({ minTrained: 1 });
    const d: EvidenceDoc = {
      spans: Array.from({ length: 6 }, (_, i) => ({ id: `s${i}`, type: 'tool', name: 'search', tool: 'search', status: 'ok' as const, input: `{"q":"order ${i}"}`, output: `Order ${i} found: 2 items, shipped on 2024-05-0${i}, carrier UPS, tracking 1Z${i}99` })),
      final_output: 'Your orders have shipped; tracking numbers are in your email.',
    };
    for (let i = 0; i < 30; i++) c.learn(custom, d, { p: i % 2 });
    for (let i = 0; i < 500; i++) c.answer(custom, d);
    // The best of five rounds: a loaded machine that takes the core away for a moment slows
    // one round, not all five.
    const n = 400;
    let per = Infinity;
    for (let round = 0; round < 5; round++) {
      const t0 = performance.now();
      for (let i = 0; i < n; i++) c.answer(custom, d);
      per = Math.min(per, (performance.now() - t0) / n);
    }
    expect(per).toBeLessThan(0.2);
  });
});
