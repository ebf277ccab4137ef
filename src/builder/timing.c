/* Tactic selection by timing and the timing cache (timing.h). */
#define _GNU_SOURCE
#include "timing.h"

#include "core/cpu.h"
#include "core/machine.h"
#include "core/threadpool.h"
#include "core/slot.h"
#include "cost/iomodel.h"
#include "kernels/kernels.h"
#include "ops/op.h"
#include "ops/tactic.h"
#include "tactics/tactics.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define MAX_CANDIDATES 8
#define KEY_MAX 2048
#define TARGET_S 0.015 /* timed runs of a candidate: about this long, */
#define MIN_RUNS 3     /* at least this many */
#define MAX_RUNS 50
/* A timed candidate displaces the first choice (kiln's measured rules)
 * only when it is faster by more than this share.  Candidates are timed
 * alone, warm; in the model the order of close ones can reverse: tinycnn's
 * second 3x3 timed 9.1 us (igemm) against 9.7 (Winograd) alone but ran
 * 13.5 against 9.6 in the model.  Every choice ResNet-50, BERT and the
 * MobileNets' timing changes wins by 30% or more. */
#define DISPLACE_MARGIN 0.10

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the cache ------------------------------------------------------------ */

typedef struct entry {
  char *key;
  char tactic[32];
  double us;
  char others[192]; /* the other candidates' times: "; conv_igemm_nhwc 553.7 us" */
} entry;

typedef struct cache {
  entry *e;
  int32_t n, cap;
} cache;

static void cache_free(cache *c) {
  for (int32_t i = 0; i < c->n; i++) free(c->e[i].key);
  free(c->e);
  memset(c, 0, sizeof *c);
}

static entry *cache_find(cache *c, const char *key) {
  for (int32_t i = 0; i < c->n; i++)
    if (!strcmp(c->e[i].key, key)) return &c->e[i];
  return NULL;
}

/* Adds or replaces; false when out of memory. */
static bool cache_put(cache *c, const char *key, const char *tactic, double us,
                      const char *others) {
  entry *e = cache_find(c, key);
  if (!e) {
    if (c->n == c->cap) {
      int32_t cap = c->cap ? 2 * c->cap : 64;
      entry *ne = realloc(c->e, (size_t)cap * sizeof *ne);
      if (!ne) return false;
      c->e = ne;
      c->cap = cap;
    }
    char *k = strdup(key);
    if (!k) return false;
    e = &c->e[c->n++];
    e->key = k;
  }
  snprintf(e->tactic, sizeof e->tactic, "%s", tactic);
  e->us = us;
  snprintf(e->others, sizeof e->others, "%s", others ? others : "");
  return true;
}

/* Reads what it understands; a missing file is an empty cache. */
static bool cache_read(cache *c, FILE *f) {
  char line[KEY_MAX + 128];
  while (fgets(line, sizeof line, f)) {
    size_t len = strlen(line);
    if (len && line[len - 1] != '\n' && !feof(f)) { /* too long: skip the rest */
      int ch;
      while ((ch = fgetc(f)) != EOF && ch != '\n') {
      }
      continue;
    }
    if (line[0] == '#' || line[0] == '\n') continue;
    char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
    if (!t1 || !t2) continue;
    *t1 = *t2 = 0;
    char *t3 = strchr(t2 + 1, '\t'), *others = "";
    if (t3) {
      *t3 = 0;
      others = t3 + 1;
      others[strcspn(others, "\n")] = 0;
      for (char *p = others; *p; p++) /* it ends up in messages: printable only */
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    }
    char *end;
    double us = strtod(t2 + 1, &end);
    bool known = false;
    for (int32_t id = 0; id < 256; id++)
      if (kn_tactic_name(id) && !strcmp(kn_tactic_name(id), t1 + 1)) known = true;
    if (end == t2 + 1 || !(us >= 0) || !known || strlen(t1 + 1) >= 32) continue;
    if (!cache_put(c, line, t1 + 1, us, others)) return false;
  }
  return true;
}

