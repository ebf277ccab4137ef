/* The IO model: transfers from loop nests, per-step predictions (iomodel.h). */
#include "iomodel.h"

#include "core/cpu.h"
#include "core/machine.h"
#include "core/threadpool.h"
#include "ops/op.h"
#include "ops/tactic.h"
#include "tactics/tactics.h"

#include <cjson/cJSON.h>
#include <math.h>

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

double kn_io_footprint(const kn_loopnest *l, const int64_t *tiles) {
  double f = 0;
  for (int32_t x = 0; x < l->n_tensors; x++) {
    double e = l->t[x].elem_bytes;
    for (int32_t d = 0; d < l->n_dims; d++)
      if (l->t[x].dims >> d & 1) e *= (double)tiles[d];
    f += e;
  }
  return f;
}

double kn_io_transfers(const kn_loopnest *l, const int64_t *tiles, double *per_tensor) {
  double total = 0;
  for (int32_t x = 0; x < l->n_tensors; x++) {
    const kn_loop_tensor *t = &l->t[x];
    /* innermost loop that changes t's tile: over one of its dimensions,
     * with more than one tile; -1: t is one tile, brought in once */
    int32_t inner = -1;
    for (int32_t d = 0; d < l->n_dims; d++)
      if ((t->dims >> d & 1) && ceil_div(l->extent[d], tiles[d]) > 1) inner = d;
    /* tile loads: every tile loop down to `inner` runs its trip count */
    double loads = 1, tile = t->elem_bytes, space = t->elem_bytes;
    for (int32_t d = 0; d <= inner; d++) loads *= (double)ceil_div(l->extent[d], tiles[d]);
    for (int32_t d = 0; d < l->n_dims; d++)
      if (t->dims >> d & 1) {
        tile *= (double)tiles[d];
        space *= (double)l->extent[d];
      }
    double bytes = loads * tile;
    if (t->output) {
      /* a reduction loop (one not indexing the output) outside `inner`
       * sends partial tiles out and brings them back */
      bool partial = false;
      for (int32_t d = 0; d < inner; d++)
        partial |= !(t->dims >> d & 1) && ceil_div(l->extent[d], tiles[d]) > 1;
      if (partial) {
        double first = 1; /* the first visit of each tile only writes */
        for (int32_t d = 0; d <= inner; d++)
          if (t->dims >> d & 1) first *= (double)ceil_div(l->extent[d], tiles[d]);
        bytes = loads * tile * 2 - first * tile;
      }
    }
    if (t->real_bytes > 0 && t->real_bytes < space) bytes *= t->real_bytes / space;
    if (per_tensor) per_tensor[x] = bytes;
    total += bytes;
  }
  return total;
}

/* Candidate tiles of one dimension: powers of two below the extent, and
 * the extent itself. */
static int32_t candidates(int64_t extent, int64_t *c) {
  int32_t n = 0;
  for (int64_t t = 1; t < extent && n < 40; t *= 2) c[n++] = t;
  c[n++] = extent;
  return n;
}

bool kn_io_best_tiles(const kn_loopnest *l, double capacity, uint32_t whole, int64_t *tiles,
                      double *bytes) {
  int64_t cand[KN_LOOP_MAX_DIMS][42];
  int32_t nc[KN_LOOP_MAX_DIMS], idx[KN_LOOP_MAX_DIMS] = {0};
  int64_t cur[KN_LOOP_MAX_DIMS];
  for (int32_t d = 0; d < l->n_dims; d++) {
    if (whole >> d & 1) {
      cand[d][0] = l->extent[d];
      nc[d] = 1;
    } else {
      nc[d] = candidates(l->extent[d], cand[d]);
    }
    tiles[d] = cand[d][0];
  }
  double best = INFINITY, best_fp = 0;
  for (;;) {
    for (int32_t d = 0; d < l->n_dims; d++) cur[d] = cand[d][idx[d]];
    double fp = kn_io_footprint(l, cur);
    if (fp <= capacity) {
      double b = kn_io_transfers(l, cur, NULL);
      if (b < best * (1 - 1e-12) || (b <= best * (1 + 1e-12) && fp > best_fp)) {
        best = b;
        best_fp = fp;
        memcpy(tiles, cur, (size_t)l->n_dims * sizeof *tiles);
      }
    }
    int32_t d = l->n_dims - 1; /* next combination */
    while (d >= 0 && ++idx[d] == nc[d]) idx[d--] = 0;
    if (d < 0) break;
  }
  bool fits = isfinite(best);
  if (!fits) best = kn_io_transfers(l, tiles, NULL);
  if (bytes) *bytes = best;
  return fits;
}

