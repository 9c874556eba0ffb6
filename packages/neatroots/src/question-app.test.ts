import * as fs from 'node:fs';
import { createLogger, loadModelConfig } from '@neatroots/platform';
import type { Envelope } from '@neatroots/spans';
import { startEmbedded, type EmbeddedApp } from './embedded';
import { tempHome, testConfig } from './test-app.test';

/**
 * What the question pipeline's embedded specs share: two question checks (one about each search,
 * one at a run's end), the events ingest would publish for a run's searches and its end, and an
 * app in a data folder of its own with them. Named *.test.ts: a helper, not a spec.
 */
export const SEARCH_QUESTION = `id: wrong-search
kind: yes_no
scope: span
when: live
ask: Was this search the wrong one?
`;
export const END_QUESTION = `id: task-left-undone
kind: yes_no
scope: trace
when: end
ask: Did the run leave its task undone?
`;

/** A search span of `run` in project `shop`, as the events topic holds it: its output is `result <id>`. */
export const search = (run: string, id: string, at: number): { key: string; value: Envelope } => ({
  key: run,
  value: { project: 'shop', received_ms: at, item: { kind: 'span', span: { run_id: run, span_id: id, type: 'tool', name: 'search', tool: 'search', status: 'ok', input: { q: id }, output: `result ${id}`, start_ms: at, end_ms: at + 5 } } },
});

/** The end of `run` in project `shop`. */
export const runEnd = (run: string, at: number): { key: string; value: Envelope } => ({
  key: run,
  value: { project: 'shop', received_ms: at, item: { kind: 'run_end', run: { event: 'run_end', run_id: run, status: 'ok', final_output: 'done', ts_ms: at } } },
});

export interface QuestionApp {
  app: EmbeddedApp;
  close(): Promise<void>;
}

/**
 * An embedded app for project `shop` (API key `key`) with the given question checks, its database
 * in memory, only errors logged; `env` adds settings; `llmUrl`, a local model's (a fake's) URL,
 * asked without the answer cache and with batches sent after 5 ms.
 */
export async function startQuestionApp(opts: { prefix: string; key: string; checks: Record<string, string>; env?: Record<string, string>; llmUrl?: string }): Promise<QuestionApp> {
  const home = tempHome(opts.prefix, opts.checks);
  try {
    const app = await startEmbedded({
      config: testConfig(home, { NEATROOTS_API_KEYS: `shop=${opts.key}`, ...opts.env }),
      ...(opts.llmUrl
        ? { models: loadModelConfig({ NEATROOTS_LLM_URL: opts.llmUrl, NEATROOTS_LLM_MODEL: 'llama-test', NEATROOTS_QUESTION_CACHE_TTL_MS: '0', NEATROOTS_QUESTION_BATCH_WAIT_MS: '5' }) }
        : {}),
      inMemoryDb: true,
      watch: false,
      log: createLogger({ level: 'error' }),
    });
    return {
      app,
      close: async () => {
        await app.close();
        fs.rmSync(home, { recursive: true, force: true });
      },
    };
  } catch (err) {
    fs.rmSync(home, { recursive: true, force: true });
    throw err;
  }
}
