#include "op.h"

#include <stdarg.h>

bool kn_domain_eq(const char *a, const char *b) {
  bool da = !a || !*a || strcmp(a, "ai.onnx") == 0;
  bool db = !b || !*b || strcmp(b, "ai.onnx") == 0;
  if (da || db) return da && db;
  return strcmp(a, b) == 0;
}

const kn_op_def *kn_op_in(const kn_op_def *family, const char *domain, const char *name) {
  for (const kn_op_def *op = family; op->name; op++)
    if (strcmp(op->name, name) == 0 && kn_domain_eq(op->domain, domain)) return op;
  return NULL;
}

kn_status kn_op_fail(kn_op_ctx *ctx, kn_status st, const char *fmt, ...) {
  if (ctx->err) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kn_fail(ctx->err, st, "%s%snode '%s' (%s): %s", ctx->label ? ctx->label : "",
            ctx->label ? ": " : "", ctx->node->name, ctx->node->op_type, msg);
  }
  return st;
}

const kn_tensor *kn_in(const kn_op_ctx *ctx, int32_t i) {
  if (i < 0 || i >= ctx->n_in || !ctx->in[i]) return NULL;
  if (ctx->in[i]->kind != KN_KIND_TENSOR) return NULL;
  return &ctx->in[i]->t;
}

kn_status kn_in_req(kn_op_ctx *ctx, int32_t i, const kn_tensor **out) {
  *out = kn_in(ctx, i);
  if (*out) return KN_OK;
  if (i < ctx->n_in && ctx->in[i] && ctx->in[i]->kind == KN_KIND_SEQUENCE)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "input %d is a sequence, expected a tensor", i);
  return kn_op_fail(ctx, KN_ERR_MISSING, "input %d is required but was not given", i);
}

kn_status kn_in_need(kn_op_ctx *ctx, int32_t i, const kn_tensor **t) {
  *t = kn_in(ctx, i);
  if (*t) return KN_OK;
  if (ctx->static_infer && i < ctx->n_in && ctx->in[i] &&
      ctx->in[i]->kind == KN_KIND_NONE)
    return KN_OK;
  return kn_in_req(ctx, i, t);
}

kn_tensor *kn_out(kn_op_ctx *ctx, int32_t i) {
  KN_ASSERT(i >= 0 && i < ctx->n_out);
  ctx->out[i]->kind = KN_KIND_TENSOR;
  return &ctx->out[i]->t;
}

void kn_out_set(kn_op_ctx *ctx, int32_t i, kn_dtype dtype, int32_t rank,
                const int64_t *dims) {
  if (i >= ctx->n_out) return;
  kn_tensor *t = kn_out(ctx, i);
  t->dtype = dtype;
  t->rank = rank;
  for (int32_t d = 0; d < rank && d < KN_MAX_RANK; d++) t->dims[d] = dims ? dims[d] : -1;
}

void kn_out_like(kn_op_ctx *ctx, int32_t out, int32_t in, kn_dtype dtype) {
  const kn_tensor *x = kn_in(ctx, in);
  if (!x) {
    kn_out_set(ctx, out, dtype, -1, NULL);
    return;
  }
  kn_out_set(ctx, out, dtype ? dtype : x->dtype, x->rank, x->dims);
}

kn_status kn_out_alloc(kn_op_ctx *ctx, int32_t i, kn_dtype dtype, int32_t rank,
                       const int64_t *dims) {
  kn_slot *s = ctx->out[i];
  kn_slot_release(s);
  s->kind = KN_KIND_TENSOR;
  kn_status st = kn_tensor_alloc(&s->t, dtype, rank, dims, ctx->err);
  if (st) kn_error_prefix(ctx->err, "node '%s' (%s): output %d", ctx->node->name,
                          ctx->node->op_type, i);
  return st;
}

kn_tensor *kn_out_ready(kn_op_ctx *ctx, int32_t i) {
  kn_tensor *t = kn_out(ctx, i);
  if (t->rank < 0 || !kn_shape_known(t) || !t->data) {
    kn_op_fail(ctx, KN_ERR_INTERNAL, "output %d was not sized before running", (int)i);
    return NULL;
  }
  return t;
}

void kn_out_zero_for_ref(kn_op_ctx *ctx, int32_t i) {
  kn_tensor *t = &ctx->out[i]->t;
  if (ctx->rt && t->data) memset(t->data, 0, (size_t)kn_tensor_numel(t) * kn_dtype_size(t->dtype));
}

