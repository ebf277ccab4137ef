/*
 * Sequences and optionals: SequenceEmpty, SequenceConstruct, SequenceAt,
 * SequenceInsert, SequenceErase, SequenceLength, SplitToSequence,
 * ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement.
 *
 * A sequence value is a slot of kind KN_KIND_SEQUENCE that owns its items;
 * an empty Optional is a slot of kind KN_KIND_NONE.  During static
 * inference sequence slots carry only the element dtype (element shapes are
 * unknown) and a NONE slot may also mean "not known yet", so these ops only
 * declare output kinds and dtypes there.  At run time `infer` sizes tensor
 * outputs whose shape follows from the inputs and `run` builds sequence
 * outputs (releasing the output slot first).
 */
#include "op.h"

/* Input i as a sequence, NULL when absent or not a sequence. */
static const kn_seq *seq_in(const kn_op_ctx *ctx, int32_t i) {
  if (i >= ctx->n_in || !ctx->in[i] || ctx->in[i]->kind != KN_KIND_SEQUENCE)
    return NULL;
  return &ctx->in[i]->seq;
}

static kn_status seq_req(kn_op_ctx *ctx, int32_t i, const kn_seq **out) {
  *out = seq_in(ctx, i);
  if (*out) return KN_OK;
  if (ctx->static_infer && i < ctx->n_in && ctx->in[i] &&
      ctx->in[i]->kind == KN_KIND_NONE)
    return KN_OK; /* not known yet */
  return kn_op_fail(ctx, KN_ERR_DTYPE, "input %d must be a sequence of tensors", (int)i);
}

/* Declare output i as a sequence of `dtype` (0: unknown). */
static void out_seq_decl(kn_op_ctx *ctx, int32_t i, kn_dtype dtype) {
  if (i >= ctx->n_out) return;
  kn_slot *s = ctx->out[i];
  if (ctx->static_infer || s->kind != KN_KIND_SEQUENCE || s->seq.count == 0) {
    s->kind = KN_KIND_SEQUENCE;
    s->seq.elem_dtype = dtype;
  }
}

/* Release output i and make it an empty sequence of `dtype`. */
static kn_slot *out_seq_begin(kn_op_ctx *ctx, int32_t i, kn_dtype dtype) {
  kn_slot *s = ctx->out[i];
  kn_slot_release(s);
  s->kind = KN_KIND_SEQUENCE;
  s->seq.elem_dtype = dtype;
  return s;
}

/* Read a scalar (or one-element) int32/int64 position input. */
static kn_status read_position(kn_op_ctx *ctx, int32_t i, int64_t *pos) {
  const kn_tensor *t = kn_in(ctx, i);
  if (!t) return kn_op_fail(ctx, KN_ERR_MISSING, "position input %d is missing", (int)i);
  if (t->dtype != KN_DTYPE_I32 && t->dtype != KN_DTYPE_I64)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "position must be int32 or int64, got %s",
                      kn_dtype_name(t->dtype));
  if (kn_tensor_numel(t) != 1 || t->rank > 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "position must be a scalar");
  *pos = kn_scalar_i64(t);
  return KN_OK;
}

static kn_status check_position_dtype(kn_op_ctx *ctx, int32_t i) {
  const kn_tensor *t = kn_in(ctx, i);
  if (t && t->dtype && t->dtype != KN_DTYPE_I32 && t->dtype != KN_DTYPE_I64)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "position must be int32 or int64, got %s",
                      kn_dtype_name(t->dtype));
  if (t && t->rank > 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "position must be a scalar, got rank %d",
                      (int)t->rank);
  return KN_OK;
}

/* ---- SequenceEmpty ------------------------------------------------------- */

static kn_status seq_empty_dtype(kn_op_ctx *ctx, kn_dtype *dt) {
  int64_t d = kn_attr_int(ctx, "dtype", KN_DTYPE_F32);
  if (!kn_dtype_is_valid((int32_t)d) || d != (int32_t)d)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "dtype %lld is not a supported element type",
                      (long long)d);
  *dt = (kn_dtype)d;
  return KN_OK;
}

