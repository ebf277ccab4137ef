/* The engine file (format.h): writing, verifying and reading it. */
#include "format.h"
#include "ops/tactic.h"

#include "core/cpu.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "weights are mapped as stored: little-endian hosts only");

#define TABLE_ENTRY_BYTES 32u
#define TENSOR_ENTRY_BYTES 96u
#define PLAN_HEAD_BYTES 32u
#define PLAN_ENTRY_BYTES 32u
#define NO_STRING 0xFFFFFFFFu
#define MAX_GRAPH_DEPTH 64
#define N_SECTION_TYPES 5
#define PACKED_ENTRY_BYTES 32u

static const char *section_name(uint32_t type) {
  switch (type) {
  case KN_ENGINE_SECTION_GRAPH: return "GRAPH";
  case KN_ENGINE_SECTION_TENSORS: return "TENSORS";
  case KN_ENGINE_SECTION_PLAN: return "PLAN";
  case KN_ENGINE_SECTION_WEIGHTS: return "WEIGHTS";
  case KN_ENGINE_SECTION_PACKED: return "PACKED";
  default: return "?";
  }
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* ---- little-endian access ----------------------------------------------- */

static uint32_t rd_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
static uint64_t rd_u64(const uint8_t *p) {
  return (uint64_t)rd_u32(p) | (uint64_t)rd_u32(p + 4) << 32;
}
static void wr_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wr_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- writing -------------------------------------------------------------- */

typedef struct wbuf {
  uint8_t *p;
  size_t n, cap;
  bool oom;
} wbuf;

static uint8_t *wb_grow(wbuf *b, size_t extra) {
  if (b->oom) return NULL;
  if (b->n + extra > b->cap) {
    size_t nc = b->cap ? b->cap : 4096;
    while (nc < b->n + extra) nc *= 2;
    uint8_t *np = kn_realloc(b->p, nc);
    if (!np) {
      b->oom = true;
      return NULL;
    }
    b->p = np;
    b->cap = nc;
  }
  uint8_t *at = b->p + b->n;
  b->n += extra;
  return at;
}
static void put_u8(wbuf *b, uint8_t v) {
  uint8_t *p = wb_grow(b, 1);
  if (p) *p = v;
}
static void put_u32(wbuf *b, uint32_t v) {
  uint8_t *p = wb_grow(b, 4);
  if (p) wr_u32(p, v);
}
static void put_i32(wbuf *b, int32_t v) { put_u32(b, (uint32_t)v); }
static void put_u64(wbuf *b, uint64_t v) {
  uint8_t *p = wb_grow(b, 8);
  if (p) wr_u64(p, v);
}
static void put_i64(wbuf *b, int64_t v) { put_u64(b, (uint64_t)v); }
static void put_f32(wbuf *b, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  put_u32(b, u);
}
static void put_bytes(wbuf *b, const void *s, size_t n) {
  put_u32(b, (uint32_t)n);
  uint8_t *p = wb_grow(b, n);
  if (p && n) memcpy(p, s, n);
}
static void put_str(wbuf *b, const char *s) { put_bytes(b, s ? s : "", s ? strlen(s) : 0); }
static void put_optstr(wbuf *b, const char *s) {
  if (s) put_str(b, s);
  else put_u32(b, NO_STRING);
}
static void put_pad(wbuf *b, size_t align) {
  size_t pad = (size_t)align_up(b->n, align) - b->n;
  uint8_t *p = wb_grow(b, pad);
  if (p && pad) memset(p, 0, pad);
}

typedef struct wtensor {
  uint32_t graph;
  int32_t value;
  const kn_tensor *t;
  uint64_t offset, size;
} wtensor;

typedef struct writer {
  wbuf graph;
  wtensor *tensors;
  int32_t n_tensors, cap_tensors;
  uint32_t n_graphs;
  kn_error *err;
  const char *path;
  const kn_spill *spill;
} writer;

static bool add_tensor(writer *w, uint32_t graph, int32_t value, const kn_tensor *t,
                       uint32_t *index) {
  if (!KN_GROW(w->tensors, w->cap_tensors, (int64_t)w->n_tensors + 1)) return false;
  w->tensors[w->n_tensors] = (wtensor){.graph = graph, .value = value, .t = t};
  *index = (uint32_t)w->n_tensors++;
  return true;
}

static kn_status write_graph(writer *w, const kn_graph *g);

/* A node's int8 quantization (kn_node_quant) as the attributes the file
 * stores it in: kiln.w_scale (floats), kiln.a_scale (float), kiln.a_zero
 * (int), kiln.qdq (int 1).  Returns how many of q it filled (at most 4);
 * they borrow n's scales. */
static int32_t quant_attrs(const kn_node *n, kn_attr *q) {
  int32_t k = 0;
  memset(q, 0, 4 * sizeof *q);
  if (n->quant.n_weight_scales > 0)
    q[k++] = (kn_attr){.name = (char *)"kiln.w_scale", .type = KN_ATTR_FLOATS,
                       .n = n->quant.n_weight_scales, .floats = n->quant.weight_scales};
  if (n->quant.has_input) {
    q[k++] = (kn_attr){.name = (char *)"kiln.a_scale", .type = KN_ATTR_FLOAT,
                       .f = n->quant.input_scale};
    q[k++] = (kn_attr){.name = (char *)"kiln.a_zero", .type = KN_ATTR_INT,
                       .i = n->quant.input_zero};
  }
  if (n->quant.from_qdq) q[k++] = (kn_attr){.name = (char *)"kiln.qdq", .type = KN_ATTR_INT, .i = 1};
  return k;
}

static kn_status write_attr(writer *w, uint32_t gid, const kn_node *n, const kn_attr *a) {
  wbuf *b = &w->graph;
  uint32_t ti;
  put_str(b, a->name);
  put_u32(b, (uint32_t)a->type);
  put_f32(b, a->f);
  put_i64(b, a->i);
  switch (a->type) {
  case KN_ATTR_STRING: put_bytes(b, a->s ? a->s : "", a->s ? a->s_len : 0); break;
  case KN_ATTR_TENSOR:
  case KN_ATTR_SPARSE_TENSOR:
    if (!add_tensor(w, gid, -1, &a->t, &ti)) return kn_fail(w->err, KN_ERR_OOM, "out of memory");
    put_u32(b, ti);
    break;
  case KN_ATTR_GRAPH:
    if (!a->g)
      return kn_fail(w->err, KN_ERR_INVALID_ARG, "%s: node '%s': attribute '%s' has no graph",
                     w->path, n->name, a->name);
    return write_graph(w, a->g);
  case KN_ATTR_FLOATS:
    put_u32(b, (uint32_t)a->n);
    for (int32_t i = 0; i < a->n; i++) put_f32(b, a->floats[i]);
    break;
  case KN_ATTR_INTS:
    put_u32(b, (uint32_t)a->n);
    for (int32_t i = 0; i < a->n; i++) put_i64(b, a->ints[i]);
    break;
  case KN_ATTR_STRINGS:
    put_u32(b, (uint32_t)a->n);
    for (int32_t i = 0; i < a->n; i++) put_str(b, a->strings[i]);
    break;
  case KN_ATTR_TENSORS:
    put_u32(b, (uint32_t)a->n);
    for (int32_t i = 0; i < a->n; i++) {
      if (!add_tensor(w, gid, -1, &a->tensors[i], &ti))
        return kn_fail(w->err, KN_ERR_OOM, "out of memory");
      put_u32(b, ti);
    }
    break;
  case KN_ATTR_GRAPHS:
    put_u32(b, (uint32_t)a->n);
    for (int32_t i = 0; i < a->n; i++) {
      if (!a->graphs[i])
        return kn_fail(w->err, KN_ERR_INVALID_ARG,
                       "%s: node '%s': attribute '%s' has no graph %d", w->path, n->name,
                       a->name, i);
      kn_status st = write_graph(w, a->graphs[i]);
      if (st) return st;
    }
    break;
  default: break;
  }
  return KN_OK;
}

static kn_status write_graph(writer *w, const kn_graph *g) {
  wbuf *b = &w->graph;
  uint32_t gid = w->n_graphs++;
  uint32_t ti;
  put_str(b, g->name);
  put_u32(b, (uint32_t)g->n_values);
  for (int32_t i = 0; i < g->n_values; i++) {
    const kn_value *v = &g->values[i];
    put_str(b, v->name);
    put_u8(b, (uint8_t)v->type.kind);
    put_u8(b, v->type.optional);
    put_u8(b, (uint8_t)((v->is_input ? 1 : 0) | (v->is_output ? 2 : 0)));
    put_u8(b, 0);
    put_i32(b, (int32_t)v->type.dtype);
    put_i32(b, v->type.rank);
    for (int32_t d = 0; d < v->type.rank; d++) put_i64(b, v->type.dims[d]);
    for (int32_t d = 0; d < v->type.rank; d++) put_optstr(b, v->dim_params[d]);
    put_i32(b, v->outer);
    if (v->constant && !add_tensor(w, gid, i, v->constant, &ti))
      return kn_fail(w->err, KN_ERR_OOM, "out of memory");
  }
  put_u32(b, (uint32_t)g->n_inputs);
  for (int32_t i = 0; i < g->n_inputs; i++) put_i32(b, g->inputs[i]);
  put_u32(b, (uint32_t)g->n_outputs);
  for (int32_t i = 0; i < g->n_outputs; i++) put_i32(b, g->outputs[i]);
  put_u32(b, (uint32_t)g->n_nodes);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (n->dead)
      return kn_fail(w->err, KN_ERR_INVALID_ARG,
                     "%s: node '%s' is marked dead; compact the graph before writing it",
                     w->path, n->name);
    put_str(b, n->name);
    put_optstr(b, n->covers);
    put_u32(b, (uint32_t)n->tactic);
    put_u32(b, (uint32_t)n->precision);
    put_str(b, n->op_type);
    put_str(b, n->domain);
    put_u32(b, (uint32_t)n->n_inputs);
    for (int32_t k = 0; k < n->n_inputs; k++) put_i32(b, n->inputs[k]);
    put_u32(b, (uint32_t)n->n_outputs);
    for (int32_t k = 0; k < n->n_outputs; k++) put_i32(b, n->outputs[k]);
    kn_attr q[4];
    int32_t nq = quant_attrs(n, q);
    put_u32(b, (uint32_t)(n->n_attrs + nq));
    for (int32_t a = 0; a < n->n_attrs + nq; a++) {
      kn_status st = write_attr(w, gid, n, a < n->n_attrs ? &n->attrs[a] : &q[a - n->n_attrs]);
      if (st) return st;
    }
  }
  return KN_OK;
}

