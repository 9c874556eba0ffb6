import { parseCheck, parseCheckFile } from './schema';
import { CheckError, CheckProblems, checkProblems, type QuestionCheck, type RuleCheck } from './types';

const FILE = 'checks/loop.yaml';

function rule(body: string, extra = ''): string {
  return `id: repeated-tool-call\nkind: rule\ntitle: Same call\n${extra}rule:\n${body
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n')}\n`;
}

function err(text: string, source: Parameters<typeof parseCheckFile>[2] = 'user'): CheckError {
  try {
    parseCheckFile(text, FILE, source);
  } catch (e) {
    expect(e).toBeInstanceOf(CheckError);
    return e as CheckError;
  }
  throw new Error('expected a CheckError');
}

describe('parseCheckFile: YAML', () => {
  it('reports a YAML syntax error with its line and column', () => {
    const e = err('id: a\nkind: rule\nrule: { type: count\n  at_least: [1,\n');
    expect(e.message).toMatch(/^checks\/loop\.yaml: YAML syntax error at \d+:\d+: /);
    const dup = err('id: a\nid: b\n');
    expect(dup.message).toBe('checks/loop.yaml: YAML syntax error at 2:1: Map keys must be unique');
  });

  it('reads one check, a list, and a multi-document stream', () => {
    const one = `id: a\nkind: rule\nrule: { type: run_end }\n`;
    expect(parseCheckFile(one, FILE, 'user').checks.map((c) => c.id)).toEqual(['a']);
    const list = `- id: a\n  kind: rule\n  rule: { type: run_end }\n- id: b\n  kind: rule\n  rule: { type: count, at_least: 2 }\n`;
    expect(parseCheckFile(list, FILE, 'user').checks.map((c) => c.id)).toEqual(['a', 'b']);
    const stream = `${one}---\nid: b\nkind: rule\nrule: { type: run_end }\n---\n- id: c\n  kind: rule\n  rule: { type: run_end }\n`;
    expect(parseCheckFile(stream, FILE, 'user').checks.map((c) => c.id)).toEqual(['a', 'b', 'c']);
  });

  it('rejects a scalar document and the same id twice in a file', () => {
    expect(err('just text\n').message).toMatch(/holds a check \(a mapping\) or a list of checks, got "just text"/);
    expect(err(`- id: a\n  kind: rule\n  rule: { type: run_end }\n- id: a\n  kind: rule\n  rule: { type: run_end }\n`).message).toBe(
      'checks/loop.yaml: check a: id: is used by two checks in this file',
    );
  });

  it('warns about an empty file', () => {
    expect(parseCheckFile('# nothing yet\n', FILE, 'user')).toEqual({ checks: [], warnings: ['checks/loop.yaml: holds no checks'] });
  });
});

