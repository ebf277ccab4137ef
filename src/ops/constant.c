/* Constant: a value held in an attribute (every opset form). */
#include "op.h"

static kn_status constant_value(kn_op_ctx *ctx, kn_tensor *out) {
  static const struct {
    const char *name;
  } forms[] = {{"value"},        {"sparse_value"}, {"value_float"},
               {"value_floats"}, {"value_int"},    {"value_ints"},
               {"value_string"}, {"value_strings"}};
  const kn_attr *a = NULL;
  int found = 0;
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    const kn_attr *x = kn_attr_get(ctx, forms[i].name);
    if (x) {
      a = x;
      found++;
    }
  }
  if (found != 1)
    return kn_op_fail(ctx, KN_ERR_PARSE,
                      "expected exactly one of the value attributes, found %d",
                      found);
  memset(out, 0, sizeof *out);
  int64_t n = a->n;
  switch (a->type) {
  case KN_ATTR_TENSOR:
  case KN_ATTR_SPARSE_TENSOR:
    *out = kn_tensor_view(&a->t);
    return KN_OK;
  case KN_ATTR_FLOAT:
    out->dtype = KN_DTYPE_F32;
    out->data = (void *)&a->f;
    out->nbytes = 4;
    return KN_OK;
  case KN_ATTR_INT:
    out->dtype = KN_DTYPE_I64;
    out->data = (void *)&a->i;
    out->nbytes = 8;
    return KN_OK;
  case KN_ATTR_STRING:
    out->dtype = KN_DTYPE_STRING;
    out->data = (void *)&a->s;
    out->nbytes = sizeof(char *);
    return KN_OK;
  case KN_ATTR_FLOATS:
    out->dtype = KN_DTYPE_F32;
    out->rank = 1;
    out->dims[0] = n;
    out->data = a->floats;
    out->nbytes = (size_t)n * 4;
    return KN_OK;
  case KN_ATTR_INTS:
    out->dtype = KN_DTYPE_I64;
    out->rank = 1;
    out->dims[0] = n;
    out->data = a->ints;
    out->nbytes = (size_t)n * 8;
    return KN_OK;
  case KN_ATTR_STRINGS:
    out->dtype = KN_DTYPE_STRING;
    out->rank = 1;
    out->dims[0] = n;
    out->data = a->strings;
    out->nbytes = (size_t)n * sizeof(char *);
    return KN_OK;
  default:
    return kn_op_fail(ctx, KN_ERR_PARSE, "attribute '%s' has an unexpected type %d",
                      a->name, (int)a->type);
  }
}

static kn_status constant_infer(kn_op_ctx *ctx) {
  kn_tensor v;
  kn_status st = constant_value(ctx, &v);
  if (st) return st;
  kn_out_set(ctx, 0, v.dtype, v.rank, v.dims);
  return KN_OK;
}

static kn_status constant_run(kn_op_ctx *ctx) {
  kn_tensor v;
  kn_status st = constant_value(ctx, &v);
  if (st) return st;
  kn_tensor *o = kn_out(ctx, 0);
  kn_tensor_release(o);
  return kn_tensor_copy(o, &v, ctx->err);
}

static double no_flops(const kn_op_ctx *ctx) {
  (void)ctx;
  return 0;
}

const kn_op_def kn_ops_constant[] = {
    {"Constant", NULL, 0, 0, 1, 1, 1, 21, constant_infer, constant_run, no_flops},
    KN_OP_END,
};
