'use strict';
// What ingest's limits cost: every item of the benchmark fleet normalised as ingest does,
// with the limits (the depth and size walk, the token and time bounds) and, as the baseline
// in the same run, without them.   node bench/limits.js [items]
const { performance } = require('node:perf_hooks');
const { DEFAULT_SPAN_LIMITS, itemToJson, normalizeItem } = require('@neatroots/spans');
const { fleet } = require('./checks');

function benchLimits({ items = 200_000, rounds = 5 } = {}) {
  const now = Date.now();
  // as JSON, the form normalizeItem takes from every source
  const raws = [];
  for (const item of fleet({ runs: Math.ceil(items / 100), perRun: 100, startMs: now })) {
    raws.push(itemToJson(item));
    if (raws.length >= items) break;
  }
  const check = { limits: DEFAULT_SPAN_LIMITS, now };
  const time = (limits) => {
    const t0 = performance.now();
    for (const raw of raws) normalizeItem(raw, limits);
    return performance.now() - t0;
  };
  // interleaved, best of `rounds` each: the machine is shared
  let base = Infinity;
  let limited = Infinity;
  for (let r = 0; r < rounds; r++) {
    base = Math.min(base, time(undefined));
    limited = Math.min(limited, time(check));
  }
  return {
    items: raws.length,
    items_per_s: Math.round(raws.length / (limited / 1000)),
    baseline_no_limits_items_per_s: Math.round(raws.length / (base / 1000)),
    extra_us_per_item: Number((((limited - base) * 1000) / raws.length).toFixed(2)),
  };
}

module.exports = { benchLimits };

if (require.main === module) {
  const items = Number(process.argv[2] ?? 200_000);
  console.log('ingest limits:', JSON.stringify(benchLimits({ items })));
}
