import type { ServiceModule } from '@neatroots/ports';
import { makeTopics } from '@neatroots/messages';
import type { KeyGrant } from './auth';
import { startIngest, type IngestOptions, type PrecheckPort } from './ingest';
import { cgroupMemory, constrainedMemory, memoryCeilingMb } from './pressure';

/** The configuration ingest reads besides where it listens. */
export interface IngestConfig {
  NEATROOTS_TOPIC_PREFIX: string;
  NEATROOTS_PRECHECK_FAIL_CLOSED?: string[];
  NEATROOTS_PRECHECK_TIMEOUT_MS?: number;
  NEATROOTS_MAX_BACKLOG: number;
  NEATROOTS_MEMORY_CEILING_MB?: number;
}

/** Where ingest listens and what it accepts: everything of IngestOptions but its drivers. */
export type IngestListen = Omit<IngestOptions, 'bus' | 'resolveKey' | 'topics'>;

interface Links {
  /**
   * The review service answers which project an API key opens, and its scope. Ingest takes a
   * key of either scope: `ingest` is what agents are given (not the whole project's notes
   * stream), `api` (a full key) may do what it may and more.
   */
  review: { resolveKey(key: string): Promise<{ project: string; scope: string } | null> };
  /**
   * The rule engine answers pre-call checks: the one of this process (the embedded default),
   * or over gRPC at NEATROOTS_RULE_ENGINE_ADDR (the distributed deployment's root links it).
   */
  'rule-engine': Pick<PrecheckPort, 'precheck' | 'haltingTools'>;
}

/**
 * Ingest as a module: OTLP/gRPC and the neatroots gRPC API in, the bus out. An edge: it is
 * the first to stop accepting on shutdown. `listen` reads the listen options from the
 * configuration (the composition root's, shared with the embedded default).
 */
