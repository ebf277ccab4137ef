#!/usr/bin/env node
// side_by_side.js: kiln against ONNX Runtime on every exported model, in one
// run, on the same inputs and thread counts; writes bench/RESULTS.md.
//
//   node bench/side_by_side.js [--models a,b] [--threads 1,2] [--quick]
//        [--rounds R] [--seconds S] [--kiln PATH] [--out FILE] [--limit GFLOPS]
//        [--no-pin] [--precisions fp32,bf16,int8]
//
//   --models   subset, comma-separated (default: resnet50, mobilenet_v2,
//              squeezenet1_1, efficientnet_b0, bert_base, bert_tiny, tinycnn)
//   --threads  thread counts (default 1,2)
//   --quick    2 rounds of about 0.3 s per runtime (a smoke run; default 5
//              rounds of about 1.5 s)
//   --rounds, --seconds  set those directly
//   --kiln     the kiln binary (default $KILN_BIN, else build/kiln)
//   --out      the report (default bench/RESULTS.md)
//   --limit    fp32 GFLOP/s of one core (default: this machine's probe,
//              `kiln probe`'s ~/.cache/kiln/machine.json or $KILN_MACHINE,
//              peak.fp32_gflops.one; else 250, BENCHMARKING.md's Zen 5)
//   --no-pin   let the OS place the processes (default: see "CPUs" below)
//   --precisions  kiln engines to measure, each against ONNX Runtime's fp32
//              (default fp32): bf16, fp16 and int8 engines are built with
//              `kiln build --precision`, int8 calibrated (`kiln calibrate`,
//              entropy) on the inputs of the model's test_data_set_* folders;
//              their outputs are reported as the cosine to ORT's (reduced
//              precision is not expected to meet the fp32 tolerance)
//
// Models come from $KILN_CACHE (default ~/.cache/kiln/models;
// scripts/make_reference.sh exports them); tinycnn also from models/tinycnn.
// A model missing from the cache is skipped with a line saying so.
// Per model: the inputs of test_data_set_0 (or, when it has none, inputs
// written once by `kiln bench --save-inputs`) feed both runtimes; kiln runs
// an engine built for those shapes (`kiln build --shape`), ONNX Runtime the
// .onnx (bench/ort_bench.js, session options of BENCHMARKING.md).  Outputs
// of the two are compared once (atol 1e-4, rtol 1e-3).  Then per thread
// count: a calibration round (sets N, the runs per round, to about S
// seconds for the slower runtime), then R rounds, alternating which runtime
// goes first, each a fresh process per runtime making 3 warm-up runs and N
// timed runs.  A runtime's p50 is the median over rounds of each round's
// median; its startup (kiln: engine load + context creation; ORT: session
// creation) and peak RSS are medians over rounds too.
// CPUs: with fewer threads than CPUs, both runtimes of a round run pinned
// (taskset) to the same CPUs, and the rounds rotate over the CPUs.  The
// CPUs of these shared VMs are not equal at a given moment (one core has
// run a 1-thread model 1.2-1.4x slower than the other for minutes), so a
// process placed by the OS on whichever CPU made the ratios of a run
// depend on where each process happened to land.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const {spawnSync} = require('child_process');
const {readInputs, parseTensor} = require('./ort_bench.js');

const ROOT = path.resolve(__dirname, '..');
const ALL = ['resnet50', 'mobilenet_v2', 'squeezenet1_1', 'efficientnet_b0', 'bert_base',
             'bert_tiny', 'tinycnn', 'audio_conv1d', 'video_r3d', 'vad_if', 'vad_if+fix',
             'aspp_seg', 'resnext_grouped'];
// Variants: a model of the cache built with extra `kiln build` options
// (ONNX Runtime runs the same .onnx).  vad_if+fix pins the sample rate its
// If decides on (kiln build --fix), which ORT has no counterpart for.
const VARIANTS = {'vad_if+fix': {model: 'vad_if', build: ['--fix', 'sr=16000']}};

function usage(msg) {
  console.error('side_by_side.js: ' + msg + '\nusage: node bench/side_by_side.js ' +
                '[--models a,b] [--threads 1,2] [--quick] [--rounds R] [--seconds S] ' +
                '[--kiln PATH] [--out FILE] [--limit GFLOPS] [--no-pin]');
  process.exit(2);
}

