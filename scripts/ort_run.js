#!/usr/bin/env node
// ort_run.js: run an ONNX model with ONNX Runtime (onnxruntime-node, CPU) on
// input_<i>.pb files (ONNX test-data layout) and write output_<i>.pb, or time it.
//
// Setup (once):  cd scripts && npm ci --ignore-scripts     (or npm install --ignore-scripts)
//
// Usage:
//   node scripts/ort_run.js MODEL [--input-dir D] [--output-dir O] [--threads T]
//                           [--bench N] [--warmup W] [--opt all|extended|basic|disabled]
//                           [--save-optimized PATH] [--json] [--quiet]
//
//   MODEL is a .onnx file, a folder holding model.onnx, or a model name looked
//   up as $KILN_CACHE/<name>/model.onnx (default cache ~/.cache/kiln/models).
//   --input-dir defaults to <model folder>/test_data_set_0.
//   Inputs are matched to the model's inputs by the TensorProto name when it
//   names one, otherwise by position (input_0 is the first graph input).
//   Outputs are written as output_<i>.pb (TensorProto, raw_data) in the
//   session's output order.  Without --output-dir and --bench, a summary of the
//   outputs is printed.
//   --bench N: W warm-up runs (default 3), then N timed runs; prints p50 (and
//   min/mean/p90) in ms, and the session-creation time.
//
// Session options follow docs BENCHMARKING.md: intraOpNumThreads = --threads
// (default 1), interOpNumThreads 1, graphOptimizationLevel 'all' (unless
// --opt), executionMode 'sequential', CPU execution provider.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');

let ort;
try {
  ort = require('onnxruntime-node');
} catch (e) {
  console.error('ort_run.js: cannot load onnxruntime-node (' + e.message + ')\n' +
                'Install it: cd ' + __dirname + ' && npm ci --ignore-scripts');
  process.exit(2);
}

// ---------------------------------------------------------------------------
// ONNX data types
// ---------------------------------------------------------------------------
// onnx elem_type -> [ort type name, TypedArray, bytes per element]
const DTYPES = {
  1: ['float32', Float32Array, 4],
  2: ['uint8', Uint8Array, 1],
  3: ['int8', Int8Array, 1],
  4: ['uint16', Uint16Array, 2],
  5: ['int16', Int16Array, 2],
  6: ['int32', Int32Array, 4],
  7: ['int64', BigInt64Array, 8],
  9: ['bool', Uint8Array, 1],
  10: ['float16', Uint16Array, 2],
  11: ['float64', Float64Array, 8],
  12: ['uint32', Uint32Array, 4],
  13: ['uint64', BigUint64Array, 8],
};
const ORT_TO_ONNX = {};
for (const [k, v] of Object.entries(DTYPES)) ORT_TO_ONNX[v[0]] = Number(k);

// ---------------------------------------------------------------------------
// Minimal protobuf reader/writer for onnx.TensorProto
// ---------------------------------------------------------------------------
class Reader {
  constructor(buf, start = 0, end = buf.length) {
    this.buf = buf;
    this.pos = start;
    this.end = end;
  }
  eof() { return this.pos >= this.end; }
  varint() { // BigInt, unsigned 64-bit
    let result = 0n, shift = 0n;
    for (;;) {
      if (this.pos >= this.end) throw new Error('truncated varint');
      const b = this.buf[this.pos++];
      result |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
      shift += 7n;
      if (shift > 63n) throw new Error('varint too long');
    }
    return result & 0xffffffffffffffffn;
  }
  num() { // small non-negative varint as Number
    const v = this.varint();
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error('varint too large');
    return Number(v);
  }
  bytes() {
    const n = this.num();
    if (this.pos + n > this.end) throw new Error('truncated length-delimited field');
    const s = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return s;
  }
  skip(wire) {
    switch (wire) {
      case 0: this.varint(); break;
      case 1: this.pos += 8; break;
      case 2: this.bytes(); break;
      case 5: this.pos += 4; break;
      default: throw new Error('unsupported wire type ' + wire);
    }
    if (this.pos > this.end) throw new Error('truncated field');
  }
}

