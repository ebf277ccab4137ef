/* The model repository (Triton's layout): DIR/<model>/<version>/model.kiln
 * or model.onnx, and an optional DIR/<model>/config.json.
 *
 * A sync (at start, every --repository-poll-secs in poll mode, or on
 * POST /v2/repository/models/{m}/load) reads each model's config, picks the
 * versions its version_policy wants among those present (a version that
 * failed is left out until its file changes, so a bad new version never
 * displaces a good one), and loads each wanted version that is not served:
 * load (and, for ONNX, build with the batch profile), a smoke run,
 * validation against the version serving now (kiln validate's gates:
 * cosine and max |error| on seeded random inputs, p99 latency), then an
 * atomic switch under repo_mu.  Served versions it no longer wants stop
 * being served at once; each is freed when its last in-flight request has
 * been answered (refs), by the control thread. */
#include "serve.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *sv_state_name(int state) {
  switch (state) {
  case SV_STATE_LOADING: return "LOADING";
  case SV_STATE_VALIDATING: return "VALIDATING";
  case SV_STATE_READY: return "READY";
  case SV_STATE_UNAVAILABLE: return "UNAVAILABLE";
  default: return "FAILED";
  }
}

static int64_t file_mtime_ns(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return -1;
  return ((int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec) ^ (int64_t)st.st_size;
}

static void log_fields(sv_buf *b, const char *model, int64_t version) {
  sv_buf_puts(b, "\"model\":");
  sv_buf_json_str(b, model);
  if (version >= 0) sv_buf_printf(b, ",\"version\":\"%lld\"", (long long)version);
}

static void log_load(sv_server *s, const char *event, const char *model, int64_t version,
                     const char *reason, double ms) {
  sv_buf b = {0};
  log_fields(&b, model, version);
  if (ms >= 0) sv_buf_printf(&b, ",\"ms\":%.1f", ms);
  if (reason && *reason) {
    sv_buf_puts(&b, ",\"reason\":");
    sv_buf_json_str(&b, reason);
  }
  if (!b.oom) sv_log_event(&s->log, event, b.p);
  sv_buf_free(&b);
}

/* ---- versions ------------------------------------------------------------------ */
bool sv_version_describe(sv_version *v, char *err, size_t err_n) {
  const sv_config *c = &v->cfg;
  v->batching = c->max_batch_size > 0;
  v->n_in = kn_model_input_count(v->kmodel);
  v->n_out = kn_model_output_count(v->kmodel);
  if (v->n_in > SV_MAX_IO || v->n_out > SV_MAX_IO) {
    snprintf(err, err_n, "%s: the model has %d inputs and %d outputs; kiln serve takes at most %d",
             v->path, v->n_in, v->n_out, SV_MAX_IO);
    return false;
  }
  for (int32_t i = 0; i < v->n_in + v->n_out; i++) {
    bool is_in = i < v->n_in;
    int32_t k = is_in ? i : i - v->n_in;
    kn_value_info vi;
    kn_status st = is_in ? kn_model_input_info(v->kmodel, k, &vi)
                         : kn_model_output_info(v->kmodel, k, &vi);
    sv_io *io = is_in ? &v->in[k] : &v->out[k];
    if (st != KN_OK || vi.rank < 0) {
      snprintf(err, err_n, "%s: %s %d has an unknown shape", v->path, is_in ? "input" : "output", k);
      return false;
    }
    snprintf(io->name, sizeof io->name, "%s", vi.name ? vi.name : "");
    io->dtype = vi.dtype;
    io->rank = vi.rank;
    memcpy(io->dims, vi.dims, sizeof vi.dims);
    if (!sv_dtype_v2(io->dtype) || io->dtype == KN_DTYPE_STRING) {
      snprintf(err, err_n, "%s: %s '%s' is %s; kiln serve takes numeric tensors", v->path,
               is_in ? "input" : "output", io->name, kn_dtype_name(io->dtype));
      return false;
    }
    if (v->batching && (io->rank < 1 || (is_in && io->dims[0] >= 0 && io->dims[0] != 1))) {
      snprintf(err, err_n,
               "%s: max_batch_size %d needs %s '%s' to have a dynamic batch dim 0; its dims are "
               "fixed", v->path, c->max_batch_size, is_in ? "input" : "output", io->name);
      return false;
    }
    if (v->batching) io->dims[0] = -1;
    if (is_in)
      for (int32_t j = 0; j < c->n_inputs; j++)
        if (!strcmp(c->inputs[j].name, io->name) && c->inputs[j].rank >= 0) {
          int32_t off = v->batching ? 1 : 0;
          if (c->inputs[j].rank + off != io->rank) {
            snprintf(err, err_n, "config.json: input[%d].dims: %d dims; the model's input '%s' "
                     "has %d%s", j, c->inputs[j].rank, io->name, io->rank - off,
                     off ? " besides the batch dim" : "");
            return false;
          }
          for (int32_t d = 0; d < c->inputs[j].rank; d++) {
            int64_t want = c->inputs[j].dims[d], have = io->dims[d + off];
            if (have >= 0 && want >= 0 && want != have) {
              snprintf(err, err_n, "config.json: input[%d].dims[%d] is %lld; the model's input "
                       "'%s' has %lld there", j, d, (long long)want, io->name, (long long)have);
              return false;
            }
            if (have < 0 && want >= 0) io->dims[d + off] = want;
          }
        }
  }
  for (int32_t j = 0; j < c->n_inputs; j++) {
    bool found = false;
    for (int32_t i = 0; i < v->n_in; i++) found |= !strcmp(c->inputs[j].name, v->in[i].name);
    if (!found) {
      snprintf(err, err_n, "config.json: input[%d].name '%s' is not an input of %s", j,
               c->inputs[j].name, v->path);
      return false;
    }
  }
  return true;
}

/* Builds an ONNX model for what it will serve: each input's dims from the
 * model and config.json; the batch dim as a profile 1..max_batch_size
 * (planned for the max). */
static bool build_onnx(sv_server *s, sv_version *v, int32_t threads, char *err, size_t err_n) {
  char *specs[SV_MAX_IO] = {0};
  bool ok = false;
  kn_build_options bo;
  kn_build_options_init(&bo);
  bo.threads = threads;
  for (int32_t i = 0; i < v->n_in; i++) {
    const sv_io *io = &v->in[i];
    int64_t dims[KN_MAX_RANK];
    memcpy(dims, io->dims, sizeof dims);
    for (int32_t d = v->batching ? 1 : 0; d < io->rank; d++)
      if (dims[d] < 0) {
        if (d == 0) dims[d] = 1; /* no batching: the batch dim is 1 */
        else {
          snprintf(err, err_n, "%s: input '%s' dim %d is dynamic; give it in config.json "
                   "(\"input\": [{\"name\": \"%s\", \"dims\": [...]}])", v->path, io->name, d,
                   io->name);
          goto done;
        }
      }
    char tail[256] = "";
    size_t k = 0;
    for (int32_t d = 1; d < io->rank; d++)
      k += (size_t)snprintf(tail + k, sizeof tail - k, "x%lld", (long long)dims[d]);
    specs[i] = malloc(1024);
    if (!specs[i]) goto done;
    if (v->batching)
      snprintf(specs[i], 1024, "%s=1%s:%d%s:%d%s", io->name, tail, v->cfg.max_batch_size, tail,
               v->cfg.max_batch_size, tail);
    else snprintf(specs[i], 1024, "%s=%lld%s", io->name, (long long)dims[0], tail);
  }
  if (v->batching) {
    bo.profiles = (const char *const *)specs;
    bo.n_profiles = v->n_in;
  } else {
    bo.shapes = (const char *const *)specs;
    bo.n_shapes = v->n_in;
  }
  kn_error e = {0};
  if (kn_model_build(v->kmodel, &bo, &e) != KN_OK) {
    snprintf(err, err_n, "%s: build: %s", v->path, e.msg);
    goto done;
  }
  ok = true;
done:
  for (int32_t i = 0; i < SV_MAX_IO; i++) free(specs[i]);
  (void)s;
  return ok;
}

void sv_version_free(sv_version *v) {
  if (!v) return;
  sv_batcher_stop(v);
  kn_model_free(v->kmodel);
  free(v);
}

static int32_t instance_threads(const sv_server *s, const sv_config *c) {
  if (c->instance_threads > 0) return c->instance_threads;
  return s->opt.threads > c->instance_count ? s->opt.threads / c->instance_count : 1;
}

sv_version *sv_version_open(sv_server *s, sv_model *md, int64_t ver, const char *path,
                            const sv_config *cfg, char *err, size_t err_n) {
  sv_version *v = calloc(1, sizeof *v);
  if (!v) {
    snprintf(err, err_n, "out of memory");
    return NULL;
  }
  v->server = s;
  v->owner = md;
  v->version = ver;
  v->cfg = *cfg;
  v->stats = sv_metrics_series(&s->metrics, md->name, ver);
  snprintf(v->path, sizeof v->path, "%s", path);
  kn_error e = {0};
  if (kn_model_load(v->path, &v->kmodel, &e) != KN_OK) {
    snprintf(err, err_n, "%s", e.msg);
    goto fail;
  }
  if (!sv_version_describe(v, err, err_n)) goto fail;
  int32_t threads = instance_threads(s, cfg);
  kn_model_stats ms;
  bool is_engine = kn_model_stats_get(v->kmodel, &ms, &e) == KN_OK && ms.onnx_nodes < 0;
  if (!is_engine && !build_onnx(s, v, threads, err, err_n)) goto fail;
  if (kn_model_stats_get(v->kmodel, &ms, &e) == KN_OK) {
    v->arena_bytes = ms.arena_bytes * (uint64_t)cfg->instance_count;
    v->weight_bytes = (uint64_t)ms.param_bytes;
  }
  double pred = 0;
  for (int32_t i = 0; i < kn_model_step_count(v->kmodel); i++) {
    kn_step_io io;
    if (kn_model_step_io(v->kmodel, i, threads, &io) == KN_OK) pred += io.predicted_us;
  }
  v->predicted_batch_us = pred;
  atomic_store(&v->refs, 1); /* the served reference */
  return v;
fail:
  sv_version_free(v);
  return NULL;
}

static sv_version *version_load(sv_server *s, sv_model *md, int64_t ver, const sv_config *cfg,
                                char *err, size_t err_n) {
  char path[1200];
  struct stat st;
  snprintf(path, sizeof path, "%s/%lld/model.kiln", md->dir, (long long)ver);
  if (stat(path, &st) != 0) snprintf(path, sizeof path, "%s/%lld/model.onnx", md->dir, (long long)ver);
  return sv_version_open(s, md, ver, path, cfg, err, err_n);
}

/* ---- validation ------------------------------------------------------------------- */
typedef struct rng {
  uint64_t s;
} rng;
static uint64_t rng_next(rng *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 2685821657736338717ull;
}

/* Batch-1 inputs as kiln compare makes them: floats uniform in [-1, 1),
 * integers and bools 0 or 1. */
static bool make_inputs(const sv_version *v, uint64_t seed, kn_tensor *ins, char *err,
                        size_t err_n) {
  rng r = {seed * 0x9E3779B97F4A7C15ull + 1};
  for (int32_t i = 0; i < v->n_in; i++) {
    int64_t dims[KN_MAX_RANK];
    for (int32_t d = 0; d < v->in[i].rank; d++) dims[d] = v->in[i].dims[d] < 0 ? 1 : v->in[i].dims[d];
    kn_error e = {0};
    if (kn_tensor_alloc(&ins[i], v->in[i].dtype, v->in[i].rank, dims, &e) != KN_OK) {
      snprintf(err, err_n, "validation input '%s': %s", v->in[i].name, e.msg);
      return false;
    }
    int64_t n = kn_tensor_numel(&ins[i]);
    for (int64_t k = 0; k < n; k++) {
      uint64_t x = rng_next(&r);
      switch (ins[i].dtype) {
      case KN_DTYPE_F32: ((float *)ins[i].data)[k] = (float)((double)(x >> 11) * 0x1p-52 - 1); break;
      case KN_DTYPE_F64: ((double *)ins[i].data)[k] = (double)(x >> 11) * 0x1p-52 - 1; break;
      case KN_DTYPE_I64: ((int64_t *)ins[i].data)[k] = (int64_t)(x >> 63); break;
      case KN_DTYPE_I32: ((int32_t *)ins[i].data)[k] = (int32_t)(x >> 63); break;
      case KN_DTYPE_BOOL:
      case KN_DTYPE_U8:
      case KN_DTYPE_I8: ((uint8_t *)ins[i].data)[k] = (uint8_t)(x >> 63); break;
      default: break; /* zeros */
      }
    }
  }
  return true;
}

static double elem(const kn_tensor *t, int64_t i) {
  switch (t->dtype) {
  case KN_DTYPE_F32: return ((const float *)t->data)[i];
  case KN_DTYPE_F64: return ((const double *)t->data)[i];
  case KN_DTYPE_I64: return (double)((const int64_t *)t->data)[i];
  case KN_DTYPE_I32: return ((const int32_t *)t->data)[i];
  case KN_DTYPE_U8:
  case KN_DTYPE_BOOL: return ((const uint8_t *)t->data)[i];
  case KN_DTYPE_I8: return ((const int8_t *)t->data)[i];
  default: return 0;
  }
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int32_t stopping_hook(void *arg) { return atomic_load((_Atomic int32_t *)arg); }

/* Runs v on ins with a fresh context, each run bounded by timeout_ms and
 * stopped when the server stops: outputs copied into outs (owned).
 * *timed_out when a run passed its deadline (then false). */
static bool run_copy(const sv_version *v, int32_t threads, const kn_tensor *ins, kn_tensor *outs,
                     int32_t runs, int64_t timeout_ms, double *p99_ms, bool *timed_out,
                     char *err, size_t err_n) {
  kn_context *ctx = NULL;
  kn_error e = {0};
  bool ok = false;
  double *t = calloc((size_t)runs, sizeof *t);
  if (!t || kn_context_create(v->kmodel, &ctx, &e) != KN_OK ||
      kn_context_set_threads(ctx, threads, &e) != KN_OK) {
    snprintf(err, err_n, "%s", t ? e.msg : "out of memory");
    goto done;
  }
  *timed_out = false;
  kn_context_set_cancel(ctx, stopping_hook, &v->server->stopping);
  for (int32_t i = 0; i < v->n_in; i++)
    if (kn_context_set_input(ctx, i, &ins[i], &e) != KN_OK) {
      snprintf(err, err_n, "%s", e.msg);
      goto done;
    }
  for (int32_t k = 0; k < runs; k++) {
    int64_t t0 = sv_now_ns();
    kn_context_set_deadline(ctx, t0 + timeout_ms * 1000000);
    kn_status st = kn_context_run(ctx, &e);
    if (st != KN_OK) {
      *timed_out = st == KN_ERR_CANCELLED && !atomic_load(&v->server->stopping);
      if (*timed_out)
        snprintf(err, err_n, "a run at batch 1 did not finish within validation.timeout_ms %lld",
                 (long long)timeout_ms);
      else snprintf(err, err_n, "run: %s", e.msg);
      goto done;
    }
    t[k] = (double)(sv_now_ns() - t0) * 1e-6;
  }
  qsort(t, (size_t)runs, sizeof *t, cmp_dbl);
  *p99_ms = t[(runs * 99) / 100 < runs ? (runs * 99) / 100 : runs - 1];
  for (int32_t o = 0; o < v->n_out; o++) {
    const kn_tensor *x = kn_context_output(ctx, o);
    if (!x || kn_tensor_alloc(&outs[o], x->dtype, x->rank, x->dims, &e) != KN_OK) {
      snprintf(err, err_n, "output %d: %s", o, x ? e.msg : "missing");
      goto done;
    }
    memcpy(outs[o].data, x->data, x->nbytes);
  }
  ok = true;
done:
  kn_context_free(ctx);
  free(t);
  return ok;
}

/* The gates: the new version runs and gives finite outputs shaped as the
 * serving version's; against it, cosine >= min_cosine and max |error| <=
 * max_abs_error per output; p99 of validation.runs runs <= max_p99_ms. */
static bool validate(sv_server *s, sv_version *nv, sv_version *cur, bool *note, char *err,
                     size_t err_n) {
  kn_tensor ins[SV_MAX_IO] = {0}, a[SV_MAX_IO] = {0}, b[SV_MAX_IO] = {0};
  bool ok = false;
  const sv_config *c = &nv->cfg;
  int32_t threads = instance_threads(s, c);
  if (cur) {
    if (cur->n_in != nv->n_in || cur->n_out != nv->n_out) {
      snprintf(err, err_n, "validation: %d inputs and %d outputs; the serving version %lld has "
               "%d and %d", nv->n_in, nv->n_out, (long long)cur->version, cur->n_in, cur->n_out);
      goto done;
    }
    for (int32_t i = 0; i < nv->n_in + nv->n_out; i++) {
      const sv_io *x = i < nv->n_in ? &nv->in[i] : &nv->out[i - nv->n_in];
      const sv_io *y = i < nv->n_in ? &cur->in[i] : &cur->out[i - nv->n_in];
      bool same = !strcmp(x->name, y->name) && x->dtype == y->dtype && x->rank == y->rank;
      for (int32_t d = 0; same && d < x->rank; d++) same = x->dims[d] == y->dims[d];
      if (!same) {
        snprintf(err, err_n, "validation: %s '%s' differs from the serving version %lld's '%s' "
                 "(name, datatype or shape)", i < nv->n_in ? "input" : "output", x->name,
                 (long long)cur->version, y->name);
        goto done;
      }
    }
  }
  if (!make_inputs(nv, (uint64_t)nv->version + 7, ins, err, err_n)) goto done;
  int32_t runs = c->max_p99_ms > 0 ? c->validation_runs : 1;
  double p99 = 0, p99_cur = 0;
  char e2[600];
  bool timed_out = false;
  if (!run_copy(nv, threads, ins, a, runs, c->validation_timeout_ms, &p99, &timed_out, e2,
                sizeof e2)) {
    /* A first version that cannot finish a run in time still serves:
     * requests carry deadlines, and there is nothing to protect.  A
     * replacement is held to it: it must not displace one that answers. */
    if (timed_out && !cur && c->max_p99_ms <= 0) {
      *note = true;
      ok = true;
      goto done;
    }
    snprintf(err, err_n, "validation: %s", e2);
    goto done;
  }
  for (int32_t o = 0; o < nv->n_out; o++) {
    int64_t n = kn_tensor_numel(&a[o]);
    for (int64_t i = 0; i < n; i++)
      if (!isfinite(elem(&a[o], i))) {
        snprintf(err, err_n, "validation: output '%s' element %lld is not finite (%g)",
                 nv->out[o].name, (long long)i, elem(&a[o], i));
        goto done;
      }
  }
  if (c->max_p99_ms > 0 && p99 > c->max_p99_ms) {
    snprintf(err, err_n, "validation: p99 %.3f ms over %d runs at batch 1 exceeds max_p99_ms %g",
             p99, runs, c->max_p99_ms);
    goto done;
  }
  if (cur && (c->min_cosine > -1 || c->max_abs_error >= 0)) {
    bool cur_timed_out;
    if (!run_copy(cur, threads, ins, b, 1, c->validation_timeout_ms, &p99_cur, &cur_timed_out, e2,
                  sizeof e2)) {
      snprintf(err, err_n, "validation: the serving version %lld: %s", (long long)cur->version, e2);
      goto done;
    }
    for (int32_t o = 0; o < nv->n_out; o++) {
      int64_t n = kn_tensor_numel(&a[o]);
      if (n != kn_tensor_numel(&b[o])) {
        snprintf(err, err_n, "validation: output '%s' has %lld elements; the serving version's "
                 "has %lld", nv->out[o].name, (long long)n, (long long)kn_tensor_numel(&b[o]));
        goto done;
      }
      double dot = 0, na = 0, nb = 0, mx = 0;
      for (int64_t i = 0; i < n; i++) {
        double x = elem(&a[o], i), y = elem(&b[o], i);
        dot += x * y;
        na += x * x;
        nb += y * y;
        mx = fmax(mx, fabs(x - y));
      }
      double cosv = na == 0 && nb == 0 ? 1 : dot / (sqrt(na) * sqrt(nb) + 1e-300);
      if (c->min_cosine > -1 && cosv < c->min_cosine) {
        snprintf(err, err_n, "validation: output '%s' cosine %.6f against version %lld is below "
                 "min_cosine %g", nv->out[o].name, cosv, (long long)cur->version, c->min_cosine);
        goto done;
      }
      if (c->max_abs_error >= 0 && mx > c->max_abs_error) {
        snprintf(err, err_n, "validation: output '%s' max |error| %g against version %lld "
                 "exceeds max_abs_error %g", nv->out[o].name, mx, (long long)cur->version,
                 c->max_abs_error);
        goto done;
      }
    }
  }
  ok = true;
done:
  for (int32_t i = 0; i < SV_MAX_IO; i++) {
    kn_tensor_release(&ins[i]);
    kn_tensor_release(&a[i]);
    kn_tensor_release(&b[i]);
  }
  return ok;
}

/* ---- references -------------------------------------------------------------------- */
void sv_version_release(sv_version *v) {
  if (atomic_fetch_sub(&v->refs, 1) != 1) return;
  sv_server *s = v->server;
  pthread_mutex_lock(&s->repo_mu);
  v->next_dead = s->dead;
  s->dead = v;
  pthread_mutex_unlock(&s->repo_mu);
  sv_server_kick(s);
}

void sv_repo_reap(sv_server *s) {
  pthread_mutex_lock(&s->repo_mu);
  sv_version *d = s->dead;
  s->dead = NULL;
  pthread_mutex_unlock(&s->repo_mu);
  while (d) {
    sv_version *n = d->next_dead;
    log_load(s, "model_freed", d->owner->name, d->version, NULL, -1);
    sv_version_free(d);
    d = n;
  }
}

static sv_model *find_model(sv_server *s, const char *name) {
  for (sv_model *m = s->models; m; m = m->next)
    if (!strcmp(m->name, name)) return m;
  return NULL;
}

static sv_vslot *find_slot(sv_model *m, int64_t ver) {
  for (int32_t i = 0; i < m->n_slots; i++)
    if (m->slots[i].version == ver) return &m->slots[i];
  return NULL;
}

sv_version *sv_repo_acquire(sv_server *s, const char *model, int64_t version, int *code,
                            char *err, size_t err_n) {
  pthread_mutex_lock(&s->repo_mu);
  sv_model *m = find_model(s, model);
  sv_version *v = NULL;
  *code = 404;
  if (!m) {
    char safe[160];
    snprintf(err, err_n, "unknown model '%s'", sv_printable(model, safe, sizeof safe));
    goto done;
  }
  if (version < 0) {
    for (int32_t i = 0; i < m->n_slots; i++)
      if (m->slots[i].v && (!v || m->slots[i].version > v->version)) v = m->slots[i].v;
    if (!v) {
      *code = 503;
      snprintf(err, err_n, "model '%s' has no ready version%s%s", m->name,
               m->config_error[0] ? ": " : "", m->config_error);
    }
  } else {
    sv_vslot *sl = find_slot(m, version);
    if (!sl) snprintf(err, err_n, "unknown version %lld of model '%s'", (long long)version, m->name);
    else if (!sl->v) {
      *code = 503;
      snprintf(err, err_n, "model '%s' version %lld is not ready (%s%s%s)", m->name,
               (long long)version, sv_state_name(sl->state), sl->reason[0] ? ": " : "", sl->reason);
    } else v = sl->v;
  }
  if (v) {
    atomic_fetch_add(&v->refs, 1);
    *code = 200;
  }
done:
  pthread_mutex_unlock(&s->repo_mu);
  return v;
}

/* ---- sync ------------------------------------------------------------------------------ */
static int cmp_desc(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x < y) - (x > y);
}

/* Version directories holding a model file, highest first. */
static int32_t list_versions(const char *dir, int64_t *out, int32_t cap) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int32_t n = 0;
  for (struct dirent *e; (e = readdir(d)) && n < cap;) {
    char *end;
    errno = 0;
    long long v = strtoll(e->d_name, &end, 10);
    if (*end || end == e->d_name || v < 1 || errno) continue;
    char p[1200];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s/model.kiln", dir, e->d_name);
    bool has = stat(p, &st) == 0;
    snprintf(p, sizeof p, "%s/%s/model.onnx", dir, e->d_name);
    has |= stat(p, &st) == 0;
    if (has) out[n++] = v;
  }
  closedir(d);
  qsort(out, (size_t)n, sizeof out[0], cmp_desc);
  return n;
}