function parseArgs(argv) {
  const a = {models: ALL, threads: [1, 2], rounds: 5, seconds: 1.5, quick: false, pin: true,
             kiln: process.env.KILN_BIN || path.join(ROOT, 'build', 'kiln'),
             out: path.join(ROOT, 'bench', 'RESULTS.md'), limit: 0, precisions: ['fp32']};
  const set = {};
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
    if (s === '--models') a.models = val().split(',').filter(Boolean);
    else if (s === '--threads') {
      a.threads = val().split(',').map(Number);
      if (!a.threads.length || a.threads.some((t) => !Number.isInteger(t) || t < 1))
        usage('--threads takes positive integers, e.g. 1,2');
    } else if (s === '--quick') a.quick = true;
    else if (s === '--rounds') set.rounds = Math.round(num(1));
    else if (s === '--seconds') set.seconds = num(0.01);
    else if (s === '--kiln') a.kiln = path.resolve(val());
    else if (s === '--out') a.out = path.resolve(val());
    else if (s === '--limit') a.limit = num(1);
    else if (s === '--no-pin') a.pin = false;
    else if (s === '--precisions') {
      a.precisions = val().split(',').filter(Boolean);
      if (!a.precisions.length || a.precisions.some((x) => !['fp32', 'bf16', 'fp16', 'int8'].includes(x)))
        usage('--precisions takes fp32, bf16, fp16, int8, comma-separated');
    }
    else if (s === '-h' || s === '--help') {
      const src = fs.readFileSync(__filename, 'utf8').split('\n');
      console.log(src.slice(1, 41).map((l) => l.replace(/^\/\/ ?/, '')).join('\n'));
      process.exit(0);
    } else usage('unknown argument ' + s);
  }
  if (a.quick) { a.rounds = 2; a.seconds = 0.3; }
  Object.assign(a, set);
  if (!a.limit) {
    const probed = probedLimit();
    a.limit = probed ? probed.gflops : 250;
    a.limitFrom = probed ? `this machine's probe (${probed.file})`
                         : '../shared/BENCHMARKING.md: 225–275 measured on one Zen 5 core';
  } else a.limitFrom = '--limit';
  return a;
}

// fp32 GFLOP/s of one core from the machine description `kiln probe` keeps
// (what kiln builds for); null when there is none.
function probedLimit() {
  const file = process.env.KILN_MACHINE ||
               path.join(os.homedir(), '.cache', 'kiln', 'machine.json');
  try {
    const m = JSON.parse(fs.readFileSync(file, 'utf8'));
    const g = m.peak && m.peak.fp32_gflops && m.peak.fp32_gflops.one;
    return g > 0 ? {gflops: g, file} : null;
  } catch (e) {
    return null;
  }
}

// Runs a command; returns stdout, or throws with its last stderr line.
function run(cmd, args, what) {
  const r = spawnSync(cmd, args, {encoding: 'utf8', maxBuffer: 64 << 20, timeout: 900e3});
  if (r.error) throw new Error(`${what}: ${r.error.message}`);
  if (r.status !== 0) {
    const lines = (r.stderr || '').trim().split('\n');
    throw new Error(`${what}: exit ${r.status}: ${lines[lines.length - 1] || ''}`);
  }
  return r.stdout;
}
function runJson(cmd, args, what) {
  const out = run(cmd, args, what).trim();
  try {
    return JSON.parse(out);
  } catch (e) {
    throw new Error(`${what}: stdout is not JSON: ${out.slice(0, 200)}`);
  }
}

