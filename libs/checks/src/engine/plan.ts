import type { Span } from '@neatroots/spans';
import type { SpanFilter } from '../types';
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
  const byText = new Map<string, CompiledRule<'match', TextMatcher>[]>();
  for (const r of plan.rules) {
    if (r.rule.type !== 'match') continue;
    const m = r as CompiledRule<'match', TextMatcher>;
    const key = m.rule.in.join(',');
    const group = byText.get(key) ?? [];
    group.push(m);
    byText.set(key, group);
  }
  if (!byText.size) return plan;
  plan.match = new Map();
  for (const [key, group] of byText) {
    const joinable = group.filter((m) => m.data.joint);
    let joint: JointMatch | undefined;
    if (joinable.length >= 2) {
      const id = `${key}\u0000${joinable.map((m) => all.indexOf(m as CompiledRule)).join(',')}`;
      joint = joints.get(id);
      if (!joint) {
        joint = new JointMatch(joinable.map((m) => m.data));
        joints.set(id, joint);
      }
    }
    for (const m of group) plan.match.set(m, joint && m.data.joint ? { key, joint, member: joinable.indexOf(m) } : { key, member: -1 });
  }
  return plan;
}

/** The filter's type, tool and status parts, which a span's kind decides. */
function decided(f: SpanFilter, s: Pick<Span, 'type' | 'tool' | 'status'>): boolean {
  return (
    (!f.type?.length || (f.type as readonly string[]).includes(s.type)) &&
    (!f.tool?.length || (s.tool !== undefined && f.tool.includes(s.tool))) &&
    (!f.status?.length || (f.status as readonly string[]).includes(s.status))
  );
}