static int64_t version_mtime(const sv_model *m, int64_t ver) {
  char p[1200];
  snprintf(p, sizeof p, "%s/%lld/model.kiln", m->dir, (long long)ver);
  int64_t t = file_mtime_ns(p);
  if (t >= 0) return t;
  snprintf(p, sizeof p, "%s/%lld/model.onnx", m->dir, (long long)ver);
  return file_mtime_ns(p);
}

/* Stops serving slot sl (repo_mu held by the caller is NOT required: takes it). */
static void unserve(sv_server *s, sv_model *m, sv_vslot *sl, const char *reason) {
  pthread_mutex_lock(&s->repo_mu);
  sv_version *v = sl->v;
  sl->v = NULL;
  sl->state = SV_STATE_UNAVAILABLE;
  snprintf(sl->reason, sizeof sl->reason, "%s", reason);
  pthread_mutex_unlock(&s->repo_mu);
  if (!v) return;
  atomic_store(&v->stats->ready, 0);
  atomic_fetch_add(&v->stats->loads[SV_LOAD_UNLOADED], 1);
  log_load(s, "model_unloaded", m->name, v->version, reason, -1);
  sv_version_release(v);
}

static sv_vslot *slot_for(sv_server *s, sv_model *m, int64_t ver) {
  pthread_mutex_lock(&s->repo_mu);
  sv_vslot *sl = find_slot(m, ver);
  if (!sl && m->n_slots < SV_MAX_VERSIONS) {
    sl = &m->slots[m->n_slots++];
    *sl = (sv_vslot){.version = ver, .state = SV_STATE_UNAVAILABLE, .mtime_ns = -2};
  }
  pthread_mutex_unlock(&s->repo_mu);
  return sl;
}