/* Bytes tensor t takes in WEIGHTS. */
static kn_status tensor_size(const writer *w, const kn_tensor *t, uint64_t *size) {
  int64_t numel = kn_tensor_numel(t);
  if (!kn_dtype_is_valid(t->dtype) || t->rank < 0 || t->rank > KN_MAX_RANK || numel < 0)
    return kn_fail(w->err, KN_ERR_INVALID_ARG,
                   "%s: a constant has dtype %d and rank %d, which cannot be stored",
                   w->path, (int)t->dtype, (int)t->rank);
  if (t->dtype == KN_DTYPE_STRING) {
    uint64_t s = 0;
    char *const *e = t->data;
    for (int64_t i = 0; i < numel; i++) s += 4 + (e && e[i] ? strlen(e[i]) : 0);
    *size = s;
    return KN_OK;
  }
  *size = (uint64_t)numel * kn_dtype_size(t->dtype);
  if (*size && (!t->data || t->nbytes < *size))
    return kn_fail(w->err, KN_ERR_INVALID_ARG,
                   "%s: a constant of %llu bytes has %zu bytes of data", w->path,
                   (unsigned long long)*size, t->data ? t->nbytes : 0);
  return KN_OK;
}

/* Feed tensor t's stored bytes to fn (hash or file). */
static bool emit_tensor(const kn_tensor *t, bool (*fn)(const void *, size_t, void *),
                        void *arg) {
  if (t->dtype != KN_DTYPE_STRING) {
    size_t n = (size_t)kn_tensor_numel(t) * kn_dtype_size(t->dtype);
    return n == 0 || fn(t->data, n, arg);
  }
  char *const *e = t->data;
  int64_t numel = kn_tensor_numel(t);
  for (int64_t i = 0; i < numel; i++) {
    const char *s = e && e[i] ? e[i] : "";
    uint8_t len[4];
    wr_u32(len, (uint32_t)strlen(s));
    if (!fn(len, 4, arg) || !fn(s, strlen(s), arg)) return false;
  }
  return true;
}

static const uint8_t kZeros[KN_ENGINE_ALIGN];

static bool hash_fn(const void *p, size_t n, void *arg) {
  return XXH64_update(arg, p, n) == XXH_OK;
}
static bool file_fn(const void *p, size_t n, void *arg) {
  return fwrite(p, 1, n, arg) == n;
}

/* Emit the WEIGHTS section (from its start) through fn. */
static bool emit_weights(const writer *w, bool (*fn)(const void *, size_t, void *),
                         void *arg) {
  uint64_t pos = 0;
  for (int32_t i = 0; i < w->n_tensors; i++) {
    const wtensor *t = &w->tensors[i];
    if (t->offset > pos && !fn(kZeros, (size_t)(t->offset - pos), arg)) return false;
    if (!emit_tensor(t->t, fn, arg)) return false;
    kn_spill_drop(w->spill, t->t->data, t->t->nbytes);
    pos = t->offset + t->size;
  }
  return true;
}

/* Layout of the PACKED section: the entry table, then each block at a
 * 64-byte multiple.  Returns the section size; offsets into offs. */
static uint64_t packed_layout(const kn_engine_config *cfg, uint64_t *offs) {
  uint64_t pos = 8 + (uint64_t)PACKED_ENTRY_BYTES * (uint64_t)cfg->n_packed;
  for (int32_t i = 0; i < cfg->n_packed; i++) {
    offs[i] = align_up(pos, KN_ENGINE_ALIGN);
    pos = offs[i] + cfg->packed[i].bytes;
  }
  return pos;
}

/* Emit the PACKED section through fn. */
static bool emit_packed(const kn_engine_config *cfg, const uint64_t *offs,
                        bool (*fn)(const void *, size_t, void *), void *arg) {
  uint8_t e[PACKED_ENTRY_BYTES];
  wr_u32(e, (uint32_t)cfg->n_packed);
  wr_u32(e + 4, 0);
  if (!fn(e, 8, arg)) return false;
  uint64_t pos = 8;
  for (int32_t i = 0; i < cfg->n_packed; i++) {
    const kn_engine_packed *p = &cfg->packed[i];
    wr_u32(e, (uint32_t)p->node);
    wr_u32(e + 4, (uint32_t)p->isa);
    wr_u32(e + 8, (uint32_t)p->tactic);
    wr_u32(e + 12, 0);
    wr_u64(e + 16, offs[i]);
    wr_u64(e + 24, p->bytes);
    if (!fn(e, PACKED_ENTRY_BYTES, arg)) return false;
    pos += PACKED_ENTRY_BYTES;
  }
  for (int32_t i = 0; i < cfg->n_packed; i++) {
    if (offs[i] > pos && !fn(kZeros, (size_t)(offs[i] - pos), arg)) return false;
    if (!fn(cfg->packed[i].data, (size_t)cfg->packed[i].bytes, arg)) return false;
    pos = offs[i] + cfg->packed[i].bytes;
  }
  return true;
}

static void put_config(wbuf *b, const kn_engine_config *cfg) {
  char ws[32];
  uint32_t count = 2;
  if (cfg)
    count += (uint32_t)(cfg->n_shapes + cfg->n_profiles + cfg->n_disabled_passes + cfg->n_fixed);
  if (cfg && cfg->machine_json) count++;
  if (cfg) count += (uint32_t)cfg->n_decisions;
  put_u32(b, count);
  put_str(b, "precision");
  put_str(b, cfg && cfg->precision ? cfg->precision : "fp32");
  for (int32_t i = 0; cfg && i < cfg->n_shapes; i++) {
    put_str(b, "shape");
    put_str(b, cfg->shapes[i]);
  }
  for (int32_t i = 0; cfg && i < cfg->n_profiles; i++) {
    put_str(b, "profile");
    put_str(b, cfg->profiles[i]);
  }
  for (int32_t i = 0; cfg && i < cfg->n_disabled_passes; i++) {
    put_str(b, "disable_pass");
    put_str(b, cfg->disabled_passes[i]);
  }
  for (int32_t i = 0; cfg && i < cfg->n_fixed; i++) {
    put_str(b, "fix");
    put_str(b, cfg->fixed[i]);
  }
  snprintf(ws, sizeof ws, "%llu", (unsigned long long)(cfg ? cfg->workspace_bytes : 0));
  put_str(b, "workspace");
  put_str(b, ws);
  if (cfg && cfg->machine_json) {
    put_str(b, "machine");
    put_str(b, cfg->machine_json);
  }
  for (int32_t i = 0; cfg && i < cfg->n_decisions; i++) {
    put_str(b, "decision");
    put_str(b, cfg->decisions[i]);
  }
  put_pad(b, 8);
}

