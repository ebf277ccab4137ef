/*
 * Patch-based execution (patch.h): a run of steps rewritten into bands.
 *
 * A run is steps [first, last] of the top-level graph in step order where
 * every step is row-local on channels-last tensors of a batch of one:
 *
 *   window  NhwcFusedConv, NhwcExpandDwConv, NhwcMaxPool, NhwcAveragePool:
 *           output row y reads input rows
 *           [y*s - pad_top, y*s - pad_top + (k-1)*d + 1); a fused residual
 *           (input 3) and the tensor a channel-slice conv fills (input 5,
 *           src/passes/concat_inplace.c) are read at row y
 *   layout  Transpose NCHW -> NHWC (perm 0,2,3,1) of a tensor made before
 *           the run: output row y is input row y of axis 2
 *   eltwise elementwise ops (Add, Mul, Relu, ElementwiseChain, ...): row y
 *           of each input of the output's height, inputs broadcast along
 *           the rows (height 1, or rank 2 and below) read whole
 *
 * and where everything the run makes is read inside it, except the last
 * step's single output.  For band k of K the last output's rows
 * [k*H/K, (k+1)*H/K) are needed; walking the run backwards each step's
 * output rows are the union of what its readers in the run need (the
 * receptive field, clipped to the tensor).  Each step then runs on its rows
 * alone: a copy of the node whose input is those rows (a Slice of a whole
 * tensor from before the run, or of a wider band of a step in the run, when
 * the rows differ) and whose top and bottom pads are the original ones only
 * where its window crosses the tensor's edge.  The output height of such a
 * window, floor((rows + pt' + pb' - ((k-1)d+1)) / s) + 1, is exactly the
 * band's rows, so the band step is the original step restricted to them:
 * the kernels, packing and tactics are the ordinary ones.
 *
 * The bands run one after the other in step order (the graph keeps the
 * order, kn_graph_compact_ordered), each band's tensors dying inside it;
 * a Concat along the rows joins the band outputs, and the memory planner
 * makes them parts of its output, so nothing is copied twice.
 */
#include "patch.h"

#define BAND_TAG "#band"

typedef enum pkind { PK_NONE, PK_WINDOW, PK_TRANSPOSE, PK_ELTWISE } pkind;

/* How an input slot is read: whole, through a window, or row for row on
 * axis 1 or (a Transpose's NCHW input) axis 2. */
typedef enum prole { PR_WHOLE, PR_WINDOW, PR_ROWS, PR_ROWS_AXIS2, PR_BAD } prole;

typedef struct rows {
  int64_t lo, hi;
} rows;

typedef struct win {
  int64_t k, s, d, pt, pb;
} win;

bool kn_patch_is_band(const kn_node *n) { return strstr(n->name, BAND_TAG) != NULL; }

static bool is_kiln(const kn_node *n, const char *op) {
  return !strcmp(n->domain, KN_DOMAIN) && !strcmp(n->op_type, op);
}

/* Every dim known, rank 4 or less, a batch of one when rank 4. */
static bool static_value(const kn_graph *g, int32_t v) {
  const kn_type *t = &g->values[v].type;
  if (t->kind != KN_KIND_TENSOR || t->rank < 0 || t->rank > 4 || !kn_dtype_is_valid(t->dtype) ||
      t->dtype == KN_DTYPE_STRING)
    return false;
  for (int32_t d = 0; d < t->rank; d++)
    if (t->dims[d] < 0) return false;
  return true;
}

static const int64_t *ints_attr(const kn_node *n, const char *name, int32_t count) {
  const kn_attr *a = kn_node_attr(n, name);
  return a && a->type == KN_ATTR_INTS && a->n == count ? a->ints : NULL;
}