static void set_state(sv_server *s, sv_vslot *sl, int state, const char *reason) {
  pthread_mutex_lock(&s->repo_mu);
  sl->state = state;
  snprintf(sl->reason, sizeof sl->reason, "%s", reason ? reason : "");
  pthread_mutex_unlock(&s->repo_mu);
}

static sv_version *serving_latest(sv_server *s, sv_model *m) {
  pthread_mutex_lock(&s->repo_mu);
  sv_version *v = NULL;
  for (int32_t i = 0; i < m->n_slots; i++)
    if (m->slots[i].v && (!v || m->slots[i].version > v->version)) v = m->slots[i].v;
  if (v) atomic_fetch_add(&v->refs, 1);
  pthread_mutex_unlock(&s->repo_mu);
  return v;
}

/* Loads, validates and serves version ver of m; false with the reason. */
static bool bring_up(sv_server *s, sv_model *m, sv_vslot *sl, const sv_config *cfg, char *err,
                     size_t err_n) {
  int64_t ver = sl->version;
  int64_t t0 = sv_now_ns();
  set_state(s, sl, SV_STATE_LOADING, NULL);
  log_load(s, "model_loading", m->name, ver, NULL, -1);
  sl->mtime_ns = version_mtime(m, ver);
  sv_stats *st = sv_metrics_series(&s->metrics, m->name, ver);
  sv_version *v = version_load(s, m, ver, cfg, err, err_n);
  if (!v) {
    set_state(s, sl, SV_STATE_FAILED, err);
    if (st) atomic_fetch_add(&st->loads[SV_LOAD_FAILED], 1);
    log_load(s, "model_load_failed", m->name, ver, err, (double)(sv_now_ns() - t0) * 1e-6);
    return false;
  }
  set_state(s, sl, SV_STATE_VALIDATING, NULL);
  sv_version *cur = serving_latest(s, m);
  bool slow = false;
  bool ok = validate(s, v, cur, &slow, err, err_n);
  if (cur) sv_version_release(cur);
  if (ok && !sv_batcher_start(v, s->opt.threads, err, err_n)) ok = false;
  if (!ok) {
    set_state(s, sl, SV_STATE_FAILED, err);
    atomic_fetch_add(&v->stats->loads[SV_LOAD_REJECTED], 1);
    log_load(s, "model_rejected", m->name, ver, err, (double)(sv_now_ns() - t0) * 1e-6);
    sv_version_free(v);
    return false;
  }
  pthread_mutex_lock(&s->repo_mu);
  sl->v = v;
  sl->state = SV_STATE_READY;
  sl->reason[0] = 0;
  pthread_mutex_unlock(&s->repo_mu);
  atomic_store(&v->stats->ready, 1);
  atomic_fetch_add(&v->stats->loads[SV_LOAD_LOADED], 1);
  char note[200] = "";
  if (slow)
    snprintf(note, sizeof note, "its validation run did not finish within %lld ms; served "
             "anyway as the first version (requests need deadlines)",
             (long long)cfg->validation_timeout_ms);
  log_load(s, "model_loaded", m->name, ver, note, (double)(sv_now_ns() - t0) * 1e-6);
  return true;
}

