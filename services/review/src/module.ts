import { deadLetterTopic, type CodeHost, type Db, type Queryable, type ServiceModule } from '@neatroots/ports';
import { createCheckSession, DEFAULT_SOP_SETTINGS, type DecisionGateway, type SopModelSettings } from '@neatroots/sop';
import { makeTopics } from '@neatroots/messages';
import { ProjectsRepo, type ApiKeyGrant, type ApiKeyScope, type IsQuiet, type ReviewQueries, type ReviewSopQueries, type SopQueries } from '@neatroots/store';
import { createReviewData, type ReviewData } from './data';
import { reviewDataGrpcService } from './data-grpc';
import { reviewGrpcService } from './grpc';
import { REVIEW_GROUPS, startReview } from './review';
import { sopGrpcService } from './sop/grpc';
import { GitHubConnections, type GitHubApiUrls } from './github/connections';
import { startSop } from './sop/service';
import { DEFAULT_RETENTION_CRON, DEFAULT_SPAN_RETENTION_DAYS, scheduleRetention } from './retention';

/** What the review service offers the others: in-process, or its gRPC clients elsewhere. */
export interface ReviewLink {
  queries: ReviewQueries;
  /** The project an API key opens and its scope, null when none. */
  resolveKey(key: string): Promise<ApiKeyGrant | null>;
  /** Whether a check is quiet in a project (cached, stale while revalidating). */
  isQuiet: IsQuiet;
  data: ReviewData;
  /** The SOP side: procedures at head, releases, sessions and their checks. */
  sop: SopQueries;
  /** sopops review: patterns, verdicts, overrides, the queue, regression sets, Insights. */
  reviewSop: ReviewSopQueries;
}

export const REVIEW_LINK = 'review';

/**
 * The review service as a module: it owns the database (seeds the API keys of
 * NEATROOTS_API_KEYS), stores what the bus carries, and answers the others over gRPC
 * (neatroots.v1.Review for the api and ingest, neatroots.v1.ReviewData for the rule engine and
 * the question service).
 */
/** The configuration the review service reads. */
export interface ReviewConfig {
  NEATROOTS_TOPIC_PREFIX: string;
  /** `none: true` for NEATROOTS_API_KEYS=none: no keys, on purpose. */
  NEATROOTS_API_KEYS: { project: string; key: string; scope?: ApiKeyScope }[] & { none?: boolean };
  /** `none: true` for NEATROOTS_STEERING=none: no project, on purpose. */
  NEATROOTS_STEERING: string[] & { none?: boolean };
  /** The daily sopops_recluster_daily job's cron (default 0 6 * * *). */
  SOPOPS_RECLUSTER_CRON?: string;
  /** When open pull requests of suggestions are looked at (default every 15 minutes). */
  SOPOPS_PR_STATUS_CRON?: string;
  /** Days spans are kept (default 30; 0 keeps them), and when the retention job runs (default hourly). */
  NEATROOTS_SPAN_RETENTION_DAYS?: number;
  NEATROOTS_TRANSCRIPT_RETENTION_DAYS?: number;
  NEATROOTS_RETENTION_CRON?: string;
}

/** What the composition root supplies for GitHub connections (the adapter lives in the platform). */
export interface GitHubLink {
  /**
   * NEATROOTS_SECRET_KEY, or the embedded default's key file; undefined when none is set (the
   * distributed deployment without NEATROOTS_SECRET_KEY). Throws for a key file that is not a key:
   * the start fails naming it, since a new key would make every stored token unreadable.
   */
  secretKey(): Buffer | undefined;
  hostFor(c: { token: string; api_url: string }): CodeHost;
  /** NEATROOTS_GITHUB_API_URLS: the REST APIs a connection may name (default 'public'; see GitHubConnections). */
  apiUrls?: GitHubApiUrls;
}

