/* Tactics of the data movement family (src/ops/movement.c): Transpose,
 * Concat, Split and Slice on the blocked copy kernels (kernels/copy) for
 * every dtype of 1, 2, 4 or 8 bytes (not strings). */
#include "tactics.h"

#include "kernels/copy/copy.h"
#include "ops/movement.h"

/* Element sizes the copy kernels move (every dtype but strings). */
static bool copy_dtype_ok(kn_dtype dt) {
  if (!kn_dtype_is_valid(dt) || dt == KN_DTYPE_STRING || dt == KN_DTYPE_UNDEFINED) return false;
  size_t es = kn_dtype_size(dt);
  return es == 1 || es == 2 || es == 4 || es == 8;
}

/* The copy tactic for nodes whose data input (0) has a dtype it moves. */
static int32_t copy_select(const kn_graph *g, const kn_node *n, int32_t isa) {
  (void)isa;
  if (n->n_inputs < 1 || n->inputs[0] < 0) return 0;
  return copy_dtype_ok(g->values[n->inputs[0]].type.dtype) ? KN_TACTIC_copy : 0;
}

/* Whether this run takes tensors of dtype dt (else: the reference). */
static bool use_copy(const kn_op_ctx *ctx, kn_dtype dt) {
  return ctx->node->tactic == KN_TACTIC_copy && copy_dtype_ok(dt);
}

static kn_status transpose_fast(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  if (!use_copy(ctx, x->dtype)) return ctx->node->op->run(ctx);
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  int64_t s[KN_MAX_RANK];
  kn_status st = kn_transpose_strides(ctx, x, s);
  if (st) return st;
  kn_copy_strided(ctx->rt->isa, ctx->rt->pool, kn_dtype_size(x->dtype), o->data, x->data,
                  o->rank, o->dims, s, 0);
  return KN_OK;
}

static kn_status concat_fast(kn_op_ctx *ctx) {
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  if (!use_copy(ctx, o->dtype)) return ctx->node->op->run(ctx);
  int32_t axis;
  kn_status st = kn_axis(ctx, kn_attr_int(ctx, "axis", 1), o->rank, &axis);
  if (st) return st;
  int64_t outer = kn_shape_numel(axis, o->dims);
  int64_t inner = kn_shape_numel(o->rank - axis - 1, o->dims + axis + 1);
  int64_t orow = o->dims[axis] * inner, at = 0;
  size_t es = kn_dtype_size(o->dtype);
  for (int32_t i = 0; i < ctx->n_in; i++) {
    const kn_tensor *t = kn_in(ctx, i);
    if (!t) continue;
    int64_t row = t->dims[axis] * inner;
    char *dst = (char *)o->data + (size_t)at * es;
    /* the memory planner made this input in place (a part of o) */
    if (outer != 1 || dst != t->data)
      kn_copy_rows(ctx->rt->pool, dst, orow * (int64_t)es, t->data, row * (int64_t)es, outer,
                   row * (int64_t)es);
    at += row;
  }
  return KN_OK;
}

static kn_status split_fast(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  if (!use_copy(ctx, x->dtype)) return ctx->node->op->run(ctx);
  int32_t axis;
  int64_t *sizes;
  kn_status st = kn_split_parts(ctx, x, &axis, &sizes);
  if (st) return st;
  int64_t xs[KN_MAX_RANK], start = 0;
  kn_strides(x->rank, x->dims, xs);
  for (int32_t i = 0; i < ctx->n_out; i++) {
    kn_tensor *o = kn_out_ready(ctx, i);
    if (!o) {
      st = KN_ERR_INTERNAL;
      break;
    }
    kn_copy_strided(ctx->rt->isa, ctx->rt->pool, kn_dtype_size(x->dtype), o->data, x->data,
                    o->rank, o->dims, xs, start * xs[axis]);
    start += sizes[i];
  }
  free(sizes);
  return st;
}

/* Pad of any rank, mode and fixed-size dtype: per output row the padded
 * edges from the plan's maps and the interior (the row's input elements in
 * order) as one memcpy, instead of the reference's per-element gather. */
static kn_status pad_fast(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  if (!use_copy(ctx, x->dtype) || x->rank < 1) return ctx->node->op->run(ctx);
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  if (kn_tensor_numel(o) == 0) return KN_OK;
  kn_pad_plan pp;
  kn_status st = kn_pad_plan_make(ctx, x, o, &pp);
  if (st) return st;
  int32_t r = x->rank;
  size_t es = kn_dtype_size(x->dtype);
  int64_t inner = o->dims[r - 1], outer = kn_tensor_numel(o) / inner, idx[KN_MAX_RANK] = {0};
  const int64_t *last = pp.maps[r - 1];
  const unsigned char *src = x->data;
  unsigned char *dst = o->data;
  for (int64_t q = 0; q < outer; q++) {
    int64_t base = 0;
    bool pad_row = false;
    for (int32_t k = 0; k < r - 1; k++) {
      int64_t m = pp.maps[k][idx[k]];
      pad_row |= m < 0;
      base += m;
    }
    unsigned char *d = dst + (size_t)(q * inner) * es;
    for (int64_t j = 0; j < inner;) {
      if (!pad_row && j == pp.run_out && pp.run_len > 0) {
        memcpy(d + (size_t)j * es, src + (size_t)(base + pp.run_in) * es, (size_t)pp.run_len * es);
        j += pp.run_len;
        continue;
      }
      const unsigned char *v = pad_row || last[j] < 0 ? pp.fill : src + (size_t)(base + last[j]) * es;
      memcpy(d + (size_t)j * es, v, es);
      j++;
    }
    for (int32_t k = r - 2; k >= 0; k--) {
      if (++idx[k] < o->dims[k]) break;
      idx[k] = 0;
    }
  }
  kn_pad_plan_free(&pp);
  return KN_OK;
}

static kn_status slice_fast(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  if (!use_copy(ctx, x->dtype)) return ctx->node->op->run(ctx);
  kn_tensor *o = kn_out_ready(ctx, 0);
  if (!o) return KN_ERR_INTERNAL;
  int64_t s[KN_MAX_RANK], off;
  kn_status st = kn_slice_view(ctx, x, s, &off);
  if (st) return st;
  kn_copy_strided(ctx->rt->isa, ctx->rt->pool, kn_dtype_size(x->dtype), o->data, x->data,
                  o->rank, o->dims, s, off);
  return KN_OK;
}

const kn_op_tactics kn_tactics_movement[] = {
    {NULL, "Transpose", .select = copy_select, .run = transpose_fast},
    {NULL, "Concat", .select = copy_select, .run = concat_fast},
    {NULL, "Split", .select = copy_select, .run = split_fast},
    {NULL, "Slice", .select = copy_select, .run = slice_fast},
    {NULL, "Pad", .select = copy_select, .run = pad_fast},
    KN_TACTICS_END,
};
