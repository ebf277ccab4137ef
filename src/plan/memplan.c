/*
 * The memory planner: lifetimes of the top-level graph's intermediate
 * tensors over the step order, then offsets in one arena.
 *
 * Tensors joined by in-place reuse (an op whose output 0 may take input
 * 0's buffer, when that input dies at this step) form one buffer whose
 * lifetime is the union of theirs.  Buffers are placed greedily, as TFLite
 * Micro's greedy_memory_planner does: in some order, each into the lowest
 * gap that fits among the already placed buffers whose lifetimes overlap
 * its own.  Which order wins depends on the graph, so a few orders (and a
 * best-fit variant) are tried and the smallest arena is kept, then a short
 * local search swaps buffers in the best order; all of it is
 * deterministic, so the same graph always gets the same plan.
 *
 * A Concat along an axis with only size-1 dims before it (channels of an
 * NCHW batch of one, rows of an NHWC one) holds each input as one
 * contiguous run of its bytes.  When every input dies there, their buffers
 * become parts of the output's (placed at their running offset inside it,
 * not placed on their own), the output's buffer lives from the first part
 * on, and the Concat finds its inputs already in place: this is how the
 * bands of a patch-by-patch run (src/plan/patch.c) fill the tensor they
 * make without a second copy of it.
 */
#include "plan.h"

#include "ops/op.h"

#define KN_PLAN_ALIGN 64

static uint64_t align_up(uint64_t x) {
  return (x + KN_PLAN_ALIGN - 1) / KN_PLAN_ALIGN * KN_PLAN_ALIGN;
}

/* Bytes of a value whose static type is fully known, else 0. */
static uint64_t static_bytes(const kn_value *v) {
  const kn_type *t = &v->type;
  if (t->kind != KN_KIND_TENSOR || t->optional || t->rank < 0 || t->rank > KN_MAX_RANK)
    return 0;
  if (!kn_dtype_is_valid(t->dtype) || t->dtype == KN_DTYPE_STRING) return 0;
  for (int32_t d = 0; d < t->rank; d++)
    if (t->dims[d] < 0) return 0;
  int64_t n = kn_shape_numel(t->rank, t->dims);
  if (n <= 0) return 0;
  size_t es = kn_dtype_size(t->dtype);
  if ((uint64_t)n > KN_MAX_TENSOR_BYTES / es) return 0;
  return (uint64_t)n * es;
}

static void mark_last(int32_t v, int32_t node, void *arg) {
  int32_t *last = arg;
  if (node > last[v]) last[v] = node;
}

/* A group of tensors sharing one buffer (an in-place chain). */
typedef struct buffer {
  uint64_t bytes;
  int32_t first, last;
  int64_t offset;
  int32_t parent;     /* a part of this buffer (a Concat input), or -1 */
  uint64_t delta;     /* its byte offset inside the parent */
  int32_t view_value; /* the Concat output it is part of, or -1 */
} buffer;

typedef struct order_arg {
  const buffer *b;
  int key; /* which order */
} order_arg;

static bool lifetimes_overlap(int32_t f1, int32_t l1, int32_t f2, int32_t l2) {
  return f1 <= l2 && f2 <= l1;
}

/* True when buffer x goes before buffer y in order `key`:
 * 0: largest first; 1: largest size x lifetime first; 2: longest lifetime
 * first; 3: earliest first.  Ties: larger, then earlier, then index. */
static bool goes_before(const buffer *b, int key, int32_t x, int32_t y) {
  const buffer *p = &b[x], *q = &b[y];
  uint64_t lp = (uint64_t)(p->last - p->first + 1), lq = (uint64_t)(q->last - q->first + 1);
  switch (key) {
  case 1: {
    double ap = (double)p->bytes * (double)lp, aq = (double)q->bytes * (double)lq;
    if (ap != aq) return ap > aq;
    break;
  }
  case 2:
    if (lp != lq) return lp > lq;
    break;
  case 3:
    if (p->first != q->first) return p->first < q->first;
    break;
  default: break;
  }
  if (p->bytes != q->bytes) return p->bytes > q->bytes;
  if (p->first != q->first) return p->first < q->first;
  return x < y;
}

