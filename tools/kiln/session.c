/* What the commands that run a model share (bench, profile): the build and
 * input options, reading or generating inputs for every input, building an
 * ONNX model for the shapes it will run on, and a context ready to run
 * (cli.h, "model sessions"). */
#include "cli.h"
#include "core/core.h"
#include "engine/engine.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

double kn_cli_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- what an input feeds --------------------------------------------------- */

typedef struct input_role {
  int64_t vocab; /* > 0: token ids below this */
  bool mask;     /* all ones */
} input_role;

static bool name_has(const char *name, const char *word) {
  size_t n = strlen(word);
  for (const char *p = name; *p; p++) {
    size_t k = 0;
    while (k < n && p[k] && tolower((unsigned char)p[k]) == word[k]) k++;
    if (k == n) return true;
  }
  return false;
}

/* Ops that carry an index tensor along unchanged in value (first input). */
static bool passes_values(const char *op) {
  static const char *const ops[] = {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten",
                                    "Identity", "Expand", "Transpose"};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(op, ops[i])) return true;
  return false;
}

/* Follows value v to the ops that read it: a Gather from a constant [V, D]
 * table makes it token ids below V (the smallest V when it indexes several
 * tables), a Cast followed by Sub or Mul makes it a mask. */
static void find_role(const kn_graph *g, int32_t v, bool cast_seen, int depth, input_role *r) {
  if (depth > 8) return;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (n->dead) continue;
    for (int32_t k = 0; k < n->n_inputs; k++) {
      if (n->inputs[k] != v) continue;
      if (!strcmp(n->op_type, "Gather") && k == 1 && n->inputs[0] >= 0) {
        const kn_tensor *table = g->values[n->inputs[0]].constant;
        if (table && table->rank == 2 && table->dims[0] > 0 &&
            (r->vocab == 0 || table->dims[0] < r->vocab))
          r->vocab = table->dims[0];
      } else if (cast_seen && (!strcmp(n->op_type, "Sub") || !strcmp(n->op_type, "Mul"))) {
        r->mask = true;
      } else if (k == 0 && passes_values(n->op_type) && n->n_outputs > 0 && n->outputs[0] >= 0) {
        find_role(g, n->outputs[0], cast_seen || !strcmp(n->op_type, "Cast"), depth + 1, r);
      }
    }
  }
}

static input_role role_of(const kn_model *m, int32_t index) {
  input_role r = {0, false};
  const kn_graph *g = kn_model_ir(m)->graph;
  int32_t v = g->inputs[m->inputs[index]];
  if (name_has(g->values[v].name, "mask")) r.mask = true;
  else find_role(g, v, false, 0, &r);
  return r;
}

/* ---- shapes ---------------------------------------------------------------- */

/* "1x3x224x224" -> dims; false when malformed. */
bool kn_cli_parse_dims(const char *s, int64_t *dims, int32_t *rank) {
  *rank = 0;
  if (!*s) return true; /* a scalar */
  for (const char *p = s;;) {
    char *end;
    if (*p < '0' || *p > '9' || *rank == KN_MAX_RANK) return false;
    long long d = strtoll(p, &end, 10);
    if (d > (1ll << 40)) return false;
    dims[(*rank)++] = d;
    if (!*end) return true;
    if (*end != 'x' && *end != 'X') return false;
    p = end + 1;
  }
}

/* The value of NAME=... for input `name` among specs, or NULL. */
const char *kn_cli_spec_for(const char *const *specs, int n, const char *name) {
  const char *found = NULL;
  for (int k = 0; k < n; k++) {
    const char *eq = strrchr(specs[k], '=');
    if (eq && strlen(name) == (size_t)(eq - specs[k]) &&
        !strncmp(name, specs[k], (size_t)(eq - specs[k])))
      found = eq + 1;
  }
  return found;
}

static bool seq_like(const char *param) {
  static const char *const words[] = {"seq", "len", "token", "time", "step", "word"};
  for (size_t i = 0; param && i < sizeof words / sizeof *words; i++)
    if (name_has(param, words[i])) return true;
  return false;
}