static void put_plan(wbuf *b, const kn_mem_plan *p) {
  put_u32(b, (uint32_t)p->n_tensors);
  put_u32(b, p->alignment);
  put_u64(b, p->arena_bytes);
  put_u64(b, p->lower_bound_bytes);
  put_u64(b, p->naive_bytes);
  for (int32_t i = 0; i < p->n_tensors; i++) {
    const kn_plan_tensor *t = &p->tensors[i];
    put_i32(b, t->value);
    put_i32(b, t->first);
    put_i32(b, t->last);
    put_i32(b, t->inplace_of);
    put_u64(b, t->bytes);
    put_i64(b, t->offset);
  }
}

typedef struct wsec {
  uint32_t type;
  const wbuf *data;
  uint64_t off, size, hash;
} wsec;

kn_status kn_engine_write(const kn_ir_model *m, const kn_mem_plan *plan,
                          const kn_engine_config *cfg, const char *path, kn_error *err) {
  kn_status st = KN_OK;
  writer w = {.err = err, .path = path, .spill = cfg ? cfg->spill : NULL};
  wbuf head = {0}, tens = {0}, planb = {0};
  XXH64_state_t *hs = NULL;
  char *tmp = NULL;
  FILE *f = NULL;
  uint64_t *packed_offs = NULL;

  /* GRAPH */
  put_i64(&w.graph, m->ir_version);
  put_u32(&w.graph, (uint32_t)m->n_opsets);
  for (int32_t i = 0; i < m->n_opsets; i++) {
    put_str(&w.graph, m->opsets[i].domain);
    put_i64(&w.graph, m->opsets[i].version);
  }
  size_t count_at = w.graph.n;
  put_u32(&w.graph, 0); /* graph count, known after the walk */
  st = write_graph(&w, m->graph);
  if (st) goto done;
  if (!w.graph.oom) wr_u32(w.graph.p + count_at, w.n_graphs);

  /* TENSORS, with the WEIGHTS layout */
  uint64_t wpos = 0;
  put_u32(&tens, (uint32_t)w.n_tensors);
  put_u32(&tens, 0);
  for (int32_t i = 0; i < w.n_tensors; i++) {
    wtensor *t = &w.tensors[i];
    st = tensor_size(&w, t->t, &t->size);
    if (st) goto done;
    t->offset = align_up(wpos, KN_ENGINE_ALIGN);
    wpos = t->offset + t->size;
    put_u32(&tens, t->graph);
    put_i32(&tens, t->value);
    put_i32(&tens, (int32_t)t->t->dtype);
    put_i32(&tens, t->t->rank);
    for (int d = 0; d < KN_MAX_RANK; d++) put_i64(&tens, d < t->t->rank ? t->t->dims[d] : 0);
    put_u64(&tens, t->offset);
    put_u64(&tens, t->size);
  }
  uint64_t weights_size = wpos;
  if (plan) put_plan(&planb, plan);

  /* PACKED layout */
  bool has_packed = cfg && cfg->n_packed > 0;
  uint64_t packed_size = 0;
  if (has_packed) {
    packed_offs = kn_calloc((size_t)cfg->n_packed, sizeof *packed_offs);
    if (!packed_offs) {
      st = kn_fail(err, KN_ERR_OOM, "%s: out of memory writing the engine", path);
      goto done;
    }
    packed_size = packed_layout(cfg, packed_offs);
  }

  /* header + config; the table follows */
  uint32_t n_sections = (plan ? 4 : 3) + (has_packed ? 1 : 0);
  uint8_t *h = wb_grow(&head, KN_ENGINE_HEADER_BYTES);
  if (h) memset(h, 0, KN_ENGINE_HEADER_BYTES);
  put_config(&head, cfg);
  if (w.graph.oom || tens.oom || planb.oom || head.oom) {
    st = kn_fail(err, KN_ERR_OOM, "%s: out of memory writing the engine", path);
    goto done;
  }
  uint32_t config_bytes = (uint32_t)(head.n - KN_ENGINE_HEADER_BYTES);
  uint64_t table_off = head.n;
  uint64_t table_end = table_off + (uint64_t)TABLE_ENTRY_BYTES * n_sections;
  wsec sec[N_SECTION_TYPES];
  int ns = 0;
  sec[ns++] = (wsec){.type = KN_ENGINE_SECTION_GRAPH, .data = &w.graph};
  sec[ns++] = (wsec){.type = KN_ENGINE_SECTION_TENSORS, .data = &tens};
  if (plan) sec[ns++] = (wsec){.type = KN_ENGINE_SECTION_PLAN, .data = &planb};
  sec[ns++] = (wsec){.type = KN_ENGINE_SECTION_WEIGHTS, .data = NULL}; /* streamed */
  if (has_packed) sec[ns++] = (wsec){.type = KN_ENGINE_SECTION_PACKED, .data = NULL};
  uint64_t pos = table_end;
  hs = XXH64_createState();
  if (!hs) {
    st = kn_fail(err, KN_ERR_OOM, "%s: out of memory writing the engine", path);
    goto done;
  }
  for (int i = 0; i < ns; i++) {
    sec[i].off = align_up(pos, KN_ENGINE_ALIGN);
    if (sec[i].data) {
      sec[i].size = sec[i].data->n;
      sec[i].hash = XXH64(sec[i].data->p, sec[i].data->n, 0);
    } else if (sec[i].type == KN_ENGINE_SECTION_WEIGHTS) {
      sec[i].size = weights_size;
      XXH64_reset(hs, 0);
      emit_weights(&w, hash_fn, hs);
      sec[i].hash = XXH64_digest(hs);
    } else {
      sec[i].size = packed_size;
      XXH64_reset(hs, 0);
      emit_packed(cfg, packed_offs, hash_fn, hs);
      sec[i].hash = XXH64_digest(hs);
    }
    pos = sec[i].off + sec[i].size;
  }
  uint64_t file_size = pos;
  for (int i = 0; i < ns; i++) {
    put_u32(&head, sec[i].type);
    put_u32(&head, 0);
    put_u64(&head, sec[i].off);
    put_u64(&head, sec[i].size);
    put_u64(&head, sec[i].hash);
  }
  if (head.oom) {
    st = kn_fail(err, KN_ERR_OOM, "%s: out of memory writing the engine", path);
    goto done;
  }
  h = head.p;
  memcpy(h, KN_ENGINE_MAGIC, 8);
  wr_u32(h + 8, KN_ENGINE_FORMAT_VERSION);
  wr_u32(h + 12, KN_ENGINE_HEADER_BYTES);
  strncpy((char *)h + 16, KN_VERSION_STRING, 32);
  wr_u64(h + 48, kn_cpu_build_features() | (cfg ? cfg->cpu_features : 0));
  wr_u64(h + 56, file_size);
  wr_u32(h + 64, config_bytes);
  wr_u32(h + 68, n_sections);
  wr_u64(h + 72, table_off);
  wr_u64(h + 80, XXH64(head.p, head.n, 0));

  /* the file, written beside `path` and renamed over it */
  size_t tl = strlen(path) + 32;
  tmp = kn_malloc(tl);
  if (!tmp) {
    st = kn_fail(err, KN_ERR_OOM, "out of memory");
    goto done;
  }
  snprintf(tmp, tl, "%s.tmp%ld", path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  f = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (!f) {
    if (fd >= 0) close(fd);
    st = kn_fail(err, KN_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    goto done;
  }
  bool ok = fwrite(head.p, 1, head.n, f) == head.n;
  pos = head.n;
  for (int i = 0; i < ns && ok; i++) {
    if (sec[i].off > pos) ok = file_fn(kZeros, (size_t)(sec[i].off - pos), f);
    if (ok) ok = sec[i].data ? file_fn(sec[i].data->p, sec[i].data->n, f)
                 : sec[i].type == KN_ENGINE_SECTION_WEIGHTS
                     ? emit_weights(&w, file_fn, f)
                     : emit_packed(cfg, packed_offs, file_fn, f);
    pos = sec[i].off + sec[i].size;
  }
  if (fflush(f) != 0) ok = false;
  int e = errno;
  if (fclose(f) != 0) ok = false;
  f = NULL;
  if (!ok) {
    unlink(tmp);
    st = kn_fail(err, KN_ERR_IO, "%s: write failed: %s", path, strerror(e ? e : EIO));
    goto done;
  }
  if (rename(tmp, path) != 0) {
    e = errno;
    unlink(tmp);
    st = kn_fail(err, KN_ERR_IO, "%s: cannot replace the file: %s", path, strerror(e));
  }
done:
  if (f) {
    fclose(f);
    unlink(tmp);
  }
  free(tmp);
  free(packed_offs);
  XXH64_freeState(hs);
  free(w.graph.p);
  free(w.tensors);
  free(head.p);
  free(tens.p);
  free(planb.p);
  return st;
}

/* ---- reading ------------------------------------------------------------- */

typedef struct rsec {
  const uint8_t *p;
  uint64_t off, size;
  bool present;
} rsec;

typedef struct reader {
  const uint8_t *base;
  size_t size;
  bool copy; /* constants copied (buffer) or pointing into base (mapping) */
  bool drop;  /* base is our private mapping: verified pages may be dropped */
  const char *label;
  kn_error *err;
  rsec sec[N_SECTION_TYPES + 1];
  /* GRAPH decoding */
  const uint8_t *p;
  size_t n, pos;
  uint32_t n_tensors;
  const uint8_t *tensors; /* first entry of the tensor table */
  kn_graph **graphs;
  uint32_t n_graphs, graphs_seen;
  uint32_t version; /* the file's format version */
} reader;

/* Cursor reads inside GRAPH; each returns false (after failing) when the
 * section ends early. */
static bool need(reader *r, size_t n) {
  if (n <= r->n - r->pos) return true;
  kn_fail(r->err, KN_ERR_PARSE,
          "%s: section GRAPH is inconsistent: a record at byte %zu needs %zu bytes, "
          "%zu remain",
          r->label, r->pos, n, r->n - r->pos);
  return false;
}
static bool get_u32(reader *r, uint32_t *v) {
  if (!need(r, 4)) return false;
  *v = rd_u32(r->p + r->pos);
  r->pos += 4;
  return true;
}
static bool get_i32(reader *r, int32_t *v) {
  uint32_t u;
  if (!get_u32(r, &u)) return false;
  *v = (int32_t)u;
  return true;
}
static bool get_u8(reader *r, uint8_t *v) {
  if (!need(r, 1)) return false;
  *v = r->p[r->pos++];
  return true;
}
static bool get_i64(reader *r, int64_t *v) {
  if (!need(r, 8)) return false;
  *v = (int64_t)rd_u64(r->p + r->pos);
  r->pos += 8;
  return true;
}
static bool get_f32(reader *r, float *f) {
  uint32_t u;
  if (!get_u32(r, &u)) return false;
  memcpy(f, &u, 4);
  return true;
}
/* A count of records that take at least `min` bytes each. */
static bool get_count(reader *r, uint32_t *n, size_t min, const char *what) {
  if (!get_u32(r, n)) return false;
  if (*n > INT32_MAX || (uint64_t)*n * min > r->n - r->pos) {
    kn_fail(r->err, KN_ERR_PARSE,
            "%s: section GRAPH is inconsistent: %u %s at byte %zu do not fit in the %zu "
            "bytes left",
            r->label, *n, what, r->pos, r->n - r->pos);
    return false;
  }
  return true;
}
/* A string as a new NUL-terminated copy; *out NULL for an absent optional
 * string.  `text`: refuse NUL bytes inside (names). */
static bool get_str(reader *r, char **out, size_t *len_out, bool optional, bool text) {
  uint32_t len;
  *out = NULL;
  if (!get_u32(r, &len)) return false;
  if (optional && len == NO_STRING) return true;
  if (!need(r, len)) return false;
  const char *s = (const char *)r->p + r->pos;
  if (text && memchr(s, 0, len)) {
    kn_fail(r->err, KN_ERR_PARSE,
            "%s: section GRAPH is inconsistent: the name at byte %zu holds a NUL byte",
            r->label, r->pos);
    return false;
  }
  *out = kn_strndup(s, len);
  if (!*out) {
    kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
    return false;
  }
  if (len_out) *len_out = len;
  r->pos += len;
  return true;
}

static kn_status bad(reader *r, const char *fmt, ...) KN_PRINTF(2, 3);
static kn_status bad(reader *r, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return kn_fail(r->err, KN_ERR_PARSE, "%s: %s", r->label, msg);
}

/* Entry i of the tensor table, already bounds-checked by check_tensors. */
static const uint8_t *tentry(const reader *r, uint32_t i) {
  return r->tensors + (size_t)i * TENSOR_ENTRY_BYTES;
}

/* Build tensor i of the table into t (a view into the mapping, or a copy). */
static kn_status load_tensor(reader *r, uint32_t i, kn_tensor *t) {
  const uint8_t *e = tentry(r, i);
  kn_dtype dt = (kn_dtype)(int32_t)rd_u32(e + 8);
  int32_t rank = (int32_t)rd_u32(e + 12);
  int64_t dims[KN_MAX_RANK];
  for (int d = 0; d < KN_MAX_RANK; d++) dims[d] = (int64_t)rd_u64(e + 16 + 8 * d);
  uint64_t off = rd_u64(e + 80), size = rd_u64(e + 88);
  const uint8_t *data = r->sec[KN_ENGINE_SECTION_WEIGHTS].p + off;
  memset(t, 0, sizeof *t);
  if (dt == KN_DTYPE_STRING) {
    int64_t numel = kn_shape_numel(rank, dims);
    kn_status st = kn_tensor_alloc(t, dt, rank, dims, r->err);
    if (st) return st;
    char **s = t->data;
    uint64_t pos = 0;
    for (int64_t k = 0; k < numel; k++) {
      uint32_t len = size - pos >= 4 ? rd_u32(data + pos) : 0;
      if (size - pos < 4 || len > size - pos - 4) {
        kn_tensor_release(t);
        return bad(r, "section TENSORS is inconsistent: string tensor %u overruns its "
                      "%llu bytes at element %lld",
                   i, (unsigned long long)size, (long long)k);
      }
      s[k] = kn_strndup((const char *)data + pos + 4, len);
      if (!s[k]) {
        kn_tensor_release(t);
        return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
      }
      pos += 4 + (uint64_t)len;
    }
    if (pos != size) {
      kn_tensor_release(t);
      return bad(r, "section TENSORS is inconsistent: string tensor %u has %llu bytes, its "
                    "elements take %llu",
                 i, (unsigned long long)size, (unsigned long long)pos);
    }
    return KN_OK;
  }
  if (r->copy) {
    kn_status st = kn_tensor_alloc(t, dt, rank, dims, r->err);
    if (st) return st;
    if (size) memcpy(t->data, data, (size_t)size);
    return KN_OK;
  }
  t->dtype = dt;
  t->rank = rank;
  memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
  t->data = (void *)data; /* read-only mapping: constants are never written */
  t->nbytes = (size_t)size;
  t->owned = 0;
  return KN_OK;
}

/* Validate the tensor table against WEIGHTS. */
static kn_status check_tensors(reader *r) {
  const rsec *s = &r->sec[KN_ENGINE_SECTION_TENSORS];
  const rsec *ws = &r->sec[KN_ENGINE_SECTION_WEIGHTS];
  if (s->size < 8) return bad(r, "section TENSORS is inconsistent: %llu bytes is too short",
                              (unsigned long long)s->size);
  uint32_t n = rd_u32(s->p);
  if (n > INT32_MAX || (uint64_t)n * TENSOR_ENTRY_BYTES != s->size - 8)
    return bad(r, "section TENSORS is inconsistent: %u entries need %llu bytes, it has %llu",
               n, (unsigned long long)n * TENSOR_ENTRY_BYTES + 8,
               (unsigned long long)s->size);
  r->n_tensors = n;
  r->tensors = s->p + 8;
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *e = tentry(r, i);
    int32_t dt = (int32_t)rd_u32(e + 8), rank = (int32_t)rd_u32(e + 12);
    uint64_t off = rd_u64(e + 80), size = rd_u64(e + 88);
    if (!kn_dtype_is_valid(dt))
      return bad(r, "section TENSORS is inconsistent: tensor %u has dtype %d", i, dt);
    if (rank < 0 || rank > KN_MAX_RANK)
      return bad(r, "section TENSORS is inconsistent: tensor %u has rank %d", i, rank);
    int64_t dims[KN_MAX_RANK];
    for (int d = 0; d < KN_MAX_RANK; d++) dims[d] = (int64_t)rd_u64(e + 16 + 8 * d);
    int64_t numel = kn_shape_numel(rank, dims);
    if (numel < 0)
      return bad(r, "section TENSORS is inconsistent: tensor %u has an invalid shape", i);
    if (off % KN_ENGINE_ALIGN || off > ws->size || size > ws->size - off)
      return bad(r, "section TENSORS is inconsistent: tensor %u at bytes %llu..%llu lies "
                    "outside WEIGHTS (%llu bytes) or is not 64-byte aligned",
                 i, (unsigned long long)off, (unsigned long long)(off + size),
                 (unsigned long long)ws->size);
    size_t es = kn_dtype_size((kn_dtype)dt);
    if (dt == KN_DTYPE_STRING ? (uint64_t)numel > size / 4
                              : ((uint64_t)numel > size / es || (uint64_t)numel * es != size))
      return bad(r, "section TENSORS is inconsistent: tensor %u of %lld %s elements has %llu "
                    "bytes",
                 i, (long long)numel, kn_dtype_name((kn_dtype)dt), (unsigned long long)size);
    if ((uint64_t)numel > KN_MAX_TENSOR_BYTES / es)
      return bad(r, "tensor %u exceeds kiln's per-tensor limit", i);
  }
  return KN_OK;
}

static kn_status read_graph(reader *r, kn_graph *parent, int depth, kn_graph **out);

static kn_status attr_tensor(reader *r, kn_tensor *t) {
  uint32_t ti;
  if (!get_u32(r, &ti)) return r->err ? r->err->status : KN_ERR_PARSE;
  if (ti >= r->n_tensors)
    return bad(r, "section GRAPH is inconsistent: tensor index %u at byte %zu is out of "
                  "range (%u tensors)",
               ti, r->pos - 4, r->n_tensors);
  if ((int32_t)rd_u32(tentry(r, ti) + 4) != -1)
    return bad(r, "section GRAPH is inconsistent: tensor %u is a value's constant, not an "
                  "attribute",
               ti);
  return load_tensor(r, ti, t);
}

#define TRY(x)                                                                         \
  do {                                                                                 \
    if (!(x)) return r->err ? r->err->status : KN_ERR_PARSE;                           \
  } while (0)

/* The type each of those attributes is written with. */
static const struct {
  const char *name;
  kn_attr_type type;
} quant_attr_types[] = {
    {"kiln.a_scale", KN_ATTR_FLOAT},
    {"kiln.a_zero", KN_ATTR_INT},
    {"kiln.w_scale", KN_ATTR_FLOATS},
    {"kiln.qdq", KN_ATTR_INT},
};

/* Which of those attributes `name` is: its index in quant_attr_types, or -1. */
static int quant_attr_of(const char *name) {
  for (size_t q = 0; q < sizeof quant_attr_types / sizeof quant_attr_types[0]; q++)
    if (!strcmp(name, quant_attr_types[q].name)) return (int)q;
  return -1;
}

/* The reverse, on a node just read: those attributes become its typed
 * quantization and leave its attribute list.  One of another type (a
 * subgraph, say) is a damaged file; values the accessors would refuse (a
 * scale not positive and finite, a zero outside 0..255) leave the step
 * without them, as they always did. */
static kn_status take_quant_attrs(reader *r, kn_node *n) {
  for (int32_t a = 0; a < n->n_attrs; a++) {
    int q = quant_attr_of(n->attrs[a].name);
    if (q >= 0 && n->attrs[a].type != quant_attr_types[q].type)
      return bad(r, "section GRAPH is inconsistent: node '%.200s' has attribute %s of "
                    "type %d, expected %d",
                 n->name, quant_attr_types[q].name, (int)n->attrs[a].type,
                 (int)quant_attr_types[q].type);
  }
  /* every one present has its type now */
  const kn_attr *as = kn_node_attr(n, "kiln.a_scale"), *az = kn_node_attr(n, "kiln.a_zero");
  const kn_attr *ws = kn_node_attr(n, "kiln.w_scale"), *qd = kn_node_attr(n, "kiln.qdq");
  if (as && az && az->i >= 0 && az->i <= 255 &&
      !kn_node_set_input_quant(n, as->f, (int32_t)az->i))
    n->quant.has_input = false;
  if (ws && !kn_node_set_weight_scales(n, ws->floats, ws->n))
    return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
  n->quant.from_qdq = qd && qd->i;
  int32_t w = 0;
  for (int32_t a = 0; a < n->n_attrs; a++) {
    kn_attr *at = &n->attrs[a];
    if (quant_attr_of(at->name) >= 0)
      kn_attr_clear(at);
    else
      n->attrs[w++] = *at;
  }
  n->n_attrs = w;
  return KN_OK;
}

static kn_status read_attr(reader *r, kn_graph *g, int depth, kn_attr *a) {
  uint32_t type, n;
  TRY(get_str(r, &a->name, NULL, false, true));
  TRY(get_u32(r, &type));
  TRY(get_f32(r, &a->f));
  TRY(get_i64(r, &a->i));
  a->type = (kn_attr_type)type;
  switch (type) {
  case KN_ATTR_FLOAT:
  case KN_ATTR_INT:
  case KN_ATTR_TYPE_PROTO: return KN_OK;
  case KN_ATTR_STRING: TRY(get_str(r, &a->s, &a->s_len, false, false)); return KN_OK;
  case KN_ATTR_TENSOR:
  case KN_ATTR_SPARSE_TENSOR: return attr_tensor(r, &a->t);
  case KN_ATTR_GRAPH: return read_graph(r, g, depth + 1, &a->g);
  case KN_ATTR_FLOATS:
    TRY(get_count(r, &n, 4, "floats"));
    a->floats = kn_malloc((size_t)n * sizeof(float));
    if (!a->floats) return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
    a->n = (int32_t)n;
    for (uint32_t i = 0; i < n; i++) TRY(get_f32(r, &a->floats[i]));
    return KN_OK;
  case KN_ATTR_INTS:
    TRY(get_count(r, &n, 8, "ints"));
    a->ints = kn_malloc((size_t)n * sizeof(int64_t));
    if (!a->ints) return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
    a->n = (int32_t)n;
    for (uint32_t i = 0; i < n; i++) TRY(get_i64(r, &a->ints[i]));
    return KN_OK;
  case KN_ATTR_STRINGS:
    TRY(get_count(r, &n, 4, "strings"));
    a->strings = kn_calloc((size_t)n + 1, sizeof(char *));
    if (!a->strings) return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
    a->n = (int32_t)n;
    for (uint32_t i = 0; i < n; i++) TRY(get_str(r, &a->strings[i], NULL, false, false));
    return KN_OK;
  case KN_ATTR_TENSORS:
    TRY(get_count(r, &n, 4, "tensors"));
    a->tensors = kn_calloc((size_t)n + 1, sizeof(kn_tensor));
    if (!a->tensors) return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
    a->n = (int32_t)n;
    for (uint32_t i = 0; i < n; i++) {
      kn_status st = attr_tensor(r, &a->tensors[i]);
      if (st) return st;
    }
    return KN_OK;
  case KN_ATTR_GRAPHS:
    TRY(get_count(r, &n, 16, "graphs"));
    a->graphs = kn_calloc((size_t)n + 1, sizeof(kn_graph *));
    if (!a->graphs) return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
    a->n = (int32_t)n;
    for (uint32_t i = 0; i < n; i++) {
      kn_status st = read_graph(r, g, depth + 1, &a->graphs[i]);
      if (st) return st;
    }
    return KN_OK;
  default:
    return bad(r, "section GRAPH is inconsistent: attribute '%s' has type %u", a->name, type);
  }
}

/* Value index list entries must name a value of g (or be -1 where allowed). */
static bool index_ok(int32_t v, const kn_graph *g, bool allow_none) {
  return (allow_none && v == -1) || (v >= 0 && v < g->n_values);
}

static kn_status read_indices(reader *r, const kn_graph *g, const char *what,
                              const char *owner, bool allow_none, int32_t **out,
                              int32_t *count) {
  uint32_t n;
  TRY(get_count(r, &n, 4, what));
  *out = kn_malloc((size_t)n * sizeof **out + 1);
  if (!*out) return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
  for (uint32_t i = 0; i < n; i++) {
    TRY(get_i32(r, &(*out)[i]));
    if (!index_ok((*out)[i], g, allow_none))
      return bad(r, "section GRAPH is inconsistent: %s %u of %s is value %d, out of range "
                    "(%d values)",
                 what, i, owner, (*out)[i], g->n_values);
    (*count)++;
  }
  return KN_OK;
}

static kn_status read_graph(reader *r, kn_graph *parent, int depth, kn_graph **out) {
  if (depth > MAX_GRAPH_DEPTH)
    return bad(r, "section GRAPH is inconsistent: subgraphs nest deeper than %d",
               MAX_GRAPH_DEPTH);
  if (r->graphs_seen >= r->n_graphs)
    return bad(r, "section GRAPH is inconsistent: it holds more than the %u graphs it "
                  "declares",
               r->n_graphs);
  kn_graph *g = kn_graph_new(parent);
  if (!g) return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
  *out = g;
  r->graphs[r->graphs_seen++] = g;
  uint32_t nv, nn;
  kn_status st;
  TRY(get_str(r, &g->name, NULL, false, true));
  TRY(get_count(r, &nv, 20, "values"));
  for (uint32_t i = 0; i < nv; i++) {
    char *name;
    TRY(get_str(r, &name, NULL, false, true));
    if (kn_graph_find(g, name) >= 0) {
      st = bad(r, "section GRAPH is inconsistent: graph '%s' has two values named '%s'",
               g->name, name);
      free(name);
      return st;
    }
    int32_t idx = kn_graph_add_value(g, name);
    free(name);
    if (idx < 0) return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
    kn_value *v = &g->values[idx];
    uint8_t kind, optional, flags, pad;
    int32_t dtype, rank;
    TRY(get_u8(r, &kind) && get_u8(r, &optional) && get_u8(r, &flags) && get_u8(r, &pad));
    TRY(get_i32(r, &dtype) && get_i32(r, &rank));
    if (kind > KN_KIND_SEQUENCE || optional > 1 || flags > 3 || pad ||
        (dtype && !kn_dtype_is_valid(dtype)) || rank < -1 || rank > KN_MAX_RANK)
      return bad(r, "section GRAPH is inconsistent: value '%s' has kind %u, dtype %d, rank %d",
                 v->name, kind, dtype, rank);
    v->type.kind = (kn_kind)kind;
    v->type.optional = optional;
    v->type.dtype = (kn_dtype)dtype;
    v->type.rank = rank;
    v->is_input = flags & 1;
    v->is_output = flags & 2;
    for (int32_t d = 0; d < rank; d++) {
      TRY(get_i64(r, &v->type.dims[d]));
      if (v->type.dims[d] < -1)
        return bad(r, "section GRAPH is inconsistent: value '%s' has dim %lld", v->name,
                   (long long)v->type.dims[d]);
    }
    for (int32_t d = 0; d < rank; d++) TRY(get_str(r, &v->dim_params[d], NULL, true, true));
    TRY(get_i32(r, &v->outer));
    if (v->outer != -1 && (!parent || v->outer < 0 || v->outer >= parent->n_values))
      return bad(r, "section GRAPH is inconsistent: value '%s' refers to outer value %d, "
                    "which %s",
                 v->name, v->outer, parent ? "is out of range" : "a top-level graph lacks");
  }
  st = read_indices(r, g, "input", "the graph", false, &g->inputs, &g->n_inputs);
  if (st) return st;
  st = read_indices(r, g, "output", "the graph", false, &g->outputs, &g->n_outputs);
  if (st) return st;
  TRY(get_count(r, &nn, 28, "nodes"));
  g->nodes = kn_calloc((size_t)nn + 1, sizeof *g->nodes);
  if (!g->nodes) return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
  g->cap_nodes = (int32_t)nn + 1;
  for (uint32_t i = 0; i < nn; i++) {
    kn_node *n = &g->nodes[g->n_nodes++];
    TRY(get_str(r, &n->name, NULL, false, true));
    TRY(get_str(r, &n->covers, NULL, true, true));
    uint32_t tactic;
    TRY(get_u32(r, &tactic));
    if (tactic > INT32_MAX || !kn_tactic_name((int32_t)tactic))
      return kn_fail(r->err, KN_ERR_UNSUPPORTED,
                     "%s: node '%.200s' uses tactic %u, which this kiln lacks; rebuild the engine",
                     r->label, n->name, tactic);
    n->tactic = (int32_t)tactic;
    if (r->version >= 3) {
      uint32_t prec;
      TRY(get_u32(r, &prec));
      if (prec >= KN_PRECISION_COUNT)
        return bad(r, "section GRAPH is inconsistent: node '%.200s' has precision %u "
                      "(expected 0..%d)",
                   n->name, prec, KN_PRECISION_COUNT - 1);
      n->precision = (int32_t)prec;
    }
    TRY(get_str(r, &n->op_type, NULL, false, true));
    TRY(get_str(r, &n->domain, NULL, false, true));
    char owner[300];
    snprintf(owner, sizeof owner, "node '%.200s'", n->name);
    st = read_indices(r, g, "input", owner, true, &n->inputs, &n->n_inputs);
    if (st) return st;
    st = read_indices(r, g, "output", owner, true, &n->outputs, &n->n_outputs);
    if (st) return st;
    uint32_t na;
    TRY(get_count(r, &na, 20, "attributes"));
    n->attrs = kn_calloc((size_t)na + 1, sizeof *n->attrs);
    if (!n->attrs) return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
    for (uint32_t a = 0; a < na; a++) {
      n->n_attrs++;
      st = read_attr(r, g, depth, &n->attrs[a]);
      if (st) return st;
    }
    st = take_quant_attrs(r, n);
    if (st) return st;
  }
  return KN_OK;
}

static kn_status read_plan(reader *r, const kn_graph *g, kn_mem_plan *p) {
  const rsec *s = &r->sec[KN_ENGINE_SECTION_PLAN];
  if (s->size < PLAN_HEAD_BYTES)
    return bad(r, "section PLAN is inconsistent: %llu bytes is too short",
               (unsigned long long)s->size);
  uint32_t n = rd_u32(s->p);
  if (n > INT32_MAX || (uint64_t)n * PLAN_ENTRY_BYTES != s->size - PLAN_HEAD_BYTES)
    return bad(r, "section PLAN is inconsistent: %u tensors need %llu bytes, it has %llu", n,
               (unsigned long long)n * PLAN_ENTRY_BYTES + PLAN_HEAD_BYTES,
               (unsigned long long)s->size);
  p->alignment = rd_u32(s->p + 4);
  p->arena_bytes = rd_u64(s->p + 8);
  p->lower_bound_bytes = rd_u64(s->p + 16);
  p->naive_bytes = rd_u64(s->p + 24);
  p->tensors = kn_calloc((size_t)n + 1, sizeof *p->tensors);
  if (!p->tensors) return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *e = s->p + PLAN_HEAD_BYTES + (size_t)i * PLAN_ENTRY_BYTES;
    kn_plan_tensor *t = &p->tensors[p->n_tensors++];
    t->value = (int32_t)rd_u32(e);
    t->first = (int32_t)rd_u32(e + 4);
    t->last = (int32_t)rd_u32(e + 8);
    t->inplace_of = (int32_t)rd_u32(e + 12);
    t->view_of = -1;
    t->bytes = rd_u64(e + 16);
    t->offset = (int64_t)rd_u64(e + 24);
    bool ok = index_ok(t->value, g, false) && index_ok(t->inplace_of, g, true) &&
              t->first >= -1 && t->first <= g->n_nodes && t->last >= -1 &&
              t->last <= g->n_nodes &&
              (t->offset == -1 ||
               (t->offset >= 0 && (uint64_t)t->offset <= p->arena_bytes &&
                t->bytes <= p->arena_bytes - (uint64_t)t->offset));
    if (!ok)
      return bad(r, "section PLAN is inconsistent: tensor %u (value %d, steps %d..%d, "
                    "bytes %llu at %lld) does not fit the graph (%d values, %d steps) or "
                    "the %llu-byte arena",
                 i, t->value, t->first, t->last, (unsigned long long)t->bytes,
                 (long long)t->offset, g->n_values, g->n_nodes,
                 (unsigned long long)p->arena_bytes);
  }
  return KN_OK;
}

