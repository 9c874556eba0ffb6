import type { Check } from '@neatroots/checks';
import { modelsFromConfig, type ModelConfig } from '@neatroots/platform';
import type { QuestionServiceOptions } from '@neatroots/question';
import { questionSet, type QuestionSet } from '@neatroots/questions';

/**
 * Question checks wired from the configuration, for both deployments and replay: the question
 * service's model options from the environment (loadModelConfig), and whether the local LLM
 * answers alone (the rule engine's scheduler then asks fewer, later questions).
 */

/** The question service's models, routing, queues and cache, from the validated configuration. */
export function questionServiceConfig(mc: ModelConfig): Pick<QuestionServiceOptions, 'models' | 'backend' | 'queue' | 'decisionQueue' | 'localQueue' | 'reasoningQueue' | 'cache'> {
  const queue = { maxBatch: mc.batch.maxBatch, maxWaitMs: mc.batch.maxWaitMs, maxQueue: mc.batch.maxQueue, retries: mc.batch.retries };
  return {
    models: modelsFromConfig(mc),
    backend: mc.backend,
    queue,
    ...(mc.decision ? { decisionQueue: { maxConcurrent: mc.decision.concurrency } } : {}),
    ...(mc.local ? { localQueue: { maxConcurrent: mc.local.concurrency } } : {}),
    ...(mc.reasoning ? { reasoningQueue: { maxConcurrent: mc.reasoning.concurrency } } : {}),
    cache: mc.cacheTtlMs > 0 ? { ttlMs: mc.cacheTtlMs } : false,
  };
}

/** Whether the local LLM answers (no decision model in use): the seed's cost-control mode. */
export function localLlmStandsIn(mc: ModelConfig): boolean {
  if (mc.backend === 'classifier' || mc.backend === 'decision') return false;
  if (mc.backend === 'local') return true;
  return !mc.decision && !!mc.local;
}

/** The question checks of the loaded set, recomputed only when the checks are reloaded. */
export function questionsOf(loaded: () => { checks: readonly Check[] }): () => QuestionSet {
  let from: unknown;
  let set: QuestionSet = questionSet([]);
  return () => {
    const l = loaded();
    if (l !== from) {
      from = l;
      set = questionSet(l.checks);
    }
    return set;
  };
}