export const reviewModule: ServiceModule<ReviewConfig> = {
  name: 'review',
  // jobs: BullMQ on Redis in the distributed deployment (the SOP checks, retention).
  needs: ['bus', 'db', 'jobs'],
  // What it serves (the api's reads, ingest's key lookups, the rule engine's steering) comes
  // from Postgres: a Kafka or Redis outage stops its consumers and jobs, not its answers.
  readyOn: ['db'],
  provides: [REVIEW_LINK],
  async start(ctx) {
    // Migrated by the platform.
    const db = await ctx.platform.db();
    await seedApiKeys(db, ctx.config.NEATROOTS_API_KEYS, ctx.log);
    // Every service reads steering from the database (the rule engine, the api): what the
    // setting says holds from here, whatever their own environment says.
    await seedSteering(db, ctx.config.NEATROOTS_STEERING, ctx.log);
    // sopops: sessions checked by the sopops_check job, its models asked through the question
    // service. That service needs this one's stores, so it starts after: the checker finds it
    // at its first check (in this process, or over gRPC), or checks without a model if there
    // is none.
    const models = await ctx.link<{ sop?: SopModelSettings }>('models').catch(() => ({}) as { sop?: SopModelSettings });
    const gateway = async () => {
      try {
        return (await ctx.link<{ decisions?: DecisionGateway }>('question')).decisions ?? null;
      } catch (err) {
        if (/no service of this process provides it/.test((err as Error).message)) return null;
        throw err; // not started yet: the job is tried again
      }
    };
    const sop = await startSop({
      db,
      jobs: await ctx.platform.jobs(),
      checkSession: createCheckSession({ settings: models.sop ?? DEFAULT_SOP_SETTINGS, gateway }),
      // calibration widens these bands per question (sopops calibrate)
      decisions: (models.sop ?? DEFAULT_SOP_SETTINGS).decisions,
      // rule patterns are named by the reasoning model through the same gateway
      gateway,
      reclusterCron: ctx.config.SOPOPS_RECLUSTER_CRON,
      github: await githubConnections(db, () => ctx.link<GitHubLink>('github'), (m) => ctx.log.warn(m)),
      prStatusCron: ctx.config.SOPOPS_PR_STATUS_CRON ?? '*/15 * * * *',
      // runs that ended without becoming sessions (a stop or a crash before their jobs ran) are queued again
      log: ctx.log,
    });
    // Counted from 0: a series that first appears at 1 has no increase, and the first dead letter
    // of a source (often the only one) would never reach an alert on the counter's increase.
    for (const source of deadLetterSources(ctx.config.NEATROOTS_TOPIC_PREFIX, ctx.platform.kind === 'distributed')) {
      ctx.metrics.deadLetters.inc({ source }, 0);
    }
    const review = await startReview({
      bus: ctx.platform.bus(),
      db,
      topics: { ...makeTopics(ctx.config.NEATROOTS_TOPIC_PREFIX), deadLetters: deadLetterTopic(ctx.config.NEATROOTS_TOPIC_PREFIX) },
      log: (m, err, fields) => ctx.log.error(m, err, fields),
      // every dead letter ends up here (the buses send theirs on the dead-letter topic)
      onSetAside: (letter) => ctx.metrics.deadLetters.inc({ source: deadLetterMetricSource(letter.source) }),
      // a run of an agent of the live release becomes a SOP session when it ends
      onRunsEnded: (ended) => sop.runsEnded(ended),
    });
    await scheduleRetention(await ctx.platform.jobs(), ctx.config.NEATROOTS_RETENTION_CRON ?? DEFAULT_RETENTION_CRON, {
      db,
      days: ctx.config.NEATROOTS_SPAN_RETENTION_DAYS ?? DEFAULT_SPAN_RETENTION_DAYS,
      transcriptDays: ctx.config.NEATROOTS_TRANSCRIPT_RETENTION_DAYS ?? 0,
      log: (m) => ctx.log.info(m),
    });
    const projects = new ProjectsRepo(db);
    const link: ReviewLink = {
      queries: review.queries,
      resolveKey: (key) => projects.resolveApiKey(key),
      isQuiet: review.isQuiet,
      data: createReviewData(db),
      sop: sop.queries,
      reviewSop: sop.review,
    };
    ctx.serveGrpc('neatroots.v1.Review', reviewGrpcService(link.queries, link.resolveKey));
    ctx.serveGrpc('neatroots.v1.ReviewData', reviewDataGrpcService(link.data));
    ctx.serveGrpc('neatroots.v1.Sop', sopGrpcService(link.sop, link.reviewSop));
    // A process that cannot go on (a disk error) saves nothing more: its batches in hand get no grace.
    return {
      provides: { [REVIEW_LINK]: link },
      stop: async () => {
        await Promise.all([sop.close(), review.close(ctx.platform.failing?.() ? { graceMs: 0 } : undefined)]);
      },
    };
  },
};