static kn_status seq_empty_infer(kn_op_ctx *ctx) {
  kn_dtype dt = KN_DTYPE_UNDEFINED;
  kn_status st = seq_empty_dtype(ctx, &dt);
  if (st) return st;
  out_seq_decl(ctx, 0, dt);
  return KN_OK;
}

static kn_status seq_empty_run(kn_op_ctx *ctx) {
  kn_dtype dt = KN_DTYPE_UNDEFINED;
  kn_status st = seq_empty_dtype(ctx, &dt);
  if (st) return st;
  out_seq_begin(ctx, 0, dt);
  return KN_OK;
}

/* ---- SequenceConstruct --------------------------------------------------- */

static kn_status seq_construct_infer(kn_op_ctx *ctx) {
  kn_dtype dt = 0;
  for (int32_t i = 0; i < ctx->n_in; i++) {
    const kn_tensor *t = kn_in(ctx, i);
    if (!t) {
      if (ctx->static_infer && ctx->in[i] && ctx->in[i]->kind == KN_KIND_NONE) continue;
      return kn_op_fail(ctx, KN_ERR_DTYPE, "input %d must be a tensor", (int)i);
    }
    if (!t->dtype) continue;
    if (dt && t->dtype != dt)
      return kn_op_fail(ctx, KN_ERR_DTYPE,
                        "input %d has dtype %s, expected %s like the other inputs",
                        (int)i, kn_dtype_name(t->dtype), kn_dtype_name(dt));
    dt = t->dtype;
  }
  out_seq_decl(ctx, 0, dt);
  return KN_OK;
}

static kn_status seq_construct_run(kn_op_ctx *ctx) {
  kn_status st = seq_construct_infer(ctx);
  if (st) return st;
  const kn_tensor *t0 = kn_in(ctx, 0);
  kn_slot *o = out_seq_begin(ctx, 0, t0 ? t0->dtype : 0);
  for (int32_t i = 0; i < ctx->n_in; i++)
    if ((st = kn_seq_insert(&o->seq, -1, kn_in(ctx, i), ctx->err))) return st;
  return KN_OK;
}

/* ---- SequenceAt ---------------------------------------------------------- */

/* Resolve a position against count: valid in [-count, count + extra). */
static kn_status norm_position(kn_op_ctx *ctx, int64_t pos, int32_t count,
                               int32_t extra, int32_t *out) {
  int64_t p = pos < 0 ? pos + count : pos;
  if (pos < -(int64_t)count || p >= (int64_t)count + extra)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                      "position %lld is out of range for a sequence of %d tensors",
                      (long long)pos, (int)count);
  *out = (int32_t)p;
  return KN_OK;
}

static kn_status seq_at_infer(kn_op_ctx *ctx) {
  const kn_seq *s;
  kn_status st = seq_req(ctx, 0, &s);
  if (st || (st = check_position_dtype(ctx, 1))) return st;
  if (!s || ctx->static_infer) {
    kn_out_set(ctx, 0, s ? s->elem_dtype : 0, -1, NULL);
    return KN_OK;
  }
  int64_t pos;
  int32_t p = 0;
  if ((st = read_position(ctx, 1, &pos))) return st;
  if ((st = norm_position(ctx, pos, s->count, 0, &p))) return st;
  const kn_tensor *t = &s->items[p];
  kn_out_set(ctx, 0, t->dtype, t->rank, t->dims);
  return KN_OK;
}

static kn_status seq_at_run(kn_op_ctx *ctx) {
  const kn_seq *s;
  kn_status st = seq_req(ctx, 0, &s);
  if (st) return st;
  int64_t pos;
  int32_t p = 0;
  if ((st = read_position(ctx, 1, &pos))) return st;
  if ((st = norm_position(ctx, pos, s->count, 0, &p))) return st;
  kn_slot *o = ctx->out[0];
  kn_slot_release(o);
  o->kind = KN_KIND_TENSOR;
  return kn_tensor_copy(&o->t, &s->items[p], ctx->err);
}

