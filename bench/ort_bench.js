#!/usr/bin/env node
// ort_bench.js: ONNX Runtime's side of bench/side_by_side.js, one process per
// measurement so that its peak RSS and session creation are its own.
//
//   node bench/ort_bench.js MODEL --input-dir D [--threads T] [--runs N |
//        --duration S] [--warmup W] [--output-dir O] [--json]
//
// Reads D/input_<i>.pb (TensorProto, matched to the session's inputs by
// name, else by position), creates a session with the options of
// ../shared/BENCHMARKING.md (intraOpNumThreads T, interOpNumThreads 1,
// graphOptimizationLevel 'all', sequential execution, CPU provider), makes W
// untimed runs, then N timed runs (or runs for S seconds, at least 3), and
// prints the statistics as kiln bench --json does: p50_ms, p90_ms, p99_ms,
// mean_ms, min_ms, max_ms, runs, threads, load_ms (session creation),
// first_run_ms, peak_rss_bytes (VmHWM of this node process, read after the
// runs: node's own ~40 MiB included, reported raw).  --output-dir writes
// output_<i>.pb after the runs (for the correctness check).
//
// onnxruntime-node comes from scripts/node_modules (scripts/make_reference.sh
// installs it: npm ci --ignore-scripts).  Required as a module it exports the
// TensorProto reader and writer.
'use strict';

const fs = require('fs');
const path = require('path');

// onnx elem_type -> [ort type, TypedArray, bytes]
const DTYPES = {
  1: ['float32', Float32Array, 4], 2: ['uint8', Uint8Array, 1], 3: ['int8', Int8Array, 1],
  4: ['uint16', Uint16Array, 2], 5: ['int16', Int16Array, 2], 6: ['int32', Int32Array, 4],
  7: ['int64', BigInt64Array, 8], 9: ['bool', Uint8Array, 1], 10: ['float16', Uint16Array, 2],
  11: ['float64', Float64Array, 8], 12: ['uint32', Uint32Array, 4],
  13: ['uint64', BigUint64Array, 8],
};
const ORT_TO_ONNX = {};
for (const [k, v] of Object.entries(DTYPES)) ORT_TO_ONNX[v[0]] = Number(k);