static kn_status cache_load(cache *c, const char *path, kn_error *err) {
  FILE *f = fopen(path, "r");
  if (!f) return KN_OK; /* no cache yet */
  bool ok = cache_read(c, f);
  fclose(f);
  return ok ? KN_OK : kn_fail(err, KN_ERR_OOM, "%s: out of memory reading the timing cache", path);
}

/* Merge `mine` into the file under its lock, write it whole, rename. */
static kn_status cache_save(const cache *mine, const char *path, kn_error *err) {
  size_t pl = strlen(path) + 32;
  char *lock = malloc(pl), *tmp = malloc(pl);
  kn_status st = KN_OK;
  if (!lock || !tmp) {
    free(lock);
    free(tmp);
    return kn_fail(err, KN_ERR_OOM, "out of memory");
  }
  snprintf(lock, pl, "%s.lock", path);
  snprintf(tmp, pl, "%s.tmp.%ld", path, (long)getpid());
  int fd = open(lock, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0 || flock(fd, LOCK_EX) != 0) {
    st = kn_fail(err, KN_ERR_IO, "%s: cannot lock the timing cache: %s", lock, strerror(errno));
    goto out;
  }
  cache all = {0};
  if ((st = cache_load(&all, path, err))) goto unlock;
  for (int32_t i = 0; i < mine->n; i++)
    if (!cache_put(&all, mine->e[i].key, mine->e[i].tactic, mine->e[i].us,
                   mine->e[i].others)) {
      st = kn_fail(err, KN_ERR_OOM, "out of memory");
      goto unlock;
    }
  FILE *f = fopen(tmp, "w");
  if (!f) {
    st = kn_fail(err, KN_ERR_IO, "%s: cannot write the timing cache: %s", path, strerror(errno));
    goto unlock;
  }
  fprintf(f, "# kiln timing cache 1: KEY<TAB>TACTIC<TAB>MICROSECONDS<TAB>OTHERS "
             "(docs/CLI.md)\n");
  for (int32_t i = 0; i < all.n; i++)
    fprintf(f, "%s\t%s\t%.3f\t%s\n", all.e[i].key, all.e[i].tactic, all.e[i].us,
            all.e[i].others);
  bool ok = !ferror(f);
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    st = kn_fail(err, KN_ERR_IO, "%s: cannot write the timing cache: %s", path, strerror(errno));
    remove(tmp);
  }
unlock:
  cache_free(&all);
  flock(fd, LOCK_UN);
out:
  if (fd >= 0) close(fd);
  free(lock);
  free(tmp);
  return st;
}

/* ---- keys ------------------------------------------------------------------ */

static uint64_t attrs_hash(const kn_node *n) {
  XXH64_state_t *s = XXH64_createState();
  if (!s) return 0;
  XXH64_reset(s, 0);
  for (int32_t a = 0; a < n->n_attrs; a++) {
    const kn_attr *at = &n->attrs[a];
    XXH64_update(s, at->name, strlen(at->name) + 1);
    XXH64_update(s, &at->type, sizeof at->type);
    switch (at->type) {
    case KN_ATTR_FLOAT: XXH64_update(s, &at->f, sizeof at->f); break;
    case KN_ATTR_INT: XXH64_update(s, &at->i, sizeof at->i); break;
    case KN_ATTR_STRING: XXH64_update(s, at->s, at->s_len); break;
    case KN_ATTR_FLOATS: XXH64_update(s, at->floats, (size_t)at->n * sizeof(float)); break;
    case KN_ATTR_INTS: XXH64_update(s, at->ints, (size_t)at->n * sizeof(int64_t)); break;
    case KN_ATTR_STRINGS:
      for (int32_t k = 0; k < at->n; k++) XXH64_update(s, at->strings[k], strlen(at->strings[k]) + 1);
      break;
    default: break; /* tensors and graphs: ops with candidates have none */
    }
  }
  uint64_t h = XXH64_digest(s);
  XXH64_freeState(s);
  return h;
}