/* ---- SequenceInsert / SequenceErase -------------------------------------- */

static kn_status seq_insert_infer(kn_op_ctx *ctx) {
  const kn_seq *s;
  kn_status st = seq_req(ctx, 0, &s);
  if (st || (st = check_position_dtype(ctx, 2))) return st;
  const kn_tensor *t = kn_in(ctx, 1);
  if (!t && !(ctx->static_infer && ctx->in[1] && ctx->in[1]->kind == KN_KIND_NONE))
    return kn_op_fail(ctx, KN_ERR_DTYPE, "input 1 must be a tensor");
  kn_dtype dt = s ? s->elem_dtype : 0;
  if (t && t->dtype) {
    if (dt && t->dtype != dt)
      return kn_op_fail(ctx, KN_ERR_DTYPE,
                        "cannot insert a %s tensor into a sequence of %s",
                        kn_dtype_name(t->dtype), kn_dtype_name(dt));
    dt = t->dtype;
  }
  out_seq_decl(ctx, 0, dt);
  return KN_OK;
}

static kn_status seq_insert_run(kn_op_ctx *ctx) {
  kn_status st = seq_insert_infer(ctx);
  if (st) return st;
  const kn_seq *s = seq_in(ctx, 0);
  const kn_tensor *t = kn_in(ctx, 1);
  int32_t p = s->count;
  if (kn_in(ctx, 2)) {
    int64_t pos;
    if ((st = read_position(ctx, 2, &pos))) return st;
    if ((st = norm_position(ctx, pos, s->count, 1, &p))) return st;
  }
  kn_slot tmp = {0};
  tmp.kind = KN_KIND_SEQUENCE;
  tmp.seq.elem_dtype = s->elem_dtype ? s->elem_dtype : t->dtype;
  for (int32_t i = 0; i <= s->count; i++) {
    const kn_tensor *item = i == p ? t : &s->items[i < p ? i : i - 1];
    if ((st = kn_seq_insert(&tmp.seq, -1, item, ctx->err))) {
      kn_slot_release(&tmp);
      return st;
    }
  }
  kn_slot_release(ctx->out[0]);
  *ctx->out[0] = tmp;
  return KN_OK;
}

static kn_status seq_erase_infer(kn_op_ctx *ctx) {
  const kn_seq *s;
  kn_status st = seq_req(ctx, 0, &s);
  if (st || (st = check_position_dtype(ctx, 1))) return st;
  out_seq_decl(ctx, 0, s ? s->elem_dtype : 0);
  return KN_OK;
}

static kn_status seq_erase_run(kn_op_ctx *ctx) {
  const kn_seq *s;
  kn_status st = seq_req(ctx, 0, &s);
  if (st) return st;
  if (s->count == 0)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "cannot erase from an empty sequence");
  int32_t p = s->count - 1;
  if (kn_in(ctx, 1)) {
    int64_t pos;
    if ((st = read_position(ctx, 1, &pos))) return st;
    if ((st = norm_position(ctx, pos, s->count, 0, &p))) return st;
  }
  kn_slot tmp = {0};
  tmp.kind = KN_KIND_SEQUENCE;
  tmp.seq.elem_dtype = s->elem_dtype;
  for (int32_t i = 0; i < s->count; i++) {
    if (i == p) continue;
    if ((st = kn_seq_insert(&tmp.seq, -1, &s->items[i], ctx->err))) {
      kn_slot_release(&tmp);
      return st;
    }
  }
  kn_slot_release(ctx->out[0]);
  *ctx->out[0] = tmp;
  return KN_OK;
}

/* ---- SequenceLength ------------------------------------------------------ */

static kn_status seq_length_infer(kn_op_ctx *ctx) {
  const kn_seq *s;
  kn_status st = seq_req(ctx, 0, &s);
  if (st) return st;
  kn_out_set(ctx, 0, KN_DTYPE_I64, 0, NULL);
  return KN_OK;
}