describe('parseCheckFile: rule checks', () => {
  it('parses the seed example, normalising filters and defaults', () => {
    const { checks, warnings } = parseCheckFile(
      rule('type: repeat\nspan: { type: [tool, mcp_tool] }\nsame: [tool, input]\nat_least: 3', 'guidance: >-\n  You have called {tool} {count} times ({args})\n'),
      FILE,
      'library',
    );
    expect(warnings).toEqual([]);
    expect(checks[0]).toEqual({
      id: 'repeated-tool-call', kind: 'rule', title: 'Same call', guidance: 'You have called {tool} {count} times ({args})',
      source: 'library', file: FILE, action: 'flag',
      rule: { type: 'repeat', span: { type: ['tool', 'mcp_tool'] }, same: ['tool', 'input'], at_least: 3 },
    });
  });

  it('parses every rule type', () => {
    const text = [
      'id: r1\nkind: rule\nrule: { type: errors, span: { tool: search, status: error }, at_least: 2 }',
      'id: r2\nkind: rule\nrule: { type: count, at_least: 50 }',
      'id: r3\nkind: rule\nrule: { type: slow, span: { name: [a, b] }, at_least_ms: 0 }',
      'id: r4\nkind: rule\nrule: { type: threshold, metric: cost, at_least: 0.5 }',
      "id: r5\nkind: rule\nrule: { type: match, pattern: '(?i)ignore previous', in: output }",
      'id: r6\nkind: rule\nrule: { type: requires_before, call: { tool: issue_refund }, requires: { tool: [lookup_order] } }',
      'id: r7\nkind: rule\nrule: { type: unrecovered_error, words: oops }',
      'id: r8\nkind: rule\nrule: { type: run_end, ends: no_output }',
      'id: r9\nkind: rule\nrule: { type: run_end }\napplies_to: { workflow: refund-agent, project: [a, b] }\naction: halt\ngroup: g\npriority: 5',
      'id: r10\nkind: rule\nrule: { type: match, pattern: x }',
    ].join('\n---\n');
    const rules = parseCheckFile(text, FILE, 'user').checks as RuleCheck[];
    expect(rules.map((c) => c.rule)).toEqual([
      { type: 'errors', span: { tool: ['search'], status: ['error'] }, at_least: 2 },
      { type: 'count', span: {}, at_least: 50 },
      { type: 'slow', span: { name: ['a', 'b'] }, at_least_ms: 0 },
      { type: 'threshold', metric: 'cost', at_least: 0.5 },
      { type: 'match', span: {}, pattern: '(?i)ignore previous', in: ['output'] },
      { type: 'requires_before', call: { tool: ['issue_refund'] }, requires: { tool: ['lookup_order'] } },
      { type: 'unrecovered_error', span: {}, words: ['oops'] },
      { type: 'run_end', ends: ['no_output'] },
      { type: 'run_end', ends: ['error', 'no_output', 'interrupted'] },
      { type: 'match', span: {}, pattern: 'x', in: ['input', 'output', 'error', 'name'] },
    ]);
    expect(rules[8]).toMatchObject({ action: 'halt', group: 'g', priority: 5, applies_to: { workflow: ['refund-agent'], project: ['a', 'b'] }, title: 'r9' });
  });

  it.each([
    ['type: repeat\nsame: [tool]\nat_least: 0', 'rule.at_least: must be an integer >= 1, got 0'],
    ['type: errors\nat_least: 2.5', 'rule.at_least: must be an integer >= 1, got 2.5'],
    ['type: count', 'rule.at_least: is required: an integer >= 1'],
    ['type: slow\nat_least_ms: -1', 'rule.at_least_ms: must be a number >= 0, got -1'],
    ['type: repat\nat_least: 3', 'rule.type: unknown rule type "repat"; expected one of repeat, errors, count, slow, threshold, match, requires_before, unrecovered_error, run_end (did you mean "repeat"?)'],
    ['type: threshold\nmetric: tokens\nat_least: 5', 'rule.metric: unknown metric "tokens"; expected one of total_tokens, input_tokens, output_tokens, cost, llm_calls, tool_calls, spans, errors, duration_ms'],
    ['type: threshold\nmetric: cost\nat_least: 0', 'rule.at_least: must be a number > 0, got 0'],
    ['type: repeat\nsame: [tool, args]\nat_least: 3', 'rule.same: "args" is not one of tool, name, input, output, error'],
    ['type: repeat\nat_least: 3\nwindow: 5', 'rule.window: unknown key for a repeat rule; expected one of type, span, same, at_least'],
    ['type: slow\nat_least: 5', 'rule.at_least: unknown key for a slow rule; expected one of type, span, at_least_ms (did you mean "at_least_ms"?)'],
    ['type: count\nat_least: 2\nspan: { kind: tool }', 'rule.span.kind: unknown key for a span filter; expected one of type, name, tool, status'],
    ['type: count\nat_least: 2\nspan: { type: function }', 'rule.span.type: "function" is not one of llm, tool, mcp_tool, agent, retrieval, other'],
    ['type: count\nat_least: 2\nspan: { status: failed }', 'rule.span.status: "failed" is not one of ok, error'],
    ['type: count\nat_least: 2\nspan: { tool: [] }', 'rule.span.tool: must not be an empty list'],
    ['type: count\nat_least: 2\nspan: { tool: [search, 3] }', 'rule.span.tool[1]: must be a non-empty string, got 3'],
    ['type: count\nat_least: 2\nspan: tool', 'rule.span: must be a span filter (a mapping of type, name, tool, status), got "tool"'],
    ['type: match\nin: output', 'rule.pattern: is required for a match rule'],
    ['type: match\npattern: x\nin: [body]', 'rule.in: "body" is not one of input, output, error, name'],
    ['type: requires_before\ncall: { tool: refund }', 'rule.requires: is required: a filter for the call that must come first'],
    ['type: requires_before\ncall: {}\nrequires: { tool: a }', 'rule.call: must name at least one of type, name, tool, status'],
    ['type: run_end\nends: [error, ok]', 'rule.ends: ok is a run that ended well; use any of error, no_output, interrupted'],
    ['type: run_end\nends: crashed', 'rule.ends: "crashed" is not one of error, no_output, interrupted'],
    ['type: unrecovered_error\nwords: [""]', 'rule.words[0]: must be a non-empty string, got ""'],
  ])('rejects %j', (body, reason) => {
    // The first problem found; any others follow on their own lines.
    expect(err(rule(body)).message.split('\n')[0]).toBe(`checks/loop.yaml: check repeated-tool-call: ${reason}`);
  });

  it('rejects bad match patterns at load, naming rule.pattern', () => {
    const nested = err(rule("type: match\npattern: '(a+)+$'"));
    expect(nested.field).toBe('rule.pattern');
    expect(nested.message).toMatch(/^checks\/loop\.yaml: check repeated-tool-call: rule\.pattern: "\(a\+\)\+\$" nests repeats \(\(a\+\)\+\)/);
    const bad = err(rule("type: match\npattern: 'a(?=b)'"));
    expect(bad.field).toBe('rule.pattern');
    expect(bad.message).toMatch(/does not compile as an RE2 pattern/);
  });

  it('rejects unknown keys, wrong types and a missing rule', () => {
    expect(err(rule('type: run_end', 'severity: high\n')).message).toBe(
      'checks/loop.yaml: check repeated-tool-call: severity: unknown key for a rule check; expected one of id, kind, title, description, guidance, action, group, priority, applies_to, rule',
    );
    expect(err(rule('type: run_end', 'title2: x\n')).field).toBe('title2');
    expect(err(rule('type: run_end', 'priority: high\n')).message).toMatch(/priority: must be a number, got "high"$/);
    expect(err(rule('type: run_end', 'action: stop\n')).message).toMatch(/action: must be flag or halt, got "stop"$/);
    expect(err(rule('type: run_end', 'applies_to: { team: x }\n')).field).toBe('applies_to.team');
    expect(err(rule('type: run_end', 'applies_to: refund-agent\n')).field).toBe('applies_to');
    expect(err('id: a\nkind: rule\n').message).toBe('checks/loop.yaml: check a: rule: is required for a rule check');
    expect(err('id: a\nkind: rules\n').message).toBe('checks/loop.yaml: check a: kind: must be one of rule, yes_no, choice, score, got "rules" (did you mean "rule"?)');
    expect(err('kind: rule\n').message.split('\n')[0]).toBe('checks/loop.yaml: id: is required');
    expect(err('id: Bad Id\nkind: rule\n').field).toBe('id');
    expect(err('- id: a\n  kind: rule\n  rule: { type: run_end }\n- kind: rule\n').message.split('\n')[0]).toBe('checks/loop.yaml: check #2: id: is required');
  });

  it('forbids halt in library and database checks, and allows it in your own', () => {
    const halt = rule('type: run_end', 'action: halt\n');
    for (const source of ['library', 'database'] as const) {
      const e = err(halt, source);
      expect(e.field).toBe('action');
      expect(e.message).toBe(
        'checks/loop.yaml: check repeated-tool-call: action: a library or agent-written check cannot halt; set action: halt in your own checks',
      );
    }
    for (const source of ['user', 'project'] as const) {
      expect((parseCheckFile(halt, FILE, source).checks[0] as RuleCheck).action).toBe('halt');
    }
  });

  it('warns about a guidance placeholder neatroots does not fill', () => {
    const { warnings } = parseCheckFile(rule('type: run_end', 'guidance: The run ended {name} {times} times\n'), FILE, 'user');
    expect(warnings).toEqual([expect.stringMatching(/^checks\/loop\.yaml: check repeated-tool-call: guidance: \{times\} is not a placeholder/)]);
  });

  it("warns about a placeholder the rule's type never fills (it reaches the agent as words saying its value is unknown)", () => {
    const warnings = (body: string, guidance: string) => parseCheckFile(rule(body, `guidance: ${JSON.stringify(guidance)}\n`), FILE, 'user').warnings;
    expect(warnings('type: count\nat_least: 5', 'You called {tool} {count} times ({args}, {ms})')).toEqual([
      'checks/loop.yaml: check repeated-tool-call: guidance: {args} is not filled for a count rule (it fills count, tool, name); it is sent as "arguments not recorded"',
      'checks/loop.yaml: check repeated-tool-call: guidance: {ms} is not filled for a count rule (it fills count, tool, name); it is sent as "an unknown number of"',
    ]);
    expect(warnings('type: repeat\nat_least: 3', 'You called {tool} ({name}) {count} times ({args})')).toEqual([]);
    expect(warnings('type: errors\nat_least: 3', 'Failed {count} times: {tool} {args}')).toEqual([]);
    expect(warnings('type: run_end', 'The run ended {name} ({tool})')).toEqual([
      'checks/loop.yaml: check repeated-tool-call: guidance: {tool} is not filled for a run_end rule (it fills count, name); it is sent as "an unnamed tool"',
    ]);
    expect(warnings('type: threshold\nmetric: cost\nat_least: 1', '{metric} reached {value} on {tool}')).toHaveLength(1);
    // A question fills {count}, {tool} and {name}.
    const question = (guidance: string) =>
      parseCheckFile(`id: q\nkind: yes_no\nscope: span\nask: Did this call pass a negative amount?\nguidance: ${JSON.stringify(guidance)}\n`, FILE, 'user').warnings;
    expect(question('Check {tool} ({name}), {count} times')).toEqual([]);
    expect(question('Check {tool} with {args}')).toEqual([
      'checks/loop.yaml: check q: guidance: {args} is not filled for a question (it fills count, tool, name); it is sent as "arguments not recorded"',
    ]);
  });

  it('names an infinite or NaN number as YAML writes it', () => {
    expect(err(rule('type: run_end', 'priority: .inf\n')).message).toBe('checks/loop.yaml: check repeated-tool-call: priority: must be a number, got .inf');
    expect(err(rule('type: run_end', 'priority: -.inf\n')).message).toBe('checks/loop.yaml: check repeated-tool-call: priority: must be a number, got -.inf');
    expect(err(rule('type: run_end', 'priority: .nan\n')).message).toBe('checks/loop.yaml: check repeated-tool-call: priority: must be a number, got .nan');
    expect(err(rule('type: slow\nat_least_ms: .inf')).message).toBe(
      'checks/loop.yaml: check repeated-tool-call: rule.at_least_ms: must be a number >= 0, got .inf',
    );
  });
});