/* ---- per step ------------------------------------------------------------ */

const char *kn_io_bound_name(int32_t bound) {
  static const char *const names[] = {"compute", "L1", "L2", "L3", "DRAM", "overhead"};
  return bound >= 0 && bound < 6 ? names[bound] : "?";
}

/* Fixed cost of a step besides its transfers and arithmetic: the
 * executor's dispatch, and with threads the pool's hand-over and barrier
 * for the fast kernels that use it: on the machines here the steps the
 * model calls overhead-bound took 1.8 us on one thread and 4-11 us on two
 * (kiln bench --per-step, 7 models); a step that only aliases its input
 * (Reshape and the like, skipped by the executor) about 0.1 us. */
#define OVERHEAD_1T_S 1.5e-6
#define OVERHEAD_MT_S 4.0e-6
#define OVERHEAD_ALIAS_S 0.1e-6

static uint64_t value_bytes(const kn_value *v) {
  const kn_type *t = &v->type;
  if (t->kind != KN_KIND_TENSOR || t->rank < 0 || !kn_dtype_is_valid(t->dtype)) return 0;
  int64_t n = kn_shape_numel(t->rank, t->dims);
  return n < 0 ? 0 : (uint64_t)n * kn_dtype_size(t->dtype);
}

/* The level a tensor of `bytes` starts from (index into mach->levels):
 * weights from DRAM unless all the model's fit half the L3; an
 * activation from the nearest level that holds it. */
static int32_t home_level(const kn_machine *mach, double bytes, bool constant,
                          double weights_total, int32_t threads) {
  int32_t dram = mach->n_levels - 1;
  if (constant) {
    const kn_mem_level *l3 = kn_machine_level(mach, "L3");
    return l3 && weights_total <= (double)l3->bytes / 2 ? dram - 1 : dram;
  }
  for (int32_t i = 0; i < dram; i++) {
    double cap = (double)mach->levels[i].bytes;
    if (mach->levels[i].shared_by <= 1) cap *= threads; /* one per core, threads cores */
    if (bytes <= cap) return i;
  }
  return dram;
}

/* What the tiles for boundary b may hold: the nearer level, one thread's
 * share of it when shared (registers for boundary 0: 32 zmm or 16 ymm). */
static double near_capacity(const kn_machine *mach, int32_t b, int32_t threads) {
  if (b == 0) return (mach->features & KN_CPU_BIT(AVX512F)) ? 32 * 64 : 16 * 32;
  const kn_mem_level *near = &mach->levels[b - 1];
  double cap = (double)near->bytes;
  if (near->shared_by > 1) cap /= (threads < near->shared_by ? threads : near->shared_by);
  return cap;
}

static double weights_bytes(const kn_graph *g) {
  double w = 0;
  for (int32_t v = 0; v < g->n_values; v++)
    if (g->values[v].constant) w += (double)value_bytes(&g->values[v]);
  return w;
}

/* A loop nest's moves on a machine: per boundary and tensor, the bytes that
 * cross it with the tiles that fit the nearer level (none farther out than
 * where the tensor lives), each tensor's index-space and real bytes, and
 * the level it lives at. */
typedef struct nest_moves {
  int32_t nb;
  double full[KN_LOOP_MAX_TENSORS], real[KN_LOOP_MAX_TENSORS];
  int32_t home[KN_LOOP_MAX_TENSORS];
  double bytes[KN_IO_BOUNDARIES][KN_LOOP_MAX_TENSORS];
  int64_t tiles[KN_IO_BOUNDARIES][KN_LOOP_MAX_DIMS];
  uint32_t unfit; /* bit b: no tiles fit the nearer level of boundary b */
} nest_moves;