/* The row geometry of a window step; false when it has none we handle. */
static bool window_of(const kn_graph *g, const kn_node *n, win *w) {
  const kn_attr *ap = kn_node_attr(n, "auto_pad");
  if (ap && ap->s && strcmp(ap->s, "NOTSET") && ap->s[0]) return false;
  const kn_attr *cm = kn_node_attr(n, "ceil_mode");
  if (cm && cm->i) return false;
  const int64_t *ks = ints_attr(n, "kernel_shape", 2);
  if (!ks && kn_node_attr(n, "kernel_shape")) return false;
  int32_t wi = is_kiln(n, "NhwcExpandDwConv") ? 2 : 1;
  if (ks) w->k = ks[0];
  else if (n->n_inputs > wi && n->inputs[wi] >= 0 && g->values[n->inputs[wi]].type.rank == 4)
    w->k = g->values[n->inputs[wi]].type.dims[2];
  else return false;
  const int64_t *st = ints_attr(n, "strides", 2), *dl = ints_attr(n, "dilations", 2);
  const int64_t *pd = ints_attr(n, "pads", 4);
  if ((!st && kn_node_attr(n, "strides")) || (!dl && kn_node_attr(n, "dilations")) ||
      (!pd && kn_node_attr(n, "pads")))
    return false;
  w->s = st ? st[0] : 1;
  w->d = dl ? dl[0] : 1;
  w->pt = pd ? pd[0] : 0;
  w->pb = pd ? pd[2] : 0;
  return w->k >= 1 && w->s >= 1 && w->d >= 1 && w->pt >= 0 && w->pb >= 0;
}

static pkind kind_of(const kn_graph *g, const kn_node *n) {
  win w;
  if (n->dead || !n->op || n->n_outputs != 1 || n->outputs[0] < 0 || kn_patch_is_band(n))
    return PK_NONE;
  for (int32_t a = 0; a < n->n_attrs; a++)
    if (n->attrs[a].type == KN_ATTR_GRAPH || n->attrs[a].type == KN_ATTR_GRAPHS) return PK_NONE;
  if ((is_kiln(n, "NhwcFusedConv") && n->n_inputs <= 6) ||
      is_kiln(n, "NhwcExpandDwConv") || is_kiln(n, "NhwcMaxPool") ||
      is_kiln(n, "NhwcAveragePool"))
    return window_of(g, n, &w) ? PK_WINDOW : PK_NONE;
  if (!strcmp(n->op_type, "Transpose") && !n->domain[0]) {
    const int64_t *p = ints_attr(n, "perm", 4);
    return p && p[0] == 0 && p[1] == 2 && p[2] == 3 && p[3] == 1 ? PK_TRANSPOSE : PK_NONE;
  }
  static const char *const elt[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Relu",
                                    "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid",
                                    "HardSwish", "Neg", "Abs", "Sqrt", "Exp"};
  if (is_kiln(n, "ElementwiseChain") || is_kiln(n, "HardSwish")) return PK_ELTWISE;
  if (n->domain[0]) return PK_NONE;
  for (size_t i = 0; i < sizeof elt / sizeof *elt; i++)
    if (!strcmp(n->op_type, elt[i])) return PK_ELTWISE;
  return PK_NONE;
}

static prole role_of(const kn_graph *g, const kn_node *n, pkind k, int32_t j) {
  int32_t v = n->inputs[j];
  if (v < 0) return PR_WHOLE;
  int64_t hout = g->values[n->outputs[0]].type.dims[1];
  switch (k) {
  case PK_WINDOW:
    if (j == 0) return PR_WINDOW;
    /* the residual, and the tensor whose other channels a channel-slice
     * conv (concat_inplace) fills in place: row for row */
    if ((j == 3 || j == 5) && is_kiln(n, "NhwcFusedConv")) return PR_ROWS;
    return PR_WHOLE;
  case PK_TRANSPOSE: return j == 0 ? PR_ROWS_AXIS2 : PR_BAD;
  case PK_ELTWISE: {
    if (g->values[v].constant && g->values[v].type.rank <= 2) return PR_WHOLE;
    if (!static_value(g, v)) return PR_BAD;
    const kn_type *t = &g->values[v].type;
    if (t->rank <= 2) return PR_WHOLE;
    if (t->rank == 4 && t->dims[1] == 1) return PR_WHOLE;
    if (t->rank == 4 && t->dims[1] == hout) return PR_ROWS;
    return PR_BAD;
  }
  default: return PR_BAD;
  }
}

/* Rows of the row axis of input j of node n that output rows `out` need,
 * clipped to the input's height hin. */
