// The dashboard's pure functions under node (run by serve/tests/serve_dashboard.sh
// when node is installed): the Prometheus text parser and histogram_quantile
// against values worked out by hand from Prometheus' definition.
"use strict";
const d = require(process.argv[2]);
let failed = 0;
function eq(name, got, want) {
  const ok = typeof want === "number" && isNaN(want) ? isNaN(got)
    : Math.abs(got - want) <= 1e-12 * Math.max(1, Math.abs(want)) || got === want;
  if (!ok) { failed++; console.error("dashboard_js: " + name + ": got " + got + ", want " + want); }
}
const text = [
  "# HELP kiln_requests_total requests",
  "# TYPE kiln_requests_total counter",
  'kiln_requests_total{model="m",version="1",outcome="success"} 40',
  'kiln_requests_total{model="a\\"b\\\\c",version="1",outcome="success"} 4 1700000000',
  'kiln_queue_depth{model="m"} 3',
  "not a metric line {",
  'kiln_memory_bytes{kind="rss"} +Inf',
].join("\n");
const s = d.parseProm(text);
eq("samples", s.length, 4);
eq("unreadable lines", s.bad, 1);
eq("escaped label", s[1].labels.model === 'a"b\\c' ? 1 : 0, 1);
eq("timestamp ignored", s[1].value, 4);
eq("+Inf", s[3].value, Infinity);
// 10 in (0, 1 ms], 20 in (1, 2], 10 in (2, 4], none above
const b = [{ le: 0.001, count: 10 }, { le: 0.002, count: 30 }, { le: 0.004, count: 40 },
           { le: Infinity, count: 40 }];
eq("p50", d.histogramQuantile(0.5, b), 0.0015);
eq("p90", d.histogramQuantile(0.9, b), 0.0032);
eq("p99", d.histogramQuantile(0.99, b), 0.00392);
eq("p25 in the first bucket, from 0", d.histogramQuantile(0.25, b), 0.001);
eq("p10", d.histogramQuantile(0.1, b), 0.0004);
eq("unsorted buckets", d.histogramQuantile(0.5, b.slice().reverse()), 0.0015);
eq("rank in +Inf: the highest finite bound",
   d.histogramQuantile(0.99, [{ le: 1, count: 1 }, { le: Infinity, count: 100 }]), 1);
eq("no observations", d.histogramQuantile(0.5, [{ le: 1, count: 0 }, { le: Infinity, count: 0 }]), NaN);
eq("no +Inf bucket", d.histogramQuantile(0.5, [{ le: 1, count: 3 }]), NaN);
// deltas between two scrapes, and a counter reset
const h1 = { buckets: { "0.001": 5, "0.002": 5, "Infinity": 5 }, sum: 0.004, count: 5 };
const h2 = { buckets: { "0.001": 5, "0.002": 15, "Infinity": 15 }, sum: 0.02, count: 15 };
const dl = d.histDelta(h1, h2);
eq("delta p50 within (1, 2] ms", d.histogramQuantile(0.5, dl.buckets), 0.0015);
eq("delta count", dl.count, 10);
eq("reset counts from zero", d.histDelta(h2, h1).count, 5);
if (failed) process.exit(1);
console.log("dashboard_js: ok (parser, histogram_quantile, deltas)");
