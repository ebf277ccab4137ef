/* Public model and context API (kiln.h) over the reference executor. */
#include "core/cpu.h"
#include "core/machine.h"
#include "kernels/kernels.h"
#include "engine.h"
#include "onnx/onnx.h"
#include "tactics/tactics.h"

#include <libgen.h>
#include <unistd.h>

struct kn_context {
  const kn_model *model;
  int32_t threads;
  kn_pool *pool;      /* threads - 1 workers, started at the first run */
  kn_rt rt;           /* ISA, pool and scratch for the fast kernels */
  kn_runner *runner;  /* the top-level graph, prepared at the first run */
  kn_slot *inputs;  /* borrowed views, one per model input */
  bool *bound;
  kn_slot *outputs; /* owned, one per graph output */
  bool ran;
  uint64_t mem_limit;
  void *arena; /* model->plan.arena_bytes, kn_big_alloc */
  size_t arena_bytes;
  kn_tensor_observer observe;
  void *observe_arg;
  bool profiling;
  kn_prof prof; /* the last run's spans when profiling */
  kn_cancel_fn cancel; /* kn_context_set_cancel */
  void *cancel_arg;
  int64_t deadline_ns; /* kn_context_set_deadline; 0: none */
};

const kn_ir_model *kn_model_ir(const kn_model *m) { return m->ir; }

static kn_status finish_model(kn_ir_model *ir, kn_model **out, kn_error *err);
static kn_status adopt_packed(kn_model *m, kn_error *err);
static kn_status copy_small_originals(kn_model *m, kn_error *err);
static kn_status pack_steps(kn_model *m, int32_t isa, const kn_machine *machine,
                            const int32_t *last, bool *ok, kn_error *err);

void kn_strings_free(char **v, int32_t n) {
  for (int32_t i = 0; v && i < n; i++) free(v[i]);
  free(v);
}

char **kn_strings_dup(const char *const *v, int32_t n) {
  char **d = kn_calloc((size_t)n + 1, sizeof *d);
  for (int32_t i = 0; d && i < n; i++)
    if (!(d[i] = kn_strdup(v[i]))) {
      kn_strings_free(d, i);
      return NULL;
    }
  return d;
}

static kn_status load_engine(const char *path, kn_model **out, kn_error *err) {
  kn_ir_model *ir;
  kn_mem_plan plan;
  kn_engine_info info;
  memset(&plan, 0, sizeof plan);
  memset(&info, 0, sizeof info);
  kn_status st = kn_engine_read(path, &ir, &plan, &info, err);
  if (st) return st;
  st = finish_model(ir, out, err);
  if (st) {
    free(plan.tensors);
    kn_engine_info_free(&info);
    return st;
  }
  kn_model *m = *out;
  m->plan = plan;
  m->built = true;
  m->from_engine = true;
  m->info = info;
  m->onnx_nodes = -1;
  for (int32_t i = 0; i < info.n_config && !st; i++)
    if (!strcmp(info.config_keys[i], "decision")) {
      if (!kn_lines_add(&m->timing.decisions, info.config_values[i]))
        st = kn_fail(err, KN_ERR_OOM, "out of memory");
    } else if (!strcmp(info.config_keys[i], "machine")) {
      const char *j = info.config_values[i];
      char label[320];
      snprintf(label, sizeof label, "%s: build configuration 'machine'", m->ir->label);
      st = kn_machine_from_json(j, strlen(j), label, &m->machine, err);
      m->has_machine = st == KN_OK;
    } else if (!strcmp(info.config_keys[i], "fix")) {
      /* the graph has the value folded in: only the check is needed */
      st = kn_model_apply_fix(m, info.config_values[i], false, err);
      if (!st) {
        const char *spec = info.config_values[i];
        char **f = realloc(m->fixed, (size_t)(m->n_fixed + 2) * sizeof *f);
        if (f) m->fixed = f;
        if (!f || !(f[m->n_fixed] = kn_strdup(spec))) st = kn_fail(err, KN_ERR_OOM, "out of memory");
        else f[++m->n_fixed] = NULL;
      }
    } else if (!strcmp(info.config_keys[i], "profile")) {
      /* the graph keeps its dynamic dims; only the ranges are needed */
      kn_graph *g = m->ir->graph;
      int64_t keep[KN_MAX_RANK];
      const char *spec = info.config_values[i], *eq = strrchr(spec, '=');
      int32_t idx = eq ? kn_model_input_named(m, spec, eq) : -1;
      kn_value *v = idx >= 0 ? &g->values[g->inputs[m->inputs[idx]]] : NULL;
      if (v) memcpy(keep, v->type.dims, sizeof keep);
      st = kn_model_apply_profile(m, spec, err);
      if (v) memcpy(v->type.dims, keep, sizeof keep);
    }
  if (!st) st = adopt_packed(m, err);
  if (!st) st = kn_model_pack(m, err);
  if (!st) st = copy_small_originals(m, err);
  /* whatever the load read of the mapping (hashing drops as it goes;
   * packing at load, the copies above, inference reading shape
   * constants) leaves the resident set: a step that reads an original
   * faults its pages back in from the file */
  if (!st && m->ir->mapping) {
    /* the mapping goes on to its last page's end */
    long pg = sysconf(_SC_PAGESIZE);
    size_t page = pg > 0 ? (size_t)pg : 4096;
    kn_drop_pages(m->ir->mapping, (m->ir->mapping_size + page - 1) & ~(page - 1));
  }
  if (st) {
    kn_model_free(m);
    *out = NULL;
    return st;
  }
  return KN_OK;
}

static kn_status finish_model(kn_ir_model *ir, kn_model **out, kn_error *err) {
  kn_status st = kn_ops_prepare(ir, err);
  if (st) {
    kn_ir_model_free(ir);
    return st;
  }
  kn_tactics_bind(ir); /* the steps of an engine come with their tactics: their runs */
  kn_model *m = kn_calloc(1, sizeof *m);
  const kn_graph *g = ir->graph;
  if (m) m->inputs = kn_calloc((size_t)g->n_inputs + 1, sizeof *m->inputs);
  if (!m || !m->inputs) {
    free(m);
    kn_ir_model_free(ir);
    return kn_fail(err, KN_ERR_OOM, "out of memory");
  }
  m->ir = ir;
  m->onnx_nodes = g->n_nodes;
  for (int32_t i = 0; i < g->n_inputs; i++)
    if (!g->values[g->inputs[i]].constant) m->inputs[m->n_inputs++] = i;
  *out = m;
  return KN_OK;
}

kn_status kn_model_from_ir(kn_ir_model *ir, kn_model **out, kn_error *err) {
  *out = NULL;
  return finish_model(ir, out, err);
}