static rows input_rows(const kn_graph *g, const kn_node *n, prole r, rows out, int64_t hin,
                       win *w_out) {
  rows in = out;
  if (r == PR_WINDOW) {
    win w;
    KN_ASSERT(window_of(g, n, &w));
    in.lo = out.lo * w.s - w.pt;
    in.hi = (out.hi - 1) * w.s - w.pt + (w.k - 1) * w.d + 1;
    if (w_out) { /* the band step's pads */
      *w_out = w;
      w_out->pt = in.lo < 0 ? -in.lo : 0;
      w_out->pb = in.hi > hin ? in.hi - hin : 0;
    }
  }
  if (in.lo < 0) in.lo = 0;
  if (in.hi > hin) in.hi = hin;
  return in;
}

/* The analysis of one run: what each step is, and for one band the rows
 * of each step's output. */
typedef struct run {
  const kn_graph *g;
  int32_t first, last, n, bands;
  pkind *kind;      /* [n] */
  int32_t *last_rd; /* [n] the last step in the run reading step i's output */
  rows *r;          /* [n] this band's output rows */
  int64_t *height;  /* [n] output rows */
} run;

static void run_free(run *u) {
  free(u->kind);
  free(u->last_rd);
  free(u->r);
  free(u->height);
}

static int64_t rows_of(const kn_graph *g, int32_t v, int32_t axis) {
  return g->values[v].type.dims[axis];
}

/* Set up u for steps [first, last]; false when they are not a run. */
static bool run_init(run *u, const kn_graph *g, int32_t first, int32_t last, int32_t bands) {
  memset(u, 0, sizeof *u);
  if (first < 0 || last >= g->n_nodes || first > last || bands < 2) return false;
  u->g = g;
  u->first = first;
  u->last = last;
  u->n = last - first + 1;
  u->bands = bands;
  u->kind = kn_calloc((size_t)u->n, sizeof *u->kind);
  u->last_rd = kn_calloc((size_t)u->n, sizeof *u->last_rd);
  u->r = kn_calloc((size_t)u->n, sizeof *u->r);
  u->height = kn_calloc((size_t)u->n, sizeof *u->height);
  if (!u->kind || !u->last_rd || !u->r || !u->height) return false;
  for (int32_t i = 0; i < u->n; i++) {
    const kn_node *n = &g->nodes[first + i];
    u->kind[i] = kind_of(g, n);
    if (u->kind[i] == PK_NONE) return false;
    int32_t y = n->outputs[0];
    const kn_type *t = &g->values[y].type;
    if (!static_value(g, y) || t->rank != 4 || t->dims[0] != 1 || g->values[y].is_output)
      return false;
    u->height[i] = t->dims[1];
    u->last_rd[i] = -1;
    for (int32_t j = 0; j < n->n_inputs; j++) {
      int32_t v = n->inputs[j];
      prole r = role_of(g, n, u->kind[i], j);
      if (r == PR_BAD) return false;
      if (r == PR_WHOLE || v < 0) continue;
      if (!static_value(g, v) || g->values[v].type.rank != 4 || g->values[v].type.dims[0] != 1)
        return false;
      int32_t p = g->values[v].producer;
      if (p >= first && p < first + i) {
        if (r == PR_ROWS_AXIS2) return false; /* rows on axis 1 inside the run */
        u->last_rd[p - first] = i;
      }
    }
  }
  if (u->height[u->n - 1] < bands) return false;
  /* everything but the last output is read inside the run, and only there */
  for (int32_t i = first; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    for (int32_t j = 0; j < n->n_inputs; j++) {
      int32_t v = n->inputs[j], p = v >= 0 ? g->values[v].producer : -1;
      if (p >= first && p < last && i > last) return false;
    }
    for (int32_t a = 0; a < n->n_attrs; a++) /* subgraphs read by name */
      if (n->attrs[a].type == KN_ATTR_GRAPH || n->attrs[a].type == KN_ATTR_GRAPHS) {
        if (i > last) return false;
      }
  }
  for (int32_t i = 0; i + 1 < u->n; i++)
    if (u->last_rd[i] < 0) return false;
  return true;
}