static void count_moves(const kn_loopnest *l, const kn_machine *mach, int32_t threads,
                        double wtotal, nest_moves *mv) {
  memset(mv, 0, sizeof *mv);
  mv->nb = mach->n_levels < KN_IO_BOUNDARIES ? mach->n_levels : KN_IO_BOUNDARIES;
  for (int32_t x = 0; x < l->n_tensors; x++) {
    const kn_loop_tensor *t = &l->t[x];
    double full = t->elem_bytes; /* the index space's bytes */
    for (int32_t d = 0; d < l->n_dims; d++)
      if (t->dims >> d & 1) full *= (double)l->extent[d];
    mv->full[x] = full;
    mv->real[x] = t->real_bytes > 0 && t->real_bytes < full ? t->real_bytes : full;
    mv->home[x] = home_level(mach, mv->real[x], t->constant && !t->output, wtotal, threads);
  }
  for (int32_t b = 0; b < mv->nb; b++) {
    double per[KN_LOOP_MAX_TENSORS];
    /* whole dimensions (a row epilogue's rows) are whole from the L2 out:
     * the registers and L1 see micro-tiles of them */
    uint32_t whole = b >= KN_IO_WHOLE_FROM ? l->whole : 0;
    if (!kn_io_best_tiles(l, near_capacity(mach, b, threads), whole, mv->tiles[b], NULL))
      mv->unfit |= 1u << b;
    kn_io_transfers(l, mv->tiles[b], per);
    for (int32_t x = 0; x < l->n_tensors; x++)
      if (b <= mv->home[x]) /* never farther out than where it lives */
        /* an im2col matrix's reuse across taps happens in L1 and beyond:
         * the registers see every tap (undo kn_io_transfers' scaling) */
        mv->bytes[b][x] = b == 0 ? per[x] * mv->full[x] / mv->real[x] : per[x];
  }
}

/* Time from flops and the bytes read and written across each boundary:
 * arithmetic at the peak, each boundary at the farther level's bandwidth
 * (reads and writes at their own rates), plus the overhead. */
static void finish(const kn_machine *mach, int32_t threads, double compute_scale, double factor,
                   const double *in_b, const double *out_b, double over, kn_io_step *out) {
  int32_t ti = threads > 1 ? 1 : 0;
  int32_t nb = mach->n_levels < KN_IO_BOUNDARIES ? mach->n_levels : KN_IO_BOUNDARIES;
  double peak = mach->fp32_gflops[ti] * 1e9;
  double compute = peak > 0 ? out->flops / peak * compute_scale : 0;
  out->time_s[0] = compute;
  double worst = compute;
  out->bound = 0;
  for (int32_t b = 0; b < nb; b++) {
    const kn_mem_level *far = &mach->levels[b];
    out->bytes[b] = in_b[b] + out_b[b];
    double rbw = far->read_gbs[ti] * 1e9, wbw = far->write_gbs[ti] * 1e9;
    double t = (rbw > 0 ? in_b[b] / rbw : 0) + (wbw > 0 ? out_b[b] / wbw : 0);
    out->time_s[1 + b] = t;
    if (t > worst) {
      worst = t;
      out->bound = 1 + b;
    }
  }
  out->time_s[KN_IO_BOUNDARIES + 1] = over;
  out->roofline_s = worst;
  out->threads = threads;
  out->factor = factor;
  if (over > factor * worst) out->bound = KN_IO_BOUNDARIES + 1;
  out->predicted_s = factor * worst + over;
}

