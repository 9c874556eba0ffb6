import type { Span } from '@neatroots/spans';
import { edgeAssertions } from '../regex-syntax';
import type { MatchField, SpanFilter } from '../types';
import type { CompiledRule, TextMatcher } from './compile';
import { JointMatch } from './joint';
import type { MatchPlan } from './span-view';

/**
 * What the engine does with every span of one kind (project, workflow, type, tool, status),
 * worked out once per kind and rule set: the rules it goes to, in the rule set's order (so
 * findings come in the same order), with their filters decided as far as the kind decides
 * them, and how the `match` rules among them read it. Per span, the work is then the rules
 * whose filters pass, a name test for the few filters that name spans, and one pass per text
 * for the `match` patterns.
 */
export interface SpanPlan {
  rules: CompiledRule[];
  /** Per rule (same index): the names its filter asks for, the part a span's kind leaves open. */
  names: (ReadonlySet<string> | undefined)[];
  /** How each `match` rule reads the span (its text, its joint pass), by rule. */
  match?: Map<object, MatchPlan>;
}

/**
 * The plan for spans of `type`, `tool` and `status`, from the rules already narrowed to the
 * span's project, workflow, type and tool (RuleEngine.rulesFor). `joints` keeps the joint
 * passes of this rule set, shared between plans with the same patterns.
 */
export function spanPlan(
  candidates: readonly CompiledRule[],
  all: readonly CompiledRule[],
  span: Pick<Span, 'type' | 'tool' | 'status'>,
  joints: Map<string, JointMatch>,
): SpanPlan {
  const plan: SpanPlan = { rules: [], names: [] };
  for (const r of candidates) {
    if (!r.kind.onSpan) continue;
    const f: SpanFilter | undefined = 'span' in r.rule ? r.rule.span : undefined;
    if (f && !decided(f, span)) continue;
    plan.rules.push(r);
    plan.names.push(f?.name?.length ? new Set(f.name) : undefined);
  }
  // `match` rules reading the same fields read the same text: their patterns go in one pass.
  const byText = new Map<string, TextGroup>();
  for (const r of plan.rules) {
    if (r.rule.type !== 'match') continue;
    const m = r as CompiledRule<'match', TextMatcher>;
    const key = m.rule.in.join(',');
    let group = byText.get(key);
    if (!group) byText.set(key, (group = { key, fields: m.rule.in, rules: [] }));
    group.rules.push(m);
  }
  if (!byText.size) return plan;
  plan.match = new Map();
  // A text that is a part of another one read for the same span (`output` within `input` and
  // `output`) goes in that one's pass: its patterns that can (withinPass) are tested over the
  // whole, and asked alone of their own text only when the pass hit them. One pass a span instead
  // of one a text, and the part's text is built only then.
  const groups = [...byText.values()];
  const hostOf = (g: TextGroup): TextGroup => {
    let host = g;
    for (const h of groups) if (h.fields.length > host.fields.length && partAt(h.fields, g.fields) >= 0) host = h;
    return host;
  };
  const passes = new Map<TextGroup, { m: CompiledRule<'match', TextMatcher>; within?: TextGroup }[]>();
  const alone: { m: CompiledRule<'match', TextMatcher>; key: string }[] = [];
  for (const g of groups) {
    const host = hostOf(g);
    for (const m of g.rules) {
      if (!m.data.joint || (host !== g && !withinPass(m.data.joint.source, host.fields, g.fields))) alone.push({ m, key: g.key });
      else {
        let members = passes.get(host);
        if (!members) passes.set(host, (members = []));
        members.push(host === g ? { m } : { m, within: g });
      }
    }
  }
  for (const [host, members] of passes) {
    if (members.length < 2) {
      for (const { m, within } of members) alone.push({ m, key: (within ?? host).key });
      continue;
    }
    const id = `${host.key}\u0000${members.map(({ m }) => all.indexOf(m as CompiledRule)).join(',')}`;
    let joint = joints.get(id);
    if (!joint) {
      joint = new JointMatch(members.map(({ m }) => m.data));
      joints.set(id, joint);
    }
    members.forEach(({ m, within }, member) =>
      plan.match!.set(m, within ? { key: within.key, joint, member, pass: { key: host.key, fields: host.fields } } : { key: host.key, joint, member }),
    );
  }
  for (const { m, key } of alone) plan.match.set(m, { key, member: -1 });
  return plan;
}

interface TextGroup {
  /** The fields joined: the text's key. */
  key: string;
  fields: readonly MatchField[];
  rules: CompiledRule<'match', TextMatcher>[];
}

/** Where `part` lies in `fields`, the same fields in the same order side by side (-1: it does not). */
function partAt(fields: readonly MatchField[], part: readonly MatchField[]): number {
  for (let at = 0; at + part.length <= fields.length; at++) {
    let i = 0;
    while (i < part.length && fields[at + i] === part[i]) i++;
    if (i === part.length) return at;
  }
  return -1;
}

/**
 * Whether a pattern reading the text of `part` may be tested in the pass over the text of
 * `fields`, which holds it. A span's text is its fields' texts joined by line breaks (the
 * empty ones left out: SpanView.text), so the part's text lies in the whole between line breaks
 * or the whole's edges, and any match in it is a match in the whole unless the pattern asserts
 * an edge of the text the part does not share with the whole (regex-syntax.ts edgeAssertions):
 * then it is always tested alone. A miss in the pass is then a miss in the part; a hit may come
 * from the rest of the whole and is asked of the part alone.
 */
function withinPass(source: string, fields: readonly MatchField[], part: readonly MatchField[]): boolean {
  const at = partAt(fields, part);
  if (at < 0) return false;
  const edges = edgeAssertions(source);
  return (!edges.start || at === 0) && (!edges.end || at + part.length === fields.length);
}

/** The filter's type, tool and status parts, which a span's kind decides. */
function decided(f: SpanFilter, s: Pick<Span, 'type' | 'tool' | 'status'>): boolean {
  return (
    (!f.type?.length || (f.type as readonly string[]).includes(s.type)) &&
    (!f.tool?.length || (s.tool !== undefined && f.tool.includes(s.tool))) &&
    (!f.status?.length || (f.status as readonly string[]).includes(s.status))
  );
}