/* This band's rows of every step's output, walking the run backwards. */
static void run_band(run *u, int32_t k) {
  const kn_graph *g = u->g;
  int64_t h = u->height[u->n - 1];
  for (int32_t i = 0; i < u->n; i++) u->r[i] = (rows){INT64_MAX, INT64_MIN};
  u->r[u->n - 1] = (rows){h * k / u->bands, h * (k + 1) / u->bands};
  for (int32_t i = u->n - 1; i >= 0; i--) {
    const kn_node *n = &g->nodes[u->first + i];
    for (int32_t j = 0; j < n->n_inputs; j++) {
      int32_t v = n->inputs[j], p = v >= 0 ? g->values[v].producer - u->first : -1;
      if (p < 0 || p >= i) continue;
      prole r = role_of(g, n, u->kind[i], j);
      if (r == PR_WHOLE) continue;
      rows in = input_rows(g, n, r, u->r[i], rows_of(g, v, 1), NULL);
      if (in.lo < u->r[p].lo) u->r[p].lo = in.lo;
      if (in.hi > u->r[p].hi) u->r[p].hi = in.hi;
    }
  }
}

static uint64_t row_bytes(const kn_graph *g, int32_t v, int32_t axis) {
  const kn_type *t = &g->values[v].type;
  uint64_t b = kn_dtype_size(t->dtype);
  for (int32_t d = 0; d < t->rank; d++)
    if (d != axis) b *= (uint64_t)t->dims[d];
  return b;
}

bool kn_patch_estimate(const kn_graph *g, int32_t first, int32_t last, int32_t bands,
                       uint64_t *peak_bytes, double *rows_out, uint64_t *slice_bytes) {
  run u;
  bool ok = run_init(&u, g, first, last, bands);
  uint64_t *live_of = ok ? kn_calloc((size_t)u.n, sizeof *live_of) : NULL;
  *peak_bytes = 0;
  *slice_bytes = 0;
  if (!live_of) {
    run_free(&u);
    return false;
  }
  for (int32_t i = 0; rows_out && i < u.n; i++) rows_out[i] = 0;
  for (int32_t k = 0; k < bands; k++) {
    run_band(&u, k);
    uint64_t live = 0;
    for (int32_t i = 0; i < u.n; i++) {
      const kn_node *n = &g->nodes[first + i];
      uint64_t slices = 0;
      for (int32_t j = 0; j < n->n_inputs; j++) {
        int32_t v = n->inputs[j];
        prole r = role_of(g, n, u.kind[i], j);
        if (r == PR_WHOLE || v < 0) continue;
        int32_t axis = r == PR_ROWS_AXIS2 ? 2 : 1, p = g->values[v].producer - first;
        int64_t hin = rows_of(g, v, axis);
        rows in = input_rows(g, n, r, u.r[i], hin, NULL);
        rows have = p >= 0 && p < i ? u.r[p] : (rows){0, hin};
        if (in.lo != have.lo || in.hi != have.hi)
          slices += (uint64_t)(in.hi - in.lo) * row_bytes(g, v, axis);
      }
      uint64_t out = i + 1 < u.n ? (uint64_t)(u.r[i].hi - u.r[i].lo) *
                                       row_bytes(g, g->nodes[first + i].outputs[0], 1)
                                 : 0;
      live_of[i] = out;
      live += slices + out;
      if (live > *peak_bytes) *peak_bytes = live;
      *slice_bytes += slices;
      live -= slices;
      for (int32_t p = 0; p < i; p++)
        if (u.last_rd[p] == i) live -= live_of[p];
      if (rows_out)
        rows_out[i] += (double)(u.r[i].hi - u.r[i].lo) / (double)u.height[i];
    }
  }
  free(live_of);
  run_free(&u);
  return true;
}

/* A constant int64 vector of one element. */
static int32_t const_i64(kn_graph *g, const char *hint, int64_t x) {
  kn_tensor t;
  kn_error e;
  if (kn_tensor_alloc(&t, KN_DTYPE_I64, 1, (int64_t[]){1}, &e)) return -1;
  ((int64_t *)t.data)[0] = x;
  int32_t c = kn_graph_add_constant(g, hint, &t);
  kn_tensor_release(&t);
  return c;
}

