/* The calibrator (kiln.h "int8 calibration"): runs a model's reference
 * path on each sample through a context of its own and histograms every
 * float tensor the context's observer shows it (every node output of the
 * top-level graph, after its step) and every float graph input.
 *
 * Above src/engine: it drives a context through the public API and reads
 * one flag of the model (engine.h) to refuse optimized builds. */
#include "engine/engine.h"
#include "quant/calibration.h"

#include <math.h>

#define CONVERT_CHUNK 4096 /* f16/bf16/f64 values converted to float at a time */

typedef struct calib_tensor {
  char *name;
  kn_hist h;
} calib_tensor;

struct kn_calibrator {
  const kn_model *model;
  kn_context *ctx;
  int32_t bins;
  int32_t nin;
  calib_tensor *t;
  int32_t n, cap;
  int32_t *slots;    /* open-addressing hash of names: index into t, or -1 */
  int32_t n_slots;   /* a power of two, more than twice n */
  int64_t samples;
  bool broken;       /* a run failed part-way: the histograms hold part of a sample */
  kn_status obs_st;  /* an observer failure (out of memory), reported after the run */
  kn_error obs_err;
  float *conv;       /* [CONVERT_CHUNK] */
};

void kn_calib_options_init(kn_calib_options *o) {
  memset(o, 0, sizeof *o);
  o->bins = KN_CALIB_DEFAULT_BINS;
}

