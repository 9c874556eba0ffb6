import type { Evidence } from './body';
import type { Answer, Decider, Question } from './decider';

/**
 * A Decider that answers from a table of recorded answers: a model's answers replayed, or
 * answers written by hand for the fixtures that show each status. A question is keyed
 * `<procedure_id>/<kind>` (route, goal) or `<procedure_id>/<kind>/<rule index>` (condition
 * and step: the step's index; never; warning and responded: the sign's index). A question
 * with no recorded answer is undecided, so it is not checked rather than guessed.
 */
export interface RecordedAnswer {
  answer: boolean;
  probability?: number;
  sure?: boolean;
  evidence?: Evidence[];
  reason?: string;
}

export interface Recorded {
  model?: string;
  prompt_version?: string;
  answers: Record<string, RecordedAnswer>;
}

export function questionKey(q: Question): string {
  return `${q.procedure.procedure_id}/${q.kind}${q.rule ? `/${q.rule.index}` : ''}`;
}

export function recordedDecider(rec: Recorded): Decider {
  return {
    model: rec.model ?? 'recorded',
    promptVersion: rec.prompt_version ?? 'recorded',
    async decide(q: Question): Promise<Answer> {
      const a = rec.answers[questionKey(q)];
      if (!a) return { decided: false, reason: `Not checked: no recorded answer for ${questionKey(q)}.` };
      return {
        decided: true,
        answer: a.answer,
        probability: a.probability ?? (a.answer ? 1 : 0),
        sure: a.sure ?? true,
        evidence: a.evidence ?? [],
        reason: a.reason ?? (a.answer ? 'Yes.' : 'No.'),
      };
    },
  };
}