/* Stable merge sort of idx[0..n) by goes_before (qsort has no context
 * argument in C11). */
static void sort_order(const buffer *b, int key, int32_t *idx, int32_t *tmp, int32_t n) {
  for (int32_t w = 1; w < n; w *= 2) {
    for (int32_t lo = 0; lo < n; lo += 2 * w) {
      int32_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int32_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) tmp[k++] = goes_before(b, key, idx[j], idx[i]) ? idx[j++] : idx[i++];
      while (i < mid) tmp[k++] = idx[i++];
      while (j < hi) tmp[k++] = idx[j++];
    }
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
  }
}

/* Place every buffer in `order`; `placed` (n entries) is scratch kept
 * sorted by offset.  best_fit: the smallest gap that fits, else the first.
 * Returns the arena size. */
static uint64_t place_all(buffer *b, const int32_t *order, int32_t n, int32_t *placed,
                          bool best_fit) {
  int32_t np = 0;
  uint64_t arena = 0;
  for (int32_t k = 0; k < n; k++) {
    buffer *cur = &b[order[k]];
    uint64_t off = 0, best = UINT64_MAX, best_gap = UINT64_MAX;
    for (int32_t j = 0; j < np; j++) {
      const buffer *p = &b[placed[j]];
      if (!lifetimes_overlap(cur->first, cur->last, p->first, p->last)) continue;
      uint64_t po = (uint64_t)p->offset;
      if (po >= off && po - off >= cur->bytes) { /* a gap [off, po) that fits */
        if (!best_fit) break;
        if (po - off < best_gap) {
          best_gap = po - off;
          best = off;
        }
      }
      uint64_t end = align_up(po + p->bytes);
      if (end > off) off = end;
    }
    if (best_fit && best != UINT64_MAX) off = best;
    cur->offset = (int64_t)off;
    if (off + cur->bytes > arena) arena = off + cur->bytes;
    /* insert into placed, sorted by offset */
    int32_t at = np;
    while (at > 0 && b[placed[at - 1]].offset > cur->offset) {
      placed[at] = placed[at - 1];
      at--;
    }
    placed[at] = order[k];
    np++;
  }
  return align_up(arena);
}

/* A part's offset: its parent's plus its place inside it. */
static int64_t part_offset(const buffer *b, int32_t i) {
  return b[i].parent < 0 ? b[i].offset : part_offset(b, b[i].parent) + (int64_t)b[i].delta;
}

/* Make the inputs of node i, when it is a Concat that holds each of them
 * as one contiguous run of its output's bytes, parts of the output's
 * buffer (see the header comment).  Every input must be a planned
 * tensor read last, and once, by the Concat, the last of its buffer's
 * in-place chain, not yet a part, and start at a multiple of the
 * alignment; otherwise nothing changes. */
