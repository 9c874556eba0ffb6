import * as fs from 'node:fs';
import * as path from 'node:path';
import { MemoryWindowStore } from '@neatroots/platform';
import { normalizeItem, type Envelope } from '@neatroots/spans';
import { GUIDANCE_PLACEHOLDERS, fillGuidance } from '../guidance';
import { parseCheckFile } from '../schema';
import type { FindingEvent, RuleCheck, RuleSpec } from '../types';
import { RuleEngine } from './engine';
import { compileRuleSet } from './ruleset';
import type { RunWindow } from './window';

/**
 * What an agent sends when OpenTelemetry's content capture is off (the default of the GenAI and
 * MCP conventions): tool calls without their arguments. A `repeat` over the arguments cannot
 * know two such calls are the same, and a note never shows a placeholder it could not fill.
 */

const LIBRARY = path.resolve(__dirname, '../../../../packages/neatroots/library');
const RAW_PLACEHOLDER = /\{[a-z_]+\}/;

const regexMatcher = (_c: RuleCheck, pattern: string) => {
  const re = new RegExp(pattern.replace(/^\(\?i\)/, ''), pattern.startsWith('(?i)') ? 'i' : '');
  return { test: (s: string) => re.test(s) };
};

function rule(id: string, spec: RuleSpec, guidance: string): RuleCheck {
  return { id, kind: 'rule', title: id, rule: spec, action: 'flag', source: 'user', guidance };
}

/** The shipped library's checks of one file. */
function library(file: string): RuleCheck[] {
  const f = path.join(LIBRARY, file);
  return parseCheckFile(fs.readFileSync(f, 'utf8'), f, 'library').checks as RuleCheck[];
}

async function findings(checks: RuleCheck[], spans: Record<string, unknown>[]): Promise<FindingEvent[]> {
  const set = compileRuleSet(checks, regexMatcher);
  const engine = new RuleEngine({ windows: new MemoryWindowStore<RunWindow>(), rules: () => set });
  const envs: Envelope[] = spans.map((raw) => ({ project: 'p', received_ms: 1_000_000, item: normalizeItem({ run_id: 'r', ...raw }) }));
  const out = await engine.process(envs);
  await out.commit();
  return out.findings;
}

/** A tool call as an OpenTelemetry exporter sends it without content capture: no arguments. */
const read = (id: string, extra: Record<string, unknown> = {}) => ({ span_id: id, type: 'tool', name: 'execute_tool read_file', tool: 'read_file', ...extra });

describe('repeat with values that were not recorded', () => {
  const loop = library('loop.yaml');
  const repeated = loop.find((c) => c.id === 'repeated-tool-call')!;

  it('three calls of one tool without recorded arguments are not a repeated call (the shipped repeated-tool-call)', async () => {
    expect(repeated.rule).toMatchObject({ type: 'repeat', same: ['tool', 'input'], at_least: 3 });
    expect(await findings([repeated], [read('a'), read('b'), read('c'), read('d')])).toEqual([]);
  });

  it('three calls with the same recorded arguments still are, with the arguments in the note', async () => {
    const out = await findings([repeated], [read('a', { input: { path: 'a.txt' } }), read('b', { input: { path: 'a.txt' } }), read('c', { input: { path: 'a.txt' } })]);
    expect(out.map((f) => `${f.status}:${f.count}`)).toEqual(['raised:3']);
    expect(out[0].guidance).toContain('called read_file 3 times in a row with the same arguments ({"path":"a.txt"})');
  });

  it('a call whose arguments were not recorded ends a streak (resolving its finding) and starts none', async () => {
    const same = { input: { path: 'a.txt' } };
    const out = await findings([repeated], [read('a', same), read('b', same), read('c', same), read('d'), read('e', same), read('f', same)]);
    expect(out.map((f) => `${f.status}:${f.count}:${f.span_ids.join(',')}`)).toEqual(['raised:3:a,b,c', 'resolved:3:a,b,c']);
  });

  it('spans without a tool name are not the same tool', async () => {
    const check = rule('rep', { type: 'repeat', span: {}, same: ['tool'], at_least: 2 }, 'Called {tool} {count} times');
    const llm = (id: string) => ({ span_id: id, type: 'llm', name: 'chat', input: 'hi' });
    expect(await findings([check], [llm('a'), llm('b'), llm('c')])).toEqual([]);
  });
});

describe('a note never shows a placeholder raw', () => {
  it('each placeholder without a value is written as words saying so', () => {
    for (const p of GUIDANCE_PLACEHOLDERS) {
      const out = fillGuidance(`before {${p}} after`, {});
      expect(out).not.toMatch(RAW_PLACEHOLDER);
      expect(out).not.toBe('before  after');
    }
    expect(fillGuidance('the same arguments ({args})', { args: undefined })).toBe('the same arguments (arguments not recorded)');
    expect(fillGuidance('the latest was {tool}', { tool: undefined })).toBe('the latest was an unnamed tool');
  });

  it('a repeat over the tool alone, on calls without recorded arguments, says the arguments were not recorded', async () => {
    const check = rule('rep', { type: 'repeat', span: { type: ['tool'] }, same: ['tool'], at_least: 3 }, 'You called {tool} {count} times ({args}).');
    const out = await findings([check], [read('a'), read('b'), read('c')]);
    expect(out.map((f) => f.guidance)).toEqual(['You called read_file 3 times (arguments not recorded).']);
  });

  it("the shipped library's notes, on spans without tool names or arguments, fill every placeholder", async () => {
    const checks = [...library('loop.yaml'), ...library('performance.yaml')].map((c) => ({ ...c, source: 'user' as const }));
    // Failed calls without a tool name or arguments (an errors streak over spans that lack them),
    // and a slow one.
    const spans = Array.from({ length: 60 }, (_, i) => ({ span_id: `s${i}`, type: 'mcp_tool', name: 'tools/call', status: 'error', start_ms: 0, end_ms: 60_000 }));
    const out = await findings(checks, spans);
    expect(new Set(out.map((f) => f.check_id)).size).toBeGreaterThanOrEqual(3);
    for (const f of out) expect(f.guidance).not.toMatch(RAW_PLACEHOLDER);
  });
});