// ---- TensorProto (the fields kiln and the exporters write) ----------------
function varint(buf, p) {
  let v = 0n, shift = 0n;
  for (;;) {
    if (p.pos >= buf.length) throw new Error('truncated varint');
    const b = buf[p.pos++];
    v |= BigInt(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
    shift += 7n;
    if (shift > 63n) throw new Error('varint too long');
  }
}

// -> {name, dataType, dims, data (TypedArray)}
function parseTensor(buf, label) {
  const p = {pos: 0};
  const t = {name: '', dataType: 0, dims: [], raw: null, f32: [], f64: [], i64: [], i32: [],
             u64: []};
  const repeated = (wire, one, out) => {
    if (wire !== 2) { out.push(one()); return; }
    const n = Number(varint(buf, p)), end = p.pos + n;
    while (p.pos < end) out.push(one());
  };
  const f32 = () => { const v = buf.readFloatLE(p.pos); p.pos += 4; return v; };
  const f64 = () => { const v = buf.readDoubleLE(p.pos); p.pos += 8; return v; };
  const vi = () => varint(buf, p);
  while (p.pos < buf.length) {
    const key = Number(varint(buf, p)), field = key >>> 3, wire = key & 7;
    if (field === 1) repeated(wire, vi, t.dims);
    else if (field === 2) t.dataType = Number(vi());
    else if (field === 4) repeated(wire, f32, t.f32);
    else if (field === 5) repeated(wire, vi, t.i32);
    else if (field === 7) repeated(wire, vi, t.i64);
    else if (field === 10) repeated(wire, f64, t.f64);
    else if (field === 11) repeated(wire, vi, t.u64);
    else if (field === 8 || field === 9) {
      const n = Number(varint(buf, p));
      const b = buf.subarray(p.pos, p.pos + n);
      p.pos += n;
      if (field === 8) t.name = b.toString('utf8'); else t.raw = b;
    } else if (wire === 0) vi();
    else if (wire === 1) p.pos += 8;
    else if (wire === 5) p.pos += 4;
    else if (wire === 2) p.pos += Number(varint(buf, p));
    else throw new Error(label + ': unsupported wire type ' + wire);
  }
  const dt = DTYPES[t.dataType];
  if (!dt) throw new Error(label + ': unsupported data_type ' + t.dataType);
  const [, Ctor, size] = dt;
  const dims = t.dims.map((d) => Number(BigInt.asIntN(64, d)));
  const n = dims.reduce((a, b) => a * b, 1);
  let data;
  if (t.raw) {
    if (t.raw.length !== n * size) throw new Error(`${label}: raw_data has ${t.raw.length} bytes, expected ${n * size}`);
    const ab = new ArrayBuffer(n * size);
    new Uint8Array(ab).set(t.raw);
    data = new Ctor(ab);
  } else {
    const src = {1: t.f32, 11: t.f64, 7: t.i64, 13: t.u64, 12: t.u64}[t.dataType] || t.i32;
    if (src.length !== n) throw new Error(`${label}: has ${src.length} values, expected ${n}`);
    data = new Ctor(n);
    const big = Ctor === BigInt64Array || Ctor === BigUint64Array;
    for (let i = 0; i < n; i++) {
      const v = src[i];
      if (big) data[i] = Ctor === BigInt64Array ? BigInt.asIntN(64, BigInt(v)) : BigInt(v);
      else data[i] = typeof v === 'bigint' ? Number(BigInt.asIntN(32, v)) : v;
    }
  }
  return {name: t.name, dataType: t.dataType, dims, data};
}

function encodeVarint(v, out) {
  let x = BigInt.asUintN(64, BigInt(v));
  do {
    let b = Number(x & 0x7fn);
    x >>= 7n;
    if (x !== 0n) b |= 0x80;
    out.push(b);
  } while (x !== 0n);
}

function writeTensor(file, name, type, dims, data) {
  const dataType = ORT_TO_ONNX[type];
  if (!dataType) throw new Error(`output ${name}: unsupported type ${type}`);
  const head = [];
  for (const d of dims) { head.push(0x08); encodeVarint(d, head); }
  head.push(0x10); encodeVarint(dataType, head);
  const nb = Buffer.from(name, 'utf8');
  head.push(0x42); encodeVarint(nb.length, head);
  const raw = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const tail = [0x4a];
  encodeVarint(raw.length, tail);
  fs.writeFileSync(file, Buffer.concat([Buffer.from(head), nb, Buffer.from(tail), raw]));
}

// D/input_<i>.pb in index order
function readInputs(dir) {
  const files = fs.readdirSync(dir).map((f) => /^input_(\d+)\.pb$/.exec(f)).filter(Boolean)
    .sort((a, b) => Number(a[1]) - Number(b[1]));
  if (!files.length) throw new Error('no input_<i>.pb in ' + dir);
  return files.map((m) => parseTensor(fs.readFileSync(path.join(dir, m[0])), m[0]));
}

function percentile(sorted, p) {
  const idx = (sorted.length - 1) * p, lo = Math.floor(idx), hi = Math.ceil(idx);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (idx - lo);
}

function peakRss() {
  const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

function loadOrt() {
  const here = __dirname;
  for (const p of [path.join(here, '..', 'scripts', 'node_modules', 'onnxruntime-node'),
                   'onnxruntime-node']) {
    try { return require(p); } catch (e) { /* next */ }
  }
  throw new Error('cannot load onnxruntime-node: run scripts/make_reference.sh, or ' +
                  '(cd scripts && npm ci --ignore-scripts)');
}

function usage(msg) {
  console.error('ort_bench.js: ' + msg + '\nusage: node bench/ort_bench.js MODEL --input-dir D ' +
                '[--threads T] [--runs N | --duration S] [--warmup W] [--output-dir O] [--json]');
  process.exit(2);
}

function parseArgs(argv) {
  const a = {model: null, inputDir: null, threads: 1, runs: 0, duration: 0, warmup: 3,
             outputDir: null, json: false};
  for (let i = 0; i < argv.length; i++) {
    let s = argv[i], v = null;
    const eq = s.startsWith('--') ? s.indexOf('=') : -1;
    if (eq > 0) { v = s.slice(eq + 1); s = s.slice(0, eq); }
    const val = () => {
      if (v !== null) return v;
      if (i + 1 >= argv.length) usage(s + ' needs a value');
      return argv[++i];
    };
    const num = (min) => {
      const x = Number(val());
      if (!Number.isFinite(x) || x < min) usage(`${s} takes a number >= ${min}`);
      return x;
    };
    if (s === '--input-dir') a.inputDir = val();
    else if (s === '--output-dir') a.outputDir = val();
    else if (s === '--threads') a.threads = num(1);
    else if (s === '--runs') a.runs = num(1);
    else if (s === '--duration') a.duration = num(0.001);
    else if (s === '--warmup') a.warmup = num(0);
    else if (s === '--json') a.json = true;
    else if (s.startsWith('-')) usage('unknown option ' + s);
    else if (a.model) usage('more than one model');
    else a.model = s;
  }
  if (!a.model || !a.inputDir) usage('MODEL and --input-dir are required');
  if (!a.runs && !a.duration) a.runs = 20;
  return a;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const ort = loadOrt();
  const inputs = readInputs(a.inputDir);
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(a.model, {
    executionProviders: ['cpu'], intraOpNumThreads: a.threads, interOpNumThreads: 1,
    graphOptimizationLevel: 'all', executionMode: 'sequential', logSeverityLevel: 3,
  });
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const feeds = {};
  inputs.forEach((t, i) => {
    const name = session.inputNames.includes(t.name) ? t.name : session.inputNames[i];
    feeds[name] = new ort.Tensor(DTYPES[t.dataType][0], t.data, t.dims);
  });
  const missing = session.inputNames.filter((n) => !(n in feeds));
  if (missing.length) throw new Error('no data for input(s) ' + missing.join(', '));

  let firstMs = 0;
  for (let i = 0; i < a.warmup; i++) {
    const s = process.hrtime.bigint();
    await session.run(feeds);
    if (i === 0) firstMs = Number(process.hrtime.bigint() - s) / 1e6;
  }
  const times = [];
  const start = process.hrtime.bigint();
  for (;;) {
    const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
    if (a.runs ? times.length >= a.runs : times.length >= 3 && elapsed >= a.duration) break;
    const s = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - s) / 1e6);
  }
  const sorted = times.slice().sort((x, y) => x - y);
  const sum = times.reduce((x, y) => x + y, 0);
  if (a.outputDir) {
    const out = await session.run(feeds);
    fs.mkdirSync(a.outputDir, {recursive: true});
    session.outputNames.forEach((name, i) => writeTensor(path.join(a.outputDir, `output_${i}.pb`),
      name, out[name].type, out[name].dims, out[name].data));
  }
  const res = {
    runtime: 'onnxruntime-node', model: a.model, threads: a.threads, runs: times.length,
    warmup: a.warmup, min_ms: sorted[0], mean_ms: sum / times.length,
    p50_ms: percentile(sorted, 0.5), p90_ms: percentile(sorted, 0.9),
    p99_ms: percentile(sorted, 0.99), max_ms: sorted[sorted.length - 1],
    throughput_qps: times.length / (sum / 1e3), load_ms: loadMs, first_run_ms: firstMs,
    peak_rss_bytes: peakRss(),
  };
  if (a.json) console.log(JSON.stringify(res));
  else {
    console.log(`${a.model}: ort, ${a.threads} thread(s), ${res.runs} runs\n` +
                `latency (ms): min ${res.min_ms.toFixed(3)}  mean ${res.mean_ms.toFixed(3)}  ` +
                `median ${res.p50_ms.toFixed(3)}  p90 ${res.p90_ms.toFixed(3)}  ` +
                `p99 ${res.p99_ms.toFixed(3)}  max ${res.max_ms.toFixed(3)}\n` +
                `session creation ${loadMs.toFixed(1)} ms, peak RSS ` +
                `${(res.peak_rss_bytes / 1048576).toFixed(1)} MiB`);
  }
}

module.exports = {parseTensor, readInputs, DTYPES};

if (require.main === module) {
  main().catch((e) => {
    console.error('ort_bench.js: ' + (e && e.message ? e.message : e));
    process.exit(1);
  });
}