/* false when the key does not fit (the step is then timed uncached). */
static bool make_key(const kn_graph *g, const kn_node *n, const kn_timing_options *o,
                     char *key, size_t len) {
  size_t at = 0;
  int w = snprintf(key, len, "%s%s%s", n->domain && *n->domain ? n->domain : "",
                   n->domain && *n->domain ? "." : "", n->op_type);
  if (w < 0 || (size_t)w >= len) return false;
  at = (size_t)w;
  for (int32_t k = 0; k < n->n_inputs; k++) {
    const kn_value *v = n->inputs[k] >= 0 ? &g->values[n->inputs[k]] : NULL;
    w = snprintf(key + at, len - at, " %s%s[", v && v->constant ? "c:" : "",
                 v ? kn_dtype_name(v->type.dtype) : "none");
    if (w < 0 || (size_t)w >= len - at) return false;
    at += (size_t)w;
    for (int32_t d = 0; v && d < v->type.rank; d++) {
      w = snprintf(key + at, len - at, "%s%lld", d ? "x" : "", (long long)v->type.dims[d]);
      if (w < 0 || (size_t)w >= len - at) return false;
      at += (size_t)w;
    }
    if (at + 1 >= len) return false;
    key[at++] = ']';
    key[at] = 0;
  }
  char feats[24];
  snprintf(feats, sizeof feats, "%llx", (unsigned long long)o->machine->features);
  w = snprintf(key + at, len - at, " attrs=%016llx isa=%s threads=%d cpu=%s/%s kiln=%s",
               (unsigned long long)attrs_hash(n), kn_isa_name((kn_isa)o->isa), o->threads,
               o->machine->cpu, feats, KN_VERSION_STRING);
  if (w < 0 || (size_t)w >= len - at) return false;
  for (char *p = key; *p; p++) /* one line, one field */
    if (*p == '\t' || *p == '\n' || *p == '\r') *p = ' ';
  return true;
}

/* ---- timing one step ------------------------------------------------------- */

