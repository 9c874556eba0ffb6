import type RE2 from 're2';
import type { CompiledRule, JointPattern, TextMatcher } from '../engine/compile';
import type { RuleSet } from '../engine/engine';
import { compileRuleSet } from '../engine/ruleset';
import { checkPatternBounds, compileSafe, DEFAULT_PATTERN_BOUNDS, type PatternBounds } from '../regex';
import type { Check, CheckSource } from '../types';
import { DisabledChecks as DisabledList, disabledChecks as processDisabled, type CheckScope, type DisabledChecks } from './disabled';
import { MatchWorker } from './pool';

/** The seed's limit per span for the patterns of checks people write. */
export const DEFAULT_MATCH_LIMIT_MS = 50;

/**
 * How much a call may cost, in text bytes times program instructions, and still run on the
 * event loop. RE2's time is at worst proportional to that product (linear in the text, the
 * factor being the program's size). The worst factor measured (a DFA that gives up, as with
 * `([a-z]{1,1000}x)` repeated) was about 7 ns per unit, so 300,000 units stay under ~2 ms:
 * a 50-instruction pattern over 6 KB of text, or a 10-instruction one over 30 KB. Almost
 * every span is that small; the long ones go to the matcher thread.
 */
export const DEFAULT_FAST_UNITS = 300_000;

export interface SafeMatchingOptions {
  /** Hard limit per span for a pattern run off the event loop (default 50 ms). */
  limitMs?: number;
  /** Where a disabled check is reported (a warning in the log). */
  warn?: (message: string, fields?: Record<string, unknown>) => void;
  /** What a pattern must keep to compile (tests lift them to load a pattern that slips past). */
  bounds?: PatternBounds;
  fastUnits?: number;
  /** The list of disabled checks; the process's by default. */
  disabled?: DisabledChecks;
}

/** What a matcher is told of its check. */
export interface MatchedCheck {
  id: string;
  source?: CheckSource;
  applies_to?: { project?: string[]; not_project?: string[] };
}

interface Pending {
  m: PatternMatcher;
  text: Buffer;
  resolve(hit: boolean): void;
  reject(err: unknown): void;
}

/**
 * Builds the matchers of `match` checks and runs the slow ones off the event loop.
 *
 * Library patterns are ours, reviewed and tested: they run inline. Patterns from the user,
 * a project or the database (what "you or a coding agent write") run inline only when the
 * call is provably cheap (DEFAULT_FAST_UNITS); otherwise the call is queued, and everything
 * queued while the engine applies one batch goes to the matcher thread as one message,
 * each call under a hard limit. A pattern over the limit (twice, see MatchWorker) is
 * disabled for the rest of the process and says so: the log, `checks list`, the API and
 * the metrics read `disabled`.
 */
export class SafeMatching {
  readonly limitMs: number;
  readonly disabled: DisabledChecks;
  private readonly worker: MatchWorker;
  private readonly bounds: PatternBounds;
  private readonly fastUnits: number;
  private readonly warn: (message: string, fields?: Record<string, unknown>) => void;
  private pending: Pending[] = [];
  /** While a rule compiles: the keys (DisabledChecks.key) of the patterns given matchers. */
  private compiling: string[] | undefined;
  /**
   * The rules of the last compile, by their check, with their patterns' keys: a reload keeps
   * the rule of a check it got again (the same Check object: CheckParseCache gives it for an
   * unchanged file or database check) and compiles only the others.
   */
  private rules = new Map<Check, { rule: CompiledRule; keys: string[] }>();
  /** Rules compiled (not kept from the compile before) since this was made. */
  compiledRules = 0;

  constructor(opts: SafeMatchingOptions = {}) {
    this.limitMs = opts.limitMs ?? DEFAULT_MATCH_LIMIT_MS;
    this.disabled = opts.disabled ?? processDisabled;
    this.bounds = opts.bounds ?? DEFAULT_PATTERN_BOUNDS;
    this.fastUnits = opts.fastUnits ?? DEFAULT_FAST_UNITS;
    this.warn = opts.warn ?? ((m) => console.warn(m));
    this.worker = new MatchWorker({
      limitMs: this.limitMs,
      onEvent: (event, detail) => event === 'died' && this.warn(`match: the matcher thread stopped (${detail})`),
    });
  }

  /** The matcher factory compileRuleSet takes. */
  readonly matcher = (check: MatchedCheck, pattern: string): TextMatcher => {
    this.compiling?.push(DisabledList.key(check.id, pattern, { projects: check.applies_to?.project, not_projects: check.applies_to?.not_project }));
    const re = compileSafe(pattern, this.bounds);
    const size = checkPatternBounds(pattern, this.bounds).size;
    // Ours: inline on any text, alone or in a joint pass (engine/joint.ts).
    if (check.source === 'library') return { test: (text) => re.test(text), joint: { source: pattern, size, budget: Infinity, live: () => true } };
    return new PatternMatcher(this, check, pattern, re, size);
  };