const toSigned64 = (u) => BigInt.asIntN(64, u);

// Reads a repeated numeric field, packed (wire 2) or not.  kind: 'varint' | 'f32' | 'f64'
function readRepeated(r, wire, kind, out) {
  const one = (rr) => {
    if (kind === 'varint') return rr.varint();
    const dv = new DataView(rr.buf.buffer, rr.buf.byteOffset + rr.pos, kind === 'f32' ? 4 : 8);
    rr.pos += kind === 'f32' ? 4 : 8;
    if (rr.pos > rr.end) throw new Error('truncated fixed field');
    return kind === 'f32' ? dv.getFloat32(0, true) : dv.getFloat64(0, true);
  };
  if (wire === 2) {
    const b = r.bytes();
    const rr = new Reader(b);
    while (!rr.eof()) out.push(one(rr));
  } else {
    out.push(one(r));
  }
}

function parseTensorProto(buf) {
  const r = new Reader(buf);
  const t = {dims: [], dataType: 0, name: '', raw: null, floatData: [], int32Data: [],
             int64Data: [], doubleData: [], uint64Data: [], hasStrings: false, external: false};
  while (!r.eof()) {
    const key = r.num();
    const field = key >>> 3, wire = key & 7;
    switch (field) {
      case 1: { const d = []; readRepeated(r, wire, 'varint', d);
                for (const v of d) t.dims.push(Number(toSigned64(v))); break; }
      case 2: t.dataType = r.num(); break;
      case 4: readRepeated(r, wire, 'f32', t.floatData); break;
      case 5: readRepeated(r, wire, 'varint', t.int32Data); break;
      case 6: r.bytes(); t.hasStrings = true; break;
      case 7: readRepeated(r, wire, 'varint', t.int64Data); break;
      case 8: t.name = Buffer.from(r.bytes()).toString('utf8'); break;
      case 9: t.raw = r.bytes(); break;
      case 10: readRepeated(r, wire, 'f64', t.doubleData); break;
      case 11: readRepeated(r, wire, 'varint', t.uint64Data); break;
      case 14: { const loc = r.num(); if (loc === 1) t.external = true; break; }
      default: r.skip(wire);
    }
  }
  return t;
}