/* Size of dynamic dim d of an input when nothing says it: the first dim is
 * a batch (1); a later one named like a sequence, or any later dim of an
 * integer input (token ids [batch, sequence]), is a sequence (128); one
 * named height or width is an image side (224); anything else 1.  Kept
 * within the range of a profile. */
static int64_t default_dim(const kn_value_info *vi, int32_t d, const kn_value_info *pmin,
                           const kn_value_info *pmax) {
  const char *p = vi->dim_params[d];
  int64_t v = 1;
  if (d > 0 && (seq_like(p) || kn_dtype_is_int(vi->dtype))) v = 128;
  else if (d > 0 && p && (name_has(p, "height") || name_has(p, "width"))) v = 224;
  if (pmin && pmin->rank == vi->rank && pmax && pmax->rank == vi->rank) {
    if (v < pmin->dims[d]) v = pmin->dims[d];
    if (v > pmax->dims[d]) v = pmax->dims[d];
  }
  return v;
}

void kn_cli_dims_text(const int64_t *dims, int32_t rank, char *buf, size_t n) {
  size_t o = 0;
  buf[0] = 0;
  for (int32_t d = 0; d < rank && o < n; d++)
    o += (size_t)snprintf(buf + o, n - o, "%s%lld", d ? "x" : "", (long long)dims[d]);
}

/* ---- generated data ------------------------------------------------------- */

