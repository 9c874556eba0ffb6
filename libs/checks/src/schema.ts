import { RUN_END_STATUSES, SPAN_TYPES } from '@neatroots/spans';
import { parseAllDocuments } from 'yaml';
import { QUESTION_PLACEHOLDERS, RULE_PLACEHOLDERS, UNKNOWN_VALUES, unfilledPlaceholders, unknownPlaceholders, type GuidancePlaceholder } from './guidance';
import { PatternError, compileSafe } from './regex';
import {
  CheckError,
  checkFailure,
  checkProblems,
  METRICS,
  MATCH_FIELDS,
  QUESTION_KINDS,
  RULE_TYPES,
  SAME_FIELDS,
  type AppliesTo,
  type Check,
  type CheckSource,
  type Evidence,
  type QuestionCheck,
  type QuestionKind,
  type RuleCheck,
  type RuleSpec,
  type RuleType,
  type SpanFilter,
} from './types';

/**
 * The only reader of check YAML (CONTRACTS.md section 2, the neatroots seed). Everything is
 * validated here, once, when a check is loaded or saved: unknown keys, wrong types and
 * impossible values are errors naming the file, the check id and the field, so the engine
 * never meets a check it cannot run.
 */

export interface ParsedChecks {
  checks: Check[];
  warnings: string[];
}

export interface ParseOptions {
  /**
   * Whether a rule may say action: halt. By default your own files may and the library and
   * database checks may not; a database check a person saved (the app, the CLI) may.
   */
  mayHalt?: boolean;
}

type Obj = Record<string, unknown>;

const COMMON_KEYS = ['id', 'kind', 'title', 'description', 'guidance', 'action', 'group', 'priority', 'applies_to'] as const;
const RULE_KEYS = [...COMMON_KEYS, 'rule'];
const QUESTION_KEYS = [
  ...COMMON_KEYS, 'scope', 'ask', 'evidence', 'when', 'flag_at', 'options', 'flag_on', 'levels', 'flag_at_level',
];

const RULE_FIELDS: Record<RuleType, readonly string[]> = {
  repeat: ['span', 'same', 'at_least'],
  errors: ['span', 'at_least'],
  count: ['span', 'at_least'],
  slow: ['span', 'at_least_ms'],
  threshold: ['metric', 'at_least'],
  match: ['span', 'pattern', 'in'],
  requires_before: ['call', 'requires'],
  unrecovered_error: ['span', 'words'],
  run_end: ['ends'],
};

const FILTER_KEYS = ['type', 'name', 'tool', 'status'] as const;
const SPAN_STATUSES = ['ok', 'error'] as const;
const FAILED_ENDINGS = RUN_END_STATUSES.filter((s) => s !== 'ok');
const SCOPES = ['span', 'trace', 'session'] as const;
const WHENS = ['live', 'end'] as const;
const EVIDENCE_KEYS = ['spans', 'fields', 'last', 'final_output', 'user_message', 'system_prompt'] as const;
const EVIDENCE_FIELDS = ['input', 'output', 'error', 'status', 'name', 'tool'] as const;
const ID_RE = /^[a-z0-9][a-z0-9_-]*$/;
const MAX_ID_LENGTH = 100;

/**
 * Words that show a question is about what the agent told the user. Such a question needs to
 * see the answer (seed: "needs scope: trace and evidence.final_output: true"); a hint, so a
 * match is a warning, not an error.
 */
const ASKS_ABOUT_ANSWER =
  /\b(claim(s|ed|ing)?|say(s|ing)?|said|report(s|ed|ing)?|tell(s|ing)?|told|answer(s|ed|ing)?|repl(y|ies|ied)|promis(e|es|ed)|final (response|output|message)|respon(se|ds|ded) to the user)\b/i;

/** Whether a question asks about what the agent told the user (and so needs to see its answer). */
export function asksAboutAnswer(ask: string): boolean {
  return ASKS_ABOUT_ANSWER.test(ask);
}

class Ctx {
  /** The problems found so far: validation goes on after one, so a single run reports them all. */
  readonly problems: CheckError[] = [];

  constructor(
    readonly file: string,
    readonly source: CheckSource,
    public id: string | undefined,
    readonly warnings: string[],
    readonly mayHalt: boolean = source !== 'library' && source !== 'database',
  ) {}

