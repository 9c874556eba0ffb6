import type { Db, JobInfo } from '@neatroots/ports';
import {
  applyEdits,
  excerpt,
  MalformedSuggestion,
  MAX_FINDINGS,
  planAgents,
  readSuggestion,
  retryAsk,
  ruleLabel,
  suggestAsk,
  suggestSubject,
  SUGGEST_ANSWER_TOKENS,
  SUGGEST_INSTRUCTIONS,
  type SuggestAnswer,
} from '@neatroots/review-domain';
import { PatternsRepo, ReviewReadRepo, SuggestionsRepo, WorkspaceRepo, type PatternRecord, type SuggestionRecord } from '@neatroots/store';
import type { GatewayOf } from '../review/namer';
import { headProcedure, issuesWith } from './head';

/** The job that generates a suggestion: inline in the embedded default, BullMQ distributed. */
export const SUGGEST_QUEUE = 'sopops_suggest';
export interface SuggestJob {
  workspace: string;
  id: string;
}
/** Tries of the job; after the last one fails the suggestion is failed, never left generating. */
export const SUGGEST_ATTEMPTS = 3;

type Attempt = { ok: true; text: string; rationale: string } | { ok: false; problems: string[] };

/**
 * SuggestEdit: asks the reasoning model (through the question service's gateway, like the
 * pattern namer) for an edit answering the verdict; the edit must compile with the rest of head
 * and still define the procedure. One that does not is sent back once with what was wrong
 * (sopc's issues, or edits that match nothing), then the suggestion is failed with the reason.
 * Model calls happen outside any transaction; the result is written only while the suggestion is
 * still generating (a dismiss meanwhile wins).
 */
export class SuggestionGenerator {
  private readonly repo = new SuggestionsRepo();
  private readonly patterns = new PatternsRepo();
  private readonly workspaces: WorkspaceRepo;

  constructor(
    private readonly db: Db,
    private readonly gateway: GatewayOf,
  ) {
    this.workspaces = new WorkspaceRepo(db);
  }

  /** The job's body: an error is retried, and the last try's error fails the suggestion. */
  async run(job: SuggestJob, info: JobInfo): Promise<void> {
    try {
      await this.generate(job);
    } catch (err) {
      if (info.attempt >= SUGGEST_ATTEMPTS) await this.repo.set(this.db, job.id, { status: 'failed', error: `it could not be generated: ${(err as Error).message}` }, ['generating']);
      throw err;
    }
  }

  async generate(job: SuggestJob): Promise<void> {
    const s = await this.repo.get(this.db, job.workspace, job.id);
    if (!s || s.status !== 'generating') return;
    const fail = (error: string, model: string | null = null) => this.repo.set(this.db, s.id, { status: 'failed', error, model }, ['generating']);
    const gateway = await this.gateway();
    const models = gateway ? await gateway.decisionModels() : null;
    if (!gateway || !models?.reasoning) return void (await fail('no reasoning model is configured: suggestions are written by the reasoning model (NEATROOTS_REASONING_MODEL_URL), else the local LLM (NEATROOTS_LLM_URL); see docs/questions.md#configuration'));
    const pattern = await this.patterns.pattern(this.db, s.workspace, s.pattern_id);
    if (!pattern) return void (await fail(`pattern ${s.pattern_id} is gone`));
    const subject = suggestSubject({
      path: s.path,
      procedure_name: pattern.procedure_name,
      file: s.old_text,
      rule_label: await this.labelOf(s, pattern),
      rule_text: s.rule_text,
      pattern_name: pattern.name,
      sessions: await this.sessionsOf(pattern),
      verdict: s.verdict,
      note: s.verdict_note,
      findings: await this.findingsOf(pattern),
      changes_since: s.changes_since,
    });
    const tag = s.id;
    let model: string | null = models.reasoning;
    const ask = async (question: string): Promise<Attempt> => {
      const reply = await gateway.decide('reasoning', { instructions: SUGGEST_INSTRUCTIONS, subject, ask: question, max_tokens: SUGGEST_ANSWER_TOKENS });
      if (!reply.ok) throw new ModelFailed(reply.reason);
      model = reply.model;
      let answer: SuggestAnswer;
      try {
        answer = readSuggestion(reply.answer);
      } catch (err) {
        if (err instanceof MalformedSuggestion) return { ok: false, problems: [err.message] };
        throw err;
      }
      return this.check(s, answer);
    };
    try {
      let attempt = await ask(suggestAsk(s.verdict, tag));
      if (!attempt.ok) attempt = await ask(retryAsk(s.verdict, tag, attempt.problems));
      if (!attempt.ok) return void (await fail(`the model's edit was sent back once and still could not be used: ${attempt.problems.join('; ')}`, model));
      const head = await this.workspaces.headFiles(s.workspace);
      const before = new Map(head.map((f) => [f.path, f.text]));
      before.set(s.path, s.old_text);
      const after = new Map(before).set(s.path, attempt.text);
      await this.repo.set(this.db, s.id, { status: 'proposed', new_text: attempt.text, rationale: attempt.rationale, plan: { agents: planAgents(before, after) }, model, error: null }, ['generating']);
    } catch (err) {
      if (err instanceof ModelFailed) return void (await fail(`the model failed: ${err.message}`, model));
      throw err;
    }
  }

  /** The edit made and checked against the rest of head as it is now (the file as it was written against). */
  private async check(s: SuggestionRecord, answer: SuggestAnswer): Promise<Attempt> {
    let text: string;
    if (answer.edits) {
      const applied = applyEdits(s.old_text, answer.edits);
      if (!applied.ok) return applied;
      text = applied.text;
    } else text = answer.new_text ?? '';
    if (text === s.old_text) return { ok: false, problems: ['the edit changes nothing in the file'] };
    const issues = issuesWith(await this.workspaces.headFiles(s.workspace), s.path, text, s.procedure_id);
    if (issues.length) return { ok: false, problems: issues.map((i) => `sopc: ${i.file}:${i.line}: ${i.message}`) };
    return { ok: true, text, rationale: answer.rationale };
  }

  /** The rule's label in the file it edits (its wording at head may sit elsewhere than where the pattern's sessions ran it). */
  private async labelOf(s: SuggestionRecord, p: PatternRecord): Promise<string> {
    const head = (await this.workspaces.headFiles(s.workspace)).map((f) => (f.path === s.path ? { ...f, text: s.old_text } : f));
    const rule = headProcedure(head, s.procedure_id)?.rules.find((r) => r.rule_id === s.rule_id);
    return rule ? ruleLabel(rule.kind, rule.index) : ruleLabel(p.rule_kind, p.rule_index);
  }

  private async findingsOf(p: PatternRecord) {
    const rows = await new ReviewReadRepo(this.db).examples([p], MAX_FINDINGS);
    return rows.map((r) => ({ session: r.external_id, status: r.status, excerpt: excerpt(r.evidence as { quote?: string | null }[], null), reason: r.reason }));
  }

  private sessionsOf(p: PatternRecord): Promise<number> {
    return this.repo.patternSessions(this.db, p);
  }
}

class ModelFailed extends Error {}
