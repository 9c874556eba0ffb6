'use strict';
// `npm run bench`: every benchmark of the project in one run, each figure beside the
// baseline measured in the same run. The machine is shared and noisy: read the ratios.
//   node bench/run.js [--spans N] [--only engine,replay,e2e,precheck,otlp,distributed,questions,flood,sop,limits,store,review]
// (--help for the usage; review, minutes at 100,000 sessions, runs only when asked: --only review)
// Every end-to-end row is also printed as a share of a receive ceiling measured in the same run
// with the same protocol, exports and concurrency (bench/ceiling.js: a null receiver that decodes
// and counts, nothing more): the OTLP rows (OTLP/gRPC ingest, and embedded and distributed driven
// by the ceiling's own workload until everything is stored) of the null OTLP/gRPC receiver; the
// neatroots.v1 rows of a null neatroots.v1 receiver taking the same ExportRequests at the row's
// own connections and exports in flight. A baseline above 1.0 of its ceiling means the comparison
// is broken: the run then prints no table, says which, and exits 1. The flood's server memory past
// its ceiling is a failure too: the table is printed, then what failed, and the run exits 1.
// --only bus: the bus alone, packs against one record per span (bench/bus.js).
// (flood: FLOOD_SECONDS, default 60, at 64 exports in flight against `neatroots start`)
// It runs with the servers' node flags (bench/server-flags.js), as `neatroots start` does.
const { benchEngine } = require('./engine');
const { benchReplay } = require('./replay');
const { benchE2e } = require('./e2e');
const { benchDistributed } = require('./distributed');
const { benchQuestions } = require('./questions');
const { benchFlood, overCeiling } = require('./flood');
const { benchSop } = require('./sop');
const { benchReview } = require('./review');
const { benchLimits } = require('./limits');
const { benchOtlp } = require('./otlp');
const { benchCeiling, workload } = require('./ceiling');
const { benchBus } = require('./bus');
const { benchStore } = require('./store');
const { benchPrecheck } = require('./precheck');
const { cli } = require('./args');

const DEFAULT = ['engine', 'replay', 'e2e', 'precheck', 'otlp', 'distributed', 'questions', 'flood', 'sop', 'limits', 'store'];
/** What --only takes: the default set, and what runs only when asked. */
const NAMES = [...DEFAULT, 'ceiling', 'bus', 'review'];
const USAGE = {
  usage: `
usage: node bench/run.js [--spans N] [--only NAME,...]   (npm run bench: the same, after a build)
  --spans N     spans of the largest runs (default 1000000; the end-to-end rows take at most 200000)
  --only NAMES  these benches only, comma-separated (default: ${DEFAULT.join(',')});
                also: ceiling (the OTLP ceiling alone), bus (the bus alone), review (minutes)
  --help        this text`,
  options: { spans: { count: true }, only: { list: NAMES } },
};