static kn_status seq_length_run(kn_op_ctx *ctx) {
  const kn_seq *s;
  kn_status st = seq_req(ctx, 0, &s);
  if (st) return st;
  kn_tensor *o = kn_out(ctx, 0);
  if (!o->data && (st = kn_out_alloc(ctx, 0, KN_DTYPE_I64, 0, NULL))) return st;
  o = kn_out(ctx, 0);
  *(int64_t *)o->data = s->count;
  return KN_OK;
}

/* ---- copying slabs ------------------------------------------------------- */

/* Copy `len` slices along an axis: for each of `outer` blocks, src holds
 * src_axis slices of `inner` elements and dst holds dst_axis slices; copy
 * slices [src_off, src_off+len) into [dst_off, dst_off+len).  Strings are
 * duplicated. */
static kn_status copy_slab(kn_op_ctx *ctx, kn_tensor *dst, const kn_tensor *src,
                           int64_t outer, int64_t inner, int64_t src_axis,
                           int64_t src_off, int64_t dst_axis, int64_t dst_off,
                           int64_t len) {
  int64_t chunk = len * inner;
  for (int64_t o = 0; o < outer; o++) {
    int64_t si = (o * src_axis + src_off) * inner;
    int64_t di = (o * dst_axis + dst_off) * inner;
    kn_status st = kn_copy_elems(ctx, dst->data, di, src->data, si, chunk, src->dtype);
    if (st) return st;
  }
  return KN_OK;
}

/* ---- SplitToSequence ----------------------------------------------------- */

typedef struct {
  int32_t axis;
  bool keepdims;
  int64_t n;      /* number of pieces */
  int64_t *sizes; /* n sizes (owned), NULL in static inference */
} split_plan;

static kn_status split_plan_make(kn_op_ctx *ctx, split_plan *sp) {
  memset(sp, 0, sizeof *sp);
  const kn_tensor *x = kn_in(ctx, 0);
  if (!x) {
    if (ctx->static_infer) return KN_OK;
    return kn_op_fail(ctx, KN_ERR_DTYPE, "input 0 must be a tensor");
  }
  const kn_tensor *split = kn_in(ctx, 1);
  if (split && split->dtype && split->dtype != KN_DTYPE_I32 && split->dtype != KN_DTYPE_I64)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "split must be int32 or int64, got %s",
                      kn_dtype_name(split->dtype));
  if (split && split->rank > 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "split must be a scalar or 1-D, got rank %d",
                      (int)split->rank);
  int64_t keep = kn_attr_int(ctx, "keepdims", 1);
  sp->keepdims = keep != 0;
  if (x->rank < 0) return KN_OK;
  if (x->rank == 0)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input must have rank >= 1 to be split");
  kn_status st = kn_axis(ctx, kn_attr_int(ctx, "axis", 0), x->rank, &sp->axis);
  if (st) return st;
  int64_t dim = x->dims[sp->axis];
  if (dim < 0 || (split && !kn_has_data(split))) return KN_OK;
  if (!split) {
    sp->n = dim;
  } else if (split->rank == 0) {
    int64_t c = kn_scalar_i64(split);
    if (c <= 0)
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "split size %lld must be positive",
                        (long long)c);
    sp->n = dim / c + (dim % c ? 1 : 0);
    sp->keepdims = true;
  } else {
    sp->n = split->dims[0];
    sp->keepdims = true;
  }
  sp->sizes = kn_malloc((size_t)(sp->n ? sp->n : 1) * sizeof *sp->sizes);
  if (!sp->sizes) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
  if (!split) {
    for (int64_t i = 0; i < sp->n; i++) sp->sizes[i] = 1;
  } else if (split->rank == 0) {
    int64_t c = kn_scalar_i64(split);
    for (int64_t i = 0; i < sp->n; i++)
      sp->sizes[i] = (i + 1) * c <= dim ? c : dim - i * c;
  } else {
    int64_t sum = 0;
    for (int64_t i = 0; i < sp->n; i++) {
      int64_t v = kn_load_i64(split->data, split->dtype, i);
      if (v < 0 || v > dim) {
        free(sp->sizes);
        sp->sizes = NULL;
        return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "split[%lld] = %lld is outside 0..%lld",
                          (long long)i, (long long)v, (long long)dim);
      }
      sp->sizes[i] = v;
      sum += v;
    }
    if (sum != dim) {
      free(sp->sizes);
      sp->sizes = NULL;
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "split sizes sum to %lld, expected the axis length %lld",
                        (long long)sum, (long long)dim);
    }
  }
  return KN_OK;
}