  error(field: string | undefined, reason: string): CheckError {
    return new CheckError(this.file, this.id, field, reason);
  }

  report(field: string | undefined, reason: string): void {
    this.problems.push(this.error(field, reason));
  }

  /**
   * Validates one field: a problem it throws is recorded and the rest of the check is still
   * validated. The value is only used when the check has no problem at all (see `done`), so a
   * field that failed may leave it undefined.
   */
  field<T>(validate: () => T): T {
    try {
      return validate();
    } catch (e) {
      if (!(e instanceof CheckError)) throw e;
      this.problems.push(...checkProblems(e));
      return undefined as T;
    }
  }

  /** The check, or every problem it has. */
  done<T>(value: T): T {
    if (this.problems.length) throw checkFailure(this.problems);
    return value;
  }

  warn(field: string, reason: string): void {
    this.warnings.push(`${this.file}${this.id ? `: check ${this.id}` : ''}: ${field}: ${reason}`);
  }
}

/**
 * Parses a check file: one check, a list of checks, or a multi-document stream of either.
 * Throws a CheckError naming every problem in the file (a CheckProblems when there are
 * several; YAML syntax stops at the first); warnings are things that work but are probably
 * not what was meant.
 */
export function parseCheckFile(text: string, file: string, source: CheckSource, opts: ParseOptions = {}): ParsedChecks {
  const warnings: string[] = [];
  const raws: unknown[] = [];
  for (const doc of parseAllDocuments(text)) {
    const err = doc.errors[0];
    if (err) {
      const pos = err.linePos?.[0];
      const where = pos ? ` at ${pos.line}:${pos.col}` : '';
      // The library appends " at line L, column C:" and a code frame; the position is given above.
      const msg = err.message.split(/ at line \d+, column \d+/)[0].split('\n')[0];
      throw new CheckError(file, undefined, undefined, `YAML syntax error${where}: ${msg}`);
    }
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 100 });
    } catch (e) {
      throw new CheckError(file, undefined, undefined, `invalid YAML: ${(e as Error).message}`);
    }
    if (value === null || value === undefined) continue;
    if (Array.isArray(value)) raws.push(...value);
    else if (isObj(value)) raws.push(value);
    else {
      throw new CheckError(file, undefined, undefined, `a check file holds a check (a mapping) or a list of checks, got ${describe(value)}`);
    }
  }
  if (raws.length === 0) warnings.push(`${file}: holds no checks`);
  const checks: Check[] = [];
  const problems: CheckError[] = [];
  const seen = new Set<string>();
  raws.forEach((raw, i) => {
    // A broken check does not hide the next one's problems.
    try {
      const check = parseCheck(raw, file, source, warnings, raws.length > 1 ? i + 1 : undefined, opts);
      if (seen.has(check.id)) throw new CheckError(file, check.id, 'id', 'is used by two checks in this file');
      seen.add(check.id);
      checks.push(check);
    } catch (e) {
      if (!(e instanceof CheckError)) throw e;
      problems.push(...checkProblems(e));
    }
  });
  if (problems.length) throw checkFailure(problems);
  return { checks, warnings };
}

/**
 * Validates one check given as a plain object (parsed YAML, or JSON from the app's check
 * editor and the MCP create_check tool). `index` (1-based) names the check in messages
 * when it has no usable id. Warnings are appended to `warnings`. Throws a CheckError naming
 * every problem (a CheckProblems when there are several).
 */
export function parseCheck(raw: unknown, file: string, source: CheckSource, warnings: string[] = [], index?: number, opts: ParseOptions = {}): Check {
  const ctx = new Ctx(file, source, index !== undefined ? `#${index}` : undefined, warnings, opts.mayHalt);
  if (!isObj(raw)) throw ctx.error(undefined, `a check must be a mapping of fields, got ${describe(raw)}`);
  const id = raw.id;
  if (id === undefined || id === null) ctx.report('id', 'is required');
  else if (typeof id !== 'string' || !ID_RE.test(id) || id.length > MAX_ID_LENGTH) {
    ctx.report('id', `must be a slug of lowercase letters, digits, - and _ (at most ${MAX_ID_LENGTH} characters), got ${describe(id)}`);
  } else ctx.id = id;
  const kind = raw.kind;
  // Without a kind there is no telling which fields belong: report what there is and stop.
  if (kind === undefined || kind === null) ctx.report('kind', `is required: rule, ${QUESTION_KINDS.join(', ')}`);
  else if (kind === 'rule') return ctx.done(parseRuleCheck(ctx, raw));
  else if (typeof kind === 'string' && (QUESTION_KINDS as readonly string[]).includes(kind)) return ctx.done(parseQuestion(ctx, raw, kind as QuestionKind));
  else ctx.report('kind', `must be one of rule, ${QUESTION_KINDS.join(', ')}, got ${describe(kind)}${suggest(kind, ['rule', ...QUESTION_KINDS])}`);
  throw checkFailure(ctx.problems);
}