kn_status kn_model_load_buffer(const void *data, size_t size, const char *base_dir,
                               const char *label, kn_model **out, kn_error *err) {
  *out = NULL;
  kn_ir_model *ir;
  kn_status st = kn_onnx_import(data, size, base_dir, label ? label : "model", &ir, err);
  if (st) return st;
  return finish_model(ir, out, err);
}

kn_status kn_model_load(const char *path, kn_model **out, kn_error *err) {
  *out = NULL;
  if (kn_engine_is_file(path)) return load_engine(path, out, err);
  void *buf;
  size_t size;
  kn_status st = kn_read_whole_file(path, &buf, &size, err);
  if (st) return st;
  char *dup = kn_strdup(path);
  if (!dup) {
    free(buf);
    return kn_fail(err, KN_ERR_OOM, "out of memory");
  }
  kn_ir_model *ir;
  st = kn_onnx_import_take(buf, size, dirname(dup), path, &ir, err); /* frees buf */
  free(dup);
  return st ? st : finish_model(ir, out, err);
}

static void unpack_all(kn_model *m) {
  if (!m->packed) return;
  for (int32_t i = 0; i < m->n_packed; i++)
    if (m->packed_owned[i]) kn_packed_free(m->packed[i]);
  free(m->packed);
  free(m->packed_owned);
  kn_big_free(m->packed_copy, m->packed_copy_bytes);
  m->packed = NULL;
  m->packed_owned = NULL;
  m->packed_copy = NULL;
  m->packed_copy_bytes = 0;
  m->n_packed = 0;
}

/* The ISA a build packs for: the best both the described machine and
 * this one have.  Packing runs here, and a described machine with an ISA
 * this one lacks cannot be packed for here (its engine repacks at load). */
int32_t kn_model_build_isa(const kn_model *m) {
  uint64_t f = kn_cpu_features();
  if (m->has_machine) f &= m->machine.features;
  return (int32_t)kn_isa_detect(f);
}

uint64_t kn_model_packed_bytes(const kn_model *m, int32_t *blocks) {
  uint64_t b = 0;
  int32_t n = 0;
  for (int32_t i = 0; m->packed && i < m->n_packed; i++)
    if (m->packed[i]) {
      b += ((const kn_packed *)m->packed[i])->bytes;
      n++;
    }
  if (blocks) *blocks = n;
  return b;
}

const char *kn_orig_fate_name(kn_orig_fate f) {
  switch (f) {
  case KN_ORIG_PACKED: return "packed";
  case KN_ORIG_REFERENCE: return "read by a reference kernel";
  case KN_ORIG_NO_BLOCK: return "read by a step with no packed form";
  case KN_ORIG_BESIDE: return "read beside its step's packed block";
  case KN_ORIG_OUTPUT: return "a graph output";
  case KN_ORIG_SUBGRAPH: return "read by a subgraph";
  case KN_ORIG_UNREAD: return "not read";
  }
  return "?";
}

/* Reasons to keep, the first found for a constant wins over the later
 * ones: one that makes it resident for every run first. */
static int fate_rank(kn_orig_fate f) {
  switch (f) {
  case KN_ORIG_OUTPUT: return 6;
  case KN_ORIG_SUBGRAPH: return 5;
  case KN_ORIG_REFERENCE: return 4;
  case KN_ORIG_NO_BLOCK: return 3;
  case KN_ORIG_BESIDE: return 2;
  case KN_ORIG_PACKED: return 1;
  case KN_ORIG_UNREAD: return 0;
  }
  return 0;
}

static void note(kn_original *o, kn_orig_fate f, int32_t step) {
  if (fate_rank(f) > fate_rank(o->fate)) {
    o->fate = f;
    o->step = step;
  }
}

int32_t kn_model_originals(const kn_model *m, kn_original *out, int32_t max) {
  const kn_graph *g = m->ir->graph;
  int32_t *slot = kn_calloc((size_t)g->n_values + 1, sizeof *slot);
  if (!slot) return 0;
  int32_t n = 0;
  for (int32_t v = 0; v < g->n_values; v++) {
    slot[v] = -1;
    if (!g->values[v].constant) continue;
    if (n < max) {
      out[n] = (kn_original){.value = v, .bytes = g->values[v].constant->nbytes,
                             .fate = KN_ORIG_UNREAD, .step = -1};
      if (g->values[v].is_output) note(&out[n], KN_ORIG_OUTPUT, -1);
      slot[v] = n;
    }
    n++;
  }
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kn_node *nd = &g->nodes[i];
    const void *blk = m->packed && i < m->n_packed ? m->packed[i] : NULL;
    uint32_t mask = blk ? kn_tactics_packed_inputs(g, nd) : 0;
    for (int32_t k = 0; k < nd->n_inputs; k++) {
      int32_t v = nd->inputs[k];
      if (v < 0 || slot[v] < 0) continue;
      kn_orig_fate f = !nd->tactic                  ? KN_ORIG_REFERENCE
                       : !blk                       ? KN_ORIG_NO_BLOCK
                       : k < 32 && (mask >> k & 1) ? KN_ORIG_PACKED
                                                    : KN_ORIG_BESIDE;
      note(&out[slot[v]], f, i);
    }
    /* a body reads what its values import from this graph */
    for (int32_t a = 0; a < nd->n_attrs; a++) {
      const kn_attr *at = &nd->attrs[a];
      int32_t ng = at->type == KN_ATTR_GRAPH ? 1 : at->type == KN_ATTR_GRAPHS ? at->n : 0;
      for (int32_t s = 0; s < ng; s++) {
        const kn_graph *sg = at->type == KN_ATTR_GRAPH ? at->g : at->graphs[s];
        for (int32_t u = 0; sg && u < sg->n_values; u++) {
          int32_t o = sg->values[u].outer;
          if (o >= 0 && o < g->n_values && slot[o] >= 0)
            note(&out[slot[o]], KN_ORIG_SUBGRAPH, i);
        }
      }
    }
  }
  free(slot);
  return n;
}

/* Whether t's bytes lie in the engine file's mapping. */
static bool mapped(const kn_model *m, const kn_tensor *t) {
  const uint8_t *p = t ? t->data : NULL, *b = m->ir->mapping;
  return p && b && t->nbytes && p >= b && (size_t)(p - b) <= m->ir->mapping_size &&
         t->nbytes <= m->ir->mapping_size - (size_t)(p - b);
}

/* Drop the mapped pages of the constants step i's block stands in for.
 * Only the file mapping: its pages come back from the file when a step
 * reads them after all, so this is never wrong, only slower then. */
static void drop_inputs(const kn_model *m, int32_t i) {
  const kn_graph *g = m->ir->graph;
  const kn_node *n = &g->nodes[i];
  uint32_t mask = kn_tactics_packed_inputs(g, n);
  for (int32_t k = 0; k < n->n_inputs && k < 32; k++) {
    const kn_tensor *t = n->inputs[k] >= 0 ? g->values[n->inputs[k]].constant : NULL;
    if ((mask >> k & 1) && mapped(m, t)) kn_drop_pages(t->data, t->nbytes);
  }
}