static kn_status split_to_seq_infer(kn_op_ctx *ctx) {
  split_plan sp;
  kn_status st = split_plan_make(ctx, &sp);
  if (st) return st;
  free(sp.sizes);
  const kn_tensor *x = kn_in(ctx, 0);
  out_seq_decl(ctx, 0, x ? x->dtype : 0);
  return KN_OK;
}

static kn_status split_to_seq_run(kn_op_ctx *ctx) {
  split_plan sp;
  kn_status st = split_plan_make(ctx, &sp);
  if (st) return st;
  const kn_tensor *x = kn_in(ctx, 0);
  if (!sp.sizes) return kn_op_fail(ctx, KN_ERR_INTERNAL, "split plan is incomplete");
  int64_t outer = 1, inner = 1;
  for (int32_t i = 0; i < sp.axis; i++) outer *= x->dims[i];
  for (int32_t i = sp.axis + 1; i < x->rank; i++) inner *= x->dims[i];
  kn_slot *o = out_seq_begin(ctx, 0, x->dtype);
  int64_t off = 0;
  for (int64_t k = 0; k < sp.n && !st; k++) {
    kn_tensor piece;
    int64_t dims[KN_MAX_RANK];
    int32_t r = 0;
    for (int32_t i = 0; i < x->rank; i++) {
      if (i == sp.axis) {
        if (sp.keepdims) dims[r++] = sp.sizes[k];
      } else {
        dims[r++] = x->dims[i];
      }
    }
    if ((st = kn_tensor_alloc(&piece, x->dtype, r, dims, ctx->err))) break;
    st = copy_slab(ctx, &piece, x, outer, inner, x->dims[sp.axis], off, sp.sizes[k],
                   0, sp.sizes[k]);
    if (!st) {
      if (!KN_GROW(o->seq.items, o->seq.cap, (int64_t)o->seq.count + 1)) {
        st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory growing a sequence");
      } else {
        o->seq.items[o->seq.count++] = piece;
        piece.data = NULL;
      }
    }
    if (piece.data) kn_tensor_release(&piece);
    off += sp.sizes[k];
  }
  free(sp.sizes);
  return st;
}

/* ---- ConcatFromSequence -------------------------------------------------- */

/* Output shape of the concatenation (all known at run time). */
static kn_status concat_shape(kn_op_ctx *ctx, const kn_seq *s, int32_t *axis_out,
                              int32_t *rank_out, int64_t *dims) {
  bool new_axis = kn_attr_int(ctx, "new_axis", 0) != 0;
  if (!kn_attr_get(ctx, "axis"))
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "attribute 'axis' is required");
  int64_t axis = kn_attr_int(ctx, "axis", 0);
  if (s->count == 0)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "cannot concatenate an empty sequence");
  const kn_tensor *t0 = &s->items[0];
  int32_t r = t0->rank + (new_axis ? 1 : 0);
  if (r > KN_MAX_RANK)
    return kn_op_fail(ctx, KN_ERR_LIMIT, "result rank %d exceeds %d", (int)r, KN_MAX_RANK);
  int32_t a;
  kn_status st = kn_axis(ctx, axis, r, &a);
  if (st) return st;
  if (!new_axis && t0->rank == 0)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "cannot concatenate scalars without new_axis");
  int64_t total = 0;
  for (int32_t k = 0; k < s->count; k++) {
    const kn_tensor *t = &s->items[k];
    char sa[128], sb[128];
    if (t->dtype != t0->dtype)
      return kn_op_fail(ctx, KN_ERR_DTYPE, "sequence item %d has dtype %s, item 0 has %s",
                        (int)k, kn_dtype_name(t->dtype), kn_dtype_name(t0->dtype));
    bool ok = t->rank == t0->rank;
    for (int32_t i = 0; ok && i < t->rank; i++)
      if (t->dims[i] != t0->dims[i] && (new_axis || i != a)) ok = false;
    if (!ok)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "sequence item %d has shape %s, which does not concatenate "
                        "with item 0 of shape %s along axis %d",
                        (int)k, kn_shape_str(t->rank, t->dims, sa, sizeof sa),
                        kn_shape_str(t0->rank, t0->dims, sb, sizeof sb), (int)a);
    total += new_axis ? 1 : t->dims[a];
  }
  for (int32_t i = 0, j = 0; i < r; i++) {
    if (new_axis && i == a) {
      dims[i] = total;
      continue;
    }
    dims[i] = (i == a) ? total : t0->dims[j];
    j++;
  }
  *axis_out = a;
  *rank_out = r;
  return KN_OK;
}