bool kn_out_wanted(const kn_op_ctx *ctx, int32_t i) {
  return i < ctx->n_out && i < ctx->node->n_outputs && ctx->node->outputs[i] >= 0;
}

kn_status kn_copy_elems(kn_op_ctx *ctx, void *dst, int64_t di, const void *src,
                        int64_t si, int64_t n, kn_dtype dt) {
  if (n <= 0) return KN_OK;
  if (dt == KN_DTYPE_STRING) {
    char **d = (char **)dst + di;
    char *const *s = (char *const *)src + si;
    for (int64_t i = 0; i < n; i++) {
      char *c = kn_strdup(s[i] ? s[i] : "");
      if (!c) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory copying strings");
      free(d[i]);
      d[i] = c;
    }
    return KN_OK;
  }
  size_t es = kn_dtype_size(dt);
  if (n == 1) { /* single elements (Gather*, Scatter*): skip the memcpy call */
    switch (es) {
    case 1: ((uint8_t *)dst)[di] = ((const uint8_t *)src)[si]; return KN_OK;
    case 2: ((uint16_t *)dst)[di] = ((const uint16_t *)src)[si]; return KN_OK;
    case 4: ((uint32_t *)dst)[di] = ((const uint32_t *)src)[si]; return KN_OK;
    case 8: ((uint64_t *)dst)[di] = ((const uint64_t *)src)[si]; return KN_OK;
    default: break;
    }
  }
  memcpy((char *)dst + (size_t)di * es, (const char *)src + (size_t)si * es,
         (size_t)n * es);
  return KN_OK;
}

float *kn_tensor_f32(const kn_tensor *t) {
  int64_t n = kn_tensor_numel(t);
  float *d = kn_malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  if (d) kn_convert(t->data, t->dtype, d, KN_DTYPE_F32, n);
  return d;
}

bool kn_shape_known(const kn_tensor *t) {
  if (t->rank < 0) return false;
  for (int32_t i = 0; i < t->rank; i++)
    if (t->dims[i] < 0) return false;
  return true;
}

const kn_attr *kn_attr_get(const kn_op_ctx *ctx, const char *name) {
  return kn_node_attr(ctx->node, name);
}

int64_t kn_attr_int(const kn_op_ctx *ctx, const char *name, int64_t dflt) {
  const kn_attr *a = kn_attr_get(ctx, name);
  if (!a) return dflt;
  if (a->type == KN_ATTR_INT) return a->i;
  if (a->type == KN_ATTR_FLOAT) { /* saturate: a hostile float is no UB */
    if (!(a->f == a->f)) return dflt;
    if (a->f >= 9.2233720368547758e18f) return INT64_MAX;
    if (a->f <= -9.2233720368547758e18f) return INT64_MIN;
    return (int64_t)a->f;
  }
  return dflt;
}

float kn_attr_float(const kn_op_ctx *ctx, const char *name, float dflt) {
  const kn_attr *a = kn_attr_get(ctx, name);
  if (!a) return dflt;
  if (a->type == KN_ATTR_FLOAT) return a->f;
  if (a->type == KN_ATTR_INT) return (float)a->i;
  return dflt;
}

const char *kn_attr_str(const kn_op_ctx *ctx, const char *name,
                        const char *dflt) {
  const kn_attr *a = kn_attr_get(ctx, name);
  if (!a || a->type != KN_ATTR_STRING || !a->s) return dflt;
  return a->s;
}

int32_t kn_attr_ints(const kn_op_ctx *ctx, const char *name,
                     const int64_t **vals) {
  const kn_attr *a = kn_attr_get(ctx, name);
  *vals = NULL;
  if (!a) return 0;
  if (a->type == KN_ATTR_INTS) {
    *vals = a->ints;
    return a->n;
  }
  if (a->type == KN_ATTR_INT) {
    *vals = &a->i;
    return 1;
  }
  return 0;
}

int32_t kn_attr_floats(const kn_op_ctx *ctx, const char *name,
                       const float **vals) {
  const kn_attr *a = kn_attr_get(ctx, name);
  *vals = NULL;
  if (!a) return 0;
  if (a->type == KN_ATTR_FLOATS) {
    *vals = a->floats;
    return a->n;
  }
  if (a->type == KN_ATTR_FLOAT) {
    *vals = &a->f;
    return 1;
  }
  return 0;
}