/* Originals up to this size that steps read as they are get copied
 * together out of the mapping. */
#define SMALL_ORIGINAL ((size_t)64 << 10)

/* The small originals steps read as they are (biases, norm scales, shape
 * constants) lie scattered between the weights; each read would make its
 * pages resident, and on kernels that map file pages in large folios
 * (Linux 6.x on ext4) up to 2 MiB around each.  One copy of them all is a
 * few hundred KiB (ResNet-50: 3.4 MiB of file pages -> 0.2 MiB). */
static kn_status copy_small_originals(kn_model *m, kn_error *err) {
  if (!m->ir->mapping) return KN_OK;
  kn_graph *g = m->ir->graph;
  int32_t n = kn_model_originals(m, NULL, 0);
  kn_original *o = kn_calloc((size_t)n + 1, sizeof *o);
  if (!o) return kn_fail(err, KN_ERR_OOM, "out of memory");
  n = kn_model_originals(m, o, n);
  size_t total = 0;
  for (int32_t k = 0; k < n; k++)
    if (o[k].fate > KN_ORIG_PACKED && o[k].fate < KN_ORIG_UNREAD && o[k].bytes <= SMALL_ORIGINAL &&
        mapped(m, g->values[o[k].value].constant))
      total += ((size_t)o[k].bytes + 63) & ~(size_t)63;
  uint8_t *copy = total ? aligned_alloc(64, total) : NULL;
  if (total && !copy) {
    free(o);
    return kn_fail(err, KN_ERR_OOM, "out of memory");
  }
  size_t at = 0;
  for (int32_t k = 0; k < n && copy; k++) {
    kn_tensor *t = g->values[o[k].value].constant;
    if (!(o[k].fate > KN_ORIG_PACKED && o[k].fate < KN_ORIG_UNREAD &&
          o[k].bytes <= SMALL_ORIGINAL && mapped(m, t)))
      continue;
    memcpy(copy + at, t->data, t->nbytes);
    kn_drop_pages(t->data, t->nbytes);
    t->data = copy + at;
    at += (t->nbytes + 63) & ~(size_t)63;
  }
  m->small_copy = copy;
  free(o);
  return KN_OK;
}

/* Originals from this size up are moved out of a build's heap. */
#define SPILL_MIN ((size_t)64 << 10)

/* Which originals a build may move out of its heap once packed: per
 * value, the last step reading it (last[v]), and whether every reader is
 * a packing step whose block would stand in for it (ok[v]; a reader that
 * then packs nothing clears it in kn_model_pack).  Graph outputs, strings
 * and what a body reads stay. */
static void spill_plan(const kn_graph *g, int32_t *last, bool *ok) {
  for (int32_t v = 0; v < g->n_values; v++) {
    const kn_tensor *t = g->values[v].constant;
    last[v] = -1;
    ok[v] = t && t->owned && t->data && t->dtype != KN_DTYPE_STRING && t->nbytes >= SPILL_MIN &&
            !g->values[v].is_output;
  }
  for (int32_t j = 0; j < g->n_nodes; j++) {
    const kn_node *n = &g->nodes[j];
    const kn_op_tactics *tt = kn_tactics_of(n);
    uint32_t mask = n->tactic && tt && tt->pack ? kn_tactics_packed_inputs(g, n) : 0;
    for (int32_t k = 0; k < n->n_inputs; k++) {
      int32_t v = n->inputs[k];
      if (v < 0) continue;
      last[v] = j;
      if (k >= 32 || !(mask >> k & 1)) ok[v] = false;
    }
    for (int32_t a = 0; a < n->n_attrs; a++) {
      const kn_attr *at = &n->attrs[a];
      int32_t ng = at->type == KN_ATTR_GRAPH ? 1 : at->type == KN_ATTR_GRAPHS ? at->n : 0;
      for (int32_t s = 0; s < ng; s++) {
        const kn_graph *sg = at->type == KN_ATTR_GRAPH ? at->g : at->graphs[s];
        for (int32_t u = 0; sg && u < sg->n_values; u++)
          if (sg->values[u].outer >= 0 && sg->values[u].outer < g->n_values)
            ok[sg->values[u].outer] = false;
      }
    }
  }
}

/* After step i packed (block p, NULL: none): the originals it was the last
 * reader of, all of whose readers run from their blocks, move to the
 * model's spill file.  A step that falls back to its original after all
 * reads it from there (its pages come back from the file). */
static void spill_after(kn_model *m, int32_t i, const void *p, const int32_t *last, bool *ok) {
  kn_graph *g = m->ir->graph;
  const kn_node *n = &g->nodes[i];
  uint32_t mask = kn_tactics_packed_inputs(g, n);
  for (int32_t k = 0; k < n->n_inputs && k < 32; k++) {
    int32_t v = n->inputs[k];
    if (v < 0 || !(mask >> k & 1)) continue;
    if (!p) ok[v] = false;
    if (!ok[v] || last[v] != i) continue;
    if (!m->spill_tried) {
      m->spill_tried = true;
      m->spill = kn_spill_open();
    }
    kn_tensor *t = g->values[v].constant;
    void *to = m->spill ? kn_spill_put(m->spill, t->data, t->nbytes) : NULL;
    if (!to) continue;
    free(t->data);
    t->data = to;
    t->owned = 0;
    ok[v] = false;
    /* in the middle of the heap free() leaves the pages resident: the
     * build's peak would be the originals and the blocks together */
    kn_heap_trim();
  }
}

/* Prepack the weights of every top-level step whose tactic packs them
 * and that has no block for the target's ISA yet (an engine's mapped
 * blocks are kept); contexts share them read-only.  The target is the
 * machine the model is built for, or for an engine this one as the OS
 * reports it. */
kn_status kn_model_pack(kn_model *m, kn_error *err) {
  const kn_graph *g = m->ir->graph;
  const kn_machine *machine = m->has_machine ? &m->machine : NULL;
  int32_t isa = kn_model_build_isa(m);
  if (m->packed && m->n_packed != g->n_nodes) unpack_all(m);
  /* a build: its originals leave the heap as their steps are packed */
  int32_t *last = NULL;
  bool *ok = NULL;
  if (!m->ir->mapping && !m->from_engine) {
    last = kn_calloc((size_t)g->n_values + 1, sizeof *last);
    ok = kn_calloc((size_t)g->n_values + 1, sizeof *ok);
    if (last && ok) spill_plan(g, last, ok);
    else {
      free(last);
      free(ok);
      last = NULL;
      ok = NULL;
    }
  }
  kn_status st = pack_steps(m, isa, machine, last, ok, err);
  free(last);
  free(ok);
  return st;
}