static kn_status concat_seq_infer(kn_op_ctx *ctx) {
  const kn_seq *s;
  kn_status st = seq_req(ctx, 0, &s);
  if (st) return st;
  if (!kn_attr_get(ctx, "axis"))
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "attribute 'axis' is required");
  if (!s || ctx->static_infer) {
    kn_out_set(ctx, 0, s ? s->elem_dtype : 0, -1, NULL);
    return KN_OK;
  }
  int32_t a, r;
  int64_t dims[KN_MAX_RANK];
  if ((st = concat_shape(ctx, s, &a, &r, dims))) return st;
  kn_out_set(ctx, 0, s->items[0].dtype, r, dims);
  return KN_OK;
}

static kn_status concat_seq_run(kn_op_ctx *ctx) {
  const kn_seq *s;
  kn_status st = seq_req(ctx, 0, &s);
  if (st) return st;
  int32_t a, r;
  int64_t dims[KN_MAX_RANK];
  if ((st = concat_shape(ctx, s, &a, &r, dims))) return st;
  kn_dtype dt = s->items[0].dtype;
  if ((st = kn_out_alloc(ctx, 0, dt, r, dims))) return st;
  kn_tensor *o = kn_out(ctx, 0);
  int64_t outer = 1, inner = 1;
  for (int32_t i = 0; i < a; i++) outer *= dims[i];
  for (int32_t i = a + 1; i < r; i++) inner *= dims[i];
  int64_t off = 0;
  for (int32_t k = 0; k < s->count; k++) {
    const kn_tensor *t = &s->items[k];
    int64_t len = r == t->rank ? t->dims[a] : 1;
    if ((st = copy_slab(ctx, o, t, outer, inner, len, 0, dims[a], off, len))) return st;
    off += len;
  }
  return KN_OK;
}

/* ---- Optional ------------------------------------------------------------ */

static kn_status optional_infer(kn_op_ctx *ctx) {
  const kn_slot *in = ctx->n_in > 0 ? ctx->in[0] : NULL;
  if (!in) {
    const kn_attr *ty = kn_attr_get(ctx, "type");
    if (!ty)
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                        "attribute 'type' is required when the input is omitted");
    kn_slot_release(ctx->out[0]);
    ctx->out[0]->kind = KN_KIND_NONE;
    return KN_OK;
  }
  if (in->kind == KN_KIND_TENSOR) {
    kn_out_like(ctx, 0, 0, 0);
  } else if (in->kind == KN_KIND_SEQUENCE) {
    out_seq_decl(ctx, 0, in->seq.elem_dtype);
  }
  return KN_OK;
}