static kn_status read_config(reader *r, uint64_t off, uint32_t bytes, kn_engine_info *info) {
  const uint8_t *p = r->base + off;
  uint64_t pos = 0;
  if (bytes < 4) return bad(r, "the build configuration is inconsistent: %u bytes", bytes);
  uint32_t n = rd_u32(p);
  pos = 4;
  if (n > bytes / 8)
    return bad(r, "the build configuration is inconsistent: %u entries in %u bytes", n, bytes);
  info->config_keys = kn_calloc((size_t)n + 1, sizeof(char *));
  info->config_values = kn_calloc((size_t)n + 1, sizeof(char *));
  if (!info->config_keys || !info->config_values)
    return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
  for (uint32_t i = 0; i < n; i++) {
    for (int kv = 0; kv < 2; kv++) {
      uint32_t len = bytes - pos >= 4 ? rd_u32(p + pos) : UINT32_MAX;
      if (len == UINT32_MAX || len > bytes - pos - 4 || memchr(p + pos + 4, 0, len))
        return bad(r, "the build configuration is inconsistent at entry %u", i);
      char *s = kn_strndup((const char *)p + pos + 4, len);
      if (!s) return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
      (kv ? info->config_values : info->config_keys)[i] = s;
      pos += 4 + (uint64_t)len;
    }
    info->n_config++;
  }
  return KN_OK;
}

