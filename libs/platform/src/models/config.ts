import type { ChatModel } from '@neatroots/ports';
import { DEFAULT_SOP_SETTINGS, loadSopSettings, SopSettingsError, type SopModelSettings } from '@neatroots/sop';
import { z } from 'zod';
import { ConfigError, numeric } from '../config';
import { MIN_REPLY_LIMIT_BYTES, openAiChatModel, type ModelParams } from './openai';

/**
 * Which models the question service may call, from the environment, validated once at start-up
 * (STYLE.md 1): a wrong value stops the process with a message naming the variable. With
 * nothing set, the built-in fast classifier answers every question.
 *
 *   the hosted decision model (the seed's Jev): NEATROOTS_DECISION_MODEL_URL, _NAME, _KEY,
 *     NEATROOTS_DECISION_MODEL=off to keep it configured but unused; TYPESAFE_API_KEY, the
 *     seed's name for its key, stands for _KEY when that is not set
 *   the local LLM: NEATROOTS_LLM_URL, NEATROOTS_LLM_MODEL, NEATROOTS_LLM_KEY
 *   the reasoning model (reviews sopops' decisions): NEATROOTS_REASONING_MODEL_URL, _NAME,
 *     _KEY; the local LLM reviews when it is not set
 */
const bool = z
  .string()
  .optional()
  .transform((s, ctx) => {
    if (s === undefined || s === '') return undefined;
    if (/^(1|true|on|yes)$/i.test(s)) return true;
    if (/^(0|false|off|no)$/i.test(s)) return false;
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: `expected on or off, got "${s}"` });
    return z.NEVER;
  });
const ms = (def: number) => numeric(z.coerce.number().int().min(1).max(3_600_000).default(def));
const count = (def: number, max: number) => numeric(z.coerce.number().int().min(1).max(max).default(def));
const url = z.string().url().optional().or(z.literal('').transform(() => undefined));
const params = z.enum(['classic', 'reasoning']).default('classic');