static void concat_parts(const kn_graph *g, int32_t i, kn_plan_tensor *ts, const int32_t *tidx,
                         const int32_t *root, buffer *bufs) {
  const kn_node *n = &g->nodes[i];
  if (strcmp(n->op_type, "Concat") || n->domain[0] || n->n_outputs != 1 || n->n_inputs < 1)
    return;
  int32_t vo = n->outputs[0];
  if (vo < 0 || tidx[vo] < 0 || ts[tidx[vo]].offset < 0) return;
  const kn_type *ty = &g->values[vo].type;
  const kn_attr *ax = kn_node_attr(n, "axis");
  int64_t axis = ax ? ax->i : 1;
  if (axis < 0) axis += ty->rank;
  if (axis < 0 || axis >= ty->rank) return;
  for (int32_t d = 0; d < axis; d++)
    if (ty->dims[d] != 1) return;
  int32_t ob = root[tidx[vo]];
  uint64_t at = 0;
  for (int32_t k = 0; k < n->n_inputs; k++) {
    int32_t v = n->inputs[k];
    if (v < 0 || tidx[v] < 0) return;
    const kn_plan_tensor *t = &ts[tidx[v]];
    int32_t b = root[tidx[v]];
    if (t->offset < 0 || b < 0 || b == ob || t->last != i || bufs[b].last != i ||
        bufs[b].parent >= 0 || bufs[b].bytes != t->bytes || at % KN_PLAN_ALIGN)
      return;
    for (int32_t j = 0; j < k; j++)
      if (n->inputs[j] == v) return;
    at += t->bytes;
  }
  if (at != ts[tidx[vo]].bytes) return;
  at = 0;
  for (int32_t k = 0; k < n->n_inputs; k++) {
    int32_t b = root[tidx[n->inputs[k]]];
    bufs[b].parent = ob;
    bufs[b].delta = at;
    bufs[b].view_value = vo;
    at += bufs[b].bytes;
    if (bufs[b].first < bufs[ob].first) bufs[ob].first = bufs[b].first;
  }
  /* the executor neither zeroes the output (reference kernels) nor
   * expects it elsewhere: input 0 is at its first byte */
  ts[tidx[vo]].inplace_of = n->inputs[0];
}