static bool sync_model(sv_server *s, sv_model *m, bool explicit_load, char *err, size_t err_n) {
  char path[1200];
  snprintf(path, sizeof path, "%s/config.json", m->dir);
  sv_config cfg;
  sv_config_defaults(&cfg);
  FILE *f = fopen(path, "rb");
  bool ok = true;
  char cerr[SV_REASON_MAX] = "";
  if (f) {
    char *text = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && n < (1 << 20) &&
        fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)n + 1)) &&
        fread(text, 1, (size_t)n, f) == (size_t)n) {
      ok = sv_config_parse(text, (size_t)n, path, m->name, &cfg, cerr, sizeof cerr);
    } else {
      ok = false;
      snprintf(cerr, sizeof cerr, "%s: cannot be read (or larger than 1 MiB)", path);
    }
    free(text);
    fclose(f);
  }
  pthread_mutex_lock(&s->repo_mu);
  bool was_error = m->config_error[0] != 0;
  snprintf(m->config_error, sizeof m->config_error, "%s", ok ? "" : cerr);
  pthread_mutex_unlock(&s->repo_mu);
  if (!ok) {
    if (!was_error) log_load(s, "model_config_error", m->name, -1, cerr, -1);
    snprintf(err, err_n, "%s", cerr);
    return false;
  }
  int64_t avail[SV_MAX_VERSIONS];
  int32_t n_avail = list_versions(m->dir, avail, SV_MAX_VERSIONS);
  /* what the policy wants, among versions not failed (unchanged since) */
  int64_t want[SV_MAX_VERSIONS];
  int32_t n_want = 0;
  for (int32_t i = 0; i < n_avail; i++) {
    int64_t ver = avail[i];
    pthread_mutex_lock(&s->repo_mu);
    sv_vslot *sl = find_slot(m, ver);
    bool failed = sl && sl->state == SV_STATE_FAILED && !explicit_load &&
                  sl->mtime_ns == version_mtime(m, ver);
    pthread_mutex_unlock(&s->repo_mu);
    if (failed) continue;
    bool wanted = false;
    if (cfg.version_policy == SV_POLICY_ALL) wanted = true;
    else if (cfg.version_policy == SV_POLICY_LATEST) wanted = n_want < cfg.num_versions;
    else
      for (int32_t k = 0; k < cfg.n_versions; k++) wanted |= cfg.versions[k] == ver;
    if (wanted) want[n_want++] = ver;
  }
  if (n_avail == 0) {
    snprintf(err, err_n, "model '%s': no version directory holds model.kiln or model.onnx",
             m->name);
    ok = false;
  }
  /* bring up the wanted ones, lowest first so that the newest switches last */
  for (int32_t i = n_want - 1; i >= 0; i--) {
    sv_vslot *sl = slot_for(s, m, want[i]);
    if (!sl) continue;
    pthread_mutex_lock(&s->repo_mu);
    bool served = sl->v != NULL;
    pthread_mutex_unlock(&s->repo_mu);
    if (served) continue;
    char e[SV_REASON_MAX];
    if (!bring_up(s, m, sl, &cfg, e, sizeof e)) {
      snprintf(err, err_n, "model '%s' version %lld: %s", m->name, (long long)want[i], e);
      ok = false;
      /* latest-N: the next older version takes its place */
      if (cfg.version_policy == SV_POLICY_LATEST)
        for (int32_t k = 0; k < n_avail; k++) {
          bool listed = false;
          for (int32_t j = 0; j < n_want; j++) listed |= want[j] == avail[k];
          if (!listed && avail[k] < want[i]) {
            sv_vslot *o = slot_for(s, m, avail[k]);
            pthread_mutex_lock(&s->repo_mu);
            bool usable = o && (o->v || o->state != SV_STATE_FAILED);
            pthread_mutex_unlock(&s->repo_mu);
            if (usable) {
              want[i] = avail[k];
              if (o->v || bring_up(s, m, o, &cfg, e, sizeof e)) break;
            }
          }
        }
    }
  }
  /* stop serving what is no longer wanted */
  for (int32_t i = 0; i < m->n_slots; i++) {
    sv_vslot *sl = &m->slots[i];
    bool keep = false;
    for (int32_t k = 0; k < n_want; k++) keep |= want[k] == sl->version;
    bool present = false;
    for (int32_t k = 0; k < n_avail; k++) present |= avail[k] == sl->version;
    if (!keep && sl->v)
      unserve(s, m, sl, present ? "not in the version policy" : "version directory removed");
  }
  return ok;
}