static kn_status pack_steps(kn_model *m, int32_t isa, const kn_machine *machine,
                            const int32_t *last, bool *ok, kn_error *err) {
  const kn_graph *g = m->ir->graph;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    const kn_op_tactics *tt = kn_tactics_of(n);
    if (!n->tactic || !tt || !tt->pack) continue;
    if (!m->packed) {
      m->packed = kn_calloc((size_t)g->n_nodes, sizeof *m->packed);
      m->packed_owned = kn_calloc((size_t)g->n_nodes, sizeof *m->packed_owned);
      if (!m->packed || !m->packed_owned) {
        unpack_all(m);
        return kn_fail(err, KN_ERR_OOM, "out of memory packing weights");
      }
      m->n_packed = g->n_nodes;
    }
    const kn_packed *have = m->packed[i];
    if (have && have->isa == isa && have->tactic == n->tactic) continue;
    if (m->packed_owned[i]) kn_packed_free(m->packed[i]);
    m->packed[i] = NULL;
    m->packed_owned[i] = false;
    void *p = NULL;
    kn_status st = tt->pack(g, n, &(kn_target){isa, machine}, &p, err);
    if (st) {
      kn_error_prefix(err, "%s: node '%s' (%s): packing weights", m->ir->label, n->name,
                      n->op_type);
      unpack_all(m);
      return st;
    }
    m->packed[i] = p;
    m->packed_owned[i] = p != NULL;
    /* an engine packing at load: the originals just read leave the
     * resident set again, one step at a time */
    if (p && m->ir->mapping) drop_inputs(m, i);
    if (last) spill_after(m, i, p, last, ok);
  }
  return KN_OK;
}

/* Take an engine's PACKED blocks made for this machine's ISA; the rest
 * are packed by pack_all.  They are copied out of the file mapping into
 * one huge-page buffer, and their pages of the mapping are dropped again:
 * steps stream these weights on every run, and from file-backed pages
 * they ran up to 1.5x slower, erratically, on the VMs kiln is measured on
 * (BERT-base: runs of 130 to 250 ms, against 130 to 136 ms from the copy;
 * file pages stay mapped in the process and the kernel keeps scanning
 * them).  The copy costs one pass over bytes the load hashes anyway. */
#define COPY_PIECE ((size_t)1 << 20)
static kn_status adopt_packed(kn_model *m, kn_error *err) {
  const kn_graph *g = m->ir->graph;
  int32_t isa = (int32_t)kn_isa_detect(kn_cpu_features());
  if (!m->info.n_packed) return KN_OK;
  m->packed = kn_calloc((size_t)g->n_nodes + 1, sizeof *m->packed);
  m->packed_owned = kn_calloc((size_t)g->n_nodes + 1, sizeof *m->packed_owned);
  if (!m->packed || !m->packed_owned) {
    unpack_all(m);
    return kn_fail(err, KN_ERR_OOM, "out of memory");
  }
  m->n_packed = g->n_nodes;
  size_t total = 0;
  for (int32_t k = 0; k < m->info.n_packed; k++) {
    const kn_engine_packed *e = &m->info.packed[k];
    if (e->isa == isa) total += ((size_t)e->bytes + 63) & ~(size_t)63;
  }
  if (!total) return KN_OK;
  uint8_t *copy = kn_big_alloc(total);
  if (!copy) {
    unpack_all(m);
    return kn_fail(err, KN_ERR_OOM, "%s: out of memory copying %.1f MiB of packed weights",
                   m->ir->label, (double)total / 1048576.0);
  }
  m->packed_copy = copy;
  m->packed_copy_bytes = total;
  size_t at = 0;
  for (int32_t k = 0; k < m->info.n_packed; k++) {
    const kn_engine_packed *e = &m->info.packed[k];
    if (e->isa != isa) continue;
    /* in pieces, each piece's pages of the mapping dropped once copied (a
     * mapped buffer only: kn_model_load_buffer's blocks are the caller's
     * memory): a large block (ResNet-50's fc, 8 MiB) never has its
     * file pages and its copy resident at once */
    for (size_t done = 0; done < (size_t)e->bytes; done += COPY_PIECE) {
      size_t len = (size_t)e->bytes - done < COPY_PIECE ? (size_t)e->bytes - done : COPY_PIECE;
      memcpy(copy + at + done, (const uint8_t *)e->data + done, len);
      if (m->ir->mapping) kn_drop_pages(e->data, done + len);
    }
    m->packed[e->node] = copy + at;
    at += ((size_t)e->bytes + 63) & ~(size_t)63;
  }
  return KN_OK;
}

void kn_model_report_free(kn_model *m) {
  if (!m->report_ir) return;
  free(m->report_ir->graph->values);
  free(m->report_ir->graph);
  free(m->report_ir);
  m->report_ir = NULL;
}

void kn_timing_report_free(kn_timing_report *r) { kn_lines_free(&r->decisions); }

void kn_model_free(kn_model *m) {
  if (!m) return;
  kn_model_report_free(m);
  unpack_all(m);
  kn_ir_model_free(m->ir);
  free(m->small_copy);
  kn_spill_close(m->spill); /* after the constants that pointed into it */
  free(m->inputs);
  kn_mem_plan_free(&m->plan);
  kn_engine_info_free(&m->info);
  kn_strings_free(m->shapes, m->n_shapes);
  kn_strings_free(m->disabled, m->n_disabled);
  kn_strings_free(m->profiles, m->n_profiles);
  kn_strings_free(m->fixed, m->n_fixed);
  for (int32_t i = 0; m->pinned && i < m->n_inputs; i++) kn_tensor_release(&m->pinned[i]);
  free(m->pinned);
  free(m->prof_min);
  free(m->prof_max);
  kn_timing_report_free(&m->timing);
  free(m);
}

int32_t kn_model_decision_count(const kn_model *m) { return m->timing.decisions.n; }
const char *kn_model_decision(const kn_model *m, int32_t i) {
  return i >= 0 && i < m->timing.decisions.n ? m->timing.decisions.s[i] : NULL;
}

int32_t kn_model_input_count(const kn_model *m) { return m->n_inputs; }

const char *kn_model_input_fixed(const kn_model *m, int32_t index) {
  if (index < 0 || index >= m->n_inputs || !m->pinned || !m->pinned[index].dtype) return NULL;
  const kn_graph *g = m->ir->graph;
  const char *name = g->values[g->inputs[m->inputs[index]]].name;
  for (int32_t k = 0; k < m->n_fixed; k++) {
    const char *eq = strchr(m->fixed[k], '=');
    if (eq && (size_t)(eq - m->fixed[k]) == strlen(name) &&
        !strncmp(m->fixed[k], name, (size_t)(eq - m->fixed[k])))
      return eq + 1;
  }
  return NULL;
}
int32_t kn_model_output_count(const kn_model *m) { return m->ir->graph->n_outputs; }