async function main({ spans = 1_000_000, only: names = DEFAULT } = {}) {
  const only = new Set(names);
  const out = {};
  // The OTLP ceiling's workload, built once: the same exports drive every OTLP row.
  let work;
  if (only.has('e2e') || only.has('distributed') || only.has('ceiling') || only.has('otlp')) {
    work = workload({ spans: Math.min(spans, 100_000) });
    out.ceiling = await benchCeiling({ work });
    console.log('the OTLP ceiling, a null OTLP/gRPC receiver:', JSON.stringify(out.ceiling));
  }
  if (only.has('engine')) {
    out.engine = await benchEngine({ spans });
    console.log('rule engine alone:', JSON.stringify(out.engine));
  }
  if (only.has('replay')) {
    out.replay = await benchReplay({ spans: Math.min(spans, 100_000), log: (m) => console.log(`neatroots replay, ${m}`) });
    console.log('neatroots replay:', JSON.stringify(out.replay));
  }
  if (only.has('e2e')) {
    out.embedded = await benchE2e({ spans: Math.min(spans, 200_000), work, ceiling: out.ceiling });
    console.log('embedded, gRPC ingest to findings:', JSON.stringify(out.embedded));
  }
  if (only.has('precheck')) {
    out.precheck = await benchPrecheck();
    console.log('pre-call check beside the export round trip:', JSON.stringify(out.precheck));
  }
  if (only.has('otlp')) {
    out.otlp = await benchOtlp({ work });
    console.log('ingest, OTLP/HTTP beside OTLP/gRPC:', JSON.stringify(out.otlp));
  }
  if (only.has('distributed')) {
    out.distributed = await benchDistributed({ spans: Math.min(spans, 200_000), work });
    console.log('distributed, real Kafka/Redis/Postgres:', JSON.stringify(out.distributed));
    if (!out.distributed.skipped) {
      // the baseline: the same deployment writing one Kafka record per span (before packs)
      out.distributedUnpacked = await benchDistributed({ spans: Math.min(spans, 200_000), env: { NEATROOTS_BUS_PACK: 'off' }, otlp: false });
      console.log('distributed, one Kafka record per span:', JSON.stringify(out.distributedUnpacked));
    }
  }
  if (only.has('bus')) {
    out.bus = await benchBus({ spans: Math.min(spans, 200_000) });
    console.log('the bus alone, packs against one record per span:', JSON.stringify(out.bus));
  }
  if (only.has('questions')) {
    out.questions = await benchQuestions();
    console.log('questions:', JSON.stringify(out.questions));
  }
  if (only.has('flood')) {
    out.flood = await benchFlood();
    console.log('flood, embedded:', JSON.stringify(out.flood));
  }
  if (only.has('limits')) {
    out.limits = benchLimits();
    console.log('ingest limits:', JSON.stringify(out.limits));
  }
  if (only.has('sop')) {
    out.sop = await benchSop();
    console.log('sop checks:', JSON.stringify(out.sop));
  }
  if (only.has('store')) {
    // the review service's storage write alone, beside the write before it went as one batch (a statement at a time);
    // short runs, then long ones
    out.store = [await benchStore({ spans: 20_000, rounds: 4, perRun: 100 }), await benchStore({ spans: 64_000, rounds: 3, perRun: 1000 })];
    for (const r of out.store) console.log('storage write alone:', JSON.stringify(r));
  }
  if (only.has('review')) {
    // 100,000 sessions and 300,000 findings, on PGlite and (with NEATROOTS_PG_URL) Postgres: minutes
    out.review = await benchReview();
    for (const r of out.review) console.log('review:', JSON.stringify(r));
  }
  const { rows, broken, failed } = report(out);
  if (broken.length) {
    console.error(`\nno table: ${broken.length === 1 ? 'a figure came out' : 'figures came out'} above its ceiling, so the comparison is broken (not the same protocol, exports or concurrency, or the ceiling was not measured alike):`);
    for (const b of broken) console.error(`- ${b}`);
    process.exitCode = 1;
    return;
  }
  console.log('\n| what | measured | baseline in the same run |\n| --- | --- | --- |');
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
  // A figure measured right that is a failure in itself (the flood's memory past its ceiling): the table stands, the run fails.
  if (failed.length) {
    for (const f of failed) console.error(f);
    process.exitCode = 1;
  }
}

/**
 * The table's rows from the figures, each share against the ceiling of its own protocol, exports
 * and concurrency; `broken`: the figures above 1.0 of their ceiling (a broken comparison).
 */