int32_t kn_io_family(int32_t tactic) {
  switch (tactic) {
  case KN_TACTIC_gemm_packed:
  case KN_TACTIC_gemm:
  case KN_TACTIC_qgemm_integer:
  case KN_TACTIC_rnn_gemm: return KN_FAM_GEMM;
  case KN_TACTIC_conv_gemm:
  case KN_TACTIC_conv_igemm_nhwc:
  case KN_TACTIC_conv_transpose_gemm:
  case KN_TACTIC_conv_gemm_positions: return KN_FAM_CONV;
  case KN_TACTIC_conv_winograd:
  case KN_TACTIC_conv_winograd_nhwc:
  case KN_TACTIC_conv_winograd_f23_nhwc: return KN_FAM_WINOGRAD;
  case KN_TACTIC_conv_depthwise:
  case KN_TACTIC_conv_depthwise_nhwc:
  case KN_TACTIC_conv_expand_dw_nhwc: return KN_FAM_DEPTHWISE;
  case KN_TACTIC_attention_streamed: return KN_FAM_ATTENTION;
  case KN_TACTIC_pool:
  case KN_TACTIC_pool_nhwc: return KN_FAM_POOL;
  case KN_TACTIC_eltwise:
  case KN_TACTIC_softmax:
  case KN_TACTIC_layernorm:
  case KN_TACTIC_resize:
  case KN_TACTIC_reduce: return KN_FAM_ELTWISE;
  case KN_TACTIC_copy: return KN_FAM_COPY;
  default: return -1;
  }
}

/* A loop nest's bytes per boundary, split into reads and writes. */
static void nest_bytes(const kn_loopnest *l, const kn_machine *mach, int32_t threads,
                       double wtotal, double *in_b, double *out_b, uint32_t *unfit) {
  nest_moves mv;
  count_moves(l, mach, threads, wtotal, &mv);
  for (int32_t b = 0; b < mv.nb; b++)
    for (int32_t x = 0; x < l->n_tensors; x++) (l->t[x].output ? out_b : in_b)[b] += mv.bytes[b][x];
  *unfit = mv.unfit;
}

static double overhead_s(int32_t threads) {
  return threads > 1 ? OVERHEAD_MT_S : OVERHEAD_1T_S;
}

void kn_io_predict_nest(const kn_ir_model *m, const kn_loopnest *l, const kn_machine *mach,
                        int32_t threads, kn_io_step *out) {
  memset(out, 0, sizeof *out);
  if (threads < 1) threads = 1;
  double in_b[KN_IO_BOUNDARIES] = {0}, out_b[KN_IO_BOUNDARIES] = {0};
  out->modelled = true;
  out->flops = l->flops;
  double io = 0;
  for (int32_t x = 0; x < l->n_tensors; x++) {
    double e = l->t[x].elem_bytes;
    for (int32_t d = 0; d < l->n_dims; d++)
      if (l->t[x].dims >> d & 1) e *= (double)l->extent[d];
    io += e;
  }
  if (threads > 1 && !kn_pool_would_split(l->flops, io)) threads = 1;
  nest_bytes(l, mach, threads, weights_bytes(m->graph), in_b, out_b, &out->unfit);
  finish(mach, threads, 1.0, 1.0, in_b, out_b, overhead_s(threads), out);
}

/* Bytes per weight element a step of precision p streams. */
static uint32_t precision_weight_bytes(int32_t p) {
  switch (p) {
  case KN_PRECISION_BF16:
  case KN_PRECISION_FP16:
  case KN_PRECISION_FP16_WEIGHTS: return 2;
  case KN_PRECISION_INT8:
  case KN_PRECISION_INT8_WEIGHTS: return 1;
  default: return 4;
  }
}

/* Compute time of precision p relative to fp32 FMAs: the machine's bf16
 * and int8 dot-product peaks where it has them (the probe measures them;
 * 0 means no such instruction: the portable paths emulate at about fp32's
 * rate, a little slower for the conversions). */
static double precision_compute_scale(const kn_machine *mach, int32_t threads, int32_t p) {
  int32_t ti = threads > 1 ? 1 : 0;
  double f = mach->fp32_gflops[ti];
  if (f <= 0) return 1.0;
  switch (p) {
  case KN_PRECISION_BF16: return mach->bf16_gflops[ti] > 0 ? f / mach->bf16_gflops[ti] : 1.2;
  case KN_PRECISION_INT8: return mach->int8_gops[ti] > 0 ? f / mach->int8_gops[ti] : 1.2;
  case KN_PRECISION_FP16:
  case KN_PRECISION_FP16_WEIGHTS:
  case KN_PRECISION_INT8_WEIGHTS: return 1.05;
  default: return 1.0;
  }
}