function parseCommon(ctx: Ctx, raw: Obj) {
  const guidance = ctx.field(() => optString(ctx, raw.guidance, 'guidance'));
  if (guidance !== undefined) {
    for (const p of unknownPlaceholders(guidance)) {
      ctx.warn('guidance', `{${p}} is not a placeholder neatroots fills (tool, count, args, name, ms, metric, value, pattern, requires); it is sent as written`);
    }
  }
  const priority = raw.priority;
  if (priority !== undefined && (typeof priority !== 'number' || !Number.isFinite(priority))) {
    ctx.report('priority', `must be a number, got ${describe(priority)}`);
  }
  let action: unknown = raw.action ?? 'flag';
  if (action !== 'flag' && action !== 'halt') {
    ctx.report('action', `must be flag or halt, got ${describe(action)}`);
    action = undefined;
  }
  return {
    id: ctx.id as string,
    title: ctx.field(() => optString(ctx, raw.title, 'title', true)),
    description: ctx.field(() => optString(ctx, raw.description, 'description')),
    guidance,
    group: ctx.field(() => optString(ctx, raw.group, 'group', true)),
    priority: priority as number | undefined,
    applies_to: ctx.field(() => appliesTo(ctx, raw.applies_to)),
    action: action as 'flag' | 'halt' | undefined,
  };
}

function parseRuleCheck(ctx: Ctx, raw: Obj): RuleCheck {
  checkKeys(ctx, raw, RULE_KEYS, '', 'a rule check');
  const common = parseCommon(ctx, raw);
  if (common.action === 'halt' && !ctx.mayHalt) {
    // Seed: a coding agent "can't create one, turn a check into one, or change yours".
    ctx.report('action', 'a library or agent-written check cannot halt; set action: halt in your own checks');
  }
  let rule: RuleSpec | undefined;
  if (raw.rule === undefined || raw.rule === null) ctx.report('rule', 'is required for a rule check');
  else rule = parseRule(ctx, raw.rule);
  if (rule?.type) warnUnfilled(ctx, common.guidance, RULE_PLACEHOLDERS[rule.type], `a ${rule.type} rule`);
  return compact({
    ...baseFields(ctx, common, common.title ?? common.id),
    kind: 'rule' as const,
    rule: rule as RuleSpec,
    action: common.action ?? 'flag',
  });
}

/** A known placeholder the check's type never fills reaches the agent as words saying its value is unknown. */
function warnUnfilled(ctx: Ctx, guidance: string | undefined, fills: readonly GuidancePlaceholder[], what: string): void {
  if (guidance === undefined) return;
  for (const p of unfilledPlaceholders(guidance, fills)) {
    ctx.warn('guidance', `{${p}} is not filled for ${what} (it fills ${fills.join(', ')}); it is sent as "${UNKNOWN_VALUES[p]}"`);
  }
}

