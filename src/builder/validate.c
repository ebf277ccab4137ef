/* Validation gates (kiln.h, kn_validate): an engine against the reference
 * path of its ONNX model, on the same inputs, with limits on accuracy, p99
 * latency and peak RSS.  `kiln validate` prints what this measures; `kiln
 * build` refuses to write an engine that fails one.
 *
 * Order matters for the memory figure: peak RSS is the process's
 * high-water mark (getrusage), so the engine is run on every sample and
 * timed, and its peak read, before the reference model is loaded.  What is
 * kept across: the inputs of a generated sample and every sample's outputs
 * (samples from a reader are read again for the reference runs). */
#include "builder.h"
#include "engine/engine.h"

#include <errno.h>
#include <math.h>
#include <unistd.h>

static const char *dt_name(kn_dtype dt) {
  const char *n = kn_dtype_name(dt);
  return n ? n : "unknown dtype";
}

/* "?" for a dynamic dim, "scalar" for rank 0. */
static void dims_text(const int64_t *dims, int32_t rank, char *buf, size_t n) {
  size_t o = 0;
  buf[0] = 0;
  if (rank == 0) snprintf(buf, n, "scalar");
  for (int32_t d = 0; d < rank && o < n; d++) {
    if (dims[d] < 0) o += (size_t)snprintf(buf + o, n - o, "%s?", d ? "x" : "");
    else o += (size_t)snprintf(buf + o, n - o, "%s%lld", d ? "x" : "", (long long)dims[d]);
  }
}

static void info_text(const char *name, kn_dtype dt, int32_t rank, const int64_t *dims,
                      char *buf, size_t n) {
  char d[128];
  if (rank < 0) snprintf(d, sizeof d, "of unknown rank");
  else dims_text(dims, rank, d, sizeof d);
  snprintf(buf, n, "'%s' %s %s", name, dt_name(dt), d);
}

void kn_validate_options_init(kn_validate_options *o) {
  memset(o, 0, sizeof *o);
  o->runs = 20;
  o->warmup = 3;
}

void kn_validate_report_release(kn_validate_report *r) {
  if (!r) return;
  for (int32_t o = 0; r->outputs && o < r->n_outputs; o++) free(r->outputs[o].name);
  free(r->outputs);
  free(r->latency_ms);
  memset(r, 0, sizeof *r);
}

typedef struct io_info {
  const char *name; /* the engine's */
  kn_dtype dtype;
  int32_t rank;
  int64_t dims[KN_MAX_RANK];
} io_info;

typedef struct gate_state {
  const kn_model *engine;
  const char *model_path, *label;
  const kn_validate_options *o;
  const kn_samples *samples; /* NULL or count 0: generated */
  kn_validate_report *r;
  io_info *in;
  int32_t nin, nout, n_samples;
  kn_tensor *generated;      /* the generated sample's inputs */
  kn_tensor *outputs;        /* engine outputs, [sample][output]; rank -1: none */
  /* the labels and each side's correct predictions */
  int64_t ref_seen, eng_seen, ref_correct, eng_correct;
} gate_state;

static bool given_samples(const gate_state *s) { return s->samples && s->samples->count > 0; }

static const char *where_of(const gate_state *s, int32_t k) {
  return given_samples(s) ? kn_samples_name(s->samples, k) : NULL;
}

/* The inputs of sample k into buf (read, or views of given ones), or the
 * kept generated ones (*ins then points at them, buf untouched). */
static kn_status sample_inputs(const gate_state *s, int32_t k, kn_tensor *buf,
                               const kn_tensor **ins, kn_error *err) {
  if (!given_samples(s)) {
    *ins = s->generated;
    return KN_OK;
  }
  *ins = buf;
  return kn_samples_get(s->samples, k, s->nin, buf, err);
}

static kn_status bind_inputs(kn_context *ctx, const kn_tensor *ins, int32_t nin,
                             const char *where, kn_error *err) {
  for (int32_t i = 0; i < nin; i++) {
    kn_status st = kn_context_set_input(ctx, i, &ins[i], err);
    if (st) {
      if (where) kn_error_prefix(err, "%s", where);
      return st;
    }
  }
  return KN_OK;
}

static kn_status set_threads(kn_context *ctx, int32_t threads, kn_error *err) {
  return threads > 0 ? kn_context_set_threads(ctx, threads, err) : KN_OK;
}

/* The generated sample: the engine's inputs, a dim kept dynamic by a build
 * --profile the smallest of its range (at least 1). */
