/* Validation gates (cli.h): an engine against the reference path of its
 * ONNX model, on the same inputs, with limits on accuracy, p99 latency and
 * peak RSS.  `kiln validate` reports them; `kiln build` refuses to write an
 * engine that fails one.
 *
 * Order matters for the memory figure: peak RSS is the process's high-water
 * mark (getrusage, as kiln bench reads it), so the engine is loaded, run on
 * every sample and timed, and its peak read, before the reference model is
 * loaded.  What is kept across: the inputs of a generated sample and every
 * sample's outputs (files are read again for the reference runs). */
#include "cli.h"
#include "engine/engine.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* atol in the relative error's denominator, max(|b|, atol), as compare's default */
#define REL_ATOL 1e-4

void kn_cli_gates_init(kn_cli_gates *g) {
  memset(g, 0, sizeof *g);
  g->runs = KN_CLI_GATE_RUNS;
  g->warmup = KN_CLI_GATE_WARMUP;
  g->seed = 1;
}

int kn_cli_gate_option(const kn_cli_args *a, int id, kn_cli_gates *g) {
  int64_t v;
  switch (id) {
  case KN_CLI_O_MAX_P99:
    if (!kn_cli_double(a, 0, 1e9, &g->max_p99_ms)) return KN_EXIT_USAGE;
    g->has_p99 = true;
    return KN_EXIT_OK;
  case KN_CLI_O_MAX_RSS:
    if (!kn_cli_parse_bytes(a->arg, &g->max_rss))
      return kn_cli_usage(a->cmd, "--max-rss takes a byte count such as 536870912 or 512M, got "
                                  "'%s'", a->arg);
    g->has_rss = true;
    return KN_EXIT_OK;
  case KN_CLI_O_MAX_ABS:
    if (!kn_cli_double(a, 0, 1e300, &g->max_abs_error)) return KN_EXIT_USAGE;
    g->has_abs = true;
    return KN_EXIT_OK;
  case KN_CLI_O_MIN_COS:
    if (!kn_cli_double(a, -1, 1, &g->min_cosine)) return KN_EXIT_USAGE;
    g->has_cos = true;
    return KN_EXIT_OK;
  case KN_CLI_O_MAX_DROP:
    if (!kn_cli_double(a, 0, 100, &g->max_drop)) return KN_EXIT_USAGE;
    g->has_drop = true;
    return KN_EXIT_OK;
  case KN_CLI_O_LABELS:
    g->labels = a->arg;
    g->run_opts_given = true;
    return KN_EXIT_OK;
  case KN_CLI_O_DATA:
    g->data = a->arg;
    g->run_opts_given = true;
    return KN_EXIT_OK;
  case KN_CLI_O_RUNS:
    if (!kn_cli_int(a, 1, 100000000, &g->runs)) return KN_EXIT_USAGE;
    g->run_opts_given = true;
    return KN_EXIT_OK;
  case KN_CLI_O_WARMUP:
    if (!kn_cli_int(a, 0, 100000000, &g->warmup)) return KN_EXIT_USAGE;
    g->run_opts_given = true;
    return KN_EXIT_OK;
  case KN_CLI_O_GATE_SEED:
    if (!kn_cli_int(a, 0, INT64_MAX, &v)) return KN_EXIT_USAGE;
    g->seed = (uint64_t)v;
    g->run_opts_given = true;
    return KN_EXIT_OK;
  default: return -1;
  }
}

bool kn_cli_shape_spec_ok(const char *spec) {
  const char *eq = strrchr(spec, '=');
  int64_t dims[KN_MAX_RANK];
  int32_t rank;
  return eq && eq != spec && kn_cli_parse_dims(eq + 1, dims, &rank);
}

static const char *dt_name(kn_dtype dt) {
  const char *n = kn_dtype_name(dt);
  return n ? n : "unknown dtype";
}

/* ---- small helpers ---------------------------------------------------------- */

/* JSON has no infinity or NaN: null stands for them. */
static void json_num(FILE *f, double v) {
  if (isfinite(v)) fprintf(f, "%.9g", v);
  else fputs("null", f);
}

/* kn_cli_dims_text for messages: "?" for a dynamic dim, "scalar" for rank 0. */
static void dims_text(const int64_t *dims, int32_t rank, char *buf, size_t n) {
  size_t o = 0;
  buf[0] = 0;
  if (rank == 0) snprintf(buf, n, "scalar");
  for (int32_t d = 0; d < rank && o < n; d++) {
    if (dims[d] < 0) o += (size_t)snprintf(buf + o, n - o, "%s?", d ? "x" : "");
    else o += (size_t)snprintf(buf + o, n - o, "%s%lld", d ? "x" : "", (long long)dims[d]);
  }
}