kn_status kn_axis(kn_op_ctx *ctx, int64_t axis, int32_t rank, int32_t *out) {
  if (axis < -(int64_t)rank || axis >= rank || rank == 0)
    if (!(rank == 0 && (axis == 0 || axis == -1)))
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "axis %lld is out of range for a tensor of rank %d",
                        (long long)axis, (int)rank);
  *out = (int32_t)(axis < 0 ? axis + rank : axis);
  if (*out < 0) *out = 0;
  return KN_OK;
}

kn_status kn_read_ints(kn_op_ctx *ctx, const kn_tensor *t, int64_t *vals,
                       int64_t max, int64_t *n) {
  int64_t cnt = kn_tensor_numel(t);
  if (cnt < 0 || cnt > max)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "integer input has %lld elements, at most %lld expected",
                      (long long)cnt, (long long)max);
  if (!kn_dtype_is_int(t->dtype))
    return kn_op_fail(ctx, KN_ERR_DTYPE, "expected an integer tensor, got %s",
                      kn_dtype_name(t->dtype));
  for (int64_t i = 0; i < cnt; i++) vals[i] = kn_load_i64(t->data, t->dtype, i);
  *n = cnt;
  return KN_OK;
}

double kn_scalar_f64(const kn_tensor *t) { return kn_load_f64(t->data, t->dtype, 0); }
int64_t kn_scalar_i64(const kn_tensor *t) { return kn_load_i64(t->data, t->dtype, 0); }

kn_status kn_broadcast(kn_op_ctx *ctx, int32_t ra, const int64_t *da,
                       int32_t rb, const int64_t *db, int32_t *rout,
                       int64_t *dout) {
  if (ra < 0 || rb < 0) {
    *rout = -1;
    return KN_OK;
  }
  int32_t r = ra > rb ? ra : rb;
  for (int32_t i = 0; i < r; i++) {
    int64_t a = i < r - ra ? 1 : da[i - (r - ra)];
    int64_t b = i < r - rb ? 1 : db[i - (r - rb)];
    int64_t o;
    if (a == b) o = a;
    else if (a == 1) o = b;
    else if (b == 1) o = a;
    else if (a < 0) o = b;
    else if (b < 0) o = a;
    else {
      char sa[128], sb[128];
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "shapes %s and %s do not broadcast (dim %d: %lld vs %lld)",
                        kn_shape_str(ra, da, sa, sizeof sa),
                        kn_shape_str(rb, db, sb, sizeof sb), (int)i,
                        (long long)a, (long long)b);
    }
    dout[i] = o;
  }
  *rout = r;
  return KN_OK;
}

int64_t kn_dims_prod(const int64_t *dims, int32_t from, int32_t to) {
  int64_t p = 1;
  for (int32_t i = from; i < to; i++) p *= dims[i];
  return p;
}

void kn_strides(int32_t rank, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int32_t i = rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= dims[i];
  }
}

void kn_broadcast_strides(int32_t r, const int64_t *d, int32_t rout,
                          const int64_t *dout, int64_t *out_strides) {
  (void)dout;
  int64_t s[KN_MAX_RANK];
  kn_strides(r, d, s);
  for (int32_t i = 0; i < rout; i++) {
    int32_t j = i - (rout - r);
    out_strides[i] = (j < 0 || d[j] == 1) ? 0 : s[j];
  }
}

kn_status kn_check_dtype(kn_op_ctx *ctx, int32_t input, const kn_tensor *t,
                         const kn_dtype *allowed) {
  if (!t || t->dtype == KN_DTYPE_UNDEFINED) return KN_OK;
  for (const kn_dtype *a = allowed; *a; a++)
    if (*a == t->dtype) return KN_OK;
  char list[256];
  size_t o = 0;
  list[0] = 0;
  for (const kn_dtype *a = allowed; *a && o < sizeof list; a++) {
    int n = snprintf(list + o, sizeof list - o, "%s%s", a == allowed ? "" : ", ",
                     kn_dtype_name(*a));
    if (n < 0) break;
    o += (size_t)n;
  }
  return kn_op_fail(ctx, KN_ERR_DTYPE, "input %d has dtype %s, expected one of %s",
                    (int)input, kn_dtype_name(t->dtype), list);
}