bool sv_repo_sync(sv_server *s, const char *model, char *err, size_t err_n) {
  pthread_mutex_lock(&s->load_mu);
  bool ok = true;
  err[0] = 0;
  DIR *d = opendir(s->opt.repository);
  if (!d) {
    snprintf(err, err_n, "%s: cannot open the repository: %s", s->opt.repository, strerror(errno));
    pthread_mutex_unlock(&s->load_mu);
    return false;
  }
  bool found = false;
  char names[256][SV_NAME_MAX];
  int32_t n_names = 0;
  for (struct dirent *e; (e = readdir(d)) && n_names < 256;) {
    if (e->d_name[0] == '.' || strlen(e->d_name) >= SV_NAME_MAX) continue;
    char p[1200];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", s->opt.repository, e->d_name);
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    snprintf(names[n_names++], SV_NAME_MAX, "%s", e->d_name);
  }
  closedir(d);
  for (int32_t i = 0; i < n_names; i++) {
    if (model && strcmp(model, names[i])) continue;
    found = true;
    pthread_mutex_lock(&s->repo_mu);
    sv_model *m = find_model(s, names[i]);
    if (!m && (m = calloc(1, sizeof *m))) {
      snprintf(m->name, sizeof m->name, "%s", names[i]);
      snprintf(m->dir, sizeof m->dir, "%s/%s", s->opt.repository, names[i]);
      sv_model **tail = &s->models;
      while (*tail) tail = &(*tail)->next;
      *tail = m;
    }
    if (m && model) m->unloaded = false;
    bool skip = !m || m->unloaded;
    pthread_mutex_unlock(&s->repo_mu);
    if (skip) continue;
    char e[SV_REASON_MAX];
    if (!sync_model(s, m, model != NULL, e, sizeof e)) {
      ok = false;
      if (!err[0]) snprintf(err, err_n, "%s", e);
    }
  }
  /* models whose directory went away */
  if (!model)
    for (sv_model *m = s->models; m; m = m->next) {
      bool present = false;
      for (int32_t i = 0; i < n_names; i++) present |= !strcmp(names[i], m->name);
      if (!present)
        for (int32_t i = 0; i < m->n_slots; i++)
          if (m->slots[i].v) unserve(s, m, &m->slots[i], "model directory removed");
    }
  if (model && !found) {
    char safe[160];
    snprintf(err, err_n, "unknown model '%s': no such directory in the repository",
             sv_printable(model, safe, sizeof safe));
    ok = false;
  }
  pthread_mutex_unlock(&s->load_mu);
  return ok;
}

