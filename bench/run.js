'use strict';
// `npm run bench`: every benchmark of the project in one run, each figure beside the
// baseline measured in the same run. The machine is shared and noisy: read the ratios.
//   node bench/run.js [--spans N] [--only engine,e2e,otlp,distributed,questions,flood,sop,limits,review]
// (review, minutes at 100,000 sessions, runs only when asked: --only review)
// (flood: FLOOD_SECONDS, default 60, at 64 exports in flight against `neatroots start`)
const { benchEngine } = require('./engine');
const { benchE2e } = require('./e2e');
const { benchDistributed } = require('./distributed');
const { benchQuestions } = require('./questions');
const { benchFlood } = require('./flood');
const { benchSop } = require('./sop');
const { benchReview } = require('./review');
const { benchLimits } = require('./limits');
const { benchOtlp } = require('./otlp');

function arg(name, def) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : def;
}

async function main() {
  const spans = Number(arg('spans', 1_000_000));
  const only = new Set(String(arg('only', 'engine,e2e,otlp,distributed,questions,flood,sop,limits')).split(','));
  const out = {};
  if (only.has('engine')) {
    out.engine = await benchEngine({ spans });
    console.log('rule engine alone:', JSON.stringify(out.engine));
  }
  if (only.has('e2e')) {
    out.embedded = await benchE2e({ spans: Math.min(spans, 200_000) });
    console.log('embedded, gRPC ingest to findings:', JSON.stringify(out.embedded));
  }
  if (only.has('otlp')) {
    out.otlp = await benchOtlp({ spans: Math.min(spans, 100_000) });
    console.log('ingest, OTLP/HTTP beside OTLP/gRPC:', JSON.stringify(out.otlp));
  }
  if (only.has('distributed')) {
    out.distributed = await benchDistributed({ spans: Math.min(spans, 200_000) });
    console.log('distributed, real Kafka/Redis/Postgres:', JSON.stringify(out.distributed));
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
  if (only.has('review')) {
    // 100,000 sessions and 300,000 findings, on PGlite and (with NEATROOTS_PG_URL) Postgres: minutes
    out.review = await benchReview();
    for (const r of out.review) console.log('review:', JSON.stringify(r));
  }
  const rows = [];
  if (out.engine) {
    rows.push(['rule engine alone, library + 20 rule checks (2 match)', `${out.engine.spans_per_s} spans/s`, `no checks: ${out.engine.baseline_spans_per_s} spans/s (x${out.engine.ratio_to_baseline} slower)`]);
    rows.push(['rule engine, runs split over 2 engines on 2 threads', `${out.engine.two_engines_two_threads_spans_per_s} spans/s`, '']);
  }
  if (out.embedded) {
    rows.push(['embedded: gRPC ingest to findings (durable log bus)', `${out.embedded.spans_per_s} spans/s`, `ingest only: ${out.embedded.baseline_ingest_only_spans_per_s} spans/s; in-memory bus: ${out.embedded.memory_bus_spans_per_s} spans/s`]);
    rows.push([`embedded: receipt to finding at ${out.embedded.latency_at_spans_per_s} spans/s`, `p50 ${out.embedded.receipt_to_finding_p50_ms} ms, p99 ${out.embedded.receipt_to_finding_p99_ms} ms`, '']);
  }
  if (out.otlp) {
    const o = out.otlp;
    rows.push(['ingest: OTel JS SDK spans over OTLP/gRPC', `${o.otlp_grpc_spans_per_s} spans/s`, '']);
    rows.push(['ingest: the same over OTLP/HTTP protobuf / JSON', `${o.otlp_http_protobuf_spans_per_s} / ${o.otlp_http_json_spans_per_s} spans/s`, `OTLP/gRPC: ${o.otlp_grpc_spans_per_s} spans/s (x${o.otlp_http_protobuf_over_grpc} / x${o.otlp_http_json_over_grpc})`]);
    rows.push(['ingest: the same over OTLP/HTTP gzip, protobuf / JSON', `${o.otlp_http_protobuf_gzip_spans_per_s} / ${o.otlp_http_json_gzip_spans_per_s} spans/s`, `OTLP/gRPC: ${o.otlp_grpc_spans_per_s} spans/s; bytes sent ${o.otlp_http_protobuf_gzip_mb_sent} / ${o.otlp_http_json_gzip_mb_sent} MB against ${o.otlp_grpc_mb_sent} MB`]);
  }
  if (out.distributed && !out.distributed.skipped) {
    rows.push(['distributed: gRPC ingest to findings', `${out.distributed.spans_per_s} spans/s`, `ingest to Kafka (every export acknowledged): ${out.distributed.baseline_ingest_to_kafka_spans_per_s} spans/s`]);
    rows.push([`distributed: receipt to finding at ${out.distributed.latency_at_spans_per_s} spans/s`, `p50 ${out.distributed.receipt_to_finding_p50_ms} ms, p99 ${out.distributed.receipt_to_finding_p99_ms} ms`, '']);
  } else if (out.distributed) rows.push(['distributed', 'skipped', out.distributed.skipped]);
  if (out.questions) {
    for (const m of out.questions.modes) rows.push([`questions, ${m.mode}`, `${m.questions_per_s} questions/s, ${m.model_requests} model requests`, `x${m.fewer_requests_than_off} fewer requests than off`]);
    rows.push(['fast classifier (trained model)', `${out.questions.classifier.trained_model.answers_per_s} answers/s`, `heuristics: ${out.questions.classifier.library_heuristic.answers_per_s} answers/s`]);
  }
  if (out.flood) {
    const f = out.flood;
    rows.push([`flood: ${f.flood.seconds} s at ${f.flood.exports_in_flight} exports in flight`, `accepted ${f.flood.accepted_spans_per_s} spans/s, refused ${f.flood.refused_spans_per_s} spans/s; export p99 ${f.flood.accepted_export_p99_ms} ms`, `unloaded: ${f.baseline_unloaded.accepted_spans_per_s} spans/s, p99 ${f.baseline_unloaded.export_p99_ms} ms`]);
    rows.push(['flood: server memory', `peak ${f.memory.rss_peak_during_flood_mb} MB (ceiling ${f.memory.ceiling_mb} MB)`, `idle ${f.memory.rss_idle_mb} MB`]);
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
  for (const r of out.review ?? []) {
    if (r.skipped) {
      rows.push([`review on ${r.db}`, 'skipped', r.skipped]);
      continue;
    }
    const base = `count(*) of the findings: ${r.baseline_count_findings_ms} ms, of the sessions: ${r.baseline_count_sessions_ms} ms`;
    rows.push([`review on ${r.db}, ${r.sessions} sessions, ${r.findings} findings: review queue / patterns / Insights`, `${r.review_queue_ms} / ${r.patterns_ms} / ${r.insights_ms} ms`, base]);
    rows.push([`review on ${r.db}: assigning findings to patterns`, `${r.assign_findings_per_s} findings/s (backfill); one session ${r.assign_one_session_ms} ms`, '']);
  }
  console.log('\n| what | measured | baseline in the same run |\n| --- | --- | --- |');
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