/* Node n's loop nest: its tactics' `loops` hook; false when it has none. */
static bool node_loops(const kn_graph *g, const kn_node *n, kn_loopnest *l) {
  const kn_op_tactics *tt = kn_tactics_of(n);
  return tt && tt->loops && tt->loops(g, n, l);
}

void kn_io_predict(const kn_ir_model *m, int32_t i, const kn_machine *mach, int32_t threads,
                   kn_io_step *out) {
  const kn_graph *g = m->graph;
  const kn_node *n = &g->nodes[i];
  memset(out, 0, sizeof *out);
  if (threads < 1) threads = 1;
  uint64_t rd, wr;
  kn_ops_node_cost(m, i, &out->flops, &rd, &wr);
  /* a step too small to hand over runs on one thread (kn_pool_worth) */
  if (threads > 1 && !(n->tactic && kn_pool_would_split(out->flops, (double)(rd + wr))))
    threads = 1;
  double wtotal = weights_bytes(g);
  int32_t nb = mach->n_levels < KN_IO_BOUNDARIES ? mach->n_levels : KN_IO_BOUNDARIES;
  /* bytes crossing each boundary, split into reads and writes */
  double in_b[KN_IO_BOUNDARIES] = {0}, out_b[KN_IO_BOUNDARIES] = {0};
  kn_loopnest l;
  memset(&l, 0, sizeof l);
  if (node_loops(g, n, &l) && l.n_tensors > 0) {
    out->modelled = true;
    out->flops = l.flops;
    /* reduced precision: the weights are stored smaller (activations stay
     * fp32 in memory; they are converted as the kernel packs them) */
    uint32_t wb = precision_weight_bytes(n->precision);
    for (int32_t t = 0; t < l.n_tensors; t++)
      if (l.t[t].constant && l.t[t].elem_bytes == 4) {
        if (l.t[t].real_bytes > 0) l.t[t].real_bytes *= wb / 4.0;
        l.t[t].elem_bytes = wb;
      }
    nest_bytes(&l, mach, threads, wtotal, in_b, out_b, &out->unfit);
  } else if (n->op && n->op->inplace == KN_INPLACE_ALIAS) {
    /* Reshape and the like: planned over their input, the executor skips
     * them; nothing moves */
  } else {
    /* streamed: each tensor crosses every boundary nearer than its home once */
    for (int32_t k = 0; k < n->n_inputs; k++) {
      if (n->inputs[k] < 0) continue;
      const kn_value *v = &g->values[n->inputs[k]];
      double bytes = (double)value_bytes(v);
      /* a graph input comes from the caller's buffer: from memory */
      int32_t home = v->is_input && !v->constant
                         ? mach->n_levels - 1
                         : home_level(mach, bytes, v->constant != NULL, wtotal, threads);
      for (int32_t b = 0; b < nb && b <= home; b++) in_b[b] += bytes;
    }
    for (int32_t o = 0; o < n->n_outputs; o++) {
      if (n->outputs[o] < 0) continue;
      double bytes = (double)value_bytes(&g->values[n->outputs[o]]);
      int32_t home = home_level(mach, bytes, false, wtotal, threads);
      for (int32_t b = 0; b < nb && b <= home; b++) out_b[b] += bytes;
    }
  }
  /* F(4,3) Winograd: a quarter of the products, plus the transforms;
   * F(2,3): 4/9 of them, plus its (cheaper) transforms */
  double scale = n->tactic == KN_TACTIC_conv_winograd || n->tactic == KN_TACTIC_conv_winograd_nhwc
                     ? 0.4
                 : n->tactic == KN_TACTIC_conv_winograd_f23_nhwc ? 0.55
                                                                 : 1.0;
  /* MatMulInteger on the int8 GEMM computes at the int8 rate whatever the
   * step's precision label */
  scale *= precision_compute_scale(
      mach, threads, n->tactic == KN_TACTIC_qgemm_integer ? KN_PRECISION_INT8 : n->precision);
  bool alias = n->op && n->op->inplace == KN_INPLACE_ALIAS;
  double over = alias ? OVERHEAD_ALIAS_S : overhead_s(threads);
  /* the family's fitted factor; an aliasing step moves nothing */
  double factor = alias ? 1.0 : kn_machine_factor(mach, kn_io_family(n->tactic), threads);
  finish(mach, threads, scale, factor, in_b, out_b, over, out);
}