bool sv_repo_unload(sv_server *s, const char *model, char *err, size_t err_n) {
  pthread_mutex_lock(&s->load_mu);
  pthread_mutex_lock(&s->repo_mu);
  sv_model *m = find_model(s, model);
  if (m) m->unloaded = true;
  pthread_mutex_unlock(&s->repo_mu);
  if (!m) {
    char safe[160];
    snprintf(err, err_n, "unknown model '%s'", sv_printable(model, safe, sizeof safe));
    pthread_mutex_unlock(&s->load_mu);
    return false;
  }
  for (int32_t i = 0; i < m->n_slots; i++)
    if (m->slots[i].v) unserve(s, m, &m->slots[i], "unloaded");
  pthread_mutex_unlock(&s->load_mu);
  return true;
}

void sv_repo_index(sv_server *s, sv_buf *b) {
  pthread_mutex_lock(&s->repo_mu);
  sv_buf_puts(b, "[");
  bool first = true;
  for (sv_model *m = s->models; m; m = m->next) {
    if (m->n_slots == 0) {
      sv_buf_puts(b, first ? "{\"name\":" : ",{\"name\":");
      first = false;
      sv_buf_json_str(b, m->name);
      sv_buf_puts(b, ",\"state\":\"UNAVAILABLE\",\"reason\":");
      sv_buf_json_str(b, m->config_error[0] ? m->config_error : "no version loaded");
      sv_buf_puts(b, "}");
      continue;
    }
    for (int32_t i = 0; i < m->n_slots; i++) {
      const sv_vslot *sl = &m->slots[i];
      sv_buf_puts(b, first ? "{\"name\":" : ",{\"name\":");
      first = false;
      sv_buf_json_str(b, m->name);
      sv_buf_printf(b, ",\"version\":\"%lld\",\"state\":\"%s\",\"reason\":", (long long)sl->version,
                    sv_state_name(sl->state));
      const char *reason = sl->reason;
      if (!reason[0] && m->config_error[0]) reason = m->config_error;
      sv_buf_json_str(b, reason);
      sv_buf_puts(b, "}");
    }
  }
  sv_buf_puts(b, "]");
  pthread_mutex_unlock(&s->repo_mu);
}