/* ---- inputs ------------------------------------------------------------------ */

typedef struct io_info {
  char *name;
  kn_dtype dtype;
  int32_t rank;
  int64_t dims[KN_MAX_RANK];
} io_info;

/* The sample folders' inputs (samples.c), names from in[]. */
static int read_sample(const char *dir, const char *label, const io_info *in, int32_t nin,
                       kn_tensor *ins) {
  const char **names = calloc((size_t)nin + 1, sizeof *names);
  if (!names) return kn_cli_fail("out of memory");
  for (int32_t i = 0; i < nin; i++) names[i] = in[i].name;
  int rc = kn_cli_sample_read(dir, label, names, nin, ins);
  free(names);
  return rc;
}

static void release_all(kn_tensor *t, int32_t n) {
  for (int32_t i = 0; t && i < n; i++) kn_tensor_release(&t[i]);
}

static int bind_inputs(kn_context *ctx, const kn_tensor *ins, int32_t nin, const char *where) {
  kn_error err = {0};
  for (int32_t i = 0; i < nin; i++)
    if (kn_context_set_input(ctx, i, &ins[i], &err))
      return where ? kn_cli_fail("%s: %s", where, err.msg) : kn_cli_error(&err);
  return KN_EXIT_OK;
}

static bool copy_tensor(const kn_tensor *t, kn_tensor *out) {
  kn_error err;
  if (kn_tensor_alloc(out, t->dtype, t->rank, t->dims, &err)) return false;
  if (t->nbytes) memcpy(out->data, t->data, out->nbytes < t->nbytes ? out->nbytes : t->nbytes);
  return true;
}

/* ---- the measurements ------------------------------------------------------- */

typedef struct out_acc {
  char *name;
  kn_dtype dtype;
  int32_t rank;
  int64_t dims[KN_MAX_RANK];
  bool compared;       /* a tensor on both sides in some sample */
  double max_abs, max_rel, cosine;
  int32_t abs_sample, cos_sample; /* where the worst came from */
} out_acc;

typedef struct gate_state {
  const kn_cli_gates *g;
  const char *label;
  io_info *in;
  int32_t nin, nout;
  out_acc *out;
  kn_cli_samples samples;  /* n == 0: one generated sample */
  int32_t n_samples;
  kn_tensor *generated;    /* the generated sample's inputs */
  kn_tensor *outputs;      /* engine outputs, [sample][output]; rank -1: none */
  double *times;           /* ms, sorted once measured */
  int32_t threads;
  uint64_t rss;
  char inputs_text[512];
  /* --max-accuracy-drop: the labels and each side's correct predictions */
  int64_t *labels, n_labels, ref_seen, eng_seen, ref_correct, eng_correct;
  char labels_path[4096];
} gate_state;

static void state_free(gate_state *s) {
  for (int32_t i = 0; s->in && i < s->nin; i++) free(s->in[i].name);
  free(s->in);
  for (int32_t i = 0; s->out && i < s->nout; i++) free(s->out[i].name);
  free(s->out);
  release_all(s->generated, s->nin);
  free(s->generated);
  release_all(s->outputs, s->n_samples * s->nout);
  free(s->outputs);
  free(s->times);
  free(s->labels);
  kn_cli_samples_free(&s->samples);
}

/* The inputs of sample k (read or generated) into ins; nothing to release
 * for a generated sample (ins then points at the kept tensors). */
static int sample_inputs(gate_state *s, int32_t k, kn_tensor *buf, const kn_tensor **ins) {
  if (s->samples.n == 0) {
    *ins = s->generated;
    return KN_EXIT_OK;
  }
  *ins = buf;
  return read_sample(s->samples.dirs[k], s->label, s->in, s->nin, buf);
}