static uint64_t hash_name(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static int32_t *find_slot(const kn_calibrator *c, const char *name) {
  uint64_t mask = (uint64_t)c->n_slots - 1;
  for (uint64_t i = hash_name(name) & mask;; i = (i + 1) & mask) {
    int32_t k = c->slots[i];
    if (k < 0 || !strcmp(c->t[k].name, name)) return &c->slots[i];
  }
}

static kn_status rehash(kn_calibrator *c, int32_t n_slots, kn_error *err) {
  int32_t *s = kn_malloc(sizeof *s * (size_t)n_slots);
  if (!s) return kn_fail(err, KN_ERR_OOM, "out of memory calibrating");
  for (int32_t i = 0; i < n_slots; i++) s[i] = -1;
  free(c->slots);
  c->slots = s;
  c->n_slots = n_slots;
  for (int32_t k = 0; k < c->n; k++) *find_slot(c, c->t[k].name) = k;
  return KN_OK;
}

/* The tensor named `name`, added when new. */
static kn_status tensor_for(kn_calibrator *c, const char *name, calib_tensor **out,
                            kn_error *err) {
  int32_t *slot = find_slot(c, name);
  if (*slot >= 0) {
    *out = &c->t[*slot];
    return KN_OK;
  }
  if (c->n >= INT32_MAX / 4 || !KN_GROW(c->t, c->cap, (int64_t)c->n + 1))
    return kn_fail(err, KN_ERR_OOM, "out of memory calibrating");
  calib_tensor *t = &c->t[c->n];
  memset(t, 0, sizeof *t);
  if (!(t->name = kn_strdup(name))) return kn_fail(err, KN_ERR_OOM, "out of memory calibrating");
  kn_status st = kn_hist_init(&t->h, c->bins, err);
  if (st) {
    free(t->name);
    return st;
  }
  c->n++;
  if ((int64_t)c->n * 2 >= c->n_slots) {
    if ((st = rehash(c, c->n_slots * 2, err))) return st;
  } else {
    *slot = c->n - 1;
  }
  *out = t;
  return KN_OK;
}

static bool calibrated_dtype(kn_dtype dt) {
  return dt == KN_DTYPE_F32 || dt == KN_DTYPE_F16 || dt == KN_DTYPE_BF16 || dt == KN_DTYPE_F64;
}

static kn_status record(kn_calibrator *c, const char *name, const kn_tensor *x, kn_error *err) {
  if (!calibrated_dtype(x->dtype)) return KN_OK;
  calib_tensor *t = NULL;
  kn_status st = tensor_for(c, name, &t, err);
  if (st) return st;
  int64_t n = kn_tensor_numel(x);
  if (x->dtype == KN_DTYPE_F32) {
    kn_hist_add(&t->h, x->data, n);
    return KN_OK;
  }
  size_t es = kn_dtype_size(x->dtype);
  for (int64_t i = 0; i < n; i += CONVERT_CHUNK) {
    int64_t k = n - i < CONVERT_CHUNK ? n - i : CONVERT_CHUNK;
    kn_convert((const char *)x->data + (size_t)i * es, x->dtype, c->conv, KN_DTYPE_F32, k);
    kn_hist_add(&t->h, c->conv, k);
  }
  return KN_OK;
}

static void observe(const char *name, const kn_tensor *t, void *arg) {
  kn_calibrator *c = arg;
  if (c->obs_st || !name) return;
  c->obs_st = record(c, name, t, &c->obs_err);
}

kn_status kn_calibrator_create(const kn_model *m, const kn_calib_options *o,
                               kn_calibrator **out, kn_error *err) {
  *out = NULL;
  kn_calib_options def;
  if (!o) {
    kn_calib_options_init(&def);
    o = &def;
  }
  const char *label = m->ir->label;
  if (m->from_engine)
    return kn_fail(err, KN_ERR_INVALID_ARG, "%s is an engine: calibration runs the ONNX model "
                   "as imported, whose tensors keep the names the ONNX file gives them; load "
                   "the .onnx the engine was built from", label);
  if (m->optimized)
    return kn_fail(err, KN_ERR_INVALID_ARG, "%s was built with optimization: calibration runs "
                   "the graph as imported (build it with no_optimize, or not at all), so that "
                   "its tensors keep their ONNX names", label);
  int32_t bins = o->bins ? o->bins : KN_CALIB_DEFAULT_BINS;
  if (bins < KN_CALIB_MIN_BINS || bins > KN_CALIB_MAX_BINS)
    return kn_fail(err, KN_ERR_INVALID_ARG, "calibration of %s: %d histogram bins; expected "
                   "%d to %d", label, bins, KN_CALIB_MIN_BINS, KN_CALIB_MAX_BINS);
  kn_calibrator *c = kn_calloc(1, sizeof *c);
  if (!c) return kn_fail(err, KN_ERR_OOM, "out of memory calibrating %s", label);
  c->model = m;
  c->bins = bins;
  c->nin = kn_model_input_count(m);
  kn_status st = KN_OK;
  if (!(c->conv = kn_malloc(sizeof(float) * CONVERT_CHUNK)))
    st = kn_fail(err, KN_ERR_OOM, "out of memory calibrating %s", label);
  if (!st) st = rehash(c, 64, err);
  if (!st) st = kn_context_create(m, &c->ctx, err);
  if (!st && o->threads > 0) st = kn_context_set_threads(c->ctx, o->threads, err);
  if (st) {
    kn_calibrator_free(c);
    return st;
  }
  kn_context_set_observer(c->ctx, observe, c);
  *out = c;
  return KN_OK;
}

kn_status kn_calibrator_add_sample(kn_calibrator *c, const kn_tensor *in, int32_t n_in,
                                   kn_error *err) {
  const char *label = c->model->ir->label;
  if (c->broken)
    return kn_fail(err, KN_ERR_INVALID_ARG, "calibration of %s: an earlier sample failed "
                   "part-way; start a new calibrator", label);
  if (n_in != c->nin)
    return kn_fail(err, KN_ERR_INVALID_ARG, "calibration of %s: %d input%s given, the model "
                   "takes %d", label, n_in, n_in == 1 ? "" : "s", c->nin);
  kn_status st;
  for (int32_t i = 0; i < n_in; i++)
    if ((st = kn_context_set_input(c->ctx, i, &in[i], err))) return st;
  c->obs_st = KN_OK;
  st = kn_context_run(c->ctx, err);
  if (!st && c->obs_st) {
    st = c->obs_st;
    if (err) *err = c->obs_err;
  }
  /* the inputs last, so that a run that fails records none of them */
  for (int32_t i = 0; !st && i < n_in; i++) {
    kn_value_info vi;
    if ((st = kn_model_input_info(c->model, i, &vi)))
      st = kn_fail(err, st, "calibration of %s: cannot read input %d", label, i);
    else st = record(c, vi.name, &in[i], err);
  }
  if (st) {
    c->broken = true;
    return st;
  }
  c->samples++;
  return KN_OK;
}

int64_t kn_calibrator_sample_count(const kn_calibrator *c) { return c->samples; }

uint64_t kn_calibrator_nonfinite_count(const kn_calibrator *c) {
  uint64_t n = 0;
  for (int32_t k = 0; k < c->n; k++) n += c->t[k].h.nonfinite;
  return n;
}

/* Graph inputs first (in input order), then node outputs as first seen. */
static int32_t input_rank(const kn_calibrator *c, const char *name) {
  for (int32_t i = 0; i < c->nin; i++) {
    kn_value_info vi;
    if (!kn_model_input_info(c->model, i, &vi) && !strcmp(vi.name, name)) return i;
  }
  return -1;
}

kn_status kn_calibrator_finish(const kn_calibrator *c, kn_calib_method method, double param,
                               kn_calibration **out, kn_error *err) {
  *out = NULL;
  const char *label = c->model->ir->label;
  if (!kn_calib_method_name(method))
    return kn_fail(err, KN_ERR_INVALID_ARG, "calibration of %s: unknown method %d", label,
                   (int)method);
  if (method == KN_CALIB_PERCENTILE) {
    if (param == 0) param = KN_CALIB_DEFAULT_PERCENTILE;
    if (!(param > 0 && param <= 100))
      return kn_fail(err, KN_ERR_INVALID_ARG, "calibration of %s: percentile %g; expected a "
                     "number in (0, 100]", label, param);
  }
  if (c->broken)
    return kn_fail(err, KN_ERR_INVALID_ARG, "calibration of %s: a sample failed part-way; "
                   "the ranges are incomplete", label);
  if (c->samples == 0)
    return kn_fail(err, KN_ERR_MISSING, "calibration of %s: no samples were run", label);
  kn_calibration *t;
  kn_status st = kn_calibration_new(method, param, c->samples, &t, err);
  if (st) return st;
  int32_t *order = kn_malloc(sizeof *order * ((size_t)c->n + 1));
  if (!order) {
    kn_calibration_free(t);
    return kn_fail(err, KN_ERR_OOM, "out of memory calibrating %s", label);
  }
  int32_t n = 0;
  for (int32_t i = 0; i < c->nin; i++) {
    kn_value_info vi;
    if (kn_model_input_info(c->model, i, &vi)) continue;
    int32_t *slot = find_slot(c, vi.name);
    if (*slot >= 0) order[n++] = *slot;
  }
  for (int32_t k = 0; k < c->n; k++)
    if (input_rank(c, c->t[k].name) < 0) order[n++] = k;
  for (int32_t i = 0; !st && i < n; i++) {
    const kn_hist *h = &c->t[order[i]].h;
    float amax = (float)kn_hist_threshold(h, method, param);
    bool any = h->min <= h->max;
    st = kn_calibration_append(t, c->t[order[i]].name, strlen(c->t[order[i]].name), amax,
                               any ? h->min : 0, any ? h->max : 0, err);
  }
  free(order);
  if (!st && kn_calibration_index(t) != -1)
    st = kn_fail(err, KN_ERR_OOM, "out of memory calibrating %s", label);
  if (st) {
    kn_calibration_free(t);
    return st;
  }
  *out = t;
  return KN_OK;
}

void kn_calibrator_free(kn_calibrator *c) {
  if (!c) return;
  kn_context_free(c->ctx);
  for (int32_t k = 0; k < c->n; k++) {
    free(c->t[k].name);
    kn_hist_free(&c->t[k].h);
  }
  free(c->t);
  free(c->slots);
  free(c->conv);
  free(c);
}