static kn_status generate(gate_state *s, kn_error *err) {
  const kn_model *m = s->engine;
  const kn_validate_options *o = s->o;
  s->generated = kn_calloc((size_t)s->nin + 1, sizeof *s->generated);
  if (!s->generated) return kn_fail(err, KN_ERR_OOM, "out of memory");
  uint64_t rng = kn_rng_seed(s->samples ? s->samples->seed : 1);
  for (int32_t i = 0; i < s->nin; i++) {
    kn_value_info vi = {.name = s->in[i].name, .dtype = s->in[i].dtype, .rank = s->in[i].rank};
    memcpy(vi.dims, s->in[i].dims, sizeof vi.dims);
    const kn_value_info *pmin = m->prof_min ? &m->prof_min[i] : NULL;
    const kn_value_info *pmax = m->prof_max ? &m->prof_max[i] : NULL;
    for (int32_t d = 0; pmin && pmax && pmin->rank == vi.rank && pmax->rank == vi.rank &&
                        d < vi.rank; d++)
      if (vi.dims[d] < 0) vi.dims[d] = pmin->dims[d] > 1 ? pmin->dims[d] : 1;
    kn_error e = {0};
    kn_status st = kn_random_input(&vi, o->shapes, o->n_shapes, &rng, &s->generated[i], &e);
    if (st == KN_ERR_UNSUPPORTED)
      return kn_fail(err, st, "%s: input '%s' has dtype %s, which kiln does not generate: give "
                     "the inputs with --data DIR", s->label, vi.name, dt_name(vi.dtype));
    if (st) return kn_fail(err, st, "%s: %s", s->label, e.msg);
  }
  return KN_OK;
}

/* Run every sample, time the first, read the peak RSS. */
static kn_status engine_phase(gate_state *s, kn_error *err) {
  const kn_validate_options *o = s->o;
  kn_validate_report *r = s->r;
  kn_context *ctx = NULL;
  kn_tensor *buf = kn_calloc((size_t)s->nin + 1, sizeof *buf);
  kn_status st = KN_OK;
  if (!buf) return kn_fail(err, KN_ERR_OOM, "out of memory");
  if (given_samples(s)) s->n_samples = s->samples->count;
  else if ((st = generate(s, err))) goto done;
  else s->n_samples = 1;
  r->samples = s->n_samples;
  s->outputs = kn_calloc((size_t)s->n_samples * (size_t)s->nout + 1, sizeof *s->outputs);
  r->latency_ms = kn_calloc((size_t)o->runs, sizeof *r->latency_ms);
  if (!s->outputs || !r->latency_ms) {
    st = kn_fail(err, KN_ERR_OOM, "out of memory");
    goto done;
  }
  for (int32_t k = 0; k < s->n_samples * s->nout; k++) s->outputs[k].rank = -1;
  if ((st = kn_context_create(s->engine, &ctx, err)) || (st = set_threads(ctx, o->threads, err)))
    goto done;
  r->threads = kn_context_threads(ctx);
  for (int32_t k = 0; k < s->n_samples; k++) {
    const kn_tensor *ins;
    const char *where = where_of(s, k);
    if ((st = sample_inputs(s, k, buf, &ins, err)) ||
        (st = bind_inputs(ctx, ins, s->nin, where, err)))
      goto done;
    if ((st = kn_context_run(ctx, err))) {
      if (where) kn_error_prefix(err, "%s", where);
      goto done;
    }
    for (int32_t i = 0; i < s->nout; i++) {
      const kn_tensor *t = kn_context_output(ctx, i);
      if (t && t->dtype != KN_DTYPE_STRING &&
          (st = kn_tensor_copy(&s->outputs[k * s->nout + i], t, err))) {
        st = kn_fail(err, st, "out of memory keeping the outputs of %s", s->label);
        goto done;
      }
    }
    if (k == 0) {
      size_t used = 0;
      r->inputs[0] = 0;
      for (int32_t i = 0; i < s->nin && used < sizeof r->inputs; i++) {
        char t[128];
        dims_text(ins[i].dims, ins[i].rank, t, sizeof t);
        used += (size_t)snprintf(r->inputs + used, sizeof r->inputs - used, "%s%s=%s",
                                 i ? " " : "", s->in[i].name, t);
      }
      if (!s->nin) snprintf(r->inputs, sizeof r->inputs, "no inputs");
      /* the timing runs on the first sample, after untimed warm-up runs
       * (the first run pays for first-touch page faults) */
      for (int64_t w = 0; w < o->warmup; w++)
        if ((st = kn_context_run(ctx, err))) goto done;
      for (int64_t i = 0; i < o->runs; i++) {
        double a = kn_now_s();
        if ((st = kn_context_run(ctx, err))) goto done;
        r->latency_ms[i] = (kn_now_s() - a) * 1e3;
      }
    }
    if (given_samples(s)) kn_samples_put(s->nin, buf);
  }
  r->peak_rss = kn_peak_rss();
  qsort(r->latency_ms, (size_t)o->runs, sizeof *r->latency_ms, kn_cmp_double);
done:
  kn_samples_put(s->nin, buf);
  free(buf);
  kn_context_free(ctx);
  return st;
}