/* ---- diagrams ------------------------------------------------------------- */

static const char *near_name(const kn_machine *mach, int32_t b) {
  return b == 0 ? "registers" : mach->levels[b - 1].name;
}

/* The boundaries' byte totals as {"L1": .., "L2": .., ...}, keyed by the
 * farther level. */
static cJSON *bytes_object(const kn_machine *mach, const double *bytes, int32_t nb) {
  cJSON *o = cJSON_CreateObject();
  for (int32_t b = 0; o && b < nb; b++) cJSON_AddNumberToObject(o, mach->levels[b].name, bytes[b]);
  return o;
}

char *kn_io_diagram_json(const kn_ir_model *m, int32_t i, const kn_machine *mach,
                         int32_t threads) {
  const kn_graph *g = m->graph;
  const kn_node *n = &g->nodes[i];
  kn_loopnest l;
  memset(&l, 0, sizeof l);
  if (!node_loops(g, n, &l) || !l.n_tensors) return NULL;
  if (threads < 1) threads = 1;
  double wtotal = weights_bytes(g);
  int32_t nb = mach->n_levels < KN_IO_BOUNDARIES ? mach->n_levels : KN_IO_BOUNDARIES;
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  /* the ONNX ops the step covers, in order */
  cJSON *ops = cJSON_AddArrayToObject(root, "ops");
  const char *cv = n->covers ? n->covers : n->name;
  int32_t n_ops = 0;
  for (const char *p = cv; ops && *p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    char *name = kn_strndup(p, len);
    if (name) cJSON_AddItemToArray(ops, cJSON_CreateString(name));
    free(name);
    n_ops++;
    p += len + (comma != NULL);
  }
  cJSON *axes = cJSON_AddObjectToObject(root, "axes");
  for (int32_t d = 0; axes && d < l.n_dims; d++)
    cJSON_AddNumberToObject(axes, l.dim_name[d], (double)l.extent[d]);
  cJSON *tensors = cJSON_AddArrayToObject(root, "tensors");
  nest_moves mv;
  count_moves(&l, mach, threads, wtotal, &mv);
  int32_t out_x = -1;
  for (int32_t x = 0; x < l.n_tensors; x++) {
    const kn_loop_tensor *t = &l.t[x];
    if (t->output && out_x < 0) out_x = x;
    cJSON *o = cJSON_CreateObject(), *ax = o ? cJSON_AddArrayToObject(o, "axes") : NULL;
    if (!o) continue;
    for (int32_t d = 0; ax && d < l.n_dims; d++)
      if (t->dims >> d & 1) cJSON_AddItemToArray(ax, cJSON_CreateString(l.dim_name[d]));
    cJSON_AddStringToObject(o, "name", t->name);
    cJSON_AddNumberToObject(o, "bytes", mv.real[x]);
    cJSON_AddStringToObject(o, "level", mach->levels[mv.home[x]].name);
    cJSON_AddStringToObject(o, "role", t->output ? "output" : t->constant ? "weights" : "input");
    cJSON_AddItemToArray(tensors, o);
  }
  /* the fused step: each tensor's moves across each boundary, with the
   * tiles that fit the nearer level */
  cJSON *fused = cJSON_AddObjectToObject(root, "fused");
  cJSON *moves = fused ? cJSON_AddArrayToObject(fused, "transfers") : NULL;
  double fb[KN_IO_BOUNDARIES] = {0}, ub[KN_IO_BOUNDARIES] = {0};
  for (int32_t b = 0; b < nb; b++)
    for (int32_t x = 0; x < l.n_tensors; x++) {
      if (b > mv.home[x]) continue;
      double bytes = mv.bytes[b][x];
      fb[b] += bytes;
      cJSON *o = moves ? cJSON_CreateObject() : NULL;
      if (!o) continue;
      cJSON_AddStringToObject(o, "tensor", l.t[x].name);
      cJSON_AddStringToObject(o, l.t[x].output ? "to" : "from", mach->levels[b].name);
      cJSON_AddStringToObject(o, l.t[x].output ? "from" : "to", near_name(mach, b));
      cJSON_AddNumberToObject(o, "bytes", bytes);
      cJSON_AddNumberToObject(o, "repetitions", bytes / (b == 0 ? mv.full[x] : mv.real[x]));
      cJSON *tl = cJSON_AddObjectToObject(o, "tile");
      for (int32_t d = 0; tl && d < l.n_dims; d++)
        if (l.t[x].dims >> d & 1) cJSON_AddNumberToObject(tl, l.dim_name[d], (double)mv.tiles[b][d]);
      cJSON_AddItemToArray(moves, o);
    }
  if (fused) cJSON_AddItemToObject(fused, "bytes", bytes_object(mach, fb, nb));
  /* unfused: every op the step absorbed after the first (bias,
   * activation, residual add) reads the output back and writes it again
   * at the level where it lives */
  cJSON *unf = cJSON_AddObjectToObject(root, "unfused");
  cJSON *umoves = unf ? cJSON_AddArrayToObject(unf, "transfers") : NULL;
  for (int32_t b = 0; b < nb; b++) ub[b] = fb[b];
  if (out_x >= 0 && n_ops > 1)
    for (int32_t b = 0; b < nb && b <= mv.home[out_x]; b++) {
      double extra = 2.0 * mv.real[out_x] * (double)(n_ops - 1);
      ub[b] += extra;
      cJSON *o = umoves ? cJSON_CreateObject() : NULL;
      if (!o) continue;
      cJSON_AddStringToObject(o, "tensor", l.t[out_x].name);
      cJSON_AddStringToObject(o, "between", mach->levels[b].name);
      cJSON_AddStringToObject(o, "and", near_name(mach, b));
      cJSON_AddNumberToObject(o, "bytes", extra);
      cJSON_AddNumberToObject(o, "repetitions", 2.0 * (double)(n_ops - 1));
      cJSON_AddStringToObject(o, "why", "each later op reads the output and writes it back");
      cJSON_AddItemToArray(umoves, o);
    }
  if (unf) cJSON_AddItemToObject(unf, "bytes", bytes_object(mach, ub, nb));
  double saving[KN_IO_BOUNDARIES];
  for (int32_t b = 0; b < nb; b++) saving[b] = ub[b] - fb[b];
  cJSON_AddItemToObject(root, "fusion_saves_bytes", bytes_object(mach, saving, nb));
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!text) return NULL;
  char *out = strdup(text);
  cJSON_free(text);
  return out;
}