static void fill_info(const kn_value *v, kn_value_info *out) {
  memset(out, 0, sizeof *out);
  out->name = v->name;
  out->dtype = v->type.dtype;
  out->rank = v->type.rank;
  for (int32_t d = 0; d < v->type.rank && d < KN_MAX_RANK; d++) {
    out->dims[d] = v->type.dims[d];
    out->dim_params[d] = v->dim_params[d];
  }
}

kn_status kn_model_input_info(const kn_model *m, int32_t i, kn_value_info *out) {
  if (i < 0 || i >= m->n_inputs) return KN_ERR_INVALID_ARG;
  const kn_graph *g = m->ir->graph;
  fill_info(&g->values[g->inputs[m->inputs[i]]], out);
  return KN_OK;
}

kn_status kn_model_output_info(const kn_model *m, int32_t i, kn_value_info *out) {
  const kn_graph *g = m->ir->graph;
  if (i < 0 || i >= g->n_outputs) return KN_ERR_INVALID_ARG;
  fill_info(&g->values[g->outputs[i]], out);
  return KN_OK;
}

/* "1x3x224x224" -> dims; false when malformed. */
bool kn_parse_dims(const char *p, const char *end, int64_t *dims, int32_t *rank) {
  *rank = 0;
  if (p == end) return false;
  while (p < end) {
    char *e;
    long long d = strtoll(p, &e, 10);
    if (e == p || d < 0 || *rank == KN_MAX_RANK || (e < end && *e != 'x') || e > end)
      return false;
    dims[(*rank)++] = d;
    p = e < end ? e + 1 : e;
    if (e < end && p == end) return false; /* trailing 'x' */
  }
  return true;
}

/* The model input named by spec's "NAME=" prefix, or -1. */
int32_t kn_model_input_named(const kn_model *m, const char *spec, const char *eq) {
  const kn_graph *g = m->ir->graph;
  for (int32_t i = 0; i < m->n_inputs; i++) {
    const kn_value *c = &g->values[g->inputs[m->inputs[i]]];
    if (strlen(c->name) == (size_t)(eq - spec) && !strncmp(c->name, spec, (size_t)(eq - spec)))
      return i;
  }
  return -1;
}

/* Parse "NAME=MIN:OPT:MAX" into the input's range; dims equal across the
 * range become static. */
/* "V1,V2,..." -> t's count elements of dtype t->dtype; false when
 * malformed or of another count. */
static bool parse_values(const char *p, kn_tensor *t) {
  int64_t n = kn_tensor_numel(t), k = 0;
  while (*p) {
    if (k == n) return false;
    char *end;
    if (t->dtype == KN_DTYPE_BOOL && (!strncmp(p, "true", 4) || !strncmp(p, "false", 5))) {
      kn_store_i64(t->data, t->dtype, k, p[0] == 't');
      end = (char *)p + (p[0] == 't' ? 4 : 5);
    } else if (kn_dtype_is_float(t->dtype)) {
      double v = strtod(p, &end);
      if (end == p) return false;
      kn_store_f64(t->data, t->dtype, k, v);
    } else {
      long long v = strtoll(p, &end, 10);
      if (end == p) return false;
      kn_store_i64(t->data, t->dtype, k, v);
    }
    k++;
    p = end;
    if (*p == ',') p++;
    else if (*p) return false;
  }
  return k == n;
}

kn_status kn_model_apply_fix(kn_model *m, const char *spec, bool fold, kn_error *err) {
  const char *label = m->ir->label;
  const char *eq = strchr(spec, '=');
  if (!eq || eq == spec)
    return kn_fail(err, KN_ERR_INVALID_ARG, "--fix '%s': expected NAME=VALUE[,VALUE...]", spec);
  int32_t idx = kn_model_input_named(m, spec, eq);
  if (idx < 0)
    return kn_fail(err, KN_ERR_INVALID_ARG, "%s: --fix '%s': the model has no input named '%.*s'",
                   label, spec, (int)(eq - spec), spec);
  kn_graph *g = m->ir->graph;
  int32_t vi = g->inputs[m->inputs[idx]];
  const kn_value *v = &g->values[vi];
  if (v->type.kind != KN_KIND_TENSOR || !v->type.dtype || v->type.dtype == KN_DTYPE_STRING ||
      v->type.rank < 0 || kn_shape_numel(v->type.rank, v->type.dims) < 0)
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "%s: --fix %s: input '%s' must be a numeric tensor of static shape (fix its "
                   "shape with --shape first)",
                   label, spec, v->name);
  if (!m->pinned && !(m->pinned = kn_calloc((size_t)m->n_inputs + 1, sizeof *m->pinned)))
    return kn_fail(err, KN_ERR_OOM, "out of memory");
  kn_tensor t;
  memset(&t, 0, sizeof t);
  if (kn_tensor_alloc(&t, v->type.dtype, v->type.rank, v->type.dims, NULL))
    return kn_fail(err, KN_ERR_OOM, "out of memory");
  if (!parse_values(eq + 1, &t)) {
    char shp[128];
    kn_tensor_release(&t);
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "%s: --fix %s: input '%s' is %s %s: give %lld comma-separated values", label,
                   spec, v->name, kn_dtype_name(v->type.dtype),
                   kn_shape_str(v->type.rank, v->type.dims, shp, sizeof shp),
                   (long long)kn_shape_numel(v->type.rank, v->type.dims));
  }
  /* an input that is also a graph output stays one (the pin is still
   * checked); every other reader reads the constant */
  if (fold && !v->is_output) {
    kn_tensor c;
    if (kn_tensor_copy(&c, &t, err)) {
      kn_tensor_release(&t);
      return KN_ERR_OOM;
    }
    char hint[256];
    snprintf(hint, sizeof hint, "%s_fixed", v->name);
    int32_t cv = kn_graph_add_constant(g, hint, &c);
    if (cv < 0) {
      kn_tensor_release(&c);
      kn_tensor_release(&t);
      return kn_fail(err, KN_ERR_OOM, "out of memory");
    }
    /* readers of the input (nodes, subgraphs' outer references) read the
     * constant; the input itself stays, read by nothing */
    kn_graph_replace_value(g, vi, cv);
  }
  kn_tensor_release(&m->pinned[idx]);
  m->pinned[idx] = t;
  return KN_OK;
}