  /**
   * The rule set of `checks` with these matchers: the checks in effect (the first load and each
   * reload). A disabled check that is no longer in effect with the pattern it was disabled for
   * (its pattern changed, or it was deleted) leaves the disabled list: the log, `checks list`,
   * the API and the metrics stop saying it is disabled, and its new pattern runs.
   */
  compile(checks: readonly Check[]): RuleSet {
    const keys = new Set<string>();
    const kept = new Map<Check, { rule: CompiledRule; keys: string[] }>();
    const set = compileRuleSet(checks, this.matcher, (check, compileRule) => {
      let got = this.rules.get(check);
      if (!got) {
        const mine: string[] = [];
        this.compiling = mine;
        try {
          got = { rule: compileRule(), keys: mine };
        } finally {
          this.compiling = undefined;
        }
        this.compiledRules++;
      }
      kept.set(check, got);
      for (const k of got.keys) keys.add(k);
      return got.rule;
    });
    this.rules = kept;
    this.disabled.retain(keys);
    return set;
  }

  /** Stops the matcher thread; queued calls still pending are rejected. */
  async close(): Promise<void> {
    await this.worker.close();
  }

  /** @internal PatternMatcher's way off the event loop. */
  enqueue(m: PatternMatcher, text: Buffer): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      // Everything queued by one engine batch (a synchronous loop) goes in one message.
      if (!this.pending.length) queueMicrotask(() => this.flush());
      this.pending.push({ m, text, resolve, reject });
    });
  }

  /** @internal */
  get fast(): number {
    return this.fastUnits;
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    this.worker.run(batch.map((p) => ({ pattern: p.m.pattern, text: p.text }))).then(
      (outcomes) => {
        for (let i = 0; i < batch.length; i++) {
          const o = outcomes[i];
          if ('hit' in o) batch[i].resolve(o.hit);
          else {
            if ('slow' in o) this.disable(batch[i].m, o.slow, batch[i].text.length);
            // Out of time (or the pattern was disabled earlier in the batch): no answer, no finding.
            batch[i].resolve(false);
          }
        }
      },
      (err: unknown) => batch.forEach((p) => p.reject(err)),
    );
  }

  private disable(m: PatternMatcher, ms: number, bytes: number): void {
    const reason = `pattern took ${ms >= this.limitMs ? 'over ' : ''}${Math.round(ms)} ms on one span (limit ${this.limitMs} ms); skipped until neatroots restarts`;
    const added = this.disabled.add({
      check_id: m.checkId,
      pattern: m.pattern,
      source: m.check.source,
      ...(m.check.applies_to?.project?.length ? { projects: [...m.check.applies_to.project] } : {}),
      ...(m.check.applies_to?.not_project?.length ? { not_projects: [...m.check.applies_to.not_project] } : {}),
      reason,
      ms: Math.round(ms * 10) / 10,
      limit_ms: this.limitMs,
      since: new Date().toISOString(),
    });
    if (added) {
      this.warn(`check ${m.checkId}: ${reason}`, { check_id: m.checkId, pattern: m.pattern, ms, limit_ms: this.limitMs, bytes });
    }
  }
}

/** A user, project or database pattern: inline when cheap, else on the matcher thread. */
class PatternMatcher implements TextMatcher {
  private off: boolean;
  private seen: number;
  readonly checkId: string;
  /** The projects the check runs in: another project's check of the same id is disabled apart. */
  private readonly scope: CheckScope;

  constructor(
    private readonly owner: SafeMatching,
    readonly check: MatchedCheck,
    readonly pattern: string,
    private readonly re: RE2,
    /** Estimated program size (instructions). */
    private readonly size: number,
  ) {
    this.checkId = check.id;
    this.seen = owner.disabled.version;
    this.scope = { projects: check.applies_to?.project, not_projects: check.applies_to?.not_project };
    this.off = owner.disabled.has(check.id, pattern, this.scope);
    this.joint = { source: pattern, size, budget: owner.fast, live: () => !this.isOff() };
  }

  /** In a joint pass only while the pass stays as cheap as this pattern alone inline, and never once disabled. */
  readonly joint: JointPattern;

  private isOff(): boolean {
    const d = this.owner.disabled;
    if (d.version !== this.seen) {
      this.seen = d.version;
      this.off = d.has(this.checkId, this.pattern, this.scope);
    }
    return this.off;
  }

  test(text: string | Buffer): boolean | Promise<boolean> {
    if (this.isOff()) return false;
    const bytes = typeof text === 'string' ? 3 * text.length : text.length;
    if (bytes * this.size <= this.owner.fast) return this.re.test(text);
    return this.owner.enqueue(this, typeof text === 'string' ? Buffer.from(text, 'utf8') : text);
  }
}