kn_status kn_plan_memory(const kn_graph *g, uint64_t workspace_cap, kn_mem_plan *out,
                         kn_error *err) {
  memset(out, 0, sizeof *out);
  out->alignment = KN_PLAN_ALIGN;
  kn_status st = KN_OK;
  int32_t nv = g->n_values, ns = g->n_nodes;
  int32_t *last = kn_malloc(((size_t)nv + 1) * sizeof *last);
  int32_t *tidx = kn_malloc(((size_t)nv + 1) * sizeof *tidx);
  int32_t *root = NULL, *order = NULL, *best_order = NULL, *tmp = NULL, *placed = NULL;
  buffer *bufs = NULL;
  int64_t *delta = NULL;
  int32_t nt = 0, nb = 0;
  if (!last || !tidx) goto oom;
  for (int32_t v = 0; v < nv; v++) last[v] = tidx[v] = -1;
  for (int32_t i = 0; i < ns; i++) kn_node_foreach_read(g, &g->nodes[i], mark_last, i, last);
  for (int32_t i = 0; i < ns; i++)
    for (int32_t o = 0; o < g->nodes[i].n_outputs; o++)
      if (g->nodes[i].outputs[o] >= 0) nt++;
  out->tensors = kn_calloc((size_t)nt + 1, sizeof *out->tensors);
  root = kn_malloc(((size_t)nt + 1) * sizeof *root);
  if (!out->tensors || !root) goto oom;

  /* tensors, in step order */
  nt = 0;
  for (int32_t i = 0; i < ns; i++) {
    const kn_node *n = &g->nodes[i];
    for (int32_t o = 0; o < n->n_outputs; o++) {
      int32_t v = n->outputs[o];
      if (v < 0 || tidx[v] >= 0) continue;
      const kn_value *val = &g->values[v];
      if (val->is_output || val->is_input || val->constant || val->outer >= 0) continue;
      kn_plan_tensor *t = &out->tensors[nt];
      t->value = v;
      t->bytes = static_bytes(val);
      t->first = i;
      t->last = last[v] > i ? last[v] : i;
      t->offset = t->bytes ? 0 : -1; /* 0: to place */
      t->inplace_of = -1;
      t->view_of = -1;
      tidx[v] = nt++;
    }
  }
  for (int32_t i = 0; i < g->n_outputs; i++) /* graph outputs are pinned */
    if (g->outputs[i] >= 0 && tidx[g->outputs[i]] >= 0) {
      out->tensors[tidx[g->outputs[i]]].offset = -1;
      out->tensors[tidx[g->outputs[i]]].bytes = 0;
    }
  out->n_tensors = nt;

  /* in-place pairs: output 0 takes the in-place input's buffer (input 0
     unless the op says otherwise) when that input dies here */
  for (int32_t i = 0; i < ns; i++) {
    const kn_node *n = &g->nodes[i];
    if (!n->op || !n->op->inplace || n->n_outputs < 1) continue;
    int32_t ii = n->op->inplace_input;
    if (n->n_inputs <= ii) continue;
    int32_t vi = n->inputs[ii], vo = n->outputs[0];
    if (vi < 0 || vo < 0 || tidx[vi] < 0 || tidx[vo] < 0) continue;
    kn_plan_tensor *ti = &out->tensors[tidx[vi]], *to = &out->tensors[tidx[vo]];
    if (ti->offset < 0 || to->offset < 0 || ti->bytes != to->bytes || ti->last != i) continue;
    bool again = false;
    for (int32_t k = 0; k < n->n_inputs; k++) again |= k != ii && n->inputs[k] == vi;
    if (!again) to->inplace_of = vi;
  }

  /* buffers: one per in-place chain */
  bufs = kn_calloc((size_t)nt + 1, sizeof *bufs);
  if (!bufs) goto oom;
  for (int32_t t = 0; t < nt; t++) {
    kn_plan_tensor *pt = &out->tensors[t];
    root[t] = -1;
    if (pt->offset < 0) continue;
    out->naive_bytes += pt->bytes;
    if (pt->inplace_of >= 0) {
      int32_t r = root[tidx[pt->inplace_of]];
      root[t] = r;
      if (pt->last > bufs[r].last) bufs[r].last = pt->last;
      continue;
    }
    root[t] = nb;
    bufs[nb++] = (buffer){.bytes = pt->bytes, .first = pt->first, .last = pt->last,
                          .parent = -1, .view_value = -1};
  }
  for (int32_t i = 0; i < ns; i++) concat_parts(g, i, out->tensors, tidx, root, bufs);

  /* lower bound: the most bytes of buffers live at one step */
  delta = kn_calloc((size_t)ns + 2, sizeof *delta);
  if (!delta) goto oom;
  for (int32_t b = 0; b < nb; b++) {
    if (bufs[b].parent >= 0) continue; /* inside its parent's bytes */
    delta[bufs[b].first] += (int64_t)bufs[b].bytes;
    delta[bufs[b].last + 1] -= (int64_t)bufs[b].bytes;
  }
  int64_t live = 0;
  out->live = kn_calloc((size_t)ns + 1, sizeof *out->live);
  if (!out->live) goto oom;
  out->n_steps = ns;
  for (int32_t s = 0; s <= ns; s++) {
    live += delta[s];
    if (s < ns) out->live[s] = (uint64_t)live;
    if ((uint64_t)live > out->lower_bound_bytes) out->lower_bound_bytes = (uint64_t)live;
  }

  /* placement: try the orders, keep the smallest arena */
  order = kn_malloc(((size_t)nb + 1) * sizeof *order);
  best_order = kn_malloc(((size_t)nb + 1) * sizeof *best_order);
  tmp = kn_malloc(((size_t)nb + 1) * sizeof *tmp);
  placed = kn_malloc(((size_t)nb + 1) * sizeof *placed);
  if (!order || !best_order || !tmp || !placed) goto oom;
  uint64_t best = UINT64_MAX;
  bool best_bf = false;
  int32_t nplace = 0; /* buffers placed on their own (parts follow their parent) */
  for (int32_t b = 0; b < nb; b++)
    if (bufs[b].parent < 0) nplace++;
  for (int key = 0; key < 4; key++)
    for (int bf = 0; bf < 2; bf++) {
      for (int32_t b = 0, k = 0; b < nb; b++)
        if (bufs[b].parent < 0) order[k++] = b;
      sort_order(bufs, key, order, tmp, nplace);
      uint64_t a = place_all(bufs, order, nplace, placed, bf);
      if (a < best) {
        best = a;
        best_bf = bf;
        memcpy(best_order, order, (size_t)nplace * sizeof *order);
      }
    }
  /* then a deterministic local search from the best order: swap two
   * buffers, keep the swap when the arena does not grow.  Greedy orders
   * miss plans that stack the buffers live at the peak step tightly
   * (MobileNetV2 after fuse_expand_dw: 3.64 MiB against a lower bound of
   * 3.06 for every order above).  A few hundred placements, fewer for
   * graphs with many buffers (each costs about nb^2). */
  if (nplace > 2 && best > out->lower_bound_bytes) {
    int64_t tries = (int64_t)(20000000.0 / ((double)nplace * (double)nplace));
    tries = tries > 512 ? 512 : tries;
    memcpy(order, best_order, (size_t)nplace * sizeof *order);
    uint32_t seed = 12345u;
    for (int64_t t = 0; t < tries && best > out->lower_bound_bytes; t++) {
      seed = seed * 1664525u + 1013904223u;
      int32_t i = (int32_t)((seed >> 8) % (uint32_t)nplace);
      seed = seed * 1664525u + 1013904223u;
      int32_t j = (int32_t)((seed >> 8) % (uint32_t)nplace);
      if (i == j) continue;
      int32_t x = order[i];
      order[i] = order[j];
      order[j] = x;
      uint64_t a = place_all(bufs, order, nplace, placed, best_bf);
      if (a <= best) {
        best = a;
        memcpy(best_order, order, (size_t)nplace * sizeof *order);
      } else {
        order[j] = order[i];
        order[i] = x;
      }
    }
  }
  out->arena_bytes = place_all(bufs, best_order, nplace, placed, best_bf);
  for (int32_t t = 0; t < nt; t++) {
    if (root[t] < 0) continue;
    kn_plan_tensor *pt = &out->tensors[t];
    pt->offset = part_offset(bufs, root[t]);
    if (bufs[root[t]].parent >= 0) {
      pt->view_of = bufs[root[t]].view_value;
      pt->view_offset = bufs[root[t]].delta;
    }
  }

  if (workspace_cap && out->arena_bytes > workspace_cap) {
    st = kn_fail(err, KN_ERR_LIMIT,
                 "workspace of %llu bytes is too small: the plan needs %llu bytes "
                 "(%llu over)",
                 (unsigned long long)workspace_cap, (unsigned long long)out->arena_bytes,
                 (unsigned long long)(out->arena_bytes - workspace_cap));
    kn_mem_plan_free(out);
  }
  goto done;
oom:
  st = kn_fail(err, KN_ERR_OOM, "out of memory planning %d tensors", nt);
  kn_mem_plan_free(out);
done:
  free(last);
  free(tidx);
  free(root);
  free(bufs);
  free(delta);
  free(order);
  free(best_order);
  free(tmp);
  free(placed);
  return st;
}