bool kn_io_fusion_saving(const kn_ir_model *m, int32_t i, const kn_machine *mach, int32_t threads,
                         double *bytes, double *seconds, int32_t *n_ops, int32_t *farthest) {
  const kn_graph *g = m->graph;
  const kn_node *n = &g->nodes[i];
  *bytes = *seconds = 0;
  *n_ops = 1;
  *farthest = -1;
  for (const char *p = n->covers; p && *p; p++) *n_ops += *p == ',';
  if (!n->covers || *n_ops < 2 || n->n_outputs < 1 || n->outputs[0] < 0) return false;
  double out = (double)value_bytes(&g->values[n->outputs[0]]);
  if (out <= 0) return false;
  if (threads < 1) threads = 1;
  int32_t ti = threads > 1 ? 1 : 0;
  int32_t home = home_level(mach, out, false, weights_bytes(g), threads);
  int32_t nb = mach->n_levels < KN_IO_BOUNDARIES ? mach->n_levels : KN_IO_BOUNDARIES;
  /* each op after the first, unfused, reads the output and writes it
   * back across every boundary up to where it lives: at its slowest */
  double worst = 0;
  for (int32_t b = 0; b < nb && b <= home; b++) {
    const kn_mem_level *far = &mach->levels[b];
    double rbw = far->read_gbs[ti] * 1e9, wbw = far->write_gbs[ti] * 1e9;
    double t = (rbw > 0 ? out / rbw : 0) + (wbw > 0 ? out / wbw : 0);
    if (t > worst) worst = t;
    *farthest = b;
  }
  double k = (double)(*n_ops - 1);
  *bytes = 2.0 * out * k;
  *seconds = k * (worst + overhead_s(threads));
  return true;
}