const median = (xs) => {
  const s = xs.slice().sort((x, y) => x - y), m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

function cpuInfo() {
  let model = os.cpus()[0] ? os.cpus()[0].model : 'unknown', flags = [];
  try {
    const l = run('lscpu', [], 'lscpu');
    const m = /^Model name:\s*(.+)$/m.exec(l);
    if (m) model = m[1].trim();
    const f = /^Flags:\s*(.+)$/m.exec(l);
    if (f) flags = f[1].split(/\s+/);
  } catch (e) { /* keep os.cpus() */ }
  const want = ['avx2', 'fma', 'f16c', 'avx512f', 'avx512dq', 'avx512bw', 'avx512vl',
                'avx512_vnni', 'avx512_bf16', 'avx512vbmi', 'avx512_vp2intersect', 'amx_tile'];
  return {model, cpus: os.cpus().length, flags: want.filter((x) => flags.includes(x))};
}

// Outputs of the two runtimes within atol + rtol * |ort|?
function compareOutputs(kdir, odir) {
  let worst = 0, bad = 0, n = 0;
  for (let i = 0; fs.existsSync(path.join(odir, `output_${i}.pb`)); i++) {
    const [o] = readInputsFile(path.join(odir, `output_${i}.pb`));
    const kf = path.join(kdir, `output_${i}.pb`);
    if (!fs.existsSync(kf)) return {ok: false, text: `kiln wrote no output_${i}`};
    const [k] = readInputsFile(kf);
    if (k.data.length !== o.data.length) return {ok: false, text: `output_${i}: sizes differ`};
    for (let j = 0; j < o.data.length; j++) {
      const a = Number(k.data[j]), b = Number(o.data[j]), d = Math.abs(a - b);
      if (!(d <= 1e-4 + 1e-3 * Math.abs(b))) bad++;
      if (d > worst || Number.isNaN(d)) worst = Number.isNaN(d) ? Infinity : d;
      n++;
    }
  }
  return {ok: bad === 0 && n > 0,
          text: bad ? `${bad} of ${n} differ, max ${worst.toExponential(1)}` : `max ${worst.toExponential(1)}`};
}

// The lowest cosine, over the outputs, of kiln's against ORT's.
function cosineOutputs(kdir, odir) {
  let low = 1;
  for (let i = 0; fs.existsSync(path.join(odir, `output_${i}.pb`)); i++) {
    const kf = path.join(kdir, `output_${i}.pb`);
    if (!fs.existsSync(kf)) return {ok: false, text: `kiln wrote no output_${i}`};
    const [o] = readInputsFile(path.join(odir, `output_${i}.pb`)), [k] = readInputsFile(kf);
    if (k.data.length !== o.data.length) return {ok: false, text: `output_${i}: sizes differ`};
    let d = 0, na = 0, nb = 0;
    for (let j = 0; j < o.data.length; j++) {
      const x = Number(k.data[j]), y = Number(o.data[j]);
      d += x * y; na += x * x; nb += y * y;
    }
    const c = na === 0 && nb === 0 ? 1 : d / Math.sqrt(na * nb);
    if (!(c >= low)) low = Number.isNaN(c) ? -1 : Math.min(low, c);
  }
  return {ok: low >= 0.99, text: `cosine ${low.toFixed(6)}`};
}
function readInputsFile(file) {
  return [parseTensor(fs.readFileSync(file), path.basename(file))];
}

function findModel(cache, name) {
  const m = path.join(cache, name, 'model.onnx');
  if (fs.existsSync(m)) return {model: m, data: path.join(cache, name, 'test_data_set_0')};
  if (name === 'tinycnn') {
    const t = path.join(ROOT, 'models', 'tinycnn');
    return {model: path.join(t, 'model.onnx'), data: path.join(t, 'test_data_set_0')};
  }
  return null;
}

// The CPUs this process may run on (taskset's list), or null when taskset
// is missing or says something else.
function allowedCpus() {
  try {
    const m = /list:\s*([0-9,-]+)\s*$/.exec(run('taskset', ['-pc', String(process.pid)], 'taskset'));
    if (!m) return null;
    const cpus = [];
    for (const part of m[1].split(',')) {
      const [lo, hi] = part.split('-').map(Number);
      for (let c = lo; c <= (hi === undefined ? lo : hi); c++) cpus.push(c);
    }
    return cpus.length ? cpus : null;
  } catch (e) {
    return null;
  }
}

// [cmd, args] run on `threads` of the CPUs, starting at index `round`
// (rotating), when pinning applies; otherwise unchanged.
function pinned(a, threads, round, cmd, args) {
  const cpus = a.cpus;
  if (!a.pin || !cpus || threads >= cpus.length) return [cmd, args];
  const set = [];
  for (let i = 0; i < threads; i++) set.push(cpus[(round + i) % cpus.length]);
  return ['taskset', ['-c', set.join(','), cmd, ...args]];
}

function benchOne(a, tool, ctx, threads, runs, warmup, round) {
  if (tool === 'kiln') {
    return runJson(...pinned(a, threads, round, a.kiln,
                             ['bench', ctx.engine, '--input-dir', ctx.inputs, '--threads',
                              String(threads), '--runs', String(runs), '--warmup', String(warmup),
                              '--json']), `kiln bench ${ctx.name}`);
  }
  return runJson(...pinned(a, threads, round, process.execPath,
                           [path.join(__dirname, 'ort_bench.js'), ctx.model, '--input-dir',
                            ctx.inputs, '--threads', String(threads), '--runs', String(runs),
                            '--warmup', String(warmup), '--json']), `ort_bench ${ctx.name}`);
}

function prepare(a, name, cache, tmp) {
  const variant = VARIANTS[name];
  const found = findModel(cache, variant ? variant.model : name);
  if (!found) return {skip: `${name}: not in ${cache} (scripts/make_reference.sh exports it)`};
  const ctx = {name, model: found.model};
  // the same input files for both runtimes
  if (fs.existsSync(path.join(found.data, 'input_0.pb'))) ctx.inputs = found.data;
  else {
    ctx.inputs = path.join(tmp, name + '_inputs');
    run(a.kiln, ['bench', found.model, '--runs', '1', '--warmup', '0', '--save-inputs',
                 ctx.inputs], `kiln bench --save-inputs ${name}`);
  }
  const info = runJson(a.kiln, ['inspect', found.model, '--json', '--no-optimize'],
                       `kiln inspect ${name}`);
  const tensors = readInputs(ctx.inputs);
  const shapes = info.inputs.map((vi, i) => {
    const t = tensors.find((x) => x.name === vi.name) || tensors[i];
    if (!t) throw new Error(`${name}: no input file for ${vi.name}`);
    return `${vi.name}=${t.dims.length ? t.dims.join('x') : 'scalar'}`;
  });
  ctx.shapes = shapes.map((s) => s.replace(/^[^=]*=/, '')).join(', ');
  // a scalar has no shape to fix
  shapes.splice(0, shapes.length, ...shapes.filter((s) => !s.endsWith('=scalar')));
  ctx.engine = path.join(tmp, name + '.kiln');
  const t0 = Date.now();
  run(a.kiln, ['build', found.model, '-o', ctx.engine, ...shapes.flatMap((s) => ['--shape', s]),
                ...(variant ? variant.build : [])],
      `kiln build ${name}`);
  ctx.build_ms = Date.now() - t0;
  const insp = runJson(a.kiln, ['inspect', ctx.engine, '--json'], `kiln inspect ${name}.kiln`);
  ctx.flops = insp.flops;
  // the weights a run reads: the packed blocks for this CPU and the originals kept
  ctx.weights = (insp.packed_bytes || 0) + (insp.originals_kept_bytes || 0) ||
                insp.weights_bytes || 0;
  // correctness before speed
  const kout = path.join(tmp, name + '_kiln_out'), oout = path.join(tmp, name + '_ort_out');
  run(a.kiln, ['run', ctx.engine, '--input-dir', ctx.inputs, '--output-dir', kout],
      `kiln run ${name}`);
  run(process.execPath, [path.join(__dirname, 'ort_bench.js'), ctx.model, '--input-dir',
                         ctx.inputs, '--runs', '1', '--warmup', '0', '--output-dir', oout],
      `ort_bench ${name}`);
  ctx.check = compareOutputs(kout, oout);
  // reduced-precision engines of the same model, each checked against ORT
  ctx.variants = [];
  for (const prec of a.precisions.filter((x) => x !== 'fp32')) {
    const v = {prec, engine: path.join(tmp, `${name}_${prec}.kiln`)};
    const extra = ['--precision', prec];
    if (prec === 'int8') {
      const calDir = path.join(tmp, name + '_calib_data');
      const parent = path.dirname(found.data);
      let k = 0;
      for (const d of fs.readdirSync(parent).filter((x) => x.startsWith('test_data_set')).sort()) {
        const sd = path.join(calDir, `s${k++}`);
        fs.mkdirSync(sd, {recursive: true});
        for (const f of fs.readdirSync(path.join(parent, d)).filter((x) => x.startsWith('input_')))
          fs.copyFileSync(path.join(parent, d, f), path.join(sd, f));
      }
      if (!k) {
        fs.mkdirSync(path.join(calDir, 's0'), {recursive: true});
        for (const f of fs.readdirSync(ctx.inputs).filter((x) => x.startsWith('input_')))
          fs.copyFileSync(path.join(ctx.inputs, f), path.join(calDir, 's0', f));
      }
      const cal = path.join(tmp, name + '.calib');
      run(a.kiln, ['calibrate', found.model, '--data', calDir, '--method', 'entropy', '-o', cal],
          `kiln calibrate ${name}`);
      extra.push('--calibration', cal);
    }
    run(a.kiln, ['build', found.model, '-o', v.engine, ...shapes.flatMap((s) => ['--shape', s]),
                 ...extra, ...(variant ? variant.build : [])],
        `kiln build ${name} --precision ${prec}`);
    const vi = runJson(a.kiln, ['inspect', v.engine, '--json'], `kiln inspect ${name} ${prec}`);
    v.weights = (vi.packed_bytes || 0) + (vi.originals_kept_bytes || 0) || vi.weights_bytes || 0;
    const vout = path.join(tmp, `${name}_${prec}_out`);
    run(a.kiln, ['run', v.engine, '--input-dir', ctx.inputs, '--output-dir', vout],
        `kiln run ${name} ${prec}`);
    v.check = cosineOutputs(vout, oout);
    ctx.variants.push(v);
  }
  return ctx;
}

function measure(a, ctx, threads) {
  // calibration, which also warms the page cache for both
  const cal = ['kiln', 'ort'].map((t) => benchOne(a, t, ctx, threads, 2, 1, 0));
  const slow = Math.max(cal[0].p50_ms, cal[1].p50_ms);
  const runs = Math.max(3, Math.min(2000, Math.round((a.seconds * 1e3) / Math.max(slow, 1e-3))));
  const res = {kiln: [], ort: [], runs};
  for (let r = 0; r < a.rounds; r++) {
    const order = r % 2 ? ['ort', 'kiln'] : ['kiln', 'ort'];
    for (const t of order) res[t].push(benchOne(a, t, ctx, threads, runs, 3, r));
  }
  const summary = {runs};
  for (const t of ['kiln', 'ort']) {
    summary[t] = {
      p50: median(res[t].map((x) => x.p50_ms)),
      p50s: res[t].map((x) => x.p50_ms),
      load: median(res[t].map((x) => x.load_ms)),
      rss: median(res[t].map((x) => x.peak_rss_bytes)),
      threads: res[t][0].threads,
    };
  }
  return summary;
}

const f1 = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const mib = (b) => (b / 1048576).toFixed(0);

function report(a, cpu, rows, skipped, started, loadStart) {
  const ortPkg = path.join(ROOT, 'scripts', 'node_modules', 'onnxruntime-node', 'package.json');
  const ortVersion = fs.existsSync(ortPkg) ? JSON.parse(fs.readFileSync(ortPkg, 'utf8')).version : '?';
  let rev = '?';
  try {
    rev = run('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD'], 'git').trim();
    if (run('git', ['-C', ROOT, 'status', '--porcelain', '--untracked-files=no'], 'git').trim())
      rev += ' + uncommitted changes';
  } catch (e) { /* not a checkout */ }
  const L = [];
  L.push('# kiln and ONNX Runtime, side by side', '');
  L.push(`Written by \`node bench/side_by_side.js${process.argv.slice(2).map((x) => ' ' + x).join('')}\` ` +
         `on ${started.toISOString().replace('T', ' ').replace(/\..*/, '')} UTC ` +
         `(${((Date.now() - started) / 60000).toFixed(1)} min).`, '');
  L.push(`- CPU: ${cpu.model}, ${cpu.cpus} CPUs; flags: ${cpu.flags.join(' ') || 'none of note'}`);
  L.push(`- Load average at start ${loadStart.map((x) => x.toFixed(1)).join(' / ')}, ` +
         `at end ${os.loadavg().map((x) => x.toFixed(1)).join(' / ')} (1/5/15 min): ` +
         'the machine is shared, so absolute times move; the ratios of one run are what count.');
  const bin = a.kiln.startsWith(ROOT + path.sep) ? path.relative(ROOT, a.kiln) : a.kiln;
  L.push(`- kiln: \`${bin}\` (checkout ${rev}), engines built with ` +
         '`kiln build --shape` for the inputs; ONNX Runtime: onnxruntime-node ' +
         `${ortVersion}, intraOpNumThreads = threads, interOpNumThreads 1, ` +
         "graphOptimizationLevel 'all', sequential.");
  L.push(`- Method: the same input files (test_data_set_0) for both; per thread count a ` +
         `calibration round, then ${a.rounds} rounds alternating which runtime goes first, ` +
         'each a fresh process per runtime with 3 warm-up runs and N timed runs (N below, ' +
         `about ${a.seconds} s for the slower one). p50: median over rounds of each round's ` +
         'median. Startup: kiln engine load + context creation, ORT session creation. ' +
         "Peak RSS: the process's peak (kiln: getrusage; ORT: VmHWM of the node process, " +
         "node's own ~40 MiB included, raw); kiln's RSS over weights: its peak less the " +
         "weights its runs read (`kiln inspect --json`: packed_bytes + originals_kept_bytes), " +
         'the arena, code and buffers a process holds beside them.' +
         (a.pin && a.cpus
           ? ' CPUs: with fewer threads than the machine has CPUs, both runtimes of a round ' +
             'are pinned (taskset) to the same CPUs, rotating over the CPUs from round to ' +
             'round (the CPUs of a shared VM are not equal at a given moment).'
           : ' CPUs: placed by the OS (--no-pin or no taskset).'));
  L.push(`- GFLOP/s: FLOPs of one run (\`kiln inspect --json\` on the engine, a multiply-add ` +
         `= 2) / p50. Limit: ${a.limit} GFLOP/s per core × threads (fp32 FMA, ` +
         `${a.limitFrom})` +
         (a.precisions.some((x) => x !== 'fp32')
           ? '; bf16 and int8 rows are set against the same fp32 limit (FLOPs counted as ' +
             'fp32 multiply-adds), so they pass 100%: their own peaks are about 2x and 4x it.'
           : '.'));
  L.push('- Outputs: kiln against ORT on these inputs, |kiln − ORT| ≤ 1e-4 + 1e-3·|ORT|.', '');
  for (const t of a.threads) {
    const rs = rows.filter((r) => r.threads === t);
    if (!rs.length) continue;
    L.push(`## ${t} thread${t > 1 ? 's' : ''}`, '');
    L.push('| model | inputs | kiln p50 ms | ORT p50 ms | speed-up (ORT/kiln) | kiln GFLOP/s | ' +
           '% of limit | ORT GFLOP/s | kiln RSS MiB | kiln RSS over weights MiB | ORT RSS MiB | ' +
           'kiln startup ms | ORT startup ms | N | outputs |');
    L.push('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|');
    const ups = [], byPrec = {};
    for (const r of rs) {
      if (r.error) {
        L.push(`| ${r.name} | ${r.shapes || ''} | failed: ${r.error.replace(/\|/g, '/')} ` +
               '| | | | | | | | | | | | |');
        continue;
      }
      const k = r.m.kiln, o = r.m.ort, up = o.p50 / k.p50;
      ups.push(up);
      (byPrec[r.prec] = byPrec[r.prec] || []).push(up);
      const kg = r.flops / (k.p50 * 1e6), og = r.flops / (o.p50 * 1e6);
      L.push(`| ${r.name} | ${r.shapes} | ${f1(k.p50)} | ${f1(o.p50)} | ${up.toFixed(2)}× | ` +
             `${f1(kg)} | ${((100 * kg) / (a.limit * t)).toFixed(0)}% | ${f1(og)} | ` +
             `${mib(k.rss)} | ${mib(k.rss - (r.weights || 0))} | ${mib(o.rss)} | ` +
             `${f1(k.load)} | ${f1(o.load)} | ${r.m.runs} | ` +
             `${r.check.ok ? 'match' : 'DIFFER'} (${r.check.text}) |`);
    }
    const geomean = (xs) => Math.exp(xs.reduce((s, x) => s + Math.log(x), 0) / xs.length);
    const precs = Object.keys(byPrec);
    if (ups.length && precs.length > 1) {
      /* each kiln precision against ORT's fp32, on its own */
      L.push('');
      for (const p of precs) {
        const xs = byPrec[p];
        L.push(`- kiln ${p}: geometric mean of the speed-ups **${geomean(xs).toFixed(2)}×** ` +
               `over ${xs.length} model${xs.length === 1 ? '' : 's'}; at least as fast on ` +
               `${xs.filter((x) => x >= 1).length} of them.`);
      }
      L.push('');
    } else if (ups.length) {
      L.push('', `Geometric mean of the speed-ups: **${geomean(ups).toFixed(2)}×** over ` +
             `${ups.length} model${ups.length === 1 ? '' : 's'}; kiln is at least as fast on ` +
             `${ups.filter((x) => x >= 1).length} of them.`, '');
    } else {
      L.push('', 'No model was measured.', '');
    }
  }
  if (skipped.length) {
    L.push('## Skipped', '');
    for (const s of skipped) L.push(`- ${s}`);
    L.push('');
  }
  fs.writeFileSync(a.out, L.join('\n'));
}