/* Load, run every sample, time the first, read the peak RSS, unload. */
static int engine_phase(gate_state *s) {
  const kn_cli_gates *g = s->g;
  kn_error err = {0};
  kn_model *m = NULL;
  kn_context *ctx = NULL;
  kn_tensor *buf = NULL;
  int rc = KN_EXIT_ERROR;
  if (kn_model_load(g->engine, &m, &err)) {
    if (g->label && strcmp(g->label, g->engine)) return kn_cli_fail("%s: %s", g->label, err.msg);
    return kn_cli_error(&err);
  }
  if (kn_model_format_version(m) == 0) {
    rc = kn_cli_fail("%s is an ONNX model, not an engine: write one with kiln build MODEL -o "
                     "ENGINE (kiln compare compares a model with its optimized build)",
                     s->label);
    goto done;
  }
  s->nin = kn_model_input_count(m);
  s->nout = kn_model_output_count(m);
  s->in = calloc((size_t)s->nin + 1, sizeof *s->in);
  s->out = calloc((size_t)s->nout + 1, sizeof *s->out);
  buf = calloc((size_t)s->nin + 1, sizeof *buf);
  if (!s->in || !s->out || !buf) {
    rc = kn_cli_fail("out of memory");
    goto done;
  }
  for (int32_t i = 0; i < s->nin; i++) {
    kn_value_info vi;
    if (kn_model_input_info(m, i, &vi) || !(s->in[i].name = strdup(vi.name))) {
      rc = kn_cli_fail("%s: cannot read input %d", s->label, i);
      goto done;
    }
    s->in[i].dtype = vi.dtype;
    s->in[i].rank = vi.rank;
    memcpy(s->in[i].dims, vi.dims, sizeof vi.dims);
  }
  for (int32_t o = 0; o < s->nout; o++) {
    kn_value_info vi;
    if (kn_model_output_info(m, o, &vi) || !(s->out[o].name = strdup(vi.name))) {
      rc = kn_cli_fail("%s: cannot read output %d", s->label, o);
      goto done;
    }
    s->out[o].rank = -1;
    s->out[o].cosine = 1;
    s->out[o].abs_sample = s->out[o].cos_sample = -1;
  }
  if (g->data) {
    if ((rc = kn_cli_samples_find(g->data, s->nin, &s->samples))) goto done;
    s->n_samples = s->samples.n;
  } else {
    s->n_samples = 1;
    s->generated = calloc((size_t)s->nin + 1, sizeof *s->generated);
    if (!s->generated) {
      rc = kn_cli_fail("out of memory");
      goto done;
    }
    kn_cli_rng r = {g->seed * 0x9E3779B97F4A7C15ull + 1};
    for (int32_t i = 0; i < s->nin; i++) {
      kn_value_info vi = {.name = s->in[i].name, .dtype = s->in[i].dtype, .rank = s->in[i].rank};
      memcpy(vi.dims, s->in[i].dims, sizeof vi.dims);
      /* a dim kept dynamic by a build --profile: 1 within the profile's range */
      const kn_value_info *pmin = m->prof_min ? &m->prof_min[i] : NULL;
      const kn_value_info *pmax = m->prof_max ? &m->prof_max[i] : NULL;
      for (int32_t d = 0; pmin && pmax && pmin->rank == vi.rank && pmax->rank == vi.rank &&
                          d < vi.rank; d++)
        if (vi.dims[d] < 0) vi.dims[d] = pmin->dims[d] > 1 ? pmin->dims[d] : 1;
      kn_status st = kn_cli_random_input(&vi, g->shapes, g->n_shapes, &r, &s->generated[i], &err);
      if (st == KN_ERR_UNSUPPORTED) {
        rc = kn_cli_fail("%s: input '%s' has dtype %s, which kiln does not generate: give the "
                         "inputs with --data DIR", s->label, vi.name, dt_name(vi.dtype));
        goto done;
      }
      if (st) {
        rc = kn_cli_fail("%s: %s", s->label, err.msg);
        goto done;
      }
    }
  }
  s->outputs = calloc((size_t)s->n_samples * (size_t)s->nout + 1, sizeof *s->outputs);
  s->times = calloc((size_t)g->runs, sizeof *s->times);
  if (!s->outputs || !s->times) {
    rc = kn_cli_fail("out of memory");
    goto done;
  }
  for (int32_t k = 0; k < s->n_samples * s->nout; k++) s->outputs[k].rank = -1;
  if (kn_context_create(m, &ctx, &err) || kn_cli_set_threads(ctx, g->threads, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  s->threads = kn_context_threads(ctx);
  for (int32_t k = 0; k < s->n_samples; k++) {
    const kn_tensor *ins;
    const char *where = s->samples.n ? s->samples.dirs[k] : NULL;
    if ((rc = sample_inputs(s, k, buf, &ins)) || (rc = bind_inputs(ctx, ins, s->nin, where)))
      goto done;
    rc = KN_EXIT_ERROR;
    if (kn_context_run(ctx, &err)) {
      rc = where ? kn_cli_fail("%s: %s", where, err.msg) : kn_cli_error(&err);
      goto done;
    }
    for (int32_t o = 0; o < s->nout; o++) {
      const kn_tensor *t = kn_context_output(ctx, o);
      if (t && t->dtype != KN_DTYPE_STRING && !copy_tensor(t, &s->outputs[k * s->nout + o])) {
        rc = kn_cli_fail("out of memory keeping the outputs of %s", s->label);
        goto done;
      }
    }
    if (k == 0) {
      size_t used = 0;
      s->inputs_text[0] = 0;
      for (int32_t i = 0; i < s->nin && used < sizeof s->inputs_text; i++) {
        char t[128];
        dims_text(ins[i].dims, ins[i].rank, t, sizeof t);
        used += (size_t)snprintf(s->inputs_text + used, sizeof s->inputs_text - used, "%s%s=%s",
                                 i ? " " : "", s->in[i].name, t);
      }
      if (!s->nin) snprintf(s->inputs_text, sizeof s->inputs_text, "no inputs");
      /* the timing runs on the first sample, after untimed warm-up runs
       * (the first run pays for first-touch page faults) */
      for (int64_t w = 0; w < g->warmup; w++)
        if (kn_context_run(ctx, &err)) {
          rc = kn_cli_error(&err);
          goto done;
        }
      for (int64_t r = 0; r < g->runs; r++) {
        double a = kn_cli_now_s();
        if (kn_context_run(ctx, &err)) {
          rc = kn_cli_error(&err);
          goto done;
        }
        s->times[r] = (kn_cli_now_s() - a) * 1e3;
      }
    }
    if (s->samples.n) release_all(buf, s->nin);
  }
  s->rss = kn_cli_peak_rss();
  qsort(s->times, (size_t)g->runs, sizeof *s->times, kn_cli_cmp_double);
  rc = KN_EXIT_OK;
done:
  release_all(buf, s->nin);
  free(buf);
  kn_context_free(ctx);
  kn_model_free(m);
  return rc;
}

static void info_text(const char *name, kn_dtype dt, int32_t rank, const int64_t *dims,
                      char *buf, size_t n) {
  char d[128];
  if (rank < 0) snprintf(d, sizeof d, "of unknown rank");
  else dims_text(dims, rank, d, sizeof d);
  snprintf(buf, n, "'%s' %s %s", name, dt_name(dt), d);
}

/* The engine and the model take the same inputs (names, dtypes, fixed dims
 * that agree) and give the same outputs (names), in the same order. */
static int check_signature(const gate_state *s, const kn_model *m) {
  const char *lbl = s->label, *mp = s->g->model;
  int32_t nin = kn_model_input_count(m), nout = kn_model_output_count(m);
  if (nin != s->nin)
    return kn_cli_fail("%s does not match %s: the engine has %d input%s, the model %d", lbl, mp,
                       s->nin, s->nin == 1 ? "" : "s", nin);
  if (nout != s->nout)
    return kn_cli_fail("%s does not match %s: the engine has %d output%s, the model %d", lbl, mp,
                       s->nout, s->nout == 1 ? "" : "s", nout);
  for (int32_t i = 0; i < nin; i++) {
    kn_value_info vi;
    if (kn_model_input_info(m, i, &vi)) return kn_cli_fail("%s: cannot read input %d", mp, i);
    const io_info *e = &s->in[i];
    bool ok = !strcmp(vi.name, e->name) && vi.dtype == e->dtype &&
              (vi.rank < 0 || e->rank < 0 || vi.rank == e->rank);
    for (int32_t d = 0; ok && vi.rank >= 0 && d < vi.rank && d < e->rank; d++)
      ok = vi.dims[d] < 0 || e->dims[d] < 0 || vi.dims[d] == e->dims[d];
    if (!ok) {
      char a[256], b[256];
      info_text(e->name, e->dtype, e->rank, e->dims, a, sizeof a);
      info_text(vi.name, vi.dtype, vi.rank, vi.dims, b, sizeof b);
      return kn_cli_fail("%s does not match %s: input %d is %s in the engine, %s in the model",
                         lbl, mp, i, a, b);
    }
  }
  for (int32_t o = 0; o < nout; o++) {
    kn_value_info vi;
    if (kn_model_output_info(m, o, &vi)) return kn_cli_fail("%s: cannot read output %d", mp, o);
    if (strcmp(vi.name, s->out[o].name))
      return kn_cli_fail("%s does not match %s: output %d is '%s' in the engine, '%s' in the "
                         "model", lbl, mp, o, s->out[o].name, vi.name);
  }
  return KN_EXIT_OK;
}

/* A NaN cosine (NaN on one side) is worse than any number. */
static bool worse_cosine(double c, double than) {
  return !isnan(than) && (isnan(c) || c < than);
}

/* Top-1 of output 0 of one sample (its rows' argmax) against the next
 * labels; *seen and *correct advance. */
static int count_correct(gate_state *s, const kn_tensor *t, int64_t *seen, int64_t *correct) {
  int64_t c = t && t->rank > 0 ? t->dims[t->rank - 1] : 1;
  int64_t rows = t && t->rank >= 0 && c > 0 ? kn_tensor_numel(t) / c : 0;
  if (!t || t->dtype == KN_DTYPE_STRING || rows <= 0)
    return kn_cli_fail("%s: output 0 is not a numeric tensor: --max-accuracy-drop needs logits",
                       s->label);
  if (*seen + rows > s->n_labels)
    return kn_cli_fail("%s: %lld label%s, fewer than the predictions of the samples (output "
                       "0's rows): one label per row, in sample order", s->labels_path,
                       (long long)s->n_labels, s->n_labels == 1 ? "" : "s");
  int64_t *pred = malloc((size_t)rows * sizeof *pred);
  if (!pred) return kn_cli_fail("out of memory");
  rows = kn_cli_argmax_rows(t, pred, rows);
  for (int64_t r = 0; r < rows; r++) *correct += pred[r] == s->labels[*seen + r];
  *seen += rows;
  free(pred);
  return KN_EXIT_OK;
}

/* The reference path (the graph as imported, reference kernels' order of
 * operations) on the same samples; accuracy per output, worst over them. */
static int reference_phase(gate_state *s) {
  const kn_cli_gates *g = s->g;
  kn_error err = {0};
  kn_model *m = NULL;
  kn_context *ctx = NULL;
  kn_tensor *buf = calloc((size_t)s->nin + 1, sizeof *buf);
  int rc = KN_EXIT_ERROR;
  if (!buf) return kn_cli_fail("out of memory");
  if (kn_model_load(g->model, &m, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  if (kn_model_format_version(m) != 0) {
    rc = kn_cli_fail("%s is an engine: --against takes the ONNX model the engine was built "
                     "from", g->model);
    goto done;
  }
  kn_build_options bo;
  kn_build_options_init(&bo);
  bo.shapes = g->shapes;
  bo.n_shapes = g->n_shapes;
  bo.no_optimize = 1;
  kn_cli_note_probe(m, &bo);
  if (kn_model_build(m, &bo, &err)) { /* fixes shapes only */
    rc = kn_cli_error(&err);
    goto done;
  }
  if ((rc = check_signature(s, m))) goto done;
  rc = KN_EXIT_ERROR;
  if (kn_context_create(m, &ctx, &err) || kn_cli_set_threads(ctx, g->threads, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  for (int32_t k = 0; k < s->n_samples; k++) {
    const kn_tensor *ins;
    const char *where = s->samples.n ? s->samples.dirs[k] : NULL;
    if ((rc = sample_inputs(s, k, buf, &ins)) || (rc = bind_inputs(ctx, ins, s->nin, where)))
      goto done;
    rc = KN_EXIT_ERROR;
    if (kn_context_run(ctx, &err)) {
      rc = kn_cli_fail("%s (reference path)%s%s: %s", g->model, where ? ", " : "",
                       where ? where : "", err.msg);
      goto done;
    }
    for (int32_t o = 0; o < s->nout; o++) {
      const kn_tensor *ref = kn_context_output(ctx, o), *opt = &s->outputs[k * s->nout + o];
      if (!ref || ref->dtype == KN_DTYPE_STRING || opt->rank < 0) continue;
      out_acc *a = &s->out[o];
      kn_cli_diff d;
      if (!kn_cli_diff_tensors(ref, opt, REL_ATOL, 0, &d)) {
        char x[256], y[256];
        info_text(a->name, opt->dtype, opt->rank, opt->dims, x, sizeof x);
        info_text(a->name, ref->dtype, ref->rank, ref->dims, y, sizeof y);
        rc = kn_cli_fail("%s: output %s%s%s, but the reference path of %s gives %s", s->label, x,
                         where ? " on " : "", where ? where : "", g->model, y);
        goto done;
      }
      if (!a->compared) {
        a->dtype = ref->dtype;
        a->rank = ref->rank;
        memcpy(a->dims, ref->dims, sizeof a->dims);
      }
      if (!a->compared || d.max_abs > a->max_abs) a->max_abs = d.max_abs, a->abs_sample = k;
      if (!a->compared || d.max_rel > a->max_rel) a->max_rel = d.max_rel;
      if (!a->compared || worse_cosine(d.cosine, a->cosine))
        a->cosine = d.cosine, a->cos_sample = k;
      a->compared = true;
    }
    if (s->labels && s->nout > 0) {
      const kn_tensor *ref = kn_context_output(ctx, 0), *opt = &s->outputs[k * s->nout];
      if ((rc = count_correct(s, ref, &s->ref_seen, &s->ref_correct)) ||
          (rc = count_correct(s, opt, &s->eng_seen, &s->eng_correct)))
        goto done;
      rc = KN_EXIT_ERROR;
    }
    if (s->samples.n) release_all(buf, s->nin);
  }
  rc = KN_EXIT_OK;
done:
  release_all(buf, s->nin);
  free(buf);
  kn_context_free(ctx);
  kn_model_free(m);
  return rc;
}

/* ---- the limits --------------------------------------------------------------- */

enum { LIM_P99, LIM_RSS, LIM_ABS, LIM_COS, LIM_DROP, N_LIMITS };

typedef struct limit_result {
  const char *name; /* "max-p99-ms" */
  bool given, pass, upper; /* upper: a maximum */
  double measured, limit, margin; /* margin: room left, negative when failed */
  int32_t output, sample;         /* for accuracy: where the worst is (-1: none) */
} limit_result;

static void measure_limits(const gate_state *s, limit_result *lim) {
  const kn_cli_gates *g = s->g;
  double worst_abs = 0, worst_cos = 1;
  int32_t abs_o = -1, cos_o = -1;
  for (int32_t o = 0; o < s->nout; o++) {
    const out_acc *a = &s->out[o];
    if (!a->compared) continue;
    if (abs_o < 0 || a->max_abs > worst_abs) worst_abs = a->max_abs, abs_o = o;
    if (cos_o < 0 || worse_cosine(a->cosine, worst_cos)) worst_cos = a->cosine, cos_o = o;
  }
  lim[LIM_P99] = (limit_result){"max-p99-ms", g->has_p99, false, true,
                                kn_cli_percentile(s->times, g->runs, 0.99), g->max_p99_ms, 0, -1,
                                -1};
  lim[LIM_RSS] = (limit_result){"max-rss", g->has_rss, false, true, (double)s->rss,
                                (double)g->max_rss, 0, -1, -1};
  lim[LIM_ABS] = (limit_result){"max-abs-error", g->has_abs, false, true, worst_abs,
                                g->max_abs_error, 0, abs_o,
                                abs_o >= 0 ? s->out[abs_o].abs_sample : -1};
  lim[LIM_COS] = (limit_result){"min-cosine", g->has_cos, false, false, worst_cos,
                                g->min_cosine, 0, cos_o,
                                cos_o >= 0 ? s->out[cos_o].cos_sample : -1};
  double drop = 0;
  if (s->labels && s->ref_seen)
    drop = 100.0 * (double)(s->ref_correct - s->eng_correct) / (double)s->ref_seen;
  lim[LIM_DROP] = (limit_result){"max-accuracy-drop", g->has_drop, false, true, drop,
                                 g->max_drop, 0, -1, -1};
  for (int i = 0; i < N_LIMITS; i++) {
    limit_result *l = &lim[i];
    /* written so that a NaN measurement fails */
    l->pass = l->upper ? l->measured <= l->limit : l->measured >= l->limit;
    l->margin = l->upper ? l->limit - l->measured : l->measured - l->limit;
  }
}

/* "0.1398 ms", "9.2 MiB", "0.00031", as the limit's unit reads. */
static void value_text(int which, double v, bool sign, char *buf, size_t n) {
  const char *plus = sign && v >= 0 ? "+" : "";
  switch (which) {
  case LIM_P99: snprintf(buf, n, "%s%.4g ms", plus, v); break;
  case LIM_RSS: snprintf(buf, n, "%s%.1f MiB", plus, v / 1048576.0); break;
  case LIM_COS: snprintf(buf, n, sign ? "%s%.3g" : "%s%.9f", plus, v); break;
  case LIM_DROP: snprintf(buf, n, "%s%.3g points", plus, v); break;
  default: snprintf(buf, n, "%s%.4g", plus, v); break;
  }
}

static void where_text(const gate_state *s, const limit_result *l, char *buf, size_t n) {
  buf[0] = 0;
  if (l->output < 0) return;
  if (s->samples.n)
    snprintf(buf, n, "output '%s', sample %s", s->out[l->output].name,
             s->samples.dirs[l->sample]);
  else snprintf(buf, n, "output '%s'", s->out[l->output].name);
}

static void print_text(const gate_state *s, const limit_result *lim) {
  const kn_cli_gates *g = s->g;
  char src[4200];
  if (s->samples.n) snprintf(src, sizeof src, "from %s", g->data);
  else snprintf(src, sizeof src, "generated, seed %llu", (unsigned long long)g->seed);
  printf("%s against %s: %d sample%s (%s), %s; %d thread%s, %lld runs after %lld warm-up%s\n",
         s->label, g->model, s->n_samples, s->n_samples == 1 ? "" : "s", src, s->inputs_text,
         s->threads, s->threads == 1 ? "" : "s", (long long)g->runs, (long long)g->warmup,
         g->warmup == 1 ? "" : "s");
  for (int32_t o = 0; o < s->nout; o++) {
    const out_acc *a = &s->out[o];
    if (!a->compared) {
      printf("output '%s': not compared (not a numeric tensor)\n", a->name);
      continue;
    }
    char d[128];
    dims_text(a->dims, a->rank, d, sizeof d);
    printf("output '%s' %s %s: max_abs %.3g  max_rel %.3g  cosine %.9f\n", a->name,
           dt_name(a->dtype), d, a->max_abs, a->max_rel, a->cosine);
  }
  int64_t n = g->runs;
  double sum = 0;
  for (int64_t i = 0; i < n; i++) sum += s->times[i];
  printf("latency (ms): min %.4f  mean %.4f  p50 %.4f  p90 %.4f  p99 %.4f  max %.4f\n",
         s->times[0], sum / (double)n, kn_cli_percentile(s->times, n, 0.5),
         kn_cli_percentile(s->times, n, 0.9), kn_cli_percentile(s->times, n, 0.99),
         s->times[n - 1]);
  printf("peak RSS: %.1f MiB (%llu bytes)\n", (double)s->rss / 1048576.0,
         (unsigned long long)s->rss);
  if (s->labels && s->ref_seen)
    printf("top-1 accuracy of output '%s': engine %.2f%%, reference %.2f%% (%lld labels from "
           "%s)\n", s->nout ? s->out[0].name : "?",
           100.0 * (double)s->eng_correct / (double)s->eng_seen,
           100.0 * (double)s->ref_correct / (double)s->ref_seen, (long long)s->n_labels,
           s->labels_path);
  int given = 0, failed = 0;
  for (int i = 0; i < N_LIMITS; i++) {
    const limit_result *l = &lim[i];
    if (!l->given) continue;
    given++;
    failed += !l->pass;
    char m[64], lv[64], mg[64], w[512];
    value_text(i, l->measured, false, m, sizeof m);
    value_text(i, l->limit, false, lv, sizeof lv);
    if (i == LIM_COS) snprintf(lv, sizeof lv, "%.9g", l->limit);
    value_text(i, l->margin, true, mg, sizeof mg);
    where_text(s, l, w, sizeof w);
    if (w[0])
      printf("%s %-14s %-16s limit %-12s margin %-12s (%s)\n", l->pass ? "PASS" : "FAIL",
             l->name, m, lv, mg, w);
    else
      printf("%s %-14s %-16s limit %-12s margin %s\n", l->pass ? "PASS" : "FAIL", l->name, m,
             lv, mg);
  }
  if (!given) {
    printf("PASS: no limits given (--max-p99-ms, --max-rss, --max-abs-error, --min-cosine): "
           "measurements only\n");
  } else if (!failed) {
    printf("PASS: %d limit%s met\n", given, given == 1 ? "" : "s");
  } else {
    printf("FAIL: %d of %d limit%s failed (", failed, given, given == 1 ? "" : "s");
    for (int i = 0, k = 0; i < N_LIMITS; i++)
      if (lim[i].given && !lim[i].pass) printf("%s%s", k++ ? ", " : "", lim[i].name);
    printf(")\n");
  }
}

static void print_json(const gate_state *s, const limit_result *lim) {
  const kn_cli_gates *g = s->g;
  bool pass = true;
  for (int i = 0; i < N_LIMITS; i++) pass &= !lim[i].given || lim[i].pass;
  printf("{\"format\": \"kiln-validate\", \"version\": 1, \"engine\": ");
  kn_cli_json_str(stdout, s->label);
  printf(", \"model\": ");
  kn_cli_json_str(stdout, g->model);
  printf(", \"pass\": %s, \"samples\": %d, \"data\": ", pass ? "true" : "false", s->n_samples);
  if (g->data) kn_cli_json_str(stdout, g->data);
  else printf("null");
  printf(", \"seed\": %llu, \"inputs\": ", (unsigned long long)g->seed);
  kn_cli_json_str(stdout, s->inputs_text);
  printf(", \"threads\": %d, \"runs\": %lld, \"warmup\": %lld,\n \"limits\": [", s->threads,
         (long long)g->runs, (long long)g->warmup);
  for (int i = 0, k = 0; i < N_LIMITS; i++) {
    const limit_result *l = &lim[i];
    if (!l->given) continue;
    printf("%s\n  {\"name\": \"%s\", \"measured\": ", k++ ? "," : "", l->name);
    json_num(stdout, l->measured);
    printf(", \"limit\": ");
    json_num(stdout, l->limit);
    printf(", \"margin\": ");
    json_num(stdout, l->margin);
    printf(", \"pass\": %s", l->pass ? "true" : "false");
    if (l->output >= 0) {
      printf(", \"output\": ");
      kn_cli_json_str(stdout, s->out[l->output].name);
      printf(", \"sample\": %d", l->sample);
    }
    printf("}");
  }
  printf("],\n \"accuracy\": {\"max_abs_error\": ");
  json_num(stdout, lim[LIM_ABS].measured);
  printf(", \"min_cosine\": ");
  json_num(stdout, lim[LIM_COS].measured);
  if (s->labels && s->ref_seen)
    printf(", \"top1\": %.6f, \"reference_top1\": %.6f",
           100.0 * (double)s->eng_correct / (double)s->eng_seen,
           100.0 * (double)s->ref_correct / (double)s->ref_seen);
  printf(", \"outputs\": [");
  for (int32_t o = 0; o < s->nout; o++) {
    const out_acc *a = &s->out[o];
    printf("%s\n  {\"name\": ", o ? "," : "");
    kn_cli_json_str(stdout, a->name);
    printf(", \"compared\": %s", a->compared ? "true" : "false");
    if (a->compared) {
      printf(", \"dtype\": \"%s\", \"shape\": [", dt_name(a->dtype));
      for (int32_t d = 0; d < a->rank; d++) printf("%s%lld", d ? ", " : "", (long long)a->dims[d]);
      printf("], \"max_abs_error\": ");
      json_num(stdout, a->max_abs);
      printf(", \"max_rel_error\": ");
      json_num(stdout, a->max_rel);
      printf(", \"cosine\": ");
      json_num(stdout, a->cosine);
      printf(", \"worst_abs_sample\": %d, \"worst_cosine_sample\": %d", a->abs_sample,
             a->cos_sample);
    }
    printf("}");
  }
  int64_t n = g->runs;
  double sum = 0;
  for (int64_t i = 0; i < n; i++) sum += s->times[i];
  printf("]},\n \"latency_ms\": {\"min\": %.6f, \"mean\": %.6f, \"p50\": %.6f, \"p90\": %.6f, "
         "\"p99\": %.6f, \"max\": %.6f},\n \"peak_rss_bytes\": %llu}\n",
         s->times[0], sum / (double)n, kn_cli_percentile(s->times, n, 0.5),
         kn_cli_percentile(s->times, n, 0.9), kn_cli_percentile(s->times, n, 0.99),
         s->times[n - 1], (unsigned long long)s->rss);
}

static int read_labels(gate_state *s) {
  const kn_cli_gates *g = s->g;
  if (g->labels) snprintf(s->labels_path, sizeof s->labels_path, "%s", g->labels);
  else if (g->data) snprintf(s->labels_path, sizeof s->labels_path, "%s/labels.txt", g->data);
  else
    return kn_cli_fail("%s: --max-accuracy-drop needs labelled samples: give --data DIR (with "
                       "DIR/labels.txt, or --labels FILE)", s->label);
  return kn_cli_labels_read(s->labels_path, &s->labels, &s->n_labels);
}

int kn_cli_gates_check(const kn_cli_gates *g, char *failed, size_t failed_size) {
  if (failed_size) failed[0] = 0;
  gate_state s;
  memset(&s, 0, sizeof s);
  s.g = g;
  s.label = g->label ? g->label : g->engine;
  /* said before the engine's runs rather than after them */
  if (access(g->model, R_OK) != 0)
    return kn_cli_fail("%s: cannot open: %s", g->model, strerror(errno));
  int rc = engine_phase(&s);
  if (!rc && g->has_drop) rc = read_labels(&s);
  if (!rc) rc = reference_phase(&s);
  if (!rc && s.labels && s.ref_seen != s.n_labels)
    rc = kn_cli_fail("%s: %lld labels for %lld predictions (output 0's rows over %d sample%s): "
                     "one label per row, in sample order", s.labels_path,
                     (long long)s.n_labels, (long long)s.ref_seen, s.n_samples,
                     s.n_samples == 1 ? "" : "s");
  if (rc) {
    state_free(&s);
    return rc;
  }
  limit_result lim[N_LIMITS];
  measure_limits(&s, lim);
  if (g->json) print_json(&s, lim);
  else print_text(&s, lim);
  fflush(stdout);
  size_t used = 0;
  for (int i = 0; i < N_LIMITS; i++) {
    const limit_result *l = &lim[i];
    if (!l->given || l->pass) continue;
    char m[64], lv[64];
    value_text(i, l->measured, false, m, sizeof m);
    value_text(i, l->limit, false, lv, sizeof lv);
    if (i == LIM_COS) snprintf(lv, sizeof lv, "%.9g", l->limit);
    if (used < failed_size)
      used += (size_t)snprintf(failed + used, failed_size - used, "%s--%s (measured %s, limit %s)",
                               used ? " and " : "", l->name, m, lv);
    rc = KN_EXIT_ERROR;
  }
  state_free(&s);
  return rc;
}