function report(out) {
  const broken = [];
  // Figures that are failures themselves (not broken comparisons): the run exits 1 after its table.
  const failed = [];
  /** `n` spans/s and its share of `ceil` (a ceiling result: spans_per_s, protocol), named. */
  const shareOf = (ceil, label) => (n) => {
    if (!ceil?.spans_per_s) return `${n} spans/s`;
    const x = n / ceil.spans_per_s;
    if (x > 1) broken.push(`${label}: ${n} spans/s is ${x.toFixed(3)} of ${ceil.protocol} ceiling's ${ceil.spans_per_s} spans/s`);
    return `${n} spans/s (${x.toFixed(3)} of the ${ceil.protocol} ceiling)`;
  };
  const rows = [];
  /** How a ceiling was measured, for its row. */
  const how = (c) => `${c.batch ? `${c.batch} spans a request, ` : ''}${c.exports_in_flight} in flight over ${c.connections} connections`;
  if (out.ceiling) {
    const c = out.ceiling;
    rows.push([`the OTLP ceiling: a null OTLP/gRPC receiver (decodes and counts; OTel SDK spans, ${how(c)})`, `${c.spans_per_s} spans/s (1)`, 'the OTLP rows below are shares of it']);
  }
  if (out.engine) {
    rows.push(['rule engine alone, library + 20 rule checks (2 match)', `${out.engine.spans_per_s} spans/s`, `no checks: ${out.engine.baseline_spans_per_s} spans/s (x${out.engine.ratio_to_baseline} slower)`]);
    rows.push(['rule engine, runs split over 2 engines on 2 threads', `${out.engine.two_engines_two_threads_spans_per_s} spans/s`, '']);
  }
  if (out.replay) {
    const r = out.replay;
    rows.push([`neatroots replay, ${r.spans} spans, the library's ${r.rule_checks} rule checks`, `${r.replay_rule_checks_spans_per_s} spans/s`, `the rule engine alone, item by item: ${r.baseline_engine_spans_per_s} spans/s; replay's CPU x${r.ratio_to_baseline} the engine's (median of the pairs)`]);
    rows.push([
      `neatroots replay, the whole library (question checks by the fast classifier), ${r.pairs} alternated pairs at load ${r.load_average}`,
      `${r.replay_spans_per_s} spans/s (${r.replay_seconds} s), ${r.replay_cpu_s} CPU s`,
      `the hand-wired replay before the composition root: ${r.hand_wired_spans_per_s} spans/s, ${r.hand_wired_cpu_s} CPU s (replay's CPU x${r.cpu_ratio_to_hand_wired}; same findings: ${r.findings_same_as_hand_wired})`,
    ]);
  }
  if (out.embedded) {
    const e = out.embedded;
    const c = e.neatroots_v1_ceiling;
    const share = shareOf(c, 'embedded, neatroots.v1');
    if (e.otlp) {
      rows.push([
        `embedded: OTel SDK spans over OTLP/gRPC until everything is stored (the OTLP ceiling's own exports, ${how(e.otlp)})`,
        shareOf(out.ceiling ?? e.otlp_ceiling, 'embedded, OTLP/gRPC until stored')(e.otlp.stored_spans_per_s), '',
      ]);
    }
    rows.push([`the neatroots.v1 ceiling of the embedded rows: a null neatroots.v1 receiver taking their exports (500 items an export, ${how(c)})`, `${c.spans_per_s} spans/s (1)`, '']);
    rows.push(['embedded: neatroots.v1 ingest to findings (durable log bus)', share(e.spans_per_s), `ingest only: ${share(e.baseline_ingest_only_spans_per_s)}; in-memory bus: ${share(e.memory_bus_spans_per_s)}`]);
    rows.push(['embedded: neatroots.v1 ingest until everything is stored (runs, spans, findings in PGlite in the data folder)', share(e.stored_spans_per_s), `in-memory bus: ${share(e.memory_bus_stored_spans_per_s)}; windows in memory: ${share(e.memory_windows_stored_spans_per_s)}${e.memory_db_stored_spans_per_s ? `; PGlite in memory: ${share(e.memory_db_stored_spans_per_s)}` : ''}`]);
    rows.push([`embedded: receipt to finding at ${out.embedded.latency_at_spans_per_s} spans/s`, `p50 ${out.embedded.receipt_to_finding_p50_ms} ms, p99 ${out.embedded.receipt_to_finding_p99_ms} ms`, '']);
  }
  if (out.precheck) {
    const p = out.precheck;
    rows.push([`embedded: pre-call check at ${p.rate} checks/s (bar: p99 < ${p.bar_p99_ms} ms)`, `p50 ${p.precheck.p50_ms} ms, p99 ${p.precheck.p99_ms} ms`, `the export round trip at the same rate: p50 ${p.export_round_trip.p50_ms} ms, p99 ${p.export_round_trip.p99_ms} ms; the engine's part alone ${p.engine_alone.per_check_ms} ms a check`]);
  }
  if (out.otlp) {
    const o = out.otlp;
    rows.push(['ingest: OTel JS SDK spans over OTLP/gRPC (the OTLP ceiling\'s own exports; a bus nobody reads)', shareOf(out.ceiling, 'ingest, OTLP/gRPC')(o.otlp_grpc_spans_per_s), '']);
    // OTLP/HTTP: another transport than the ceiling's (HTTP/1.1 gzip can outrun gRPC), so its ratio to OTLP/gRPC, not a share
    rows.push(['ingest: the same over OTLP/HTTP protobuf / JSON', `${o.otlp_http_protobuf_spans_per_s} / ${o.otlp_http_json_spans_per_s} spans/s`, `OTLP/gRPC: ${o.otlp_grpc_spans_per_s} spans/s (x${o.otlp_http_protobuf_over_grpc} / x${o.otlp_http_json_over_grpc})`]);
    rows.push(['ingest: the same over OTLP/HTTP gzip, protobuf / JSON', `${o.otlp_http_protobuf_gzip_spans_per_s} / ${o.otlp_http_json_gzip_spans_per_s} spans/s`, `OTLP/gRPC: ${o.otlp_grpc_spans_per_s} spans/s; bytes sent ${o.otlp_http_protobuf_gzip_mb_sent} / ${o.otlp_http_json_gzip_mb_sent} MB against ${o.otlp_grpc_mb_sent} MB`]);
  }
  if (out.distributed && !out.distributed.skipped) {
    const d = out.distributed;
    const u = out.distributedUnpacked;
    if (d.otlp) {
      const c = d.otlp.otlp_ceiling;
      rows.push([
        `distributed: OTel SDK spans over OTLP/gRPC until everything is stored (the OTLP ceiling's own exports, ${how(d.otlp)}; after the rows below, into the same services)`,
        shareOf(c, 'distributed, OTLP/gRPC until stored')(d.otlp.stored_spans_per_s), `the OTLP ceiling measured beside it, the services up: ${c.spans_per_s} spans/s`,
      ]);
    }
    const c = d.neatroots_v1_ceiling;
    const share = shareOf(c, 'distributed, neatroots.v1');
    rows.push([`the neatroots.v1 ceiling of the distributed rows: a null neatroots.v1 receiver taking their exports (500 items an export, ${how(c)}), the services up`, `${c.spans_per_s} spans/s (1)`, '']);
    rows.push(['distributed: neatroots.v1 ingest to findings', share(d.spans_per_s), `ingest to Kafka (every export acknowledged): ${share(d.baseline_ingest_to_kafka_spans_per_s)}`]);
    rows.push(['distributed: neatroots.v1 ingest until everything is stored (Postgres)', share(d.stored_spans_per_s), '']);
    if (u && !u.skipped) {
      const shareU = shareOf(u.neatroots_v1_ceiling, 'distributed, one Kafka record per span');
      rows.push([
        'distributed, one Kafka record per span (NEATROOTS_BUS_PACK=off): to findings / stored',
        `${shareU(u.spans_per_s)} / ${shareU(u.stored_spans_per_s)}`,
        `ingest to Kafka: ${shareU(u.baseline_ingest_to_kafka_spans_per_s)}; its own neatroots.v1 ceiling: ${u.neatroots_v1_ceiling.spans_per_s} spans/s`,
      ]);
    }
    rows.push([`distributed: receipt to finding at ${out.distributed.latency_at_spans_per_s} spans/s`, `p50 ${out.distributed.receipt_to_finding_p50_ms} ms, p99 ${out.distributed.receipt_to_finding_p99_ms} ms`, '']);
  } else if (out.distributed) rows.push(['distributed', 'skipped', out.distributed.skipped]);
  if (out.bus) {
    const b = out.bus;
    rows.push(['the bus alone, durable log: publish / consume, packs', `${b.log_packed.publish_records_per_s} / ${b.log_packed.consume_records_per_s} records/s, ${b.log_packed.frames} frames`, `one record per span: ${b.log_one_record_per_span.publish_records_per_s} / ${b.log_one_record_per_span.consume_records_per_s} records/s, ${b.log_one_record_per_span.frames} frames`]);
    if (b.kafka_packed) {
      rows.push(['the bus alone, Kafka: publish / consume, packs', `${b.kafka_packed.publish_records_per_s} / ${b.kafka_packed.consume_records_per_s} records/s, ${b.kafka_packed.kafka_records} Kafka records`, `one record per span: ${b.kafka_one_record_per_span.publish_records_per_s} / ${b.kafka_one_record_per_span.consume_records_per_s} records/s; packs and gzip: ${b.kafka_packed_gzip.publish_records_per_s} / ${b.kafka_packed_gzip.consume_records_per_s}`]);
    }
  }
  if (out.questions) {
    for (const m of out.questions.modes) rows.push([`questions, ${m.mode}`, `${m.questions_per_s} questions/s, ${m.model_requests} model requests`, `x${m.fewer_requests_than_off} fewer requests than off`]);
    rows.push(['fast classifier (trained model)', `${out.questions.classifier.trained_model.answers_per_s} answers/s`, `heuristics: ${out.questions.classifier.library_heuristic.answers_per_s} answers/s`]);
  }
  if (out.flood) {
    const f = out.flood;
    rows.push([`flood: ${f.flood.seconds} s at ${f.flood.exports_in_flight} exports in flight`, `accepted ${f.flood.accepted_spans_per_s} spans/s, refused ${f.flood.refused_spans_per_s} spans/s; export p99 ${f.flood.accepted_export_p99_ms} ms`, `unloaded: ${f.baseline_unloaded.accepted_spans_per_s} spans/s, p99 ${f.baseline_unloaded.export_p99_ms} ms`]);
    rows.push(['flood: server memory', `peak ${f.memory.rss_peak_during_flood_mb} MB (ceiling ${f.memory.ceiling_mb} MB)`, `idle ${f.memory.rss_idle_mb} MB`]);
    const over = overCeiling(f);
    if (over) failed.push(over);
  }
  if (out.limits) {
    rows.push(['ingest: items normalised and held to the limits (NEATROOTS_MAX_*)', `${out.limits.items_per_s} items/s (+${out.limits.extra_us_per_item} µs/item)`, `without the limits: ${out.limits.baseline_no_limits_items_per_s} items/s`]);
  }
  if (out.sop) {
    rows.push(['sopops checks, tool-only procedures, no model: the checker alone', `${out.sop.tool_only.sessions_per_s} sessions/s`, '']);
    const e = out.sop.tool_only_embedded;
    if (e && !e.skipped) {
      const b = e.baseline_one_check_at_a_time;
      rows.push([
        `sopops checks, tool-only, through the embedded review service (PGlite), ${e.check_concurrency} checks at once`,
        `${e.sessions_per_s} sessions/s, ${e.statements_per_session} statements a session`,
        `one check at a time: ${b.sessions_per_s} sessions/s, ${b.statements_per_session} statements a session; receiving alone: ${e.received_per_s} sessions/s; one statement's round trip: ${e.round_trip_ms} ms`,
      ]);
    } else if (e) rows.push(['sopops checks through the embedded review service', 'skipped', e.skipped]);
    const p = out.sop.tool_only_postgres;
    if (p && !p.skipped) {
      rows.push([
        `sopops checks, tool-only, through the review service on Postgres, ${p.check_concurrency} checks at once`,
        `${p.sessions_per_s} sessions/s, ${p.statements_per_session} statements a session`,
        `receiving alone: ${p.received_per_s} sessions/s; one statement's round trip: ${p.round_trip_ms} ms`,
      ]);
    } else if (p) rows.push(['sopops checks on Postgres', 'skipped', p.skipped]);
    for (const m of out.sop.model.filter((m) => m.max_batch > 1)) {
      const base = out.sop.model.find((b) => b.max_batch === 1 && b.concurrency === m.concurrency);
      rows.push([
        `sopops checks, scripted model at ${out.sop.model_latency_ms} ms, ${m.concurrency} sessions at once`,
        `${m.sessions_per_s} sessions/s, ${m.requests_per_decision} model requests per rule decision`,
        base ? `one request per rule: ${base.sessions_per_s} sessions/s, ${base.requests_per_decision} requests per decision` : '',
      ]);
    }
  }
  for (const r of out.store ?? []) {
    for (const db of ['pglite', 'postgres']) {
      const x = r[db];
      if (x.skipped) rows.push([`storage write alone on ${db}`, 'skipped', x.skipped]);
      else rows.push([`storage write alone on ${db}, runs of ${r.spans_a_run} spans, batches of ${r.batch} (load ${r.load_before})`, `${x.new_spans_per_s} spans/s`, `the write before (a statement at a time in a transaction): ${x.old_spans_per_s} spans/s (x${x.ratio}); per CPU second x${x.cpu_ratio}`]);
    }
  }
  for (const r of out.review ?? []) {
    if (r.skipped) {
      rows.push([`review on ${r.db}`, 'skipped', r.skipped]);
      continue;
    }
    const base = `count(*) of the findings: ${r.baseline_count_findings_ms} ms, of the sessions: ${r.baseline_count_sessions_ms} ms`;
    rows.push([`review on ${r.db}, ${r.sessions} sessions, ${r.findings} findings: review queue / patterns / Insights`, `${r.review_queue_ms} / ${r.patterns_ms} / ${r.insights_ms} ms`, base]);
    rows.push([`review on ${r.db}: assigning findings to patterns`, `${r.assign_findings_per_s} findings/s (backfill); one session ${r.assign_one_session_ms} ms`, '']);
  }
  return { rows, broken, failed };
}

module.exports = { report };

// The embedded app runs in this process: with the node flags `neatroots start` runs it with.
// The command line is checked first: a bad one (or --help) ends here, before any relaunch.
const args = require.main === module ? cli(USAGE) : undefined;
if (args && require('./server-flags').asServer()) {
  main(args).catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