/**
 * Workspaces' GitHub connections, or null (drafts only) when no key or adapter is supplied. No
 * key is a documented setting (docs/deployment.md), not a fault: one warning line, no stack.
 */
export async function githubConnections(db: Db, link: () => Promise<GitHubLink>, warn: (m: string) => void): Promise<GitHubConnections | null> {
  let gh: GitHubLink;
  try {
    gh = await link();
  } catch {
    return null; // no composition root supplies one (tests of the module alone)
  }
  const key = gh.secretKey();
  if (!key) {
    warn('GitHub connections are off (suggestions are applied as drafts): no secret key to seal tokens with; set NEATROOTS_SECRET_KEY (32 bytes as 64 hex digits, the same on every replica)');
    return null;
  }
  return new GitHubConnections(db, key, (c) => gh.hostFor(c), gh.apiUrls ?? 'public');
}

/**
 * API keys from NEATROOTS_API_KEYS into the database (stored hashed); idempotent.
 * The setting is the list of the keys it opens: a key taken out of it is revoked, one moved to
 * another project opens that one only. An empty setting (unset or blank: a replica missing the
 * variable, a Secret without it) revokes nothing, and says so at warn; `none` (`keys.none`)
 * revokes them all. Revocations are logged at warn. Returns how many keys were revoked and kept so.
 */
export async function seedApiKeys(
  db: Queryable,
  keys: { project: string; key: string; scope?: ApiKeyScope }[] & { none?: boolean },
  log: { warn(m: string): void },
): Promise<{ revoked: number; kept: number }> {
  const out = await new ProjectsRepo(db).syncLabelledKeys('NEATROOTS_API_KEYS', keys, { none: keys.none === true });
  if (out.kept) {
    log.warn(
      `NEATROOTS_API_KEYS is empty (unset or blank): the ${out.kept} API key${out.kept === 1 ? '' : 's'} it listed before ${out.kept === 1 ? 'is' : 'are'} kept, not revoked; to revoke them all, set NEATROOTS_API_KEYS=none`,
    );
  }
  if (out.revoked) log.warn(`${out.revoked} API key${out.revoked === 1 ? '' : 's'} no longer in NEATROOTS_API_KEYS ${out.revoked === 1 ? 'was' : 'were'} revoked${keys.none ? ' (NEATROOTS_API_KEYS=none)' : ''}`);
  return out;
}

/**
 * Steering from NEATROOTS_STEERING into the database, where every service reads it; idempotent.
 * The setting is the list of the projects it turns steering on in: a project taken out of it is
 * switched off, unless it was switched on another way (the demo). An empty setting (unset or
 * blank: a replica missing the variable) changes nothing and says so at warn when the setting had
 * switched projects on, as an empty NEATROOTS_API_KEYS keeps the keys; `none` switches them all
 * off. A project on with no source (an earlier version's review switched it on, after a rollback
 * too) is taken over when listed; not listed, it stays on, said at warn. Says which projects it
 * switched on and off.
 */