const schema = z
  .object({
    NEATROOTS_DECISION_MODEL_URL: url,
    NEATROOTS_DECISION_MODEL_NAME: z.string().min(1).optional(),
    NEATROOTS_DECISION_MODEL_KEY: z.string().optional(),
    /** The seed's name for the decision model's key ("Jev answers them when it's on (TYPESAFE_API_KEY, ...)"). */
    TYPESAFE_API_KEY: z.string().optional(),
    NEATROOTS_DECISION_MODEL: bool,
    NEATROOTS_DECISION_MODEL_TIMEOUT_MS: ms(30_000),
    NEATROOTS_DECISION_MODEL_CONCURRENCY: count(8, 256),
    NEATROOTS_DECISION_MODEL_JSON_MODE: bool,
    /** classic (max_tokens, temperature 0) or reasoning (max_completion_tokens, no temperature). */
    NEATROOTS_DECISION_MODEL_PARAMS: params,
    NEATROOTS_LLM_URL: url,
    NEATROOTS_LLM_MODEL: z.string().min(1).optional(),
    NEATROOTS_LLM_KEY: z.string().optional(),
    NEATROOTS_LLM_TIMEOUT_MS: ms(60_000),
    NEATROOTS_LLM_CONCURRENCY: count(2, 256),
    NEATROOTS_REASONING_MODEL_URL: url,
    NEATROOTS_REASONING_MODEL_NAME: z.string().min(1).optional(),
    NEATROOTS_REASONING_MODEL_KEY: z.string().optional(),
    NEATROOTS_REASONING_MODEL_TIMEOUT_MS: ms(120_000),
    NEATROOTS_REASONING_MODEL_CONCURRENCY: count(2, 256),
    NEATROOTS_REASONING_MODEL_JSON_MODE: bool,
    NEATROOTS_REASONING_MODEL_PARAMS: params,
    /** Send response_format json_object (some older servers reject it). */
    NEATROOTS_LLM_JSON_MODE: bool,
    /** The seed's classifier.backend. */
    NEATROOTS_CLASSIFIER_BACKEND: z.enum(['auto', 'decision', 'local', 'classifier']).default('auto'),
    NEATROOTS_QUESTION_BATCH: count(8, 64),
    NEATROOTS_QUESTION_BATCH_WAIT_MS: numeric(z.coerce.number().int().min(0).max(10_000).default(10)),
    NEATROOTS_QUESTION_MAX_QUEUE: count(1000, 1_000_000),
    NEATROOTS_QUESTION_RETRIES: numeric(z.coerce.number().int().min(0).max(10).default(2)),
    NEATROOTS_QUESTION_CACHE_TTL_MS: numeric(z.coerce.number().int().min(0).default(15 * 60_000)),
    NEATROOTS_QUESTION_PORT: numeric(z.coerce.number().int().min(0).max(65535).default(50052)),
    /** The most bytes of a model's reply read (more for a request asking for more tokens: replyLimitBytes). */
    NEATROOTS_MODEL_REPLY_MAX_BYTES: numeric(z.coerce.number().int().min(65_536).max(1_073_741_824).default(MIN_REPLY_LIMIT_BYTES)),
  })
  .superRefine((c, ctx) => {
    if (c.NEATROOTS_DECISION_MODEL_URL && !c.NEATROOTS_DECISION_MODEL_NAME) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['NEATROOTS_DECISION_MODEL_NAME'], message: 'is required with NEATROOTS_DECISION_MODEL_URL (the model to ask)' });
    }
    if (c.NEATROOTS_LLM_URL && !c.NEATROOTS_LLM_MODEL) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['NEATROOTS_LLM_MODEL'], message: 'is required with NEATROOTS_LLM_URL (the model to ask, e.g. llama3.1:8b)' });
    }
    if (c.NEATROOTS_REASONING_MODEL_URL && !c.NEATROOTS_REASONING_MODEL_NAME) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['NEATROOTS_REASONING_MODEL_NAME'], message: 'is required with NEATROOTS_REASONING_MODEL_URL (the model to ask)' });
    }
    // The key turns the decision model on, but says nothing of where it answers: a key with no
    // endpoint would be silently unused.
    if (c.TYPESAFE_API_KEY && !c.NEATROOTS_DECISION_MODEL_URL && c.NEATROOTS_DECISION_MODEL !== false) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['TYPESAFE_API_KEY'],
        message: 'is the decision model\'s key, but NEATROOTS_DECISION_MODEL_URL and NEATROOTS_DECISION_MODEL_NAME (where to send it) are not set; set them, or NEATROOTS_DECISION_MODEL=off',
      });
    }
    if (c.NEATROOTS_DECISION_MODEL === true && !c.NEATROOTS_DECISION_MODEL_URL) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['NEATROOTS_DECISION_MODEL'], message: 'is on but NEATROOTS_DECISION_MODEL_URL is not set' });
    }
    if (c.NEATROOTS_CLASSIFIER_BACKEND === 'decision' && !c.NEATROOTS_DECISION_MODEL_URL) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['NEATROOTS_CLASSIFIER_BACKEND'], message: 'is decision but NEATROOTS_DECISION_MODEL_URL is not set' });
    } else if (c.NEATROOTS_CLASSIFIER_BACKEND === 'decision' && c.NEATROOTS_DECISION_MODEL === false) {
      // Off keeps the decision model configured but unused: nothing would answer the questions.
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['NEATROOTS_CLASSIFIER_BACKEND'],
        message: 'is decision but NEATROOTS_DECISION_MODEL is off (configured but unused); turn it on, or choose another backend (auto, local, classifier)',
      });
    }
    if (c.NEATROOTS_CLASSIFIER_BACKEND === 'local' && !c.NEATROOTS_LLM_URL) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['NEATROOTS_CLASSIFIER_BACKEND'], message: 'is local but NEATROOTS_LLM_URL is not set' });
    }
  });

export type ModelEnv = z.infer<typeof schema>;

export interface ModelConfig {
  decision?: { url: string; model: string; key?: string; timeoutMs: number; concurrency: number; jsonMode?: boolean; params?: ModelParams };
  local?: { url: string; model: string; key?: string; timeoutMs: number; concurrency: number; jsonMode: boolean };
  reasoning?: { url: string; model: string; key?: string; timeoutMs: number; concurrency: number; jsonMode?: boolean; params?: ModelParams };
  backend: 'auto' | 'decision' | 'local' | 'classifier';
  batch: { maxBatch: number; maxWaitMs: number; maxQueue: number; retries: number };
  cacheTtlMs: number;
  grpcPort: number;
  /** The most bytes of a model reply read, at least (NEATROOTS_MODEL_REPLY_MAX_BYTES; a request asking for more tokens may read more). */
  replyMaxBytes: number;
  /** How sopops' checker uses the models (SOPOPS_DECISIONS, SOPOPS_CHECK_MODE, SOPOPS_CHECK_REVIEW). */
  sop: SopModelSettings;
}