function parseRule(ctx: Ctx, raw: unknown): RuleSpec | undefined {
  if (!isObj(raw)) return void ctx.report('rule', `must be a mapping with a type, got ${describe(raw)}`);
  const type = raw.type;
  if (type === undefined || type === null) return void ctx.report('rule.type', `is required: ${RULE_TYPES.join(', ')}`);
  if (typeof type !== 'string' || !(RULE_TYPES as readonly string[]).includes(type)) {
    return void ctx.report('rule.type', `unknown rule type ${describe(type)}; expected one of ${RULE_TYPES.join(', ')}${suggest(type, RULE_TYPES)}`);
  }
  const t = type as RuleType;
  checkKeys(ctx, raw, ['type', ...RULE_FIELDS[t]], 'rule.', `a ${t} rule`);
  const f = <T>(validate: () => T) => ctx.field(validate);
  const span = () => f(() => filter(ctx, raw.span, 'rule.span'));
  switch (t) {
    case 'repeat':
      return {
        type: t,
        span: span(),
        // Without `same`, "the same call": the same tool with the same arguments.
        same: raw.same === undefined ? ['tool', 'input'] : f(() => enumList(ctx, raw.same, 'rule.same', SAME_FIELDS)),
        at_least: f(() => countAtLeast(ctx, raw.at_least, 'rule.at_least')),
      };
    case 'errors':
    case 'count':
      return { type: t, span: span(), at_least: f(() => countAtLeast(ctx, raw.at_least, 'rule.at_least')) };
    case 'slow':
      return { type: t, span: span(), at_least_ms: f(() => number(ctx, raw.at_least_ms, 'rule.at_least_ms', { min: 0 })) };
    case 'threshold': {
      const metric = f(() => {
        const m = raw.metric;
        if (m === undefined || m === null) throw ctx.error('rule.metric', `is required: ${METRICS.join(', ')}`);
        if (typeof m !== 'string' || !(METRICS as readonly string[]).includes(m)) {
          throw ctx.error('rule.metric', `unknown metric ${describe(m)}; expected one of ${METRICS.join(', ')}${suggest(m, METRICS)}`);
        }
        return m as (typeof METRICS)[number];
      });
      return { type: t, metric, at_least: f(() => number(ctx, raw.at_least, 'rule.at_least', { above: 0 })) };
    }
    case 'match': {
      const pattern = f(() => {
        const pattern = raw.pattern;
        if (pattern === undefined || pattern === null) throw ctx.error('rule.pattern', 'is required for a match rule');
        if (typeof pattern !== 'string' || pattern === '') throw ctx.error('rule.pattern', `must be a non-empty string, got ${describe(pattern)}`);
        try {
          compileSafe(pattern);
        } catch (e) {
          if (e instanceof PatternError) throw ctx.error('rule.pattern', `${describe(pattern)} ${e.reason}`);
          throw e;
        }
        return pattern;
      });
      return {
        type: t,
        span: span(),
        pattern,
        in: raw.in === undefined ? [...MATCH_FIELDS] : f(() => enumList(ctx, raw.in, 'rule.in', MATCH_FIELDS)),
      };
    }
    case 'requires_before': {
      // An empty filter matches every span, so the run's first span would always fire.
      const needed = (key: 'call' | 'requires', what: string) =>
        f(() => {
          if (raw[key] === undefined || raw[key] === null) throw ctx.error(`rule.${key}`, `is required: a filter for the call ${what}`);
          const got = filter(ctx, raw[key], `rule.${key}`);
          if (Object.keys(got).length === 0 && isObj(raw[key]) && Object.keys(raw[key]).length === 0) {
            throw ctx.error(`rule.${key}`, 'must name at least one of type, name, tool, status');
          }
          return got;
        });
      return { type: t, call: needed('call', 'that needs an earlier one'), requires: needed('requires', 'that must come first') };
    }
    case 'unrecovered_error': {
      const words = raw.words === undefined ? undefined : f(() => stringList(ctx, raw.words, 'rule.words'));
      return compact({ type: t, span: span(), words });
    }
    case 'run_end': {
      const ends = f(() => {
        if (raw.ends === undefined) return [...FAILED_ENDINGS];
        const list = Array.isArray(raw.ends) ? raw.ends : [raw.ends];
        if (list.includes('ok')) throw ctx.error('rule.ends', `ok is a run that ended well; use any of ${FAILED_ENDINGS.join(', ')}`);
        return enumList(ctx, raw.ends, 'rule.ends', FAILED_ENDINGS);
      });
      return { type: t, ends };
    }
  }
}