export async function seedSteering(
  db: Queryable,
  steering: readonly string[] & { none?: boolean },
  log: { info(m: string): void; warn(m: string): void },
): Promise<{ on: string[]; claimed: string[]; off: string[]; kept: string[]; unsourced: string[] }> {
  const projects = new ProjectsRepo(db);
  if (!steering.length && !steering.none) {
    const kept = await projects.settingSteering('NEATROOTS_STEERING');
    if (kept.length) {
      log.warn(
        `NEATROOTS_STEERING is empty (unset or blank): steering stays on in ${kept.join(', ')}, as it listed before; to switch it off in every project it listed, set NEATROOTS_STEERING=none`,
      );
    }
    return { on: [], claimed: [], off: [], kept, unsourced: [] };
  }
  const out = await projects.syncSettingSteering('NEATROOTS_STEERING', steering);
  if (out.on.length) log.info(`steering switched on by NEATROOTS_STEERING: ${out.on.join(', ')}`);
  if (out.claimed.length) log.info(`steering in ${out.claimed.join(', ')}, switched on by an earlier version, now follows NEATROOTS_STEERING`);
  if (out.off.length) log.warn(`steering switched off (halt rules only flag there now): ${out.off.join(', ')}, no longer in NEATROOTS_STEERING${steering.none ? ' (NEATROOTS_STEERING=none)' : ''}`);
  // On with no source and not listed (listed ones were claimed just now): an earlier version's.
  const unsourced = await projects.unsourcedSteering();
  if (unsourced.length) {
    log.warn(
      `steering stays on in ${unsourced.join(', ')}: an earlier version switched it on, not NEATROOTS_STEERING, so the setting does not switch it off; no API or CLI command switches it off either: list the project in NEATROOTS_STEERING for one start of review (the setting then takes it over), then take it out`,
    );
  }
  return { ...out, kept: [], unsourced };
}

/**
 * The sources of neatroots_dead_letters_total known at start, which the review service counts
 * from 0: the store writer's (`store.events`, `store.findings`, `store.deliveries`) and the bus's
 * of each consumer group of the pipeline that sets records aside, `bus:<topic>/<group>` (this
 * service's stores, the rule engine's `rule-engine` on the events topic, the question service's
 * `question` on the questions topic; their default group names; and every ingest replica's notes
 * group as one, `ingest-notes` on the notes topic: deadLetterMetricSource). `scoped`: the
 * distributed deployment names its Kafka groups after the topic prefix (`<prefix>.rule-engine`).
 * Not here: a dead letter's own consumer, which sets nothing aside.
 */
export function deadLetterSources(prefix: string, scoped: boolean): string[] {
  const topics = makeTopics(prefix);
  const group = (g: string) => (scoped ? `${prefix}.${g}` : g);
  const bus: [string, string][] = [
    [topics.events.name, REVIEW_GROUPS.events],
    [topics.findings.name, REVIEW_GROUPS.findings],
    [topics.deliveries.name, REVIEW_GROUPS.deliveries],
    [topics.events.name, 'rule-engine'],
    [topics.questions.name, 'question'],
    [topics.notes.name, NOTES_GROUP],
  ];
  return ['store.events', 'store.findings', 'store.deliveries', ...bus.map(([t, g]) => `bus:${t}/${group(g)}`)];
}

/** The name every ingest replica's notes group starts with (`ingest-notes-<host>-<pid>-<random>`, services/ingest). */
const NOTES_GROUP = 'ingest-notes';

/**
 * The `source` a dead letter is counted under in neatroots_dead_letters_total: its own, but for
 * an ingest replica's notes group, named anew at each start (`bus:<topic>/<prefix.>ingest-notes-
 * <host>-<pid>-<random>`), counted as `bus:<topic>/<prefix.>ingest-notes` for every replica. That
 * series is there at 0 from the start (deadLetterSources), so the first dead letter of a notes
 * group is an increase an alert sees, and restarts do not add a series each. The letter itself
 * keeps the replica's group (GET dead-letters).
 */
export function deadLetterMetricSource(source: string): string {
  const m = /^(bus:[^/]+\/(?:[^/]*\.)?ingest-notes)-[^/]+$/.exec(source);
  return m ? m[1] : source;
}