kn_status kn_model_apply_profile(kn_model *m, const char *spec, kn_error *err) {
  const char *label = m->ir->label;
  const char *eq = strrchr(spec, '=');
  int32_t idx = eq && eq != spec ? kn_model_input_named(m, spec, eq) : -1;
  if (!eq || eq == spec)
    return kn_fail(err, KN_ERR_INVALID_ARG, "--profile '%s': expected NAME=MIN:OPT:MAX", spec);
  if (idx < 0)
    return kn_fail(err, KN_ERR_INVALID_ARG, "%s: --profile '%s': the model has no input named '%.*s'",
                   label, spec, (int)(eq - spec), spec);
  const char *c1 = strchr(eq + 1, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
  int64_t lo[KN_MAX_RANK], opt[KN_MAX_RANK], hi[KN_MAX_RANK];
  int32_t r1, r2, r3;
  if (!c1 || !c2 || strchr(c2 + 1, ':') || !kn_parse_dims(eq + 1, c1, lo, &r1) ||
      !kn_parse_dims(c1 + 1, c2, opt, &r2) || !kn_parse_dims(c2 + 1, c2 + strlen(c2), hi, &r3))
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "--profile '%s': expected NAME=MIN:OPT:MAX, each a shape like 1x3x224x224", spec);
  kn_value *v = &m->ir->graph->values[m->ir->graph->inputs[m->inputs[idx]]];
  char want[128];
  if (r1 != r2 || r2 != r3 || (v->type.rank >= 0 && v->type.rank != r1))
    return kn_fail(err, KN_ERR_SHAPE, "%s: --profile %s: input '%s' is declared %s", label, spec,
                   v->name, kn_shape_str(v->type.rank, v->type.dims, want, sizeof want));
  for (int32_t d = 0; d < r1; d++) {
    if (!(lo[d] <= opt[d] && opt[d] <= hi[d]))
      return kn_fail(err, KN_ERR_INVALID_ARG,
                     "--profile %s: dim %d must satisfy MIN <= OPT <= MAX", spec, d);
    if (v->type.rank >= 0 && v->type.dims[d] >= 0 && (lo[d] != v->type.dims[d] || hi[d] != v->type.dims[d]))
      return kn_fail(err, KN_ERR_SHAPE, "%s: --profile %s: dim %d of input '%s' is fixed at %lld",
                     label, spec, d, v->name, (long long)v->type.dims[d]);
  }
  if (!m->prof_min) {
    m->prof_min = kn_calloc((size_t)m->n_inputs + 1, sizeof *m->prof_min);
    m->prof_max = kn_calloc((size_t)m->n_inputs + 1, sizeof *m->prof_max);
    if (!m->prof_min || !m->prof_max) return kn_fail(err, KN_ERR_OOM, "out of memory");
    for (int32_t i = 0; i < m->n_inputs; i++) m->prof_min[i].rank = m->prof_max[i].rank = -1;
  }
  m->prof_min[idx].rank = m->prof_max[idx].rank = r1;
  v->type.rank = r1;
  for (int32_t d = 0; d < r1; d++) {
    m->prof_min[idx].dims[d] = lo[d];
    m->prof_max[idx].dims[d] = hi[d];
    v->type.dims[d] = lo[d] == hi[d] ? lo[d] : -1;
  }
  return KN_OK;
}

kn_status kn_model_save(const kn_model *m, const char *path, kn_error *err) {
  if (!m->built)
    return kn_fail(err, KN_ERR_INVALID_ARG, "%s: build the model before saving an engine",
                   m->ir->label);
  /* the prepacked blocks, in step order */
  kn_engine_packed *pk = kn_calloc((size_t)m->n_packed + 1, sizeof *pk);
  if (!pk) return kn_fail(err, KN_ERR_OOM, "out of memory");
  int32_t npk = 0;
  for (int32_t i = 0; i < m->n_packed; i++) {
    const kn_packed *b = m->packed[i];
    if (!b) continue;
    pk[npk++] = (kn_engine_packed){.node = i, .isa = b->isa, .tactic = b->tactic, .data = b,
                                   .bytes = b->bytes};
  }
  kn_engine_config cfg = {.n_packed = npk, .packed = pk,
                          .n_shapes = m->n_shapes, .shapes = (const char *const *)m->shapes,
                          .n_profiles = m->n_profiles,
                          .profiles = (const char *const *)m->profiles,
                          .n_disabled_passes = m->n_disabled,
                          .disabled_passes = (const char *const *)m->disabled,
                          .n_fixed = m->n_fixed, .fixed = (const char *const *)m->fixed,
                          .workspace_bytes = m->workspace,
                          .precision = m->precision[0] ? m->precision : NULL};
  char *mj = NULL;
  if (m->has_machine && !(mj = kn_machine_to_json_compact(&m->machine))) {
    free(pk);
    return kn_fail(err, KN_ERR_OOM, "out of memory");
  }
  cfg.machine_json = mj;
  cfg.decisions = (const char *const *)m->timing.decisions.s;
  cfg.n_decisions = m->timing.decisions.n;
  cfg.spill = m->spill;
  kn_status st = kn_engine_write(m->ir, &m->plan, &cfg, path, err);
  free(mj);
  free(pk);
  return st;
}

kn_status kn_context_create(const kn_model *m, kn_context **out, kn_error *err) {
  *out = NULL;
  kn_context *c = kn_calloc(1, sizeof *c);
  if (!c) return kn_fail(err, KN_ERR_OOM, "out of memory");
  c->model = m;
  c->threads = kn_default_threads();
  c->rt.features = kn_cpu_features();
  c->rt.isa = kn_isa_detect(c->rt.features);
  /* tiles for the machine the model was built for, else for this one */
  kn_machine os;
  const kn_machine *mach = m->has_machine ? &m->machine : NULL;
  if (!mach) {
    kn_machine_from_os(&os);
    mach = &os;
  }
  kn_machine_caches(mach, 1, &c->rt.caches.l1d, &c->rt.caches.l2, &c->rt.caches.l3);
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  c->mem_limit = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
  c->inputs = kn_calloc((size_t)m->n_inputs + 1, sizeof *c->inputs);
  c->bound = kn_calloc((size_t)m->n_inputs + 1, sizeof *c->bound);
  c->outputs = kn_calloc((size_t)m->ir->graph->n_outputs + 1, sizeof *c->outputs);
  if (!c->inputs || !c->bound || !c->outputs) {
    kn_context_free(c);
    return kn_fail(err, KN_ERR_OOM, "out of memory");
  }
  *out = c;
  return KN_OK;
}

void kn_context_free(kn_context *c) {
  if (!c) return;
  if (c->inputs)
    for (int32_t i = 0; i < c->model->n_inputs; i++) kn_slot_release(&c->inputs[i]);
  if (c->outputs)
    for (int32_t i = 0; i < c->model->ir->graph->n_outputs; i++)
      kn_slot_release(&c->outputs[i]);
  free(c->inputs);
  free(c->bound);
  free(c->outputs);
  kn_big_free(c->arena, c->arena_bytes);
  kn_runner_free(c->runner);
  kn_pool_free(c->pool);
  free(c->prof.spans);
  free(c->prof.pool_spans);
  free(c->rt.scratch);
  free(c);
}