function parseQuestion(ctx: Ctx, raw: Obj, kind: QuestionKind): QuestionCheck {
  checkKeys(ctx, raw, QUESTION_KEYS, '', 'a question check');
  const f = <T>(validate: () => T) => ctx.field(validate);
  const common = parseCommon(ctx, raw);
  if (common.action === 'halt') ctx.report('action', 'a question can only flag; halting needs a rule');
  warnUnfilled(ctx, common.guidance, QUESTION_PLACEHOLDERS, 'a question');
  const scope = f(() => oneOf(ctx, raw.scope, 'scope', SCOPES, true) as QuestionCheck['scope']);
  const ask = f(() => {
    const ask = optString(ctx, raw.ask, 'ask', true);
    if (ask === undefined) throw ctx.error('ask', 'is required: the question, phrased so that yes means a problem');
    return ask;
  });
  const evidence = f(() => parseEvidence(ctx, raw.evidence));
  const when = (f(() => oneOf(ctx, raw.when, 'when', WHENS, false)) ?? 'live') as QuestionCheck['when'];
  const flag_at = raw.flag_at === undefined || kind === 'score' ? undefined : f(() => number(ctx, raw.flag_at, 'flag_at', { min: 0, max: 1 }));

  let options: Record<string, string> | undefined;
  let flag_on: string[] | undefined;
  let levels: string[] | undefined;
  let flag_at_level: number | undefined;
  if (kind !== 'choice') {
    if (raw.options !== undefined) ctx.report('options', 'is only for choice questions');
    if (raw.flag_on !== undefined) ctx.report('flag_on', 'is only for choice questions');
  }
  if (kind !== 'score') {
    if (raw.levels !== undefined) ctx.report('levels', 'is only for score questions');
    if (raw.flag_at_level !== undefined) ctx.report('flag_at_level', 'is only for score questions');
  } else if (raw.flag_at !== undefined) {
    // A score flags on its expected level (flag_at_level); a flag_at would be read and ignored.
    ctx.report('flag_at', 'is not for score questions; use flag_at_level');
  }
  if (kind === 'choice') {
    options = f(() => {
      if (raw.options === undefined || raw.options === null) throw ctx.error('options', 'is required for a choice question: label -> description');
      if (!isObj(raw.options)) throw ctx.error('options', `must be a mapping of label -> description, got ${describe(raw.options)}`);
      const out: Record<string, string> = {};
      for (const [label, desc] of Object.entries(raw.options)) {
        if (typeof desc !== 'string' || desc.trim() === '') ctx.report(`options.${label}`, `must be a description (a non-empty string), got ${describe(desc)}`);
        else out[label] = desc;
      }
      if (Object.keys(raw.options).length < 2) throw ctx.error('options', 'needs at least two labels to choose from');
      return out;
    });
    flag_on = f(() => {
      if (raw.flag_on === undefined || raw.flag_on === null) throw ctx.error('flag_on', 'is required for a choice question: the labels that flag');
      // Without valid options, only the form of the labels can be checked.
      return options ? enumList(ctx, raw.flag_on, 'flag_on', Object.keys(options)) : stringList(ctx, raw.flag_on, 'flag_on');
    });
  }
  if (kind === 'score') {
    levels = f(() => {
      if (raw.levels === undefined || raw.levels === null) throw ctx.error('levels', 'is required for a score question: level descriptions, numbered from zero');
      const list = stringList(ctx, raw.levels, 'levels', false);
      if (list.length < 2) throw ctx.error('levels', 'needs at least two levels');
      return list;
    });
    flag_at_level = f(() => {
      if (raw.flag_at_level === undefined || raw.flag_at_level === null) throw ctx.error('flag_at_level', 'is required for a score question');
      // Seed: levels are numbered from zero; the score is the expected level, so fractions are fine.
      return number(ctx, raw.flag_at_level, 'flag_at_level', levels ? { min: 0, max: levels.length - 1 } : { min: 0 });
    });
  }

  if (ask !== undefined && asksAboutAnswer(ask) && (scope === 'span' || evidence?.final_output !== true)) {
    ctx.warn(
      'ask',
      `asks about the agent's answer but cannot see it (scope: ${scope}, evidence.final_output: ${evidence?.final_output ?? false}); ` +
        'use scope: trace and evidence: { final_output: true }',
    );
  }

  return compact({
    ...baseFields(ctx, common, common.title ?? ask),
    kind,
    scope,
    ask,
    evidence,
    when,
    flag_at,
    options,
    flag_on,
    levels,
    flag_at_level,
    action: 'flag' as const,
  });
}