// TensorProto -> ort.Tensor
function tensorFromProto(t, label) {
  const dt = DTYPES[t.dataType];
  if (!dt) throw new Error(label + ': unsupported data_type ' + t.dataType);
  if (t.hasStrings || t.external) throw new Error(label + ': string / external data not supported');
  const [ortType, Ctor, size] = dt;
  const n = t.dims.reduce((a, b) => a * b, 1);
  let data;
  if (t.raw) {
    if (t.raw.length !== n * size) {
      throw new Error(`${label}: raw_data has ${t.raw.length} bytes, expected ${n * size}`);
    }
    const ab = new ArrayBuffer(n * size); // aligned copy
    new Uint8Array(ab).set(t.raw);
    data = new Ctor(ab);
  } else {
    data = new Ctor(n);
    let src;
    switch (t.dataType) {
      case 1: src = t.floatData; break;
      case 11: src = t.doubleData; break;
      case 7: src = t.int64Data.map(toSigned64); break;
      case 12: case 13: src = t.uint64Data; break;
      default: src = t.int32Data.map((v) => Number(BigInt.asIntN(32, v)));
    }
    if (src.length !== n) throw new Error(`${label}: has ${src.length} values, expected ${n}`);
    for (let i = 0; i < n; i++) {
      const v = src[i];
      data[i] = (Ctor === BigInt64Array || Ctor === BigUint64Array)
        ? (typeof v === 'bigint' ? v : BigInt(v))
        : (typeof v === 'bigint' ? Number(v) : v);
    }
  }
  return new ort.Tensor(ortType, data, t.dims);
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

// ort.Tensor -> serialized TensorProto (dims, data_type, name, raw_data)
function tensorToProto(tensor, name) {
  const dataType = ORT_TO_ONNX[tensor.type];
  if (!dataType) throw new Error('output ' + name + ': unsupported type ' + tensor.type);
  const head = [];
  for (const d of tensor.dims) { head.push(0x08); encodeVarint(d, head); }
  head.push(0x10); encodeVarint(dataType, head);
  const nameBytes = Buffer.from(name, 'utf8');
  head.push(0x42); encodeVarint(nameBytes.length, head);
  const data = tensor.data;
  const raw = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const tail = [0x4a];
  encodeVarint(raw.length, tail);
  return Buffer.concat([Buffer.from(head), nameBytes, Buffer.from(tail), raw]);
}

// ---------------------------------------------------------------------------
// CLI
// ---------------------------------------------------------------------------
function usage(msg) {
  if (msg) console.error('ort_run.js: ' + msg);
  console.error('usage: node ort_run.js MODEL [--input-dir D] [--output-dir O] [--threads T]\n' +
                '                       [--bench N] [--warmup W] [--opt all|extended|basic|disabled]\n' +
                '                       [--save-optimized PATH] [--json] [--quiet]');
  process.exit(2);
}

function parseArgs(argv) {
  const a = {model: null, inputDir: null, outputDir: null, threads: 1, bench: 0, warmup: 3,
             opt: 'all', saveOptimized: null, json: false, quiet: false};
  for (let i = 0; i < argv.length; i++) {
    const s = argv[i];
    const val = () => { if (i + 1 >= argv.length) usage(s + ' needs a value'); return argv[++i]; };
    const int = () => { const v = Number(val()); if (!Number.isInteger(v) || v < 0) usage(s + ': bad number'); return v; };
    switch (s) {
      case '--input-dir': a.inputDir = val(); break;
      case '--output-dir': a.outputDir = val(); break;
      case '--threads': case '-t': a.threads = int(); break;
      case '--bench': a.bench = int(); break;
      case '--warmup': a.warmup = int(); break;
      case '--opt': a.opt = val(); break;
      case '--save-optimized': a.saveOptimized = val(); break;
      case '--json': a.json = true; break;
      case '--quiet': case '-q': a.quiet = true; break;
      case '-h': case '--help': usage();
      // fallthrough
      default:
        if (s.startsWith('-')) usage('unknown option ' + s);
        if (a.model) usage('more than one model given');
        a.model = s;
    }
  }
  if (!a.model) usage('no model given');
  if (!['all', 'extended', 'basic', 'disabled', 'layout'].includes(a.opt)) usage('bad --opt ' + a.opt);
  if (a.threads < 1) usage('--threads must be >= 1');
  return a;
}

function cacheDir() {
  return process.env.KILN_CACHE || path.join(os.homedir(), '.cache', 'kiln', 'models');
}

function resolveModel(m) {
  if (fs.existsSync(m)) {
    if (fs.statSync(m).isDirectory()) return path.join(m, 'model.onnx');
    return m;
  }
  const c = path.join(cacheDir(), m, 'model.onnx');
  if (fs.existsSync(c)) return c;
  usage('model not found: ' + m + ' (nor ' + c + ')');
}

function listIndexed(dir, prefix) {
  const re = new RegExp('^' + prefix + '_(\\d+)\\.pb$');
  return fs.readdirSync(dir)
    .map((f) => { const m = re.exec(f); return m ? [Number(m[1]), f] : null; })
    .filter(Boolean)
    .sort((x, y) => x[0] - y[0]);
}

function shapeStr(d) { return d.join('x') || 'scalar'; }

function halfToFloat(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
  if (e === 0) return s * f * 2 ** -24;
  if (e === 31) return f ? NaN : s * Infinity;
  return s * (1 + f / 1024) * 2 ** (e - 15);
}

function summarize(name, t) {
  const d = t.type === 'float16' && t.data instanceof Uint16Array
    ? Array.from(t.data, halfToFloat) : t.data;
  let min = Infinity, max = -Infinity, sum = 0;
  const n = d.length;
  for (let i = 0; i < n; i++) {
    const v = Number(d[i]);
    if (v < min) min = v;
    if (v > max) max = v;
    sum += v;
  }
  return `${name}: ${t.type} ${shapeStr(t.dims)} min ${min.toPrecision(6)} max ${max.toPrecision(6)} ` +
         `mean ${(sum / Math.max(n, 1)).toPrecision(6)}`;
}

function percentile(sorted, p) {
  if (!sorted.length) return NaN;
  const idx = (sorted.length - 1) * p;
  const lo = Math.floor(idx), hi = Math.ceil(idx);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (idx - lo);
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const modelPath = resolveModel(a.model);
  const inputDir = a.inputDir || path.join(path.dirname(modelPath), 'test_data_set_0');
  if (!fs.existsSync(inputDir)) usage('input dir not found: ' + inputDir);

  const opts = {
    executionProviders: ['cpu'],
    intraOpNumThreads: a.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: a.opt,
    executionMode: 'sequential',
    logSeverityLevel: 3,
  };
  if (a.saveOptimized) opts.optimizedModelFilePath = a.saveOptimized;

  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(modelPath, opts);
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;

  const files = listIndexed(inputDir, 'input');
  if (!files.length) usage('no input_<i>.pb in ' + inputDir);
  const feeds = {};
  const used = new Set();
  const protos = files.map(([i, f]) => [i, f, parseTensorProto(fs.readFileSync(path.join(inputDir, f)))]);
  for (const [i, f, p] of protos) {
    let name = session.inputNames.includes(p.name) && !used.has(p.name) ? p.name : null;
    if (!name) {
      if (i >= session.inputNames.length) throw new Error(`${f}: model has only ${session.inputNames.length} inputs`);
      name = session.inputNames[i];
    }
    used.add(name);
    feeds[name] = tensorFromProto(p, f);
  }
  const missing = session.inputNames.filter((n) => !(n in feeds));
  if (missing.length) throw new Error('no data for input(s): ' + missing.join(', '));

  if (a.bench > 0) {
    for (let i = 0; i < a.warmup; i++) await session.run(feeds);
    const times = [];
    for (let i = 0; i < a.bench; i++) {
      const s = process.hrtime.bigint();
      await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - s) / 1e6);
    }
    const sorted = times.slice().sort((x, y) => x - y);
    const res = {
      runtime: 'ort', ort_version: ort.env.versions ? ort.env.versions.common : undefined,
      model: modelPath, inputs: Object.fromEntries(Object.entries(feeds).map(([k, v]) => [k, shapeStr(v.dims)])),
      threads: a.threads, opt: a.opt, warmup: a.warmup, runs: a.bench,
      load_ms: +loadMs.toFixed(1), p50_ms: +percentile(sorted, 0.5).toFixed(3),
      min_ms: +sorted[0].toFixed(3), p90_ms: +percentile(sorted, 0.9).toFixed(3),
      mean_ms: +(times.reduce((x, y) => x + y, 0) / times.length).toFixed(3),
    };
    if (a.json) {
      console.log(JSON.stringify(res));
    } else {
      console.log(`ort ${path.basename(path.dirname(modelPath))}/${path.basename(modelPath)} ` +
                  `threads=${res.threads} runs=${res.runs} warmup=${res.warmup} ` +
                  `p50_ms=${res.p50_ms} min_ms=${res.min_ms} p90_ms=${res.p90_ms} ` +
                  `mean_ms=${res.mean_ms} load_ms=${res.load_ms}`);
    }
    if (!a.outputDir) return;
  }

  const results = await session.run(feeds);
  if (a.outputDir) {
    fs.mkdirSync(a.outputDir, {recursive: true});
    session.outputNames.forEach((name, i) => {
      fs.writeFileSync(path.join(a.outputDir, `output_${i}.pb`), tensorToProto(results[name], name));
    });
  }
  if (!a.quiet && !a.bench) {
    session.outputNames.forEach((name) => console.log(summarize(name, results[name])));
  }
}

main().catch((e) => {
  console.error('ort_run.js: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
