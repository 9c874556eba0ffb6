import { CONTEXT_SPANS, DEFAULT_EVIDENCE_CHARS, contextOf, contextOfRing, renderEvidence } from './evidence';
import type { EvidenceDoc, RunSummary, SpanSummary } from './types';

const span = (i: number, tool = 'search', chars = 2_000): SpanSummary => ({ id: `s${i}`, type: 'tool', name: tool, tool, status: 'ok', input: `in${i} ${'i'.repeat(chars)}`, output: `out${i} ${'o'.repeat(chars)}` });
const tools = Array.from({ length: 100 }, (_, i) => ({ name: `tool_${i}`, description: `does thing ${i} `.padEnd(300, 'd') }));
const run = (r: number): RunSummary => ({
  run_id: `r${r}`,
  status: 'ok',
  user_message: `request of run ${r} `.padEnd(500, 'u'),
  final_output: `answer of run ${r} `.padEnd(800, 'f'),
  spans: Array.from({ length: 5 }, (_, i) => ({ id: `r${r}x${i}`, type: 'tool', name: 't', tool: 't', status: 'ok', input: 'i'.repeat(300), output: 'o'.repeat(300) })),
});

describe('the evidence a question is shown', () => {
  it('is at most 16,000 characters for a span question with a hundred tools, keeping the call judged, the prompt and the tools it used', () => {
    // The largest run_start allows: a 4,000-character system prompt, a hundred tools of 300 characters.
    const spans = Array.from({ length: 11 }, (_, i) => span(i, i === 10 ? 'tool_42' : i === 3 ? 'tool_7' : 'search'));
    const doc: EvidenceDoc = { spans, focus: 's10', tools, system_prompt: `SYS ${'p'.repeat(3_996)}`, user_message: `USER ${'u'.repeat(1_995)}` };
    const text = renderEvidence(doc);
    expect(text.length).toBeLessThanOrEqual(DEFAULT_EVIDENCE_CHARS);
    expect(text).toContain(doc.system_prompt);
    expect(text).toContain(doc.user_message);
    expect(text).toContain(`>>> the call being judged: [s10] tool call tool_42 (ok)\n  input: ${spans[10].input}\n  output: ${spans[10].output}`);
    // The tools the calls used are listed; of the others, what is left out is counted.
    const listed = tools.filter((t) => text.includes(`- ${t.name}: `));
    expect(listed.map((t) => t.name)).toEqual(expect.arrayContaining(['tool_7', 'tool_42']));
    expect(listed.length).toBeLessThan(100);
    expect(text).toContain(`(${100 - listed.length} more tools not shown)`);
    // The calls shown are the newest, and the others are counted.
    const shownCalls = spans.filter((s) => text.includes(`[${s.id}] `));
    expect(shownCalls.at(-1)!.id).toBe('s10');
    expect(text).toContain(`(${11 - shownCalls.length} earlier calls not shown)`);
  });

  it('is at most 16,000 characters for a session question with ten earlier runs, keeping the newest runs and saying how many are left out', () => {
    const doc: EvidenceDoc = { spans: [span(0), span(1), span(2)], runs: Array.from({ length: 10 }, (_, r) => run(r)), final_output: `FINAL ${'f'.repeat(3_994)}` };
    const text = renderEvidence(doc);
    expect(text.length).toBeLessThanOrEqual(DEFAULT_EVIDENCE_CHARS);
    expect(text).toContain(`The agent's final answer:\n${doc.final_output}`);
    expect(text).toContain(`[s2] tool call search (ok)\n  input: ${doc.spans[2].input}`);
    const shownRuns = doc.runs!.filter((r) => text.includes(`Run ${r.run_id} `));
    expect(shownRuns.length).toBeGreaterThan(0);
    expect(shownRuns.at(-1)!.run_id).toBe('r9');
    // What the earlier runs asked and answered is kept even when their calls are not.
    for (const r of shownRuns) expect(text).toContain(r.final_output);
    expect(text).toContain(`(${10 - shownRuns.length} earlier runs of this session not shown)`);
  });

  it('cuts what is always shown to one length when it alone is over the bound', () => {
    const doc: EvidenceDoc = { spans: [span(0)], text: `TEXT ${'t'.repeat(30_000)}`, system_prompt: 'p'.repeat(4_000), final_output: 'f'.repeat(4_000), user_message: 'u'.repeat(2_000) };
    const text = renderEvidence(doc);
    expect(text.length).toBeLessThanOrEqual(DEFAULT_EVIDENCE_CHARS);
    expect(text.length).toBeGreaterThan(DEFAULT_EVIDENCE_CHARS - 500);
    expect(text).toContain('TEXT ');
    expect(text).toMatch(/characters cut\]/);
    expect(text).toContain('[s0] tool call search (ok)');
    expect(text).toContain("The agent's final answer:\n");
  });

  it('renders the same evidence the same every time, and evidence under the bound whole', () => {
    const doc: EvidenceDoc = { spans: [span(0, 'lookup', 100), span(1, 'lookup', 100)], tools: tools.slice(0, 3), system_prompt: 'Be kind.', user_message: 'Refund order 17', final_output: 'Done.' };
    const text = renderEvidence(doc);
    expect(renderEvidence(JSON.parse(JSON.stringify(doc)))).toBe(text);
    expect(text).not.toMatch(/not shown|characters cut/);
    for (const t of tools.slice(0, 3)) expect(text).toContain(`- ${t.name}: ${t.description}`);
    expect(text).toContain(doc.spans[0].output);
    const big: EvidenceDoc = { spans: Array.from({ length: 30 }, (_, i) => span(i)), tools, runs: [run(0), run(1)], system_prompt: 'p'.repeat(4_000), final_output: 'f'.repeat(4_000) };
    expect(renderEvidence(big)).toBe(renderEvidence(JSON.parse(JSON.stringify(big))));
  });

  it('never goes over the bound, whatever the sizes', () => {
    let seed = 7;
    const rnd = (n: number) => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31), seed % n);
    for (let k = 0; k < 300; k++) {
      const budget = [DEFAULT_EVIDENCE_CHARS, 4_000, 30_000][k % 3];
      const doc: EvidenceDoc = {
        spans: Array.from({ length: rnd(40) }, (_, i) => span(i, `tool_${rnd(120)}`, rnd(2_100))),
        tools: tools.slice(0, rnd(101)),
        runs: Array.from({ length: rnd(11) }, (_, r) => run(r)),
        system_prompt: rnd(2) ? 'p'.repeat(rnd(4_001)) : undefined,
        user_message: rnd(2) ? 'u'.repeat(rnd(2_001)) : undefined,
        final_output: rnd(2) ? 'f'.repeat(rnd(4_001)) : undefined,
        text: rnd(4) ? undefined : 't'.repeat(rnd(20_000)),
        omitted: rnd(3),
      };
      if (doc.spans.length && rnd(2)) doc.focus = doc.spans[rnd(doc.spans.length)].id;
      expect(renderEvidence(doc, budget).length).toBeLessThanOrEqual(budget);
    }
  });
});

describe('the context a question is shown', () => {
  it('taken from the ring in place is the context of the ring copied up to the same span', () => {
    // Short and long fields (cut to 400), fewer and more than CONTEXT_SPANS spans before.
    const ring = Array.from({ length: 45 }, (_, i) => span(i, 'search', i % 3 ? 10 : 900));
    for (const end of [0, 1, 7, CONTEXT_SPANS, CONTEXT_SPANS + 1, 45]) {
      for (const user_message of [undefined, 'what the user asked']) {
        const copied = contextOf(ring.slice(0, end), { user_message });
        const inPlace = contextOfRing(ring, end, user_message);
        expect(inPlace).toEqual(copied);
        expect(JSON.stringify(inPlace)).toBe(JSON.stringify(copied));
        // The same summaries (a record writes a shared one once).
        inPlace.spans.forEach((s, i) => expect(s).toBe(copied.spans[i]));
      }
    }
    expect(contextOfRing(ring, 45, undefined).omitted).toBe(45 - CONTEXT_SPANS);
    expect(contextOfRing(ring, 45, undefined).spans[0].output!.length).toBeLessThanOrEqual(400);
  });
});