kn_status kn_context_set_threads(kn_context *c, int32_t n, kn_error *err) {
  if (n < 1 || n > 1024)
    return kn_fail(err, KN_ERR_INVALID_ARG, "thread count %d: expected 1 to 1024", n);
  if (n != c->threads) {
    kn_pool_free(c->pool);
    c->pool = NULL;
    c->rt.pool = NULL;
    c->threads = n;
  }
  return KN_OK;
}

int32_t kn_context_threads(const kn_context *c) { return c->threads; }

static kn_status check_tensor_input(const kn_model *m, const kn_value *v,
                                    const kn_tensor *t, kn_error *err) {
  char want[160], got[160];
  const kn_type *ty = &v->type;
  if (!kn_dtype_is_valid(t->dtype) || t->rank < 0 || t->rank > KN_MAX_RANK ||
      kn_tensor_numel(t) < 0)
    return kn_fail(err, KN_ERR_INVALID_ARG, "%s: input '%s': invalid tensor",
                   m->ir->label, v->name);
  if ((t->dtype == KN_DTYPE_STRING ? sizeof(char *) : kn_dtype_size(t->dtype)) *
              (size_t)kn_tensor_numel(t) > t->nbytes ||
      (!t->data && kn_tensor_numel(t) > 0))
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "%s: input '%s': tensor data (%zu bytes) is smaller than its shape needs",
                   m->ir->label, v->name, t->nbytes);
  if (ty->kind == KN_KIND_SEQUENCE)
    return kn_fail(err, KN_ERR_DTYPE, "%s: input '%s': expected a sequence, got a tensor",
                   m->ir->label, v->name);
  bool bad_dtype = ty->dtype && ty->dtype != t->dtype;
  bool bad_shape = ty->rank >= 0 && ty->rank != t->rank;
  for (int32_t d = 0; !bad_shape && d < ty->rank; d++)
    if (ty->dims[d] >= 0 && ty->dims[d] != t->dims[d]) bad_shape = true;
  if (bad_dtype || bad_shape) {
    int64_t dims[KN_MAX_RANK];
    for (int32_t d = 0; d < ty->rank && d < KN_MAX_RANK; d++) dims[d] = ty->dims[d];
    return kn_fail(err, bad_dtype ? KN_ERR_DTYPE : KN_ERR_SHAPE,
                   "%s: input '%s': expected %s %s, got %s %s", m->ir->label, v->name,
                   ty->dtype ? kn_dtype_name(ty->dtype) : "any dtype",
                   kn_shape_str(ty->rank, dims, want, sizeof want),
                   kn_dtype_name(t->dtype), kn_shape_str(t->rank, t->dims, got, sizeof got));
  }
  /* equal symbolic names must get equal sizes */
  for (int32_t a = 0; a < t->rank && a < ty->rank; a++)
    for (int32_t b = a + 1; b < t->rank && b < ty->rank; b++)
      if (v->dim_params[a] && v->dim_params[b] &&
          strcmp(v->dim_params[a], v->dim_params[b]) == 0 && t->dims[a] != t->dims[b])
        return kn_fail(err, KN_ERR_SHAPE,
                       "%s: input '%s': dims %d and %d are both '%s' but got %lld and %lld",
                       m->ir->label, v->name, a, b, v->dim_params[a],
                       (long long)t->dims[a], (long long)t->dims[b]);
  return KN_OK;
}

kn_status kn_context_set_input_slot(kn_context *c, int32_t i, const kn_slot *s,
                                    kn_error *err) {
  const kn_model *m = c->model;
  if (i < 0 || i >= m->n_inputs)
    return kn_fail(err, KN_ERR_INVALID_ARG, "%s: input index %d is out of range (model has %d)",
                   m->ir->label, i, m->n_inputs);
  const kn_graph *g = m->ir->graph;
  const kn_value *v = &g->values[g->inputs[m->inputs[i]]];
  if (s->kind == KN_KIND_TENSOR) {
    kn_status st = check_tensor_input(m, v, &s->t, err);
    if (st) return st;
    if (m->prof_min && m->prof_min[i].rank >= 0)
      for (int32_t d = 0; d < s->t.rank; d++)
        if (s->t.dims[d] < m->prof_min[i].dims[d] || s->t.dims[d] > m->prof_max[i].dims[d])
          return kn_fail(err, KN_ERR_SHAPE,
                         "%s: input '%s': dim %d is %lld, outside the engine's profile "
                         "%lld..%lld (rebuild with a wider --profile)",
                         m->ir->label, v->name, d, (long long)s->t.dims[d],
                         (long long)m->prof_min[i].dims[d], (long long)m->prof_max[i].dims[d]);
  } else if (s->kind == KN_KIND_SEQUENCE && v->type.kind == KN_KIND_TENSOR) {
    return kn_fail(err, KN_ERR_DTYPE, "%s: input '%s': expected a tensor, got a sequence",
                   m->ir->label, v->name);
  } else if (s->kind == KN_KIND_NONE && !v->type.optional) {
    return kn_fail(err, KN_ERR_MISSING, "%s: input '%s' is required", m->ir->label, v->name);
  }
  const kn_tensor *pin = m->pinned && m->pinned[i].dtype ? &m->pinned[i] : NULL;
  if (pin && (s->kind != KN_KIND_TENSOR || s->t.dtype != pin->dtype ||
              kn_tensor_numel(&s->t) != kn_tensor_numel(pin) ||
              memcmp(s->t.data, pin->data, pin->nbytes))) {
    const char *spec = kn_model_input_fixed(m, i);
    char got[64] = "another value";
    if (s->kind == KN_KIND_TENSOR && kn_tensor_numel(&s->t) == 1 && s->t.dtype != KN_DTYPE_STRING)
      snprintf(got, sizeof got, "%.17g", kn_load_f64(s->t.data, s->t.dtype, 0));
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "%s: input '%s' is pinned to %s in this engine (kiln build --fix), got %s: "
                   "rebuild without --fix %s, or with the value you run",
                   m->ir->label, v->name, spec ? spec : "a fixed value", got, v->name);
  }
  kn_slot_release(&c->inputs[i]);
  c->inputs[i].kind = s->kind;
  c->inputs[i].t = kn_tensor_view(&s->t);
  if (s->kind == KN_KIND_SEQUENCE) {
    kn_status st = kn_slot_copy(&c->inputs[i], s, err);
    if (st) return st;
  }
  c->bound[i] = true;
  return KN_OK;
}

kn_status kn_context_set_input(kn_context *c, int32_t i, const kn_tensor *t,
                               kn_error *err) {
  kn_slot s;
  memset(&s, 0, sizeof s);
  s.kind = KN_KIND_TENSOR;
  s.t = *t;
  return kn_context_set_input_slot(c, i, &s, err);
}