function parseEvidence(ctx: Ctx, raw: unknown): Evidence | undefined {
  if (raw === undefined) return undefined;
  if (!isObj(raw)) throw ctx.error('evidence', `must be a mapping (${EVIDENCE_KEYS.join(', ')}), got ${describe(raw)}`);
  checkKeys(ctx, raw, EVIDENCE_KEYS, 'evidence.', 'evidence');
  for (const key of ['final_output', 'user_message', 'system_prompt'] as const) {
    if (raw[key] !== undefined && typeof raw[key] !== 'boolean') {
      ctx.report(`evidence.${key}`, `must be true or false, got ${describe(raw[key])}`);
    }
  }
  const final_output = raw.final_output;
  return compact({
    spans: raw.spans === undefined ? undefined : ctx.field(() => filter(ctx, raw.spans, 'evidence.spans')),
    fields: raw.fields === undefined ? undefined : ctx.field(() => enumList(ctx, raw.fields, 'evidence.fields', EVIDENCE_FIELDS)),
    last: raw.last === undefined ? undefined : ctx.field(() => evidenceLast(ctx, raw.last)),
    final_output: final_output as boolean | undefined,
    user_message: raw.user_message as boolean | undefined,
    system_prompt: raw.system_prompt as boolean | undefined,
  });
}

function filter(ctx: Ctx, raw: unknown, field: string): SpanFilter {
  if (raw === undefined) return {};
  if (!isObj(raw)) throw ctx.error(field, `must be a span filter (a mapping of type, name, tool, status), got ${describe(raw)}`);
  checkKeys(ctx, raw, FILTER_KEYS, `${field}.`, 'a span filter');
  return compact({
    type: raw.type === undefined ? undefined : ctx.field(() => enumList(ctx, raw.type, `${field}.type`, SPAN_TYPES)),
    name: raw.name === undefined ? undefined : ctx.field(() => stringList(ctx, raw.name, `${field}.name`)),
    tool: raw.tool === undefined ? undefined : ctx.field(() => stringList(ctx, raw.tool, `${field}.tool`)),
    status: raw.status === undefined ? undefined : ctx.field(() => enumList(ctx, raw.status, `${field}.status`, SPAN_STATUSES)),
  });
}

function appliesTo(ctx: Ctx, raw: unknown): AppliesTo | undefined {
  if (raw === undefined) return undefined;
  if (!isObj(raw)) throw ctx.error('applies_to', `must be a mapping of workflow and project, got ${describe(raw)}`);
  checkKeys(ctx, raw, ['workflow', 'project'], 'applies_to.', 'applies_to');
  return compact({
    workflow: raw.workflow === undefined ? undefined : ctx.field(() => stringList(ctx, raw.workflow, 'applies_to.workflow')),
    project: raw.project === undefined ? undefined : ctx.field(() => stringList(ctx, raw.project, 'applies_to.project')),
  });
}

// ---- small validators -------------------------------------------------------------------

/** Every key that is not allowed is a problem of its own. */
function checkKeys(ctx: Ctx, raw: Obj, allowed: readonly string[], prefix: string, what: string): void {
  for (const key of Object.keys(raw)) {
    if (!allowed.includes(key)) {
      ctx.report(`${prefix}${key}`, `unknown key for ${what}; expected one of ${allowed.join(', ')}${suggest(key, allowed)}`);
    }
  }
}

function optString(ctx: Ctx, v: unknown, field: string, nonEmpty = false): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw ctx.error(field, `must be a string, got ${describe(v)}`);
  if (nonEmpty && v.trim() === '') throw ctx.error(field, 'must not be empty');
  return v;
}

function oneOf(ctx: Ctx, v: unknown, field: string, allowed: readonly string[], required: boolean): string | undefined {
  if (v === undefined || v === null) {
    if (required) throw ctx.error(field, `is required: ${allowed.join(', ')}`);
    return undefined;
  }
  if (typeof v !== 'string' || !allowed.includes(v)) {
    throw ctx.error(field, `must be one of ${allowed.join(', ')}, got ${describe(v)}${suggest(v, allowed)}`);
  }
  return v;
}