static kn_status make_input(const kn_value_info *vi, const int64_t *dims, int32_t rank,
                            input_role role, kn_cli_rng *r, kn_tensor *t, kn_error *err) {
  kn_dtype dt = vi->dtype ? vi->dtype : KN_DTYPE_F32;
  if (dt == KN_DTYPE_STRING) {
    snprintf(err->msg, sizeof err->msg,
             "input '%s' is a string tensor: give it with --input NAME=FILE", vi->name);
    return err->status = KN_ERR_UNSUPPORTED;
  }
  kn_status st = kn_tensor_alloc(t, dt, rank, dims, err);
  if (st) return st;
  int64_t n = kn_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    uint64_t x = kn_cli_rng_next(r);
    if (kn_dtype_is_float(dt)) {
      kn_store_f64(t->data, dt, i, (double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    } else {
      int64_t v = role.mask ? 1 : role.vocab > 0 ? (int64_t)(x % (uint64_t)role.vocab)
                                                 : (int64_t)(x >> 63);
      kn_store_i64(t->data, dt, i, v);
    }
  }
  return KN_OK;
}

/* ---- statistics ------------------------------------------------------------ */

int kn_cli_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Linear interpolation between order statistics (as numpy's default and
 * bench/ort_bench.js do), so kiln's and ONNX Runtime's p50 compare. */
double kn_cli_percentile(const double *sorted, int64_t n, double p) {
  double idx = (double)(n - 1) * p;
  int64_t lo = (int64_t)floor(idx), hi = (int64_t)ceil(idx);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (idx - (double)lo);
}

uint64_t kn_cli_peak_rss(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (uint64_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}

void kn_cli_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

/* ---- options ----------------------------------------------------------- */

void kn_cli_model_opts_init(kn_cli_model_opts *o, const char *cmd) {
  memset(o, 0, sizeof *o);
  o->cmd = cmd;
  o->seed = 1;
  kn_build_options_init(&o->bo);
}

int kn_cli_model_option(const kn_cli_args *a, int id, kn_cli_model_opts *o) {
  const kn_cli_cmd *cmd = a->cmd;
  const char **list = NULL;
  int *count = NULL;
  switch (id) {
  case KN_CLI_O_THREADS:
    return kn_cli_int(a, 1, KN_CLI_MAX_THREADS, &o->threads) ? KN_EXIT_OK : KN_EXIT_USAGE;
  case KN_CLI_O_SEED:
    return kn_cli_int(a, 0, INT64_MAX, &o->seed) ? KN_EXIT_OK : KN_EXIT_USAGE;
  case KN_CLI_O_INPUT_DIR: o->input_dir = a->arg; return KN_EXIT_OK;
  case KN_CLI_O_NO_OPTIMIZE: o->bo.no_optimize = 1, o->build_opts = true; return KN_EXIT_OK;
  case KN_CLI_O_REFERENCE: o->bo.reference_kernels = 1, o->build_opts = true; return KN_EXIT_OK;
  case KN_CLI_O_WORKSPACE:
    if (!kn_cli_parse_bytes(a->arg, &o->bo.workspace))
      return kn_cli_usage(cmd, "--workspace takes a byte count such as 268435456 or 256M, "
                               "got '%s'", a->arg);
    o->build_opts = true;
    return KN_EXIT_OK;
  case KN_CLI_O_SHAPE: list = o->shapes, count = &o->n_shapes; break;
  case KN_CLI_O_INPUT: list = o->named, count = &o->n_named; break;
  case KN_CLI_O_PROFILE: list = o->profiles, count = &o->n_profiles, o->build_opts = true; break;
  case KN_CLI_O_DISABLE_PASS:
    list = o->disabled, count = &o->n_disabled, o->build_opts = true;
    break;
  default: return -1;
  }
  if (*count == KN_CLI_MAX_LIST) return kn_cli_usage(cmd, "too many %s options", a->flag);
  if ((id == KN_CLI_O_SHAPE || id == KN_CLI_O_INPUT) && !strchr(a->arg, '='))
    return kn_cli_usage(cmd, "--%s takes NAME=%s, got '%s'", id == KN_CLI_O_SHAPE ? "shape" : "input",
                        id == KN_CLI_O_SHAPE ? "DIMS" : "FILE", a->arg);
  if (id == KN_CLI_O_SHAPE) {
    int64_t dims[KN_MAX_RANK];
    int32_t rank;
    if (!kn_cli_parse_dims(strrchr(a->arg, '=') + 1, dims, &rank))
      return kn_cli_usage(cmd, "--shape takes NAME=DIMS such as input=1x3x224x224, got '%s'",
                          a->arg);
  }
  list[(*count)++] = a->arg;
  return KN_EXIT_OK;
}

/* ---- the session ----------------------------------------------------------- */

void kn_cli_session_close(kn_cli_session *s) {
  if (s->inputs)
    for (int32_t i = 0; i < s->nin; i++) kn_tensor_release(&s->inputs[i]);
  free(s->inputs);
  free(s->given);
  for (int32_t i = 0; i < s->n_specs; i++) free(s->shape_specs[i]);
  free(s->shape_specs);
  kn_context_free(s->ctx);
  kn_model_free(s->model);
  memset(s, 0, sizeof *s);
}

/* The size of a dynamic dim named `param` given by o->dim_values, or -1. */
static int64_t dim_value(const kn_cli_model_opts *o, const char *param) {
  const char *v = param ? kn_cli_spec_for(o->dim_values, o->n_dim_values, param) : NULL;
  return v ? strtoll(v, NULL, 10) : -1;
}

/* Reads --input files and decides every input's dims: from its file, its
 * --shape, else defaults for dynamic dims (noted on stderr unless quiet).
 * For an ONNX model the chosen dims also go to kn_model_build, so that
 * the model is built for the shapes it is timed on. */
static int plan_inputs(const kn_cli_model_opts *o, kn_cli_session *s,
                       int64_t (*dims)[KN_MAX_RANK], int32_t *ranks) {
  kn_error err = {0};
  const kn_model *m = s->model;
  for (int pass = 0; pass < 2; pass++) {
    const char *const *list = pass ? o->shapes : o->named;
    int n = pass ? o->n_shapes : o->n_named;
    for (int k = 0; k < n; k++) {
      const char *eq = pass ? strrchr(list[k], '=') : strchr(list[k], '=');
      bool found = false;
      for (int32_t i = 0; i < s->nin && !found; i++) {
        kn_value_info vi;
        found = kn_model_input_info(m, i, &vi) == KN_OK &&
                strlen(vi.name) == (size_t)(eq - list[k]) &&
                !strncmp(vi.name, list[k], (size_t)(eq - list[k]));
      }
      if (!found)
        return kn_cli_fail("%s: --%s %.*s: the model has no input of that name", o->path,
                           pass ? "shape" : "input", (int)(eq - list[k]), list[k]);
    }
  }
  s->shape_specs = calloc((size_t)s->nin + 1, sizeof *s->shape_specs);
  if (!s->shape_specs) return kn_cli_fail("out of memory");
  size_t used = 0;
  for (int32_t i = 0; i < s->nin; i++) {
    kn_value_info vi;
    if (kn_model_input_info(m, i, &vi)) return kn_cli_fail("%s: input %d has no info", o->path, i);
    const char *file = kn_cli_spec_for(o->named, o->n_named, vi.name);
    char path[4096];
    if (!file && o->input_dir) {
      snprintf(path, sizeof path, "%s/input_%d.pb", o->input_dir, i);
      if (access(path, F_OK) != 0) snprintf(path, sizeof path, "%s/input_%d.npy", o->input_dir, i);
      if (access(path, F_OK) == 0) file = path;
    }
    const char *shape = kn_cli_spec_for(o->shapes, o->n_shapes, vi.name);
    bool profiled = kn_cli_spec_for(o->profiles, o->n_profiles, vi.name) != NULL;
    bool dynamic = vi.rank < 0, named_dim = false;
    for (int32_t d = 0; d < vi.rank; d++) dynamic |= vi.dims[d] < 0;
    if (file) {
      if (kn_tensor_read_file(file, &s->inputs[i], NULL, &err)) return kn_cli_error(&err);
      s->given[i] = true;
      ranks[i] = s->inputs[i].rank;
      memcpy(dims[i], s->inputs[i].dims, sizeof dims[i]);
    } else if (shape) {
      if (!kn_cli_parse_dims(shape, dims[i], &ranks[i])) /* checked while parsing options */
        return kn_cli_fail("%s: --shape %s: bad dims", o->path, vi.name);
    } else {
      ranks[i] = vi.rank < 0 ? 0 : vi.rank;
      const kn_value_info *pmin = m->prof_min ? &m->prof_min[i] : NULL;
      const kn_value_info *pmax = m->prof_max ? &m->prof_max[i] : NULL;
      bool defaulted = false;
      for (int32_t d = 0; d < ranks[i]; d++) {
        int64_t v = vi.dims[d] >= 0 ? vi.dims[d] : dim_value(o, vi.dim_params[d]);
        if (vi.dims[d] < 0 && v >= 0) named_dim = true;
        if (v < 0) v = default_dim(&vi, d, pmin, pmax), defaulted = true;
        dims[i][d] = v;
      }
      if (dynamic && defaulted && !o->quiet) {
        char t[128];
        kn_cli_dims_text(dims[i], ranks[i], t, sizeof t);
        fprintf(stderr, "kiln %s: input '%s' has dynamic dims: using %s (--shape %s=DIMS "
                        "to choose)\n", o->cmd, vi.name, t, vi.name);
      }
    }
    /* a model is built for what it will run on; a profile keeps the input dynamic */
    if (!s->engine && !profiled && (dynamic || shape || named_dim)) {
      char t[128];
      kn_cli_dims_text(dims[i], ranks[i], t, sizeof t);
      size_t n = strlen(vi.name) + strlen(t) + 2;
      if (!(s->shape_specs[s->n_specs] = malloc(n))) return kn_cli_fail("out of memory");
      snprintf(s->shape_specs[s->n_specs++], n, "%s=%s", vi.name, t);
    }
    char t[128];
    kn_cli_dims_text(dims[i], ranks[i], t, sizeof t);
    if (used < sizeof s->shapes_text)
      used += (size_t)snprintf(s->shapes_text + used, sizeof s->shapes_text - used, "%s%s=%s",
                               i ? " " : "", vi.name, ranks[i] ? t : "scalar");
  }
  if (!s->nin) snprintf(s->shapes_text, sizeof s->shapes_text, "no inputs");
  return KN_EXIT_OK;
}

int kn_cli_session_open(const kn_cli_model_opts *o, kn_cli_session *s) {
  memset(s, 0, sizeof *s);
  kn_error err = {0};
  double t0 = kn_cli_now_s();
  if (kn_model_load(o->path, &s->model, &err)) return kn_cli_error(&err);
  double t_loaded = kn_cli_now_s();
  s->model_load_ms = (t_loaded - t0) * 1e3;
  s->engine = kn_model_format_version(s->model) != 0;
  if (s->engine && o->build_opts)
    return kn_cli_fail("%s: an engine is built already: --profile, --disable-pass, --workspace, "
                       "--no-optimize and --reference-kernels apply to ONNX models",
                       o->path);
  s->nin = kn_model_input_count(s->model);
  s->inputs = calloc((size_t)s->nin + 1, sizeof *s->inputs);
  s->given = calloc((size_t)s->nin + 1, sizeof *s->given);
  int64_t(*dims)[KN_MAX_RANK] = calloc((size_t)s->nin + 1, sizeof *dims);
  int32_t *ranks = calloc((size_t)s->nin + 1, sizeof *ranks);
  input_role *roles = calloc((size_t)s->nin + 1, sizeof *roles);
  int rc = KN_EXIT_OK;
  if (!s->inputs || !s->given || !dims || !ranks || !roles) rc = kn_cli_fail("out of memory");
  /* roles come from the graph as imported, before passes fuse what reads the inputs */
  for (int32_t i = 0; !rc && i < s->nin; i++) roles[i] = role_of(s->model, i);
  if (!rc) rc = plan_inputs(o, s, dims, ranks);
  double t_build = kn_cli_now_s();
  if (!rc && !s->engine) {
    kn_build_options bo = o->bo;
    bo.shapes = (const char *const *)s->shape_specs;
    bo.n_shapes = s->n_specs;
    bo.profiles = o->profiles;
    bo.n_profiles = o->n_profiles;
    bo.disabled_passes = o->disabled;
    bo.n_disabled_passes = o->n_disabled;
    if (!o->quiet) kn_cli_note_probe(s->model, &bo);
    if (kn_model_build(s->model, &bo, &err)) rc = kn_cli_error(&err);
  }
  double t_built = kn_cli_now_s();
  s->build_ms = s->engine ? 0 : (t_built - t_build) * 1e3;
  kn_cli_rng r = {(uint64_t)o->seed * 0x9E3779B97F4A7C15ull + 1};
  for (int32_t i = 0; !rc && i < s->nin; i++) {
    kn_value_info vi;
    if (kn_model_input_info(s->model, i, &vi) == KN_OK && !s->given[i] &&
        make_input(&vi, dims[i], ranks[i], roles[i], &r, &s->inputs[i], &err))
      rc = kn_cli_error(&err);
  }
  free(dims);
  free(ranks);
  free(roles);
  if (rc) return rc;
  double t_ctx = kn_cli_now_s();
  if (kn_context_create(s->model, &s->ctx, &err) || kn_cli_set_threads(s->ctx, o->threads, &err))
    return kn_cli_error(&err);
  /* startup: what a program pays before its first run (reading inputs and
   * generating data are not part of it) */
  s->load_ms = s->model_load_ms + s->build_ms + (kn_cli_now_s() - t_ctx) * 1e3;
  for (int32_t i = 0; i < s->nin; i++)
    if (kn_context_set_input(s->ctx, i, &s->inputs[i], &err)) return kn_cli_error(&err);
  /* step reports (profile's FLOPs, bytes, predictions) for the shapes that
   * run, not the static ones (a dynamic dimension counts as 1 there): the
   * inputs with a dynamic dimension, when there are any */
  kn_value_info *vi = calloc((size_t)s->nin + 1, sizeof *vi);
  if (!vi) return kn_cli_fail("out of memory");
  int32_t nv = 0;
  for (int32_t i = 0; i < s->nin; i++) {
    if (kn_model_input_info(s->model, i, &vi[nv])) continue;
    bool dynamic = vi[nv].rank < 0;
    for (int32_t d = 0; d < vi[nv].rank; d++) dynamic |= vi[nv].dims[d] < 0;
    if (!dynamic) continue;
    vi[nv].rank = s->inputs[i].rank;
    memcpy(vi[nv].dims, s->inputs[i].dims, sizeof vi[nv].dims);
    nv++;
  }
  kn_status st = nv ? kn_model_set_report_shapes(s->model, nv, vi, &err) : KN_OK;
  free(vi);
  if (st) return kn_cli_error(&err);
  return KN_EXIT_OK;
}