static uint32_t xorshift(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

/* Median seconds of node n's run with its current tactic on synthetic
 * inputs; false when it cannot be timed. */
static bool time_node(const kn_ir_model *m, const kn_node *n, kn_rt *rt, const void *packed,
                      double *seconds) {
  const kn_graph *g = m->graph;
  kn_slot in[16], out[8];
  kn_slot *pin[16], *pout[8];
  if (n->n_inputs > 16 || n->n_outputs > 8) return false;
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  bool ok = true;
  uint32_t seed = 12345;
  for (int32_t k = 0; k < n->n_inputs; k++) {
    pin[k] = NULL;
    if (n->inputs[k] < 0) continue;
    const kn_value *v = &g->values[n->inputs[k]];
    pin[k] = &in[k];
    in[k].kind = KN_KIND_TENSOR;
    if (v->constant) {
      in[k].t = kn_tensor_view(v->constant);
      continue;
    }
    if (v->type.kind != KN_KIND_TENSOR || v->type.rank < 0 || !kn_dtype_is_valid(v->type.dtype)) {
      ok = false;
      break;
    }
    for (int32_t d = 0; d < v->type.rank; d++) ok &= v->type.dims[d] >= 0;
    if (!ok || kn_tensor_alloc(&in[k].t, v->type.dtype, v->type.rank, v->type.dims, NULL)) {
      ok = false;
      break;
    }
    if (v->type.dtype == KN_DTYPE_F32) {
      float *f = in[k].t.data;
      for (int64_t e = 0; e < kn_tensor_numel(&in[k].t); e++)
        f[e] = (float)(xorshift(&seed) >> 8) * (2.0f / 16777216.0f) - 1.0f;
    } else {
      memset(in[k].t.data, 0, in[k].t.nbytes);
    }
  }
  kn_error err;
  kn_op_ctx ctx = {.node = n, .opset = n->opset, .n_in = n->n_inputs, .in = pin,
                   .n_out = n->n_outputs, .out = pout, .err = &err, .label = m->label,
                   .rt = rt, .packed = packed};
  for (int32_t o = 0; o < n->n_outputs; o++) {
    pout[o] = &out[o];
    out[o].t.rank = -1;
  }
  if (ok) ok = n->op->infer(&ctx) == KN_OK;
  for (int32_t o = 0; o < n->n_outputs && ok; o++) {
    kn_slot *s = pout[o];
    if (s->kind != KN_KIND_TENSOR || !kn_shape_known(&s->t)) {
      ok = false;
      break;
    }
    if (!s->t.data) {
      kn_tensor shape = s->t;
      ok = kn_tensor_alloc(&s->t, shape.dtype, shape.rank, shape.dims, NULL) == KN_OK;
    }
  }
  if (ok) ok = kn_tactics_run(&ctx) == KN_OK; /* warm: packs, faults pages in */
  double times[MAX_RUNS];
  int32_t runs = 0;
  double start = now_s();
  while (ok && runs < MAX_RUNS && (runs < MIN_RUNS || now_s() - start < TARGET_S)) {
    double t0 = now_s();
    ok = kn_tactics_run(&ctx) == KN_OK;
    times[runs++] = now_s() - t0;
  }
  for (int32_t k = 0; k < n->n_inputs; k++) kn_slot_release(&in[k]);
  for (int32_t o = 0; o < n->n_outputs; o++) kn_slot_release(&out[o]);
  if (!ok || !runs) return false;
  for (int32_t i = 1; i < runs; i++) /* insertion sort: a few dozen values */
    for (int32_t j = i; j > 0 && times[j - 1] > times[j]; j--) {
      double x = times[j];
      times[j] = times[j - 1];
      times[j - 1] = x;
    }
  *seconds = times[runs / 2];
  return true;
}

/* ---- selection --------------------------------------------------------------- */



static bool add_decision(kn_timing_report *r, const char *text) {
  return kn_lines_add(&r->decisions, text);
}

/* A step is timed with its weights warm, run after run.  In the model
 * they come from memory when all the weights cannot stay in the L3: then
 * each candidate is charged its packed weights' bytes at DRAM's bandwidth
 * on top (Winograd's weights are 4x the GEMM's: ResNet-50's layer4 3x3
 * timed 908 us warm against 1067, but ran 1415 against 1330 in the
 * model).  True then, with *dram_bw in bytes/s. */
static bool weights_cold(const kn_graph *g, const kn_timing_options *o, double *dram_bw) {
  double wbytes = 0;
  for (int32_t v = 0; v < g->n_values; v++)
    if (g->values[v].constant) wbytes += (double)g->values[v].constant->nbytes;
  const kn_mem_level *l3 = kn_machine_level(o->machine, "L3"),
                     *dram = &o->machine->levels[o->machine->n_levels - 1];
  *dram_bw = dram->read_gbs[o->threads > 1 ? 1 : 0] * 1e9;
  return l3 && wbytes > (double)l3->bytes / 2 && *dram_bw > 0;
}

kn_status kn_tactics_time(kn_ir_model *m, const kn_timing_options *o, kn_timing_report *rep,
                          kn_error *err) {
  kn_lines kept = rep->decisions; /* lines from before (the passes'): appended to */
  memset(rep, 0, sizeof *rep);
  rep->decisions = kept;
  kn_graph *g = m->graph;
  double t0 = now_s();
  cache c = {0}, mine = {0};
  kn_status st = o->cache_path ? cache_load(&c, o->cache_path, err) : KN_OK;
  kn_rt rt = {.isa = (kn_isa)o->isa, .features = kn_cpu_features()};
  kn_machine_caches(o->machine, 1, &rt.caches.l1d, &rt.caches.l2, &rt.caches.l3);
  kn_target target = {o->isa, o->machine};
  double dram_bw;
  bool cold = weights_cold(g, o, &dram_bw);
  char *key = malloc(KEY_MAX);
  if (!key) st = kn_fail(err, KN_ERR_OOM, "out of memory");
  for (int32_t i = 0; i < g->n_nodes && !st; i++) {
    kn_node *n = &g->nodes[i];
    const kn_op_tactics *tt = kn_tactics_of(n);
    if (!n->tactic || !tt || !tt->candidates) continue;
    int32_t cand[MAX_CANDIDATES];
    int32_t nc = tt->candidates(g, n, o->isa, cand, MAX_CANDIDATES);
    if (nc < 2) continue;
    rep->steps_with_choice++;
    int32_t first = cand[0];
    if (o->heuristic) {
      n->tactic = first;
      continue;
    }
    bool keyed = make_key(g, n, o, key, KEY_MAX);
    /* this build's own timings first: a shape seen at an earlier step */
    const entry *hit = keyed ? cache_find(&mine, key) : NULL;
    bool in_file = false;
    if (keyed && !hit) in_file = (hit = cache_find(&c, key)) != NULL;
    bool from_cache = false; /* a cached winner this kiln still offers */
    for (int32_t k = 0; hit && k < nc && !from_cache; k++)
      if (!strcmp(kn_tactic_name(cand[k]), hit->tactic)) {
        n->tactic = cand[k];
        rep->cached += in_file;
        rep->changed += cand[k] != first;
        from_cache = true;
        /* the same line however the choice was made: an engine built
         * from a complete cache is the one built by timing */
        char line[512];
        snprintf(line, sizeof line, "%s: %s %.1f us%s", n->name, hit->tactic, hit->us,
                 hit->others);
        if (!add_decision(rep, line)) st = kn_fail(err, KN_ERR_OOM, "out of memory");
      }
    if (from_cache) continue;
    /* the best few by prediction (a stable order: the first choice wins ties) */
    double pred[MAX_CANDIDATES];
    for (int32_t k = 0; k < nc; k++) {
      kn_io_step s;
      n->tactic = cand[k];
      kn_io_predict(m, i, o->machine, o->threads, &s);
      pred[k] = s.predicted_s;
    }
    for (int32_t a = 1; a < nc; a++)
      for (int32_t b = a; b > 0 && pred[b - 1] > pred[b]; b--) {
        double x = pred[b];
        pred[b] = pred[b - 1];
        pred[b - 1] = x;
        int32_t y = cand[b];
        cand[b] = cand[b - 1];
        cand[b - 1] = y;
      }
    if (!rt.pool && o->threads > 1 && (st = kn_pool_create(o->threads, &rt.pool, err))) break;
    int32_t best = first;
    double best_s = INFINITY, took[MAX_CANDIDATES];
    for (int32_t k = 0; k < nc && k < o->candidates; k++) {
      took[k] = -1;
      n->tactic = cand[k];
      void *packed = NULL;
      kn_error perr;
      if (tt->pack && tt->pack(g, n, &target, &packed, &perr)) continue;
      double s;
      bool timed = time_node(m, n, &rt, packed, &s);
      if (timed && cold && packed) s += (double)((const kn_packed *)packed)->bytes / dram_bw;
      if (packed) kn_packed_free(packed);
      if (timed) took[k] = s;
      if (timed && (s < best_s || (s == best_s && cand[k] == first))) {
        best_s = s;
        best = cand[k];
      }
    }
    for (int32_t k = 0; k < nc && k < o->candidates; k++)
      if (cand[k] == first && best != first && took[k] >= 0 &&
          best_s * (1 + DISPLACE_MARGIN) > took[k]) {
        best = first;
        best_s = took[k];
      }
    n->tactic = best;
    if (!isfinite(best_s)) continue; /* nothing could be timed: the first choice */
    rep->timed++;
    rep->changed += best != first;
    char others[192] = "";
    size_t w = 0;
    for (int32_t k = 0; k < nc && k < o->candidates && w < sizeof others; k++) {
      if (cand[k] == best) continue;
      int r = took[k] >= 0 ? snprintf(others + w, sizeof others - w, "; %s %.1f us",
                                      kn_tactic_name(cand[k]), took[k] * 1e6)
                           : snprintf(others + w, sizeof others - w, "; %s could not be timed",
                                      kn_tactic_name(cand[k]));
      if (r < 0) break;
      w += (size_t)r;
    }
    /* as kept in the cache (%.3f there, %.1f here: the same rounding) */
    double us = round(best_s * 1e9) / 1e3;
    char line[512];
    snprintf(line, sizeof line, "%s: %s %.1f us%s", n->name, kn_tactic_name(best), us, others);
    if (!add_decision(rep, line)) st = kn_fail(err, KN_ERR_OOM, "out of memory");
    if (keyed && !cache_put(&mine, key, kn_tactic_name(best), us, others))
      st = kn_fail(err, KN_ERR_OOM, "out of memory");
  }
  if (!st && o->cache_path && mine.n) st = cache_save(&mine, o->cache_path, err);
  free(key);
  cache_free(&c);
  cache_free(&mine);
  kn_pool_free(rt.pool);
  free(rt.scratch);
  rep->seconds = now_s() - t0;
  return st;
}

kn_status kn_precisions_time(kn_ir_model *m, const kn_timing_options *o,
                             const uint8_t *revocable, kn_timing_report *rep,
                             kn_error *err) {
  if (o->heuristic || !revocable) return KN_OK;
  kn_graph *g = m->graph;
  kn_rt rt = {.isa = (kn_isa)o->isa, .features = kn_cpu_features()};
  kn_machine_caches(o->machine, 1, &rt.caches.l1d, &rt.caches.l2, &rt.caches.l3);
  kn_target target = {o->isa, o->machine};
  kn_status st = KN_OK;
  double t0 = now_s(), dram_bw;
  bool cold = weights_cold(g, o, &dram_bw); /* as kn_tactics_time charges them */
  for (int32_t i = 0; i < g->n_nodes && !st; i++) {
    kn_node *n = &g->nodes[i];
    if (!revocable[i] || n->precision == KN_PRECISION_FP32 || !n->op) continue;
    if (!rt.pool && o->threads > 1 && (st = kn_pool_create(o->threads, &rt.pool, err))) break;
    int32_t prec = n->precision, tactic = n->tactic;
    const kn_op_tactics *tt = kn_tactics_of(n);
    double took[2];
    bool ok = true;
    for (int32_t k = 0; k < 2 && ok; k++) {
      if (k == 1) {
        n->precision = KN_PRECISION_FP32;
        int32_t t = tt && tt->select ? tt->select(g, n, o->isa) : 0;
        n->tactic = kn_tactic_name(t) ? t : 0;
      }
      void *packed = NULL;
      kn_error perr;
      if (tt && tt->pack && tt->pack(g, n, &target, &packed, &perr)) {
        ok = false;
        break;
      }
      ok = time_node(m, n, &rt, packed, &took[k]);
      if (ok && cold && packed) took[k] += (double)((const kn_packed *)packed)->bytes / dram_bw;
      if (packed) kn_packed_free(packed);
    }
    if (ok && took[1] * (1 + DISPLACE_MARGIN) < took[0]) {
      char line[512];
      snprintf(line, sizeof line, "precision: %s: fp32 (%s %.1f us, fp32 %.1f us timed: the "
               "reduced precision is slower here)", n->name, kn_precision_name(prec),
               took[0] * 1e6, took[1] * 1e6);
      if (!add_decision(rep, line)) st = kn_fail(err, KN_ERR_OOM, "out of memory");
      continue; /* fp32 and its tactic stay */
    }
    n->precision = prec;
    n->tactic = tactic;
  }
  rep->seconds += now_s() - t0;
  kn_pool_free(rt.pool);
  free(rt.scratch);
  return st;
}