/* The engine and the model take the same inputs (names, dtypes, fixed dims
 * that agree) and give the same outputs (names), in the same order. */
static kn_status check_signature(const gate_state *s, const kn_model *m, kn_error *err) {
  const char *lbl = s->label, *mp = s->model_path;
  int32_t nin = kn_model_input_count(m), nout = kn_model_output_count(m);
  if (nin != s->nin)
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "%s does not match %s: the engine has %d input%s, the model %d", lbl, mp,
                   s->nin, s->nin == 1 ? "" : "s", nin);
  if (nout != s->nout)
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "%s does not match %s: the engine has %d output%s, the model %d", lbl, mp,
                   s->nout, s->nout == 1 ? "" : "s", nout);
  for (int32_t i = 0; i < nin; i++) {
    kn_value_info vi;
    if (kn_model_input_info(m, i, &vi))
      return kn_fail(err, KN_ERR_INTERNAL, "%s: cannot read input %d", mp, i);
    const io_info *e = &s->in[i];
    bool ok = !strcmp(vi.name, e->name) && vi.dtype == e->dtype &&
              (vi.rank < 0 || e->rank < 0 || vi.rank == e->rank);
    for (int32_t d = 0; ok && vi.rank >= 0 && d < vi.rank && d < e->rank; d++)
      ok = vi.dims[d] < 0 || e->dims[d] < 0 || vi.dims[d] == e->dims[d];
    if (!ok) {
      char a[256], b[256];
      info_text(e->name, e->dtype, e->rank, e->dims, a, sizeof a);
      info_text(vi.name, vi.dtype, vi.rank, vi.dims, b, sizeof b);
      return kn_fail(err, KN_ERR_INVALID_ARG,
                     "%s does not match %s: input %d is %s in the engine, %s in the model", lbl,
                     mp, i, a, b);
    }
  }
  for (int32_t o = 0; o < nout; o++) {
    kn_value_info vi;
    if (kn_model_output_info(m, o, &vi))
      return kn_fail(err, KN_ERR_INTERNAL, "%s: cannot read output %d", mp, o);
    if (strcmp(vi.name, s->r->outputs[o].name))
      return kn_fail(err, KN_ERR_INVALID_ARG,
                     "%s does not match %s: output %d is '%s' in the engine, '%s' in the model",
                     lbl, mp, o, s->r->outputs[o].name, vi.name);
  }
  return KN_OK;
}

/* A NaN cosine (NaN on one side) is worse than any number. */
static bool worse_cosine(double c, double than) {
  return !isnan(than) && (isnan(c) || c < than);
}

/* Top-1 of output 0 of one sample (its rows' argmax) against the next
 * labels; *seen and *correct advance. */
static kn_status count_correct(const gate_state *s, const kn_tensor *t, int64_t *seen,
                               int64_t *correct, kn_error *err) {
  const kn_samples *sm = s->samples;
  const char *lname = sm->labels_name ? sm->labels_name : "labels";
  int64_t c = t && t->rank > 0 ? t->dims[t->rank - 1] : 1;
  int64_t rows = t && t->rank >= 0 && c > 0 ? kn_tensor_numel(t) / c : 0;
  if (!t || t->dtype == KN_DTYPE_STRING || rows <= 0)
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "%s: output 0 is not a numeric tensor: --max-accuracy-drop needs logits",
                   s->label);
  if (*seen + rows > sm->n_labels)
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "%s: %lld label%s, fewer than the predictions of the samples (output 0's "
                   "rows): one label per row, in sample order", lname, (long long)sm->n_labels,
                   sm->n_labels == 1 ? "" : "s");
  int64_t *pred = kn_malloc((size_t)rows * sizeof *pred);
  if (!pred) return kn_fail(err, KN_ERR_OOM, "out of memory");
  rows = kn_argmax_rows(t, pred, rows);
  for (int64_t i = 0; i < rows; i++) *correct += pred[i] == sm->labels[*seen + i];
  *seen += rows;
  free(pred);
  return KN_OK;
}