export function loadModelConfig(env: NodeJS.ProcessEnv = process.env): ModelConfig {
  const parsed = schema.safeParse(env);
  const issues = parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.') || 'environment'}: ${i.message}`);
  let sop = DEFAULT_SOP_SETTINGS;
  try {
    sop = loadSopSettings(env);
  } catch (err) {
    if (!(err instanceof SopSettingsError)) throw err;
    issues.push(...err.problems);
  }
  // Every problem at once, the model variables' and the sopops ones'.
  if (!parsed.success || issues.length) throw new ConfigError(issues);
  const c = parsed.data;
  const out: ModelConfig = {
    sop,
    backend: c.NEATROOTS_CLASSIFIER_BACKEND,
    batch: { maxBatch: c.NEATROOTS_QUESTION_BATCH, maxWaitMs: c.NEATROOTS_QUESTION_BATCH_WAIT_MS, maxQueue: c.NEATROOTS_QUESTION_MAX_QUEUE, retries: c.NEATROOTS_QUESTION_RETRIES },
    cacheTtlMs: c.NEATROOTS_QUESTION_CACHE_TTL_MS,
    grpcPort: c.NEATROOTS_QUESTION_PORT,
    replyMaxBytes: c.NEATROOTS_MODEL_REPLY_MAX_BYTES,
  };
  // Seed: the decision model answers "when you turned it on"; configured and not turned off is on.
  if (c.NEATROOTS_DECISION_MODEL_URL && c.NEATROOTS_DECISION_MODEL !== false) {
    out.decision = {
      url: c.NEATROOTS_DECISION_MODEL_URL,
      model: c.NEATROOTS_DECISION_MODEL_NAME!,
      key: c.NEATROOTS_DECISION_MODEL_KEY || c.TYPESAFE_API_KEY,
      timeoutMs: c.NEATROOTS_DECISION_MODEL_TIMEOUT_MS,
      concurrency: c.NEATROOTS_DECISION_MODEL_CONCURRENCY,
      jsonMode: c.NEATROOTS_DECISION_MODEL_JSON_MODE ?? true,
      params: c.NEATROOTS_DECISION_MODEL_PARAMS,
    };
  }
  if (c.NEATROOTS_LLM_URL) {
    out.local = {
      url: c.NEATROOTS_LLM_URL,
      model: c.NEATROOTS_LLM_MODEL!,
      key: c.NEATROOTS_LLM_KEY,
      timeoutMs: c.NEATROOTS_LLM_TIMEOUT_MS,
      concurrency: c.NEATROOTS_LLM_CONCURRENCY,
      jsonMode: c.NEATROOTS_LLM_JSON_MODE ?? true,
    };
  }
  if (c.NEATROOTS_REASONING_MODEL_URL) {
    out.reasoning = {
      url: c.NEATROOTS_REASONING_MODEL_URL,
      model: c.NEATROOTS_REASONING_MODEL_NAME!,
      key: c.NEATROOTS_REASONING_MODEL_KEY,
      timeoutMs: c.NEATROOTS_REASONING_MODEL_TIMEOUT_MS,
      concurrency: c.NEATROOTS_REASONING_MODEL_CONCURRENCY,
      jsonMode: c.NEATROOTS_REASONING_MODEL_JSON_MODE ?? true,
      params: c.NEATROOTS_REASONING_MODEL_PARAMS,
    };
  }
  return out;
}

/** The chat models the configuration names, through the `openai` package. */
export function modelsFromConfig(c: ModelConfig): { decision?: ChatModel; local?: ChatModel; reasoning?: ChatModel } {
  const out: { decision?: ChatModel; local?: ChatModel; reasoning?: ChatModel } = {};
  if (c.decision) out.decision = openAiChatModel({ role: 'decision', baseURL: c.decision.url, apiKey: c.decision.key, model: c.decision.model, timeoutMs: c.decision.timeoutMs, jsonMode: c.decision.jsonMode, params: c.decision.params, minReplyLimitBytes: c.replyMaxBytes });
  if (c.reasoning) out.reasoning = openAiChatModel({ role: 'reasoning', baseURL: c.reasoning.url, apiKey: c.reasoning.key, model: c.reasoning.model, timeoutMs: c.reasoning.timeoutMs, jsonMode: c.reasoning.jsonMode, params: c.reasoning.params, minReplyLimitBytes: c.replyMaxBytes });
  if (c.local) out.local = openAiChatModel({ role: 'local', baseURL: c.local.url, apiKey: c.local.key, model: c.local.model, timeoutMs: c.local.timeoutMs, jsonMode: c.local.jsonMode, minReplyLimitBytes: c.replyMaxBytes });
  return out;
}