function main() {
  const a = parseArgs(process.argv.slice(2));
  a.cpus = a.pin ? allowedCpus() : null;
  if (!fs.existsSync(a.kiln)) usage(`no kiln binary at ${a.kiln} (build it, or --kiln PATH)`);
  const cache = process.env.KILN_CACHE || path.join(os.homedir(), '.cache', 'kiln', 'models');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-sbs-'));
  const started = new Date(), loadStart = os.loadavg();
  const cpu = cpuInfo();
  const rows = [], skipped = [];
  try {
    for (const name of a.models) {
      let ctx;
      try {
        ctx = prepare(a, name, cache, tmp);
      } catch (e) {
        console.error(`${name}: ${e.message}`);
        for (const t of a.threads) rows.push({name, threads: t, error: e.message});
        continue;
      }
      if (ctx.skip) {
        console.error('skip ' + ctx.skip);
        skipped.push(ctx.skip);
        continue;
      }
      const jobs = [];
      if (a.precisions.includes('fp32'))
        jobs.push({label: name, prec: 'fp32', engine: ctx.engine, check: ctx.check});
      for (const v of ctx.variants)
        jobs.push({label: `${name} (${v.prec})`, prec: v.prec, engine: v.engine, check: v.check,
                   weights: v.weights});
      for (const t of a.threads) for (const job of jobs) {
        const name = job.label;
        const row = {name, prec: job.prec, threads: t, shapes: ctx.shapes, flops: ctx.flops,
                     weights: job.weights !== undefined ? job.weights : ctx.weights,
                     check: job.check};
        try {
          row.m = measure(a, {...ctx, engine: job.engine}, t);
          const k = row.m.kiln, o = row.m.ort;
          console.error(`${name} ${t}t: kiln ${f1(k.p50)} ms, ORT ${f1(o.p50)} ms, ` +
                        `speed-up ${(o.p50 / k.p50).toFixed(2)}x, outputs ${job.check.text}; ` +
                        `rounds: kiln ${k.p50s.map(f1).join(' ')}, ORT ${o.p50s.map(f1).join(' ')}`);
        } catch (e) {
          row.error = e.message;
          console.error(`${name} ${t}t: ${e.message}`);
        }
        rows.push(row);
      }
      fs.rmSync(ctx.engine, {force: true});
      for (const v of ctx.variants) fs.rmSync(v.engine, {force: true});
    }
  } finally {
    fs.rmSync(tmp, {recursive: true, force: true});
  }
  report(a, cpu, rows, skipped, started, loadStart);
  console.error(`wrote ${a.out}`);
}

main();