/* The reference path (the graph as imported, reference kernels' order of
 * operations) on the same samples; accuracy per output, worst over them. */
static kn_status reference_phase(gate_state *s, kn_error *err) {
  const kn_validate_options *o = s->o;
  kn_validate_report *r = s->r;
  kn_model *m = NULL;
  kn_context *ctx = NULL;
  kn_tensor *buf = kn_calloc((size_t)s->nin + 1, sizeof *buf);
  kn_status st;
  bool labels = s->samples && s->samples->n_labels > 0;
  if (!buf) return kn_fail(err, KN_ERR_OOM, "out of memory");
  if ((st = kn_model_load(s->model_path, &m, err))) goto done;
  if (kn_model_format_version(m) != 0) {
    st = kn_fail(err, KN_ERR_INVALID_ARG,
                 "%s is an engine: --against takes the ONNX model the engine was built from",
                 s->model_path);
    goto done;
  }
  kn_build_options bo;
  kn_build_options_init(&bo);
  bo.shapes = o->shapes;
  bo.n_shapes = o->n_shapes;
  bo.no_optimize = 1;
  bo.machine = o->machine;
  /* the first-choice tactics, not timed ones: timing lets the machine's
   * load pick a step's kernel, and two reference builds could then round
   * differently (the accuracy search's reference is built the same way) */
  bo.tactics = KN_TACTICS_HEURISTIC;
  if ((st = kn_model_build(m, &bo, err))) goto done; /* fixes shapes only */
  if ((st = check_signature(s, m, err))) goto done;
  if ((st = kn_context_create(m, &ctx, err)) || (st = set_threads(ctx, o->threads, err)))
    goto done;
  for (int32_t k = 0; k < s->n_samples; k++) {
    const kn_tensor *ins;
    const char *where = where_of(s, k);
    if ((st = sample_inputs(s, k, buf, &ins, err)) ||
        (st = bind_inputs(ctx, ins, s->nin, where, err)))
      goto done;
    if ((st = kn_context_run(ctx, err))) {
      kn_error_prefix(err, "%s (reference path)%s%s", s->model_path, where ? ", " : "",
                      where ? where : "");
      goto done;
    }
    for (int32_t i = 0; i < s->nout; i++) {
      const kn_tensor *ref = kn_context_output(ctx, i), *opt = &s->outputs[k * s->nout + i];
      if (!ref || ref->dtype == KN_DTYPE_STRING || opt->rank < 0) continue;
      kn_output_accuracy *a = &r->outputs[i];
      kn_diff d;
      if (!kn_diff_tensors(ref, opt, KN_ACC_ATOL, 0, &d)) {
        char x[256], y[256];
        info_text(a->name, opt->dtype, opt->rank, opt->dims, x, sizeof x);
        info_text(a->name, ref->dtype, ref->rank, ref->dims, y, sizeof y);
        st = kn_fail(err, KN_ERR_SHAPE, "%s: output %s%s%s, but the reference path of %s gives %s",
                     s->label, x, where ? " on " : "", where ? where : "", s->model_path, y);
        goto done;
      }
      if (!a->compared) {
        a->dtype = ref->dtype;
        a->rank = ref->rank;
        memcpy(a->dims, ref->dims, sizeof a->dims);
      }
      if (!a->compared || d.max_abs > a->max_abs_error)
        a->max_abs_error = d.max_abs, a->worst_abs_sample = k;
      if (!a->compared || d.max_rel > a->max_rel_error) a->max_rel_error = d.max_rel;
      if (!a->compared || worse_cosine(d.cosine, a->cosine))
        a->cosine = d.cosine, a->worst_cosine_sample = k;
      a->compared = 1;
    }
    if (labels && s->nout > 0) {
      const kn_tensor *ref = kn_context_output(ctx, 0), *opt = &s->outputs[k * s->nout];
      if ((st = count_correct(s, ref, &s->ref_seen, &s->ref_correct, err)) ||
          (st = count_correct(s, opt, &s->eng_seen, &s->eng_correct, err)))
        goto done;
    }
    if (given_samples(s)) kn_samples_put(s->nin, buf);
  }
  if (labels && s->ref_seen != s->samples->n_labels)
    st = kn_fail(err, KN_ERR_INVALID_ARG,
                 "%s: %lld labels for %lld predictions (output 0's rows over %d sample%s): one "
                 "label per row, in sample order",
                 s->samples->labels_name ? s->samples->labels_name : "labels",
                 (long long)s->samples->n_labels, (long long)s->ref_seen, s->n_samples,
                 s->n_samples == 1 ? "" : "s");
done:
  kn_samples_put(s->nin, buf);
  free(buf);
  kn_context_free(ctx);
  kn_model_free(m);
  return st;
}