kn_status kn_context_set_input_by_name(kn_context *c, const char *name,
                                       const kn_tensor *t, kn_error *err) {
  const kn_graph *g = c->model->ir->graph;
  for (int32_t i = 0; i < c->model->n_inputs; i++)
    if (strcmp(g->values[g->inputs[c->model->inputs[i]]].name, name) == 0)
      return kn_context_set_input(c, i, t, err);
  return kn_fail(err, KN_ERR_INVALID_ARG, "%s: the model has no input named '%s'",
                 c->model->ir->label, name);
}

/* Room for every step's span on every thread. */
static kn_status prof_prepare(kn_context *c, kn_error *err) {
  kn_prof *p = &c->prof;
  int32_t threads = c->pool ? kn_pool_threads(c->pool) : 1;
  int64_t need = (int64_t)c->model->ir->graph->n_nodes * threads;
  if (need > INT32_MAX) return kn_fail(err, KN_ERR_LIMIT, "too many steps to profile");
  if (p->cap < need || p->threads != threads) {
    kn_step_span *s = realloc(p->spans, (size_t)need * sizeof *s + 1);
    kn_pool_span *ps = s ? realloc(p->pool_spans, (size_t)threads * sizeof *ps) : NULL;
    if (s) p->spans = s;
    if (ps) p->pool_spans = ps;
    if (!s || !ps) return kn_fail(err, KN_ERR_OOM, "out of memory for the profile");
    p->cap = (int32_t)need;
    p->threads = threads;
  }
  p->pool = c->pool;
  p->n = 0;
  return KN_OK;
}

kn_status kn_context_set_profiling(kn_context *c, int32_t on, kn_error *err) {
  (void)err;
  c->profiling = on != 0;
  c->prof.n = 0;
  return KN_OK;
}

int32_t kn_context_spans(const kn_context *c, const kn_step_span **spans) {
  *spans = c->prof.n ? c->prof.spans : NULL;
  return c->ran ? c->prof.n : 0;
}

/* Whether every input with a profile is at its MAX dims (what the arena
 * was planned for). */
static bool inputs_at_max(const kn_context *c) {
  const kn_model *m = c->model;
  for (int32_t i = 0; m->prof_max && i < m->n_inputs; i++) {
    if (m->prof_max[i].rank < 0) continue;
    const kn_slot *s = &c->inputs[i];
    if (s->kind != KN_KIND_TENSOR || s->t.rank != m->prof_max[i].rank) return false;
    for (int32_t d = 0; d < s->t.rank; d++)
      if (s->t.dims[d] != m->prof_max[i].dims[d]) return false;
  }
  return true;
}

kn_status kn_context_run(kn_context *c, kn_error *err) {
  const kn_model *m = c->model;
  const kn_graph *g = m->ir->graph;
  const kn_slot **in = kn_calloc((size_t)g->n_inputs + 1, sizeof *in);
  if (!in) return kn_fail(err, KN_ERR_OOM, "out of memory");
  for (int32_t i = 0; i < m->n_inputs; i++) {
    const kn_value *v = &g->values[g->inputs[m->inputs[i]]];
    if (!c->bound[i] && !v->type.optional) {
      free(in);
      return kn_fail(err, KN_ERR_MISSING, "%s: input '%s' (%d) was not given",
                     m->ir->label, v->name, i);
    }
    in[m->inputs[i]] = &c->inputs[i];
  }
  c->ran = false;
  kn_mem_budget mem = {.limit = c->mem_limit, .live = 0, .observe = c->observe,
                       .observe_arg = c->observe_arg, .cancel = c->cancel,
                       .cancel_arg = c->cancel_arg, .deadline_ns = c->deadline_ns};
  if (m->plan.n_tensors && m->plan.arena_bytes) {
    if (!c->arena) {
      if (m->plan.arena_bytes > c->mem_limit) {
        free(in);
        return kn_fail(err, KN_ERR_LIMIT,
                       "%s: the plan's arena of %llu bytes exceeds the run's memory limit",
                       m->ir->label, (unsigned long long)m->plan.arena_bytes);
      }
      size_t bytes = (size_t)((m->plan.arena_bytes + 63) & ~(uint64_t)63);
      /* prefaulted in huge pages when the runs fill it; a --profile's
       * arena is planned at MAX, and runs below it touch only the start of
       * each tensor's slot: then only what is written becomes resident
       * (tinycnn planned for batch 512, run at 1: peak RSS 44 -> 6 MiB) */
      c->arena = inputs_at_max(c) ? kn_big_alloc(bytes) : kn_big_alloc_lazy(bytes);
      c->arena_bytes = bytes;
      if (!c->arena) {
        free(in);
        return kn_fail(err, KN_ERR_OOM, "%s: out of memory allocating a %zu-byte arena",
                       m->ir->label, bytes);
      }
    }
    mem.plan = &m->plan;
    mem.arena = c->arena;
  }
  kn_status st = KN_OK;
  if (!c->runner) st = kn_runner_create(m->ir, g, &c->runner, err);
  if (!st && c->threads > 1 && !c->pool) {
    st = kn_pool_create(c->threads, &c->pool, err);
    c->rt.pool = c->pool;
  }
  if (m->built) {
    mem.rt = &c->rt;
    mem.packed = (const void *const *)m->packed;
  }
  c->prof.n = 0;
  if (!st && c->profiling) {
    st = prof_prepare(c, err);
    mem.prof = &c->prof;
  }
  kn_pool_set_spans(c->pool, c->profiling ? c->prof.pool_spans : NULL);
  if (!st) st = kn_runner_run(c->runner, NULL, in, c->outputs, &mem, err);
  kn_pool_set_spans(c->pool, NULL);
  free(in);
  if (!st) c->ran = true;
  return st;
}

void kn_context_set_observer(kn_context *c, kn_tensor_observer fn, void *arg) {
  c->observe = fn;
  c->observe_arg = arg;
}

void kn_context_set_memory_limit(kn_context *c, uint64_t bytes) { c->mem_limit = bytes; }

void kn_context_set_cancel(kn_context *c, kn_cancel_fn fn, void *arg) {
  c->cancel = fn;
  c->cancel_arg = fn ? arg : NULL;
}

void kn_context_set_deadline(kn_context *c, int64_t deadline_ns) {
  c->deadline_ns = deadline_ns > 0 ? deadline_ns : 0;
}

const kn_slot *kn_context_output_slot(const kn_context *c, int32_t i) {
  if (!c->ran || i < 0 || i >= c->model->ir->graph->n_outputs) return NULL;
  return &c->outputs[i];
}

const kn_tensor *kn_context_output(const kn_context *c, int32_t i) {
  const kn_slot *s = kn_context_output_slot(c, i);
  return s && s->kind == KN_KIND_TENSOR ? &s->t : NULL;
}