/* xxhash64 of a mapped section, read in chunks that are dropped from the
 * process's resident set once hashed: verifying a large engine must not
 * make every weight page resident (they fault back in from the page cache
 * when a step reads them; prepacked steps never read their originals). */
static uint64_t hash_dropping(const uint8_t *p, uint64_t n) {
  enum { CHUNK = 4 << 20 };
  XXH64_state_t *hs = XXH64_createState();
  if (!hs) return XXH64(p, (size_t)n, 0);
  XXH64_reset(hs, 0);
  for (uint64_t at = 0; at < n; at += CHUNK) {
    size_t len = (size_t)(n - at < CHUNK ? n - at : CHUNK);
    XXH64_update(hs, p + at, len);
    kn_drop_pages(p + at, len);
  }
  uint64_t h = XXH64_digest(hs);
  XXH64_freeState(hs);
  return h;
}

/* Everything up to and including the checksums: header, table, bounds,
 * CPU features. */
static kn_status verify(reader *r, kn_engine_info *info) {
  const uint8_t *b = r->base;
  size_t size = r->size;
  char fb[256];
  if (size < 12 || memcmp(b, KN_ENGINE_MAGIC, 8) != 0) {
    if (size >= 8 && memcmp(b, KN_ENGINE_MAGIC, 8) == 0)
      return bad(r, "truncated: the header needs bytes 0..%u but the file has %zu",
                 KN_ENGINE_HEADER_BYTES, size);
    return bad(r, "not a kiln engine (bad magic)");
  }
  uint32_t version = rd_u32(b + 8);
  if (version > KN_ENGINE_FORMAT_VERSION)
    return kn_fail(r->err, KN_ERR_UNSUPPORTED,
                   "%s: engine format version %u is newer than this kiln supports (%u); "
                   "rebuild it",
                   r->label, version, KN_ENGINE_FORMAT_VERSION);
  if (version == 0) return bad(r, "engine format version 0 is not valid");
  r->version = version;
  if (size < KN_ENGINE_HEADER_BYTES)
    return bad(r, "truncated: the header needs bytes 0..%u but the file has %zu",
               KN_ENGINE_HEADER_BYTES, size);
  uint32_t header_bytes = rd_u32(b + 12);
  uint32_t config_bytes = rd_u32(b + 64), n_sec = rd_u32(b + 68);
  uint64_t table_off = rd_u64(b + 72);
  if (header_bytes != KN_ENGINE_HEADER_BYTES || config_bytes % 8 ||
      table_off != (uint64_t)KN_ENGINE_HEADER_BYTES + config_bytes || n_sec > 64)
    return bad(r, "the header is corrupted (header size %u, config %u bytes, %u sections, "
                  "table at %llu)",
               header_bytes, config_bytes, n_sec, (unsigned long long)table_off);
  uint64_t table_end = table_off + (uint64_t)n_sec * TABLE_ENTRY_BYTES;
  if (table_end > size)
    return bad(r, "truncated: the section table needs bytes %llu..%llu but the file has %zu",
               (unsigned long long)table_off, (unsigned long long)table_end, size);
  /* header checksum, with its own field read as zero */
  XXH64_state_t *hs = XXH64_createState();
  if (!hs) return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
  uint8_t zero[8] = {0};
  XXH64_reset(hs, 0);
  XXH64_update(hs, b, 80);
  XXH64_update(hs, zero, 8);
  XXH64_update(hs, b + 88, (size_t)table_end - 88);
  uint64_t hh = XXH64_digest(hs);
  XXH64_freeState(hs);
  if (hh != rd_u64(b + 80)) return bad(r, "header checksum mismatch: the file is corrupted");

  /* sections: known types, in bounds */
  const uint8_t *t = b + table_off;
  for (uint32_t i = 0; i < n_sec; i++) {
    const uint8_t *e = t + (size_t)i * TABLE_ENTRY_BYTES;
    uint32_t type = rd_u32(e);
    uint64_t off = rd_u64(e + 8), len = rd_u64(e + 16);
    if (type < 1 || type > N_SECTION_TYPES)
      return bad(r, "section %u has unknown type %u", i, type);
    rsec *s = &r->sec[type];
    if (s->present) return bad(r, "section %s appears twice", section_name(type));
    if (off < table_end || off % KN_ENGINE_ALIGN)
      return bad(r, "section %s at byte %llu overlaps the header or is not 64-byte aligned",
                 section_name(type), (unsigned long long)off);
    if (off > size || len > size - off)
      return bad(r, "truncated: section %s needs bytes %llu..%llu but the file has %zu",
                 section_name(type), (unsigned long long)off,
                 (unsigned long long)(off + len), size);
    s->present = true;
    s->off = off;
    s->size = len;
    s->p = b + off;
  }
  for (uint32_t type = 1; type <= N_SECTION_TYPES; type++)
    if (!r->sec[type].present && type != KN_ENGINE_SECTION_PLAN &&
        type != KN_ENGINE_SECTION_PACKED)
      return bad(r, "section %s is missing", section_name(type));
  if (version < 2 && r->sec[KN_ENGINE_SECTION_PACKED].present)
    return bad(r, "section PACKED needs format version 2, the file is version %u", version);
  /* the padding between the table and the sections is zero (no checksum
     covers it: a flipped bit there must not pass) */
  uint64_t at = table_end;
  for (;;) {
    const rsec *next = NULL;
    for (uint32_t type = 1; type <= N_SECTION_TYPES; type++)
      if (r->sec[type].present && r->sec[type].off >= at && (!next || r->sec[type].off < next->off))
        next = &r->sec[type];
    if (!next) break;
    for (uint64_t i = at; i < next->off; i++)
      if (b[i]) return bad(r, "padding byte %llu before a section is not zero: the file is corrupted",
                           (unsigned long long)i);
    at = next->off + (next->size ? next->size : 1);
  }
  for (uint64_t i = at; i < size; i++)
    if (b[i]) return bad(r, "padding byte %llu after the sections is not zero: the file is corrupted",
                         (unsigned long long)i);
  uint64_t file_size = rd_u64(b + 56);
  if (file_size != size)
    return bad(r, "%s: the header says %llu bytes but the file has %zu",
               file_size > size ? "truncated" : "trailing bytes",
               (unsigned long long)file_size, size);

  uint64_t need_cpu = rd_u64(b + 48);
  uint64_t missing = need_cpu & ~(kn_cpu_features() & KN_CPU_KNOWN_MASK);
  if (missing)
    return kn_fail(r->err, KN_ERR_UNSUPPORTED,
                   "%s: the engine needs %s which this CPU lacks; rebuild it on this "
                   "machine",
                   r->label, kn_cpu_features_str(missing, fb, sizeof fb));

  for (uint32_t i = 0; i < n_sec; i++) {
    const uint8_t *e = t + (size_t)i * TABLE_ENTRY_BYTES;
    const rsec *s = &r->sec[rd_u32(e)];
    uint64_t h = r->drop ? hash_dropping(s->p, s->size) : XXH64(s->p, (size_t)s->size, 0);
    if (h != rd_u64(e + 24))
      return bad(r, "section %s checksum mismatch: the file is corrupted",
                 section_name(rd_u32(e)));
  }

  if (info) {
    info->format_version = version;
    memcpy(info->kiln_version, b + 16, 32);
    info->kiln_version[32] = 0;
    info->cpu_features = need_cpu;
    info->file_bytes = size;
    info->graph_bytes = r->sec[KN_ENGINE_SECTION_GRAPH].size;
    info->tensors_bytes = r->sec[KN_ENGINE_SECTION_TENSORS].size;
    info->plan_bytes = r->sec[KN_ENGINE_SECTION_PLAN].size;
    info->weights_bytes = r->sec[KN_ENGINE_SECTION_WEIGHTS].size;
    info->has_plan = r->sec[KN_ENGINE_SECTION_PLAN].present;
    kn_status st = read_config(r, KN_ENGINE_HEADER_BYTES, config_bytes, info);
    if (st) return st;
  }
  return KN_OK;
}