static void set_gate(kn_gate *g, const char *name, int32_t given, int32_t upper, double measured,
                     double limit, int32_t output, int32_t sample) {
  *g = (kn_gate){.name = name, .given = given, .upper = upper, .measured = measured,
                 .limit = limit, .output = output, .sample = sample};
  /* written so that a NaN measurement fails */
  g->pass = upper ? measured <= limit : measured >= limit;
  g->margin = upper ? limit - measured : measured - limit;
}

static void measure_limits(const gate_state *s) {
  const kn_validate_options *o = s->o;
  const kn_accuracy_budget *b = &o->accuracy;
  kn_validate_report *r = s->r;
  double worst_abs = 0, worst_cos = 1;
  int32_t abs_o = -1, cos_o = -1;
  for (int32_t i = 0; i < s->nout; i++) {
    const kn_output_accuracy *a = &r->outputs[i];
    if (!a->compared) continue;
    if (abs_o < 0 || a->max_abs_error > worst_abs) worst_abs = a->max_abs_error, abs_o = i;
    if (cos_o < 0 || worse_cosine(a->cosine, worst_cos)) worst_cos = a->cosine, cos_o = i;
  }
  r->max_abs_error = worst_abs;
  r->min_cosine = worst_cos;
  int64_t n = o->runs;
  double sum = 0;
  for (int64_t i = 0; i < n; i++) sum += r->latency_ms[i];
  r->latency_min_ms = r->latency_ms[0];
  r->latency_mean_ms = sum / (double)n;
  r->latency_p50_ms = kn_percentile(r->latency_ms, n, 0.5);
  r->latency_p90_ms = kn_percentile(r->latency_ms, n, 0.9);
  r->latency_p99_ms = kn_percentile(r->latency_ms, n, 0.99);
  r->latency_max_ms = r->latency_ms[n - 1];
  r->top1 = r->reference_top1 = -1;
  r->top1_rows = s->ref_seen;
  double drop = 0;
  if (s->ref_seen) {
    r->top1 = 100.0 * (double)s->eng_correct / (double)s->eng_seen;
    r->reference_top1 = 100.0 * (double)s->ref_correct / (double)s->ref_seen;
    drop = 100.0 * (double)(s->ref_correct - s->eng_correct) / (double)s->ref_seen;
  }
  set_gate(&r->gates[KN_GATE_MAX_P99_MS], "max-p99-ms", !!o->has_max_p99_ms, 1,
           r->latency_p99_ms, o->max_p99_ms, -1, -1);
  set_gate(&r->gates[KN_GATE_MAX_RSS], "max-rss", !!o->has_max_rss, 1, (double)r->peak_rss,
           (double)o->max_rss, -1, -1);
  set_gate(&r->gates[KN_GATE_MAX_ABS_ERROR], "max-abs-error", !!b->has_max_abs_error, 1,
           worst_abs, b->max_abs_error, abs_o,
           abs_o >= 0 ? r->outputs[abs_o].worst_abs_sample : -1);
  set_gate(&r->gates[KN_GATE_MIN_COSINE], "min-cosine", !!b->has_min_cosine, 0, worst_cos,
           b->min_cosine, cos_o, cos_o >= 0 ? r->outputs[cos_o].worst_cosine_sample : -1);
  set_gate(&r->gates[KN_GATE_MAX_ACCURACY_DROP], "max-accuracy-drop",
           !!b->has_max_accuracy_drop, 1, drop, b->max_accuracy_drop, -1, -1);
  r->pass = 1;
  for (int i = 0; i < KN_GATE_COUNT; i++) r->pass &= !r->gates[i].given || r->gates[i].pass;
}