describe('parseCheckFile: questions', () => {
  const seed = `id: refund-without-ownership
kind: yes_no
scope: trace
ask: Did the agent issue a refund without first confirming the customer owns the order?
evidence:
  spans: { type: tool, name: [lookup_order, issue_refund] }
  fields: [input, output, status]
  last: 12
  final_output: false
when: live
flag_at: 0.8
guidance: Confirm the customer owns the order before issuing a refund.
applies_to: { workflow: refund-agent }
group: refunds
`;

  it('parses the seed question', () => {
    const { checks, warnings } = parseCheckFile(seed, FILE, 'database');
    expect(warnings).toEqual([]);
    expect(checks[0]).toEqual({
      id: 'refund-without-ownership', kind: 'yes_no', scope: 'trace', source: 'database', action: 'flag',
      title: 'Did the agent issue a refund without first confirming the customer owns the order?',
      ask: 'Did the agent issue a refund without first confirming the customer owns the order?',
      evidence: { spans: { type: ['tool'], name: ['lookup_order', 'issue_refund'] }, fields: ['input', 'output', 'status'], last: 12, final_output: false },
      when: 'live', flag_at: 0.8, guidance: 'Confirm the customer owns the order before issuing a refund.',
      applies_to: { workflow: ['refund-agent'] }, group: 'refunds',
    });
  });

  it('parses choice and score questions', () => {
    const choice = parseCheckFile(
      'id: tone\nkind: choice\nscope: trace\nask: Which tone did the agent use?\noptions: { polite: Polite, rude: Rude, curt: Short }\nflag_on: [rude]\nwhen: end\n',
      FILE, 'user',
    ).checks[0] as QuestionCheck;
    expect(choice).toMatchObject({ options: { polite: 'Polite', rude: 'Rude', curt: 'Short' }, flag_on: ['rude'], when: 'end' });
    const score = parseCheckFile(
      'id: progress\nkind: score\nscope: trace\nask: How stuck is the agent?\nlevels: [moving, slowing, stuck]\nflag_at_level: 1.5\n',
      FILE, 'user',
    ).checks[0] as QuestionCheck;
    expect(score).toMatchObject({ levels: ['moving', 'slowing', 'stuck'], flag_at_level: 1.5, when: 'live' });
  });

  it.each([
    ['kind: yes_no\nscope: trace\nask: Bad?\nflag_at: 1.2', 'flag_at: must be a number between 0 and 1, got 1.2'],
    ['kind: yes_no\nscope: trace\nask: Bad?\nflag_at: -0.1', 'flag_at: must be a number between 0 and 1, got -0.1'],
    ['kind: yes_no\nscope: run\nask: Bad?', 'scope: must be one of span, trace, session, got "run"'],
    ['kind: yes_no\nask: Bad?', 'scope: is required: span, trace, session'],
    ['kind: yes_no\nscope: span', 'ask: is required: the question, phrased so that yes means a problem'],
    ['kind: yes_no\nscope: span\nask: Bad?\nwhen: later', 'when: must be one of live, end, got "later"'],
    ['kind: yes_no\nscope: span\nask: Bad?\naction: halt', 'action: a question can only flag; halting needs a rule'],
    ['kind: yes_no\nscope: span\nask: Bad?\nrule: { type: run_end }', 'rule: unknown key for a question check; expected one of id, kind, title, description, guidance, action, group, priority, applies_to, scope, ask, evidence, when, flag_at, options, flag_on, levels, flag_at_level'],
    ['kind: yes_no\nscope: span\nask: Bad?\noptions: { a: A, b: B }', 'options: is only for choice questions'],
    ['kind: yes_no\nscope: span\nask: Bad?\nevidence: { last: 0 }', 'evidence.last: must be an integer >= 1, got 0'],
    ['kind: yes_no\nscope: trace\nask: Bad?\nevidence: { last: 201 }', 'evidence.last: must be at most 200 (the spans of a run a question can be shown), got 201'],
    ['kind: yes_no\nscope: span\nask: Bad?\nevidence: { final_output: "yes" }', 'evidence.final_output: must be true or false, got "yes"'],
    ['kind: yes_no\nscope: span\nask: Bad?\nevidence: { fields: [prompt] }', 'evidence.fields: "prompt" is not one of input, output, error, status, name, tool'],
    ['kind: yes_no\nscope: span\nask: Bad?\nevidence: { span: {} }', 'evidence.span: unknown key for evidence; expected one of spans, fields, last, final_output, user_message, system_prompt (did you mean "spans"?)'],
    ['kind: choice\nscope: span\nask: Which?', 'options: is required for a choice question: label -> description'],
    ['kind: choice\nscope: span\nask: Which?\noptions: { a: A }\nflag_on: a', 'options: needs at least two labels to choose from'],
    ['kind: choice\nscope: span\nask: Which?\noptions: { a: A, b: B }', 'flag_on: is required for a choice question: the labels that flag'],
    ['kind: choice\nscope: span\nask: Which?\noptions: { a: A, b: B }\nflag_on: [c]', 'flag_on: "c" is not one of a, b'],
    ['kind: choice\nscope: span\nask: Which?\noptions: { a: A, b: 2 }\nflag_on: [a]', 'options.b: must be a description (a non-empty string), got 2'],
    ['kind: score\nscope: span\nask: How?\nlevels: [a, b, c]\nflag_at_level: 2.5', 'flag_at_level: must be a number between 0 and 2, got 2.5'],
    ['kind: score\nscope: span\nask: How?\nlevels: [a, b, c]\nflag_at_level: -1', 'flag_at_level: must be a number between 0 and 2, got -1'],
    ['kind: score\nscope: span\nask: How?\nlevels: [a]\nflag_at_level: 0', 'levels: needs at least two levels'],
    ['kind: score\nscope: span\nask: How?\nlevels: [a, b]', 'flag_at_level: is required for a score question'],
    ['kind: score\nscope: span\nask: How?\nlevels: [a, b]\nflag_at_level: 1\nflag_on: [a]', 'flag_on: is only for choice questions'],
    ['kind: score\nscope: span\nask: How?\nlevels: [a, b]\nflag_at_level: 1\nflag_at: 0.5', 'flag_at: is not for score questions; use flag_at_level'],
    ['kind: yes_no\nscope: span\nask: Bad?\nflag_at: .nan', 'flag_at: must be a number between 0 and 1, got .nan'],
  ])('rejects %j', (body, reason) => {
    expect(err(`id: q\n${body}\n`).message.split('\n')[0]).toBe(`checks/loop.yaml: check q: ${reason}`);
  });

  it('warns when a question asks about the answer but cannot see it', () => {
    const ask = 'ask: Does the agent claim the refund went through when the tool failed?';
    const w = (extra: string) => parseCheckFile(`id: claims\nkind: yes_no\n${ask}\n${extra}`, FILE, 'user').warnings;
    expect(w('scope: span\n')).toEqual([expect.stringMatching(/^checks\/loop\.yaml: check claims: ask: asks about the agent's answer but cannot see it/)]);
    expect(w('scope: trace\n')).toHaveLength(1);
    expect(w('scope: trace\nevidence: { final_output: false }\n')).toHaveLength(1);
    expect(w('scope: trace\nevidence: { final_output: true }\n')).toEqual([]);
    expect(w('scope: session\nevidence: { final_output: true }\n')).toEqual([]);
    expect(parseCheckFile('id: q\nkind: yes_no\nscope: span\nask: Did this call pass a negative amount?\n', FILE, 'user').warnings).toEqual([]);
    for (const a of ['What does the final response say?', 'Is the answer wrong?', 'Does the agent say it is done?', 'Did it report success?']) {
      expect(parseCheckFile(`id: q\nkind: yes_no\nscope: span\nask: ${a}\n`, FILE, 'user').warnings).toHaveLength(1);
    }
  });
});

describe('every problem at once', () => {
  it('reports each problem of a check, not just the first', () => {
    const e = err(rule('type: repeat\nsame: [tool, args]\nat_least: 0\nspan: { kind: tool }', 'severity: high\naction: stop\n'));
    expect(e.message.split('\n')).toEqual([
      'checks/loop.yaml: check repeated-tool-call: severity: unknown key for a rule check; expected one of id, kind, title, description, guidance, action, group, priority, applies_to, rule',
      'checks/loop.yaml: check repeated-tool-call: action: must be flag or halt, got "stop"',
      'checks/loop.yaml: check repeated-tool-call: rule.span.kind: unknown key for a span filter; expected one of type, name, tool, status',
      'checks/loop.yaml: check repeated-tool-call: rule.same: "args" is not one of tool, name, input, output, error',
      'checks/loop.yaml: check repeated-tool-call: rule.at_least: must be an integer >= 1, got 0',
    ]);
    expect(e).toBeInstanceOf(CheckProblems);
    expect((e as CheckProblems).problems.map((p) => p.field)).toEqual(['severity', 'action', 'rule.span.kind', 'rule.same', 'rule.at_least']);
    // Still the first problem's CheckError, for callers that want one field.
    expect(e.field).toBe('severity');
  });

  it('reports the problems of every check in a file, and of a question', () => {
    const text = [
      'id: a\nkind: rule\nrule: { type: count, at_least: 0 }',
      'id: ok\nkind: rule\nrule: { type: run_end }',
      'id: b\nkind: rule\nrule: { type: slow }\npriority: high',
      'id: q\nkind: choice\nask: Which?\noptions: { a: A }',
    ].join('\n---\n');
    expect(checkProblems(err(text)).map((p) => `${p.checkId} ${p.field}`)).toEqual([
      'a rule.at_least',
      'b priority',
      'b rule.at_least_ms',
      'q scope',
      'q options',
      'q flag_on',
    ]);
  });

  it('gives a single problem as a plain CheckError', () => {
    const e = err(rule('type: count\nat_least: 0'));
    expect(e).not.toBeInstanceOf(CheckProblems);
    expect(checkProblems(e)).toEqual([e]);
  });
});

describe('parseCheck', () => {
  it('validates a JSON object (check editor, MCP create_check)', () => {
    const c = parseCheck({ id: 'x', kind: 'rule', rule: { type: 'count', at_least: 3, span: { type: 'tool' } } }, 'mcp', 'database');
    expect(c).toEqual({ id: 'x', kind: 'rule', title: 'x', source: 'database', action: 'flag', rule: { type: 'count', at_least: 3, span: { type: ['tool'] } } });
    expect(() => parseCheck([], 'mcp', 'database')).toThrow('mcp: a check must be a mapping of fields, got a list');
  });
});