/* Decode the verified sections into a model. */
static kn_status decode(reader *r, kn_ir_model *m, kn_mem_plan *plan_out) {
  kn_status st = check_tensors(r);
  if (st) return st;
  r->p = r->sec[KN_ENGINE_SECTION_GRAPH].p;
  r->n = (size_t)r->sec[KN_ENGINE_SECTION_GRAPH].size;
  r->pos = 0;
  uint32_t nops;
  TRY(get_i64(r, &m->ir_version));
  TRY(get_count(r, &nops, 12, "opsets"));
  m->opsets = kn_calloc((size_t)nops + 1, sizeof *m->opsets);
  if (!m->opsets) return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
  for (uint32_t i = 0; i < nops; i++) {
    m->n_opsets++;
    TRY(get_str(r, &m->opsets[i].domain, NULL, false, true));
    TRY(get_i64(r, &m->opsets[i].version));
  }
  TRY(get_count(r, &r->n_graphs, 16, "graphs"));
  if (r->n_graphs == 0) return bad(r, "section GRAPH is inconsistent: it declares no graph");
  r->graphs = kn_calloc(r->n_graphs, sizeof *r->graphs);
  if (!r->graphs) return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
  st = read_graph(r, NULL, 0, &m->graph);
  if (st) return st;
  if (r->graphs_seen != r->n_graphs || r->pos != r->n)
    return bad(r, "section GRAPH is inconsistent: %u of %u graphs decoded, %zu bytes left",
               r->graphs_seen, r->n_graphs, r->n - r->pos);

  /* value constants */
  for (uint32_t i = 0; i < r->n_tensors; i++) {
    const uint8_t *e = tentry(r, i);
    uint32_t gi = rd_u32(e);
    int32_t vi = (int32_t)rd_u32(e + 4);
    if (gi >= r->n_graphs || vi < -1)
      return bad(r, "section TENSORS is inconsistent: tensor %u names graph %u value %d", i,
                 gi, vi);
    if (vi < 0) continue;
    kn_graph *g = r->graphs[gi];
    if (vi >= g->n_values || g->values[vi].constant || g->values[vi].outer >= 0)
      return bad(r, "section TENSORS is inconsistent: tensor %u names value %d of graph %u "
                    "(%d values), which cannot take a constant",
                 i, vi, gi, g->n_values);
    kn_tensor *t = kn_calloc(1, sizeof *t);
    if (!t) return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
    g->values[vi].constant = t;
    st = load_tensor(r, i, t);
    if (st) return st;
  }
  for (uint32_t i = 0; i < r->n_graphs; i++) {
    st = kn_graph_finish_ordered(r->graphs[i], r->label, r->err);
    if (st) return st;
  }
  if (plan_out && r->sec[KN_ENGINE_SECTION_PLAN].present) {
    st = read_plan(r, m->graph, plan_out);
    if (st) return st;
  }
  return KN_OK;
}