/* Rows [lo, hi) of axis `axis` of value src, as a new value (-1: OOM). */
static int32_t add_slice(kn_ir_model *m, int32_t src, int32_t axis, int64_t lo, int64_t hi,
                         const char *name) {
  kn_graph *g = m->graph;
  int32_t out = kn_graph_add_fresh_value(g, name);
  if (out < 0) return -1;
  if (kn_ir_model_opset(m, "") < 10) {
    int32_t ni = kn_graph_new_node(g, "Slice", "", name, 1, &src, 1, &out);
    if (ni < 0) return -1;
    kn_node *n = &g->nodes[ni];
    int64_t a = axis;
    if (!kn_node_set_ints(n, "starts", &lo, 1) || !kn_node_set_ints(n, "ends", &hi, 1) ||
        !kn_node_set_ints(n, "axes", &a, 1))
      return -1;
    return out;
  }
  char hint[600];
  snprintf(hint, sizeof hint, "%.500s_start", name);
  int32_t s = const_i64(g, hint, lo);
  snprintf(hint, sizeof hint, "%.500s_end", name);
  int32_t e = const_i64(g, hint, hi);
  snprintf(hint, sizeof hint, "%.500s_axis", name);
  int32_t a = const_i64(g, hint, axis);
  if (s < 0 || e < 0 || a < 0) return -1;
  int32_t in[4] = {src, s, e, a};
  return kn_graph_new_node(g, "Slice", "", name, 4, in, 1, &out) < 0 ? -1 : out;
}

/* Emit band k of run u: its slices and steps; *band_out gets the value of
 * the last step's rows.  bv: [n] scratch for each step's band value. */
static kn_status emit_band(kn_ir_model *m, run *u, int32_t k, int32_t *bv, int32_t *band_out,
                           kn_error *err) {
  kn_graph *g = m->graph;
  char name[512];
  int32_t ins[8];
  for (int32_t i = 0; i < u->n; i++) {
    int32_t ni = u->first + i;
    const kn_node *src = &g->nodes[ni];
    int32_t n_in = src->n_inputs;
    KN_ASSERT(n_in <= 8 || u->kind[i] == PK_ELTWISE);
    if (n_in > 8) return kn_fail(err, KN_ERR_LIMIT, "step '%s' has too many inputs", src->name);
    win w = {0};
    bool windowed = false;
    for (int32_t j = 0; j < n_in; j++) {
      src = &g->nodes[ni];
      int32_t v = src->inputs[j];
      ins[j] = v;
      prole r = role_of(g, src, u->kind[i], j);
      if (r == PR_WHOLE || v < 0) continue;
      int32_t axis = r == PR_ROWS_AXIS2 ? 2 : 1, p = g->values[v].producer - u->first;
      int64_t hin = rows_of(g, v, axis);
      rows in = input_rows(g, src, r, u->r[i], hin, r == PR_WINDOW ? &w : NULL);
      windowed |= r == PR_WINDOW;
      bool inside = p >= 0 && p < i;
      rows have = inside ? u->r[p] : (rows){0, hin};
      int32_t from = inside ? bv[p] : v;
      if (in.lo == have.lo && in.hi == have.hi) {
        ins[j] = from;
        continue;
      }
      snprintf(name, sizeof name, "%s" BAND_TAG "%d/%d:in%d", src->name, k, u->bands, j);
      ins[j] = add_slice(m, from, axis, in.lo - have.lo, in.hi - have.lo, name);
      if (ins[j] < 0) return kn_fail(err, KN_ERR_OOM, "out of memory making bands");
    }
    src = &g->nodes[ni];
    snprintf(name, sizeof name, "%s" BAND_TAG "%d/%d", src->name, k, u->bands);
    int32_t out = kn_graph_add_fresh_value(g, name);
    int32_t bi = out >= 0 ? kn_graph_new_node(g, g->nodes[ni].op_type, g->nodes[ni].domain,
                                              name, n_in, ins, 1, &out)
                          : -1;
    if (bi < 0) return kn_fail(err, KN_ERR_OOM, "out of memory making bands");
    kn_node *b = &g->nodes[bi];
    src = &g->nodes[ni];
    if (!kn_node_copy_attrs(b, src))
      return kn_fail(err, KN_ERR_OOM, "out of memory making bands");
    b->covers = kn_strdup(src->covers ? src->covers : src->name);
    if (!b->covers) return kn_fail(err, KN_ERR_OOM, "out of memory making bands");
    if (windowed) {
      const int64_t *pd = ints_attr(src, "pads", 4);
      int64_t pads[4] = {w.pt, pd ? pd[1] : 0, w.pb, pd ? pd[3] : 0};
      if (!kn_node_set_ints(b, "pads", pads, 4))
        return kn_fail(err, KN_ERR_OOM, "out of memory making bands");
    }
    bv[i] = out;
  }
  *band_out = bv[u->n - 1];
  return KN_OK;
}