static void io_json(sv_buf *b, const sv_io *io, int32_t n) {
  sv_buf_puts(b, "[");
  for (int32_t i = 0; i < n; i++) {
    sv_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
    sv_buf_json_str(b, io[i].name);
    sv_buf_printf(b, ",\"datatype\":\"%s\",\"shape\":[", sv_dtype_v2(io[i].dtype));
    for (int32_t d = 0; d < io[i].rank; d++)
      sv_buf_printf(b, "%s%lld", d ? "," : "", (long long)io[i].dims[d]);
    sv_buf_puts(b, "]}");
  }
  sv_buf_puts(b, "]");
}

bool sv_repo_metadata(sv_server *s, const char *model, int64_t version, sv_buf *b, int *code,
                      char *err, size_t err_n) {
  sv_version *v = sv_repo_acquire(s, model, version, code, err, err_n);
  if (!v) return false;
  sv_buf_puts(b, "{\"name\":");
  sv_buf_json_str(b, v->owner->name);
  sv_buf_puts(b, ",\"versions\":[");
  pthread_mutex_lock(&s->repo_mu);
  bool first = true;
  for (int32_t i = 0; i < v->owner->n_slots; i++)
    if (v->owner->slots[i].v) {
      sv_buf_printf(b, "%s\"%lld\"", first ? "" : ",", (long long)v->owner->slots[i].version);
      first = false;
    }
  pthread_mutex_unlock(&s->repo_mu);
  sv_buf_printf(b, "],\"platform\":\"%s\",\"inputs\":",
                strstr(v->path, ".onnx") ? "onnx_kiln" : "kiln_engine");
  io_json(b, v->in, v->n_in);
  sv_buf_puts(b, ",\"outputs\":");
  io_json(b, v->out, v->n_out);
  sv_buf_printf(b, ",\"parameters\":{\"max_batch_size\":%d}}", v->cfg.max_batch_size);
  sv_version_release(v);
  *code = 200;
  return true;
}

void sv_repo_free(sv_server *s) {
  for (sv_model *m = s->models; m; m = m->next)
    for (int32_t i = 0; i < m->n_slots; i++)
      if (m->slots[i].v) sv_batcher_abort(m->slots[i].v);
  for (sv_model *m = s->models; m; m = m->next)
    for (int32_t i = 0; i < m->n_slots; i++)
      if (m->slots[i].v) unserve(s, m, &m->slots[i], "server stopping");
  sv_repo_reap(s);
  for (sv_model *m = s->models, *n; m; m = n) {
    n = m->next;
    free(m);
  }
  s->models = NULL;
}