/* Copy input 0's value (tensor, sequence or nothing) into output 0. */
static kn_status copy_in_to_out(kn_op_ctx *ctx) {
  kn_slot *o = ctx->out[0];
  const kn_slot *in = ctx->n_in > 0 ? ctx->in[0] : NULL;
  kn_slot tmp;
  if (!in || in->kind == KN_KIND_NONE) {
    kn_slot_release(o);
    return KN_OK;
  }
  kn_status st = kn_slot_copy(&tmp, in, ctx->err);
  if (st) return st;
  kn_slot_release(o);
  *o = tmp;
  return KN_OK;
}

static kn_status optional_run(kn_op_ctx *ctx) { return copy_in_to_out(ctx); }

/* ---- OptionalHasElement / OptionalGetElement ------------------------------ */

static kn_status opt_has_infer(kn_op_ctx *ctx) {
  kn_out_set(ctx, 0, KN_DTYPE_BOOL, 0, NULL);
  return KN_OK;
}

static kn_status opt_has_run(kn_op_ctx *ctx) {
  const kn_slot *in = ctx->n_in > 0 ? ctx->in[0] : NULL;
  kn_tensor *o = kn_out(ctx, 0);
  kn_status st;
  if (!o->data && (st = kn_out_alloc(ctx, 0, KN_DTYPE_BOOL, 0, NULL))) return st;
  o = kn_out(ctx, 0);
  *(uint8_t *)o->data = (in && in->kind != KN_KIND_NONE) ? 1 : 0;
  return KN_OK;
}

static kn_status opt_get_infer(kn_op_ctx *ctx) {
  const kn_slot *in = ctx->n_in > 0 ? ctx->in[0] : NULL;
  if (!in || in->kind == KN_KIND_NONE) {
    if (ctx->static_infer) return KN_OK; /* unknown until run */
    return kn_op_fail(ctx, KN_ERR_MISSING, "the optional input is empty");
  }
  if (in->kind == KN_KIND_TENSOR) kn_out_like(ctx, 0, 0, 0);
  else out_seq_decl(ctx, 0, in->seq.elem_dtype);
  return KN_OK;
}

static kn_status opt_get_run(kn_op_ctx *ctx) {
  const kn_slot *in = ctx->n_in > 0 ? ctx->in[0] : NULL;
  if (!in || in->kind == KN_KIND_NONE)
    return kn_op_fail(ctx, KN_ERR_MISSING, "the optional input is empty");
  return copy_in_to_out(ctx);
}

static double no_flops(const kn_op_ctx *ctx) {
  (void)ctx;
  return 0;
}

const kn_op_def kn_ops_sequence[] = {
    {"SequenceEmpty", NULL, 0, 0, 1, 1, 11, 22, seq_empty_infer, seq_empty_run, no_flops},
    {"SequenceConstruct", NULL, 1, -1, 1, 1, 11, 22, seq_construct_infer,
     seq_construct_run, no_flops},
    {"SequenceAt", NULL, 2, 2, 1, 1, 11, 22, seq_at_infer, seq_at_run, no_flops},
    {"SequenceInsert", NULL, 2, 3, 1, 1, 11, 22, seq_insert_infer, seq_insert_run,
     no_flops},
    {"SequenceErase", NULL, 1, 2, 1, 1, 11, 22, seq_erase_infer, seq_erase_run, no_flops},
    {"SequenceLength", NULL, 1, 1, 1, 1, 11, 22, seq_length_infer, seq_length_run,
     no_flops},
    {"SplitToSequence", NULL, 1, 2, 1, 1, 11, 22, split_to_seq_infer, split_to_seq_run,
     no_flops},
    {"ConcatFromSequence", NULL, 1, 1, 1, 1, 11, 22, concat_seq_infer, concat_seq_run,
     no_flops},
    {"Optional", NULL, 0, 1, 1, 1, 15, 22, optional_infer, optional_run, no_flops},
    {"OptionalHasElement", NULL, 0, 1, 1, 1, 15, 22, opt_has_infer, opt_has_run,
     no_flops},
    {"OptionalGetElement", NULL, 1, 1, 1, 1, 15, 22, opt_get_infer, opt_get_run,
     no_flops},
    KN_OP_END,
};