kn_status kn_patch_apply(kn_ir_model *m, int32_t first, int32_t last, int32_t bands,
                         kn_error *err) {
  kn_graph *g = m->graph;
  run u;
  int32_t *bv = NULL, *bo = NULL;
  kn_node *tmp = NULL;
  kn_status st = KN_OK;
  if (!run_init(&u, g, first, last, bands)) {
    run_free(&u);
    return kn_fail(err, KN_ERR_INTERNAL, "%s: steps %d to %d cannot run in %d bands", m->label,
                   first, last, bands);
  }
  int32_t n0 = g->n_nodes, y = g->nodes[last].outputs[0];
  int64_t want[KN_MAX_RANK];
  memcpy(want, g->values[y].type.dims, sizeof want);
  bv = kn_calloc((size_t)u.n, sizeof *bv);
  bo = kn_calloc((size_t)bands, sizeof *bo);
  int64_t *expect = kn_calloc((size_t)bands, sizeof *expect);
  if (!bv || !bo || !expect) {
    st = kn_fail(err, KN_ERR_OOM, "out of memory making bands");
    goto done;
  }
  for (int32_t k = 0; k < bands && !st; k++) {
    run_band(&u, k);
    expect[k] = u.r[u.n - 1].hi - u.r[u.n - 1].lo;
    st = emit_band(m, &u, k, bv, &bo[k], err);
  }
  if (st) goto done;
  char name[512];
  snprintf(name, sizeof name, "%s" BAND_TAG "s", g->nodes[last].name);
  int32_t ci = kn_graph_new_node(g, "Concat", "", name, bands, bo, 1, &y);
  if (ci < 0 || !kn_node_set_int(&g->nodes[ci], "axis", 1) ||
      !(g->nodes[ci].covers = kn_strdup(name))) {
    st = kn_fail(err, KN_ERR_OOM, "out of memory making bands");
    goto done;
  }
  for (int32_t i = first; i <= last; i++) g->nodes[i].dead = true;
  /* the new steps take the run's place: [0, first) [n0, end) [first, n0) */
  int32_t nn = g->n_nodes, w = 0;
  tmp = kn_malloc((size_t)nn * sizeof *tmp);
  if (!tmp) {
    st = kn_fail(err, KN_ERR_OOM, "out of memory making bands");
    goto done;
  }
  for (int32_t i = 0; i < first; i++) tmp[w++] = g->nodes[i];
  for (int32_t i = n0; i < nn; i++) tmp[w++] = g->nodes[i];
  for (int32_t i = first; i < n0; i++) tmp[w++] = g->nodes[i];
  memcpy(g->nodes, tmp, (size_t)nn * sizeof *tmp);
  st = kn_graph_compact_ordered(g, m->label, err);
  if (!st) st = kn_ops_prepare(m, err);
  if (st) goto done;
  /* the bands are the rows asked for, and their join the tensor it was */
  for (int32_t k = 0; k < bands; k++) {
    const kn_type *t = &g->values[bo[k]].type;
    if (t->rank != 4 || t->dims[1] != expect[k]) {
      st = kn_fail(err, KN_ERR_INTERNAL, "%s: band %d of '%s' has %lld rows, expected %lld",
                   m->label, k, g->values[y].name, (long long)(t->rank == 4 ? t->dims[1] : -1),
                   (long long)expect[k]);
      goto done;
    }
  }
  if (memcmp(want, g->values[y].type.dims, sizeof want))
    st = kn_fail(err, KN_ERR_INTERNAL, "%s: the bands of '%s' do not join into its shape",
                 m->label, g->values[y].name);
done:
  free(tmp);
  free(bv);
  free(bo);
  free(expect);
  run_free(&u);
  return st;
}