/* The PACKED section's entries, checked against the top-level graph. */
static kn_status read_packed(reader *r, const kn_graph *g, kn_engine_info *info) {
  const rsec *s = &r->sec[KN_ENGINE_SECTION_PACKED];
  if (!s->present) return KN_OK;
  if (s->size < 8) return bad(r, "section PACKED is inconsistent: %llu bytes is too short",
                              (unsigned long long)s->size);
  uint32_t n = rd_u32(s->p);
  if (n > (s->size - 8) / PACKED_ENTRY_BYTES)
    return bad(r, "section PACKED is inconsistent: %u entries do not fit in %llu bytes", n,
               (unsigned long long)s->size);
  /* every entry is checked; a copied image keeps none (the model repacks) */
  bool keep = !r->copy && info && n > 0;
  if (keep) {
    info->packed = kn_calloc(n, sizeof *info->packed);
    if (!info->packed) return kn_fail(r->err, KN_ERR_OOM, "%s: out of memory", r->label);
  }
  uint32_t prev_node = 0;
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *e = s->p + 8 + (size_t)i * PACKED_ENTRY_BYTES;
    uint32_t node = rd_u32(e), tactic = rd_u32(e + 8);
    int32_t isa = (int32_t)rd_u32(e + 4);
    uint64_t off = rd_u64(e + 16), bytes = rd_u64(e + 24);
    if (node >= (uint32_t)g->n_nodes || (int32_t)tactic != g->nodes[node].tactic ||
        off % KN_ENGINE_ALIGN || off > s->size || bytes > s->size - off || bytes < 16 ||
        rd_u64(s->p + off) != bytes || (int32_t)rd_u32(s->p + off + 8) != isa ||
        rd_u32(s->p + off + 12) != tactic || (i > 0 && node <= prev_node))
      return bad(r, "section PACKED is inconsistent: entry %u (step %u, tactic %u, bytes "
                    "%llu..%llu) does not match the graph or the section",
                 i, node, tactic, (unsigned long long)off, (unsigned long long)(off + bytes));
    prev_node = node;
    if (!keep) continue;
    info->packed[i] = (kn_engine_packed){.node = (int32_t)node, .isa = isa,
                                         .tactic = (int32_t)tactic, .data = s->p + off,
                                         .bytes = bytes};
    info->n_packed++;
    info->packed_bytes += bytes;
  }
  return KN_OK;
}