static kn_status check_options(const kn_model *engine, const char *model_path,
                               const kn_validate_options *o, const char *label, kn_error *err) {
  if (!engine || !model_path)
    return kn_fail(err, KN_ERR_INVALID_ARG, "kn_validate: %s is NULL",
                   engine ? "the model path" : "the engine");
  if (o->runs < 1 || o->warmup < 0 || o->threads < 0 || o->n_shapes < 0 ||
      (o->n_shapes > 0 && !o->shapes))
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "%s: validation needs runs >= 1, warmup >= 0, threads >= 0 and shapes for "
                   "n_shapes (got runs %lld, warmup %lld, threads %d, n_shapes %d)", label,
                   (long long)o->runs, (long long)o->warmup, o->threads, o->n_shapes);
  const kn_accuracy_budget *b = &o->accuracy;
  if ((o->has_max_p99_ms && !(o->max_p99_ms >= 0)) ||
      (b->has_max_abs_error && !(b->max_abs_error >= 0)) ||
      (b->has_min_cosine && !(b->min_cosine >= -1 && b->min_cosine <= 1)) ||
      (b->has_max_accuracy_drop && !(b->max_accuracy_drop >= 0 && b->max_accuracy_drop <= 100)))
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "%s: a limit out of range (max_p99_ms and max_abs_error >= 0, min_cosine in "
                   "[-1, 1], max_accuracy_drop in [0, 100])", label);
  return KN_OK;
}

kn_status kn_validate(const kn_model *engine, const char *model_path, const kn_samples *samples,
                      const kn_validate_options *options, kn_validate_report *report,
                      kn_error *err) {
  kn_validate_options dflt;
  if (!options) {
    kn_validate_options_init(&dflt);
    options = &dflt;
  }
  if (!report) return kn_fail(err, KN_ERR_INVALID_ARG, "kn_validate: report is NULL");
  memset(report, 0, sizeof *report);
  gate_state s;
  memset(&s, 0, sizeof s);
  s.engine = engine;
  s.model_path = model_path;
  s.o = options;
  s.samples = samples;
  s.r = report;
  s.label = options->label ? options->label : "engine";
  report->runs = options->runs;
  report->warmup = options->warmup;
  report->top1 = report->reference_top1 = -1;
  kn_status st = check_options(engine, model_path, options, s.label, err);
  if (st) return st;
  /* said before the engine's runs rather than after them */
  if (access(model_path, R_OK) != 0)
    return kn_fail(err, KN_ERR_IO, "%s: cannot open: %s", model_path, strerror(errno));
  s.nin = kn_model_input_count(engine);
  s.nout = kn_model_output_count(engine);
  if ((st = kn_samples_check(samples, s.nin, s.label, err))) return st;
  if (options->accuracy.has_max_accuracy_drop && !(samples && samples->n_labels > 0))
    return kn_fail(err, KN_ERR_MISSING,
                   "%s: the max-accuracy-drop limit needs labelled samples: one label per "
                   "prediction (row of output 0)", s.label);
  s.in = kn_calloc((size_t)s.nin + 1, sizeof *s.in);
  report->outputs = kn_calloc((size_t)s.nout + 1, sizeof *report->outputs);
  if (!s.in || !report->outputs) {
    st = kn_fail(err, KN_ERR_OOM, "out of memory");
    goto done;
  }
  report->n_outputs = s.nout;
  for (int32_t i = 0; i < s.nin; i++) {
    kn_value_info vi;
    if (kn_model_input_info(engine, i, &vi)) {
      st = kn_fail(err, KN_ERR_INTERNAL, "%s: cannot read input %d", s.label, i);
      goto done;
    }
    s.in[i].name = vi.name;
    s.in[i].dtype = vi.dtype;
    s.in[i].rank = vi.rank;
    memcpy(s.in[i].dims, vi.dims, sizeof vi.dims);
  }
  for (int32_t i = 0; i < s.nout; i++) {
    kn_value_info vi;
    kn_output_accuracy *a = &report->outputs[i];
    if (kn_model_output_info(engine, i, &vi) || !(a->name = kn_strdup(vi.name))) {
      st = kn_fail(err, KN_ERR_OOM, "%s: cannot read output %d", s.label, i);
      goto done;
    }
    a->rank = -1;
    a->cosine = 1;
    a->worst_abs_sample = a->worst_cosine_sample = -1;
  }
  if ((st = engine_phase(&s, err)) || (st = reference_phase(&s, err))) goto done;
  measure_limits(&s);
done:
  free(s.in);
  for (int32_t k = 0; s.generated && k < s.nin; k++) kn_tensor_release(&s.generated[k]);
  free(s.generated);
  for (int32_t k = 0; s.outputs && k < s.n_samples * s.nout; k++) kn_tensor_release(&s.outputs[k]);
  free(s.outputs);
  return st;
}