void kn_mem_plan_free(kn_mem_plan *p) {
  if (!p) return;
  free(p->tensors);
  free(p->live);
  memset(p, 0, sizeof *p);
  p->alignment = KN_PLAN_ALIGN;
}

/* Whether a and b may share bytes: a declared in-place pair at the same
 * offset whose lifetimes meet only at the step that makes the output. */
static bool inplace_pair(const kn_plan_tensor *a, const kn_plan_tensor *b) {
  if (b->inplace_of == a->value)
    return a->offset == b->offset && a->bytes == b->bytes && a->last == b->first;
  if (a->inplace_of == b->value)
    return a->offset == b->offset && a->bytes == b->bytes && b->last == a->first;
  return false;
}

static const kn_plan_tensor *tensor_of_value(const kn_mem_plan *p, int32_t v) {
  for (int32_t i = 0; i < p->n_tensors; i++)
    if (p->tensors[i].value == v) return &p->tensors[i];
  return NULL;
}

/* Whether a is a part (or a part of a part) of b, inside b's bytes. */
static bool part_of(const kn_mem_plan *p, const kn_plan_tensor *a, const kn_plan_tensor *b) {
  uint64_t off = 0;
  const kn_plan_tensor *c = a;
  for (int32_t depth = 0; c && c->view_of >= 0 && depth < p->n_tensors; depth++) {
    off += c->view_offset;
    const kn_plan_tensor *up = tensor_of_value(p, c->view_of);
    if (!up) return false;
    if (up == b)
      return (uint64_t)b->offset + off == (uint64_t)a->offset && off + a->bytes <= b->bytes;
    c = up;
  }
  return false;
}