export function ingestModule<C extends IngestConfig>(listen: (config: C) => IngestListen): ServiceModule<C> {
  return {
    name: 'ingest',
    needs: ['bus', 'review'],
    edge: true,
    async start(ctx) {
      const review = await ctx.link<Links['review']>('review');
      // Pre-call checks need a rule engine, here or linked; without one they answer UNAVAILABLE.
      const engine = await ctx.link<Links['rule-engine']>('rule-engine').catch((err: Error) => {
        if (/no service of this process provides it/.test(err.message)) return undefined;
        throw err;
      });
      const failClosed = new Set(ctx.config.NEATROOTS_PRECHECK_FAIL_CLOSED ?? []);
      const topics = makeTopics(ctx.config.NEATROOTS_TOPIC_PREFIX);
      const bus = ctx.platform.bus();
      const backlog = bus.backlog ? () => bus.backlog!(topics.events.name) : undefined;
      const limit = constrainedMemory();
      const ceiling = memoryCeilingMb(ctx.config.NEATROOTS_MEMORY_CEILING_MB, limit);
      // The container's limit counts every process in it (`neatroots serve`'s launcher too): its
      // memory in use is what is measured against it, where the cgroup says it.
      const container = ceiling.from === 'container' ? cgroupMemory(limit) : undefined;
      if (ceiling.from === 'container')
        ctx.log.info(
          `memory ceiling ${ceiling.mb} MB, the container's memory limit (NEATROOTS_MEMORY_CEILING_MB sets another): exports are refused past 90% of it, ` +
            (container ? "of the container's memory in use" : "of this process's resident memory (the container's memory in use cannot be read)"),
        );
      // A ceiling the process is near before it took anything: every export would be refused.
      const used = container?.();
      const atStartMb = Math.round((used ?? process.memoryUsage.rss()) / 1048576);
      if (ceiling.mb > 0 && atStartMb > ceiling.mb * 0.8) {
        const how = ceiling.from === 'container' ? "raise the container's memory limit or set NEATROOTS_MEMORY_CEILING_MB" : 'raise NEATROOTS_MEMORY_CEILING_MB';
        ctx.log.warn(`${used !== undefined ? "the container's memory in use" : 'resident memory'} is already ${atStartMb} MB of the ${ceiling.mb} MB memory ceiling as ingest starts: exports will be refused once it passes ${Math.floor(ceiling.mb * 0.9)} MB; ${how}`);
      }
      const ingest = await startIngest({
        bus,
        resolveKey: cachedKeyLookup(async (key) => {
          const grant = await review.resolveKey(key);
          // A scope ingest does not know is taken as the narrowest it does, as the api takes it.
          return grant?.project ? { project: grant.project, scope: grant.scope === 'api' ? 'api' : 'ingest' } : null;
        }),
        topics,
        logger: ctx.log,
        // Back-pressure: refuse exports while the pipeline is behind or memory is short.
        pressure: { backlog, maxBacklog: ctx.config.NEATROOTS_MAX_BACKLOG, memoryCeilingBytes: ceiling.mb * 1048576, ...(container ? { container } : {}) },
        ...listen(ctx.config),
        ...(engine
          ? {
              precheck: {
                precheck: (req) => engine.precheck(req),
                haltingTools: (project, workflow) => engine.haltingTools(project, workflow),
                failClosed: (project) => failClosed.has(project),
                timeoutMs: ctx.config.NEATROOTS_PRECHECK_TIMEOUT_MS ?? 50,
                isTimeout: (err) => (err as Error)?.name === 'PrecheckTimeoutError',
                isUnavailable: (err) => (err as Error)?.name === 'RuleEngineUnavailableError',
              },
            }
          : {}),
      });
      ctx.setHealth('neatroots.v1.Ingest', true);
      ctx.setHealth('opentelemetry.proto.collector.trace.v1.TraceService', true);
      // Ingest's counters, as Prometheus metrics. The refusals an operator looks for first start
      // at 0, so that the first of them is an increase.
      for (const code of ['UNAUTHENTICATED', 'PERMISSION_DENIED', 'INVALID_ARGUMENT', 'RESOURCE_EXHAUSTED', 'UNAVAILABLE', 'INTERNAL']) ctx.metrics.ingestCallsFailed.inc({ code }, 0);
      const last = {
        received: 0, accepted: 0, published: 0, rejected: {} as Record<string, number>, refused: {} as Record<string, number>, failed: {} as Record<string, number>, notes: {} as Record<string, number>,
      };
      const sync = setInterval(() => {
        const m = ingest.metrics;
        ctx.metrics.spansReceived.inc({ source: 'all' }, m.items_received - last.received);
        ctx.metrics.spansAccepted.inc({ source: 'all' }, m.items_accepted - last.accepted);
        ctx.metrics.published.inc({ topic: topics.events.name }, m.records_published - last.published);
        for (const [reason, n] of Object.entries(m.items_rejected)) {
          const d = n - (last.rejected[reason] ?? 0);
          if (d > 0) ctx.metrics.spansRejected.inc({ source: 'all', reason }, d);
        }
        last.received = m.items_received;
        last.accepted = m.items_accepted;
        last.published = m.records_published;
        last.rejected = { ...m.items_rejected };
        for (const [reason, n] of Object.entries(m.exports_refused)) {
          const d = n - (last.refused[reason] ?? 0);
          if (d > 0) ctx.metrics.spansRefused.inc({ reason }, d);
        }
        last.refused = { ...m.exports_refused };
        for (const [code, n] of Object.entries(m.calls_failed)) {
          const d = n - (last.failed[code] ?? 0);
          if (d > 0) ctx.metrics.ingestCallsFailed.inc({ code }, d);
        }
        last.failed = { ...m.calls_failed };
        const notes: Record<string, number> = {
          received: m.notes_received, stream: m.notes_delivered.stream, piggyback: m.notes_delivered.piggyback,
          dropped: m.notes_dropped, grouped: m.notes_grouped,
        };
        for (const [outcome, n] of Object.entries(notes)) {
          const d = n - (last.notes[outcome] ?? 0);
          if (d > 0) ctx.metrics.notes.inc({ outcome }, d);
        }
        last.notes = notes;
        if (backlog) ctx.metrics.busBacklog.set({ topic: topics.events.name }, backlog());
      }, 1000);
      sync.unref();
      return {
        provides: { ingest },
        ports: { otlp: ingest.otlpPort, grpc: ingest.grpcPort, ...(ingest.otlpHttpPort !== undefined ? { otlpHttp: ingest.otlpHttpPort } : {}) },
        stop: async () => {
          clearInterval(sync);
          await ingest.close();
        },
      };
    },
  };
}

/**
 * An API-key lookup with a cache: known keys (their project and scope) are trusted for a minute
 * and unknown ones asked again after a few seconds, so an export never waits behind the review
 * service on its hot path once its key was seen.
 */
export function cachedKeyLookup(resolve: (key: string) => Promise<KeyGrant | null>): (key: string) => Promise<KeyGrant | undefined> {
  const cache = new Map<string, { grant: KeyGrant | null; at: number }>();
  return async (key) => {
    const hit = cache.get(key);
    if (hit && Date.now() - hit.at < (hit.grant ? 60_000 : 5_000)) return hit.grant ?? undefined;
    const grant = await resolve(key);
    if (cache.size > 10_000) cache.clear();
    cache.set(key, { grant, at: Date.now() });
    return grant ?? undefined;
  };
}