/** A string or a list of strings, normalised to a non-empty list without duplicates. */
function stringList(ctx: Ctx, v: unknown, field: string, dedupe = true): string[] {
  const list = Array.isArray(v) ? v : [v];
  if (list.length === 0) throw ctx.error(field, 'must not be an empty list');
  list.forEach((x, i) => {
    if (typeof x !== 'string' || x === '') {
      throw ctx.error(Array.isArray(v) ? `${field}[${i}]` : field, `must be a non-empty string${Array.isArray(v) ? '' : ' or a list of them'}, got ${describe(x)}`);
    }
  });
  return dedupe ? [...new Set(list as string[])] : (list as string[]);
}

function enumList<T extends string>(ctx: Ctx, v: unknown, field: string, allowed: readonly T[]): T[] {
  const list = stringList(ctx, v, field);
  for (const x of list) {
    if (!(allowed as readonly string[]).includes(x)) {
      throw ctx.error(field, `${describe(x)} is not one of ${allowed.join(', ')}${suggest(x, allowed)}`);
    }
  }
  return list as T[];
}

/** The most spans a question is shown of a run: the question scheduler keeps that many of each run. */
export const MAX_EVIDENCE_LAST = 200;

function evidenceLast(ctx: Ctx, v: unknown): number {
  const n = countAtLeast(ctx, v, 'evidence.last');
  if (n > MAX_EVIDENCE_LAST) throw ctx.error('evidence.last', `must be at most ${MAX_EVIDENCE_LAST} (the spans of a run a question can be shown), got ${n}`);
  return n;
}

function countAtLeast(ctx: Ctx, v: unknown, field: string): number {
  if (v === undefined || v === null) throw ctx.error(field, 'is required: an integer >= 1');
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw ctx.error(field, `must be an integer >= 1, got ${describe(v)}`);
  return v;
}

function number(ctx: Ctx, v: unknown, field: string, range: { min?: number; max?: number; above?: number }): number {
  const want =
    range.min !== undefined && range.max !== undefined
      ? `a number between ${range.min} and ${range.max}`
      : range.above !== undefined
        ? `a number > ${range.above}`
        : `a number >= ${range.min}`;
  if (v === undefined || v === null) throw ctx.error(field, `is required: ${want}`);
  if (
    typeof v !== 'number' ||
    !Number.isFinite(v) ||
    (range.min !== undefined && v < range.min) ||
    (range.max !== undefined && v > range.max) ||
    (range.above !== undefined && v <= range.above)
  ) {
    throw ctx.error(field, `must be ${want}, got ${describe(v)}`);
  }
  return v;
}

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  // JSON has no infinities or NaN (JSON.stringify gives null): written as YAML writes them.
  if (typeof v === 'number' && !Number.isFinite(v)) return Number.isNaN(v) ? '.nan' : v > 0 ? '.inf' : '-.inf';
  const s = JSON.stringify(v);
  return typeof v === 'number' || typeof v === 'boolean' ? s : s.length > 60 ? `${s.slice(0, 57)}..."` : s;
}

/** " (did you mean "x"?)" for a near miss of a known word (a typo or a cut-off name), else "". */
function suggest(v: unknown, allowed: readonly string[]): string {
  if (typeof v !== 'string' || v.length < 4) return '';
  const w = v.toLowerCase();
  let best: string | undefined;
  let bestD = 3;
  for (const a of allowed) {
    const d = a.startsWith(w) || w.startsWith(a) ? 1 : distance(w, a);
    if (d < bestD) {
      best = a;
      bestD = d;
    }
  }
  return best !== undefined && best !== v ? ` (did you mean ${JSON.stringify(best)}?)` : '';
}

function distance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 2) return 3;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length];
}

/** Drops undefined fields so checks compare and serialise cleanly. */
/** The fields every check has, rule or question, as the parsed common part gives them. */
function baseFields(ctx: Ctx, common: ReturnType<typeof parseCommon>, title: string) {
  return {
    id: common.id,
    title,
    description: common.description,
    guidance: common.guidance,
    group: common.group,
    priority: common.priority,
    applies_to: common.applies_to,
    source: ctx.source,
    file: ctx.source === 'database' ? undefined : ctx.file,
  };
}

function compact<T extends object>(o: T): T {
  for (const k of Object.keys(o) as (keyof T)[]) if (o[k] === undefined) delete o[k];
  return o;
}
