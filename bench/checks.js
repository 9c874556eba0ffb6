'use strict';
// The 20 extra rule checks of the benchmark (two of them `match`), as YAML, validated by
// the same parser as any user file.
const TOOLS = ['search', 'lookup_order', 'issue_refund', 'send_email', 'fetch_page', 'read_file'];

function extraChecksYaml() {
  const docs = [];
  const add = (id, rule, extra = '') => docs.push(`id: bench-${id}\nkind: rule\ntitle: bench ${id}\nrule:\n${rule}\naction: flag\n${extra}`);
  for (const t of TOOLS.slice(0, 4)) add(`repeat-${t}`, `  type: repeat\n  span: { tool: ${t} }\n  same: [tool, input]\n  at_least: 4`);
  for (const t of TOOLS.slice(0, 3)) add(`errors-${t}`, `  type: errors\n  span: { tool: ${t} }\n  at_least: 3`);
  add('count-tools', '  type: count\n  span: { type: [tool, mcp_tool] }\n  at_least: 80');
  add('count-llm', '  type: count\n  span: { type: llm }\n  at_least: 40');
  add('slow-tool', '  type: slow\n  span: { type: tool }\n  at_least_ms: 5000');
  add('slow-llm', '  type: slow\n  span: { type: llm }\n  at_least_ms: 20000');
  add('tokens', '  type: threshold\n  metric: total_tokens\n  at_least: 150000');
  add('llm-calls', '  type: threshold\n  metric: llm_calls\n  at_least: 45');
  add('cost', '  type: threshold\n  metric: cost\n  at_least: 2');
  add('match-secret', "  type: match\n  span: { type: [tool, mcp_tool, llm] }\n  pattern: '(?i)(api[_-]?key|secret[_-]?token)\\s*[:=]\\s*\\w{8,}'\n  in: [output]");
  add('match-card', "  type: match\n  span: {}\n  pattern: '\\b4[0-9]{3}[ -]?[0-9]{4}[ -]?[0-9]{4}[ -]?[0-9]{4}\\b'\n  in: [input, output]");
  add('refund-lookup', '  type: requires_before\n  call: { tool: issue_refund }\n  requires: { tool: lookup_order }');
  add('unrecovered', '  type: unrecovered_error\n  span: { type: tool }');
  add('run-end', '  type: run_end\n  ends: [error, interrupted]');
  add('no-output', '  type: run_end\n  ends: [no_output]');
  return docs.join('---\n');
}

/** A deterministic pseudo-random fleet: `runs` runs of `perRun` spans, interleaved. */
function* fleet({ runs, perRun, seed = 42, project = 'bench', startMs = Date.now(), prefix = 'run' }) {
  let s = seed;
  const rnd = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 4294967296);
  const active = [];
  let next = 0;
  let t = startMs;
  while (next < runs || active.length) {
    while (active.length < 64 && next < runs) active.push({ id: `${prefix}-${next++}`, n: 0 });
    const i = Math.floor(rnd() * active.length);
    const r = active[i];
    t += 1;
    if (r.n === 0) yield { kind: 'run_start', run: { event: 'run_start', run_id: r.id, project, workflow: `wf-${r.id.length % 3}`, ts_ms: t } };
    if (r.n < perRun) {
      r.n++;
      const isLlm = r.n % 3 === 0;
      const tool = TOOLS[Math.floor(rnd() * TOOLS.length)];
      const failed = rnd() < 0.05;
      const span = isLlm
        ? { run_id: r.id, span_id: `s${r.n}`, type: 'llm', name: 'chat', status: 'ok', start_ms: t - 400, end_ms: t, model: 'm', usage: { input_tokens: 900, output_tokens: 120, total_tokens: 1020 } }
        : {
            run_id: r.id, span_id: `s${r.n}`, type: 'tool', name: tool, tool, status: failed ? 'error' : 'ok',
            ...(failed ? { error: 'upstream timeout' } : {}),
            input: { q: `query ${Math.floor(rnd() * 4)}`, page: 1 },
            output: failed ? undefined : { results: [`result for ${tool}`, 'another line of text that is not a secret'], total: 2 },
            start_ms: t - 30, end_ms: t,
          };
      yield { kind: 'span', span };
    } else {
      active.splice(i, 1);
      yield { kind: 'run_end', run: { event: 'run_end', run_id: r.id, status: rnd() < 0.05 ? 'error' : 'ok', final_output: 'Here is what I found.', ts_ms: t } };
    }
  }
}

function percentile(sorted, p) {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

module.exports = { extraChecksYaml, fleet, percentile, TOOLS };