static kn_status read_image(reader *r, kn_ir_model *m, kn_ir_model **model_out,
                            kn_mem_plan *plan_out, kn_engine_info *info_out) {
  kn_engine_info info_tmp;
  memset(&info_tmp, 0, sizeof info_tmp);
  if (plan_out) memset(plan_out, 0, sizeof *plan_out);
  kn_status st = verify(r, info_out ? &info_tmp : NULL);
  if (!st) st = decode(r, m, plan_out);
  if (!st) st = read_packed(r, m->graph, info_out ? &info_tmp : NULL);
  free(r->graphs);
  if (st) {
    kn_ir_model_free(m);
    kn_engine_info_free(&info_tmp);
    if (plan_out) {
      free(plan_out->tensors);
      memset(plan_out, 0, sizeof *plan_out);
    }
    return st;
  }
  if (info_out) {
    info_tmp.n_tensors = (int32_t)r->n_tensors;
    *info_out = info_tmp;
  }
  *model_out = m;
  return KN_OK;
}

kn_status kn_engine_read_buffer(const void *data, size_t size, const char *label,
                                kn_ir_model **model_out, kn_mem_plan *plan_out,
                                kn_engine_info *info_out, kn_error *err) {
  *model_out = NULL;
  if (info_out) memset(info_out, 0, sizeof *info_out);
  label = label ? label : "engine";
  kn_ir_model *m = kn_calloc(1, sizeof *m);
  if (m) m->label = kn_strdup(label);
  if (!m || !m->label) {
    kn_ir_model_free(m);
    return kn_fail(err, KN_ERR_OOM, "%s: out of memory", label);
  }
  reader r = {.base = data, .size = size, .copy = true, .label = label, .err = err};
  return read_image(&r, m, model_out, plan_out, info_out);
}

kn_status kn_engine_read(const char *path, kn_ir_model **model_out, kn_mem_plan *plan_out,
                         kn_engine_info *info_out, kn_error *err) {
  *model_out = NULL;
  if (info_out) memset(info_out, 0, sizeof *info_out);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return kn_fail(err, KN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return kn_fail(err, KN_ERR_IO, "%s: not a regular file", path);
  }
  size_t size = (size_t)sb.st_size;
  void *map = NULL;
  if (size) {
    map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      int e = errno;
      close(fd);
      return kn_fail(err, KN_ERR_IO, "%s: cannot map: %s", path, strerror(e));
    }
  }
  close(fd);
  kn_ir_model *m = kn_calloc(1, sizeof *m);
  if (m) m->label = kn_strdup(path);
  if (!m || !m->label) {
    if (m) free(m->label);
    free(m);
    if (map) munmap(map, size);
    return kn_fail(err, KN_ERR_OOM, "%s: out of memory", path);
  }
  m->mapping = map;
  m->mapping_size = size;
  static const uint8_t empty[1];
  reader r = {.base = map ? map : empty, .size = size, .copy = false, .drop = map != NULL,
              .label = path, .err = err};
  return read_image(&r, m, model_out, plan_out, info_out);
}

void kn_engine_info_free(kn_engine_info *info) {
  if (!info) return;
  for (int32_t i = 0; i < info->n_config; i++) {
    free(info->config_keys[i]);
    free(info->config_values[i]);
  }
  /* entries beyond n_config may hold a key whose value failed */
  if (info->config_keys && info->config_keys[info->n_config])
    free(info->config_keys[info->n_config]);
  free(info->config_keys);
  free(info->config_values);
  free(info->packed);
  memset(info, 0, sizeof *info);
}

bool kn_engine_is_file(const char *path) {
  /* O_NONBLOCK: a FIFO must not block here; only regular files qualify */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat sb;
  uint8_t magic[8];
  bool ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && read(fd, magic, 8) == 8 &&
            memcmp(magic, KN_ENGINE_MAGIC, 8) == 0;
  close(fd);
  return ok;
}

bool kn_engine_reseal(void *buf, size_t size) {
  uint8_t *b = buf;
  if (size < KN_ENGINE_HEADER_BYTES) return false;
  uint64_t table_off = rd_u64(b + 72);
  uint32_t n_sec = rd_u32(b + 68);
  if (n_sec > 64 || table_off < KN_ENGINE_HEADER_BYTES || table_off > size ||
      (uint64_t)n_sec * TABLE_ENTRY_BYTES > size - table_off)
    return false;
  uint64_t table_end = table_off + (uint64_t)n_sec * TABLE_ENTRY_BYTES;
  for (uint32_t i = 0; i < n_sec; i++) {
    uint8_t *e = b + table_off + (size_t)i * TABLE_ENTRY_BYTES;
    uint64_t off = rd_u64(e + 8), len = rd_u64(e + 16);
    if (off <= size && len <= size - off) wr_u64(e + 24, XXH64(b + off, (size_t)len, 0));
  }
  wr_u64(b + 80, 0);
  wr_u64(b + 80, XXH64(b, (size_t)table_end, 0));
  return true;
}