bool kn_plan_check(const kn_mem_plan *p, char *why, size_t wl) {
  uint32_t al = p->alignment ? p->alignment : 1;
  for (int32_t i = 0; i < p->n_tensors; i++) {
    const kn_plan_tensor *a = &p->tensors[i];
    if (a->offset < 0) continue;
    if (a->first > a->last) {
      snprintf(why, wl, "value %d: lifetime [%d, %d] is empty", a->value, a->first, a->last);
      return false;
    }
    if ((uint64_t)a->offset % al) {
      snprintf(why, wl, "value %d: offset %lld is not a multiple of %u", a->value,
               (long long)a->offset, al);
      return false;
    }
    if ((uint64_t)a->offset + a->bytes > p->arena_bytes) {
      snprintf(why, wl, "value %d: bytes [%lld, %llu) lie outside the arena of %llu",
               a->value, (long long)a->offset,
               (unsigned long long)((uint64_t)a->offset + a->bytes),
               (unsigned long long)p->arena_bytes);
      return false;
    }
  }
  for (int32_t i = 0; i < p->n_tensors; i++) {
    const kn_plan_tensor *a = &p->tensors[i];
    if (a->offset < 0) continue;
    for (int32_t j = i + 1; j < p->n_tensors; j++) {
      const kn_plan_tensor *b = &p->tensors[j];
      if (b->offset < 0 || !lifetimes_overlap(a->first, a->last, b->first, b->last)) continue;
      uint64_t ao = (uint64_t)a->offset, bo = (uint64_t)b->offset;
      if (ao < bo + b->bytes && bo < ao + a->bytes && !inplace_pair(a, b) &&
          !part_of(p, a, b) && !part_of(p, b, a)) {
        snprintf(why, wl,
                 "values %d and %d are live together (steps [%d, %d] and [%d, %d]) "
                 "and overlap in bytes [%llu, %llu) and [%llu, %llu)",
                 a->value, b->value, a->first, a->last, b->first, b->last,
                 (unsigned long long)ao, (unsigned long long)(ao + a->bytes),
                 (unsigned long long)bo, (unsigned long long)(bo + b->bytes));
        return false;
      }
    }
  }
  return true;
}

void kn_plan_print(const kn_mem_plan *p, const kn_graph *g, FILE *f) {
  fprintf(f, "arena %llu bytes, lower bound %llu, naive %llu, %d tensors, alignment %u\n",
          (unsigned long long)p->arena_bytes, (unsigned long long)p->lower_bound_bytes,
          (unsigned long long)p->naive_bytes, p->n_tensors, p->alignment);
  for (int32_t i = 0; i < p->n_tensors; i++) {
    const kn_plan_tensor *t = &p->tensors[i];
    const char *name = g && t->value < g->n_values ? g->values[t->value].name : "?";
    fprintf(f, "  %-40s %12llu  [%4d, %4d]  ", name, (unsigned long long)t->bytes, t->first,
            t->last);
    if (t->offset < 0) fprintf(f, "not planned\n");
    else if (t->inplace_of >= 0 && g && t->inplace_of < g->n_values)
      fprintf(f, "@%llu (in place of %s)\n", (unsigned long long)t->offset,
              g->values[t->inplace_of].name);
    else fprintf(f, "@%llu\n", (unsigned long long)t->offset);
  }
}
