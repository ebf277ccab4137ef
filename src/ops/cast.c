/*
 * Cast and CastLike between every dtype kiln has, strings included.
 *
 * Numbers to strings use the shortest decimal that reads back to the same
 * value in the source dtype, laid out like numpy's str() (which the ONNX
 * reference uses): positional for 1e-4 <= |v| < 1e16 ("0.5", "3.0"),
 * scientific otherwise ("1e-05", "1.5e+20"), and "nan", "inf", "-inf".
 * Strings to numbers accept anything strtod does ("NaN", "+INF", "1e3");
 * to integers, an integer literal is read exactly and anything else goes
 * through a double.  Floats to integers truncate (out-of-range values
 * saturate to int64 first); `saturate` only concerns float8 types, which
 * kiln does not have.
 */
#include "op.h"

#include <errno.h>
#include <math.h>

/* True when text s reads back as the value v held in dtype t. */
static bool round_trips(const char *s, double v, kn_dtype t) {
  switch (t) {
  case KN_DTYPE_F64: return strtod(s, NULL) == v;
  case KN_DTYPE_F32: return strtof(s, NULL) == (float)v;
  case KN_DTYPE_F16: return kn_f32_to_f16(strtof(s, NULL)) == kn_f32_to_f16((float)v);
  default: return kn_f32_to_bf16(strtof(s, NULL)) == kn_f32_to_bf16((float)v);
  }
}

/* numpy-style shortest text of float v (of dtype t) into buf (>= 64 bytes). */
static void float_text(char *buf, size_t len, double v, kn_dtype t) {
  if (isnan(v)) {
    snprintf(buf, len, "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(buf, len, v < 0 ? "-inf" : "inf");
    return;
  }
  if (v == 0) {
    snprintf(buf, len, signbit(v) ? "-0.0" : "0.0");
    return;
  }
  char e[48];
  int p;
  for (p = 1; p < 17; p++) {
    snprintf(e, sizeof e, "%.*e", p - 1, v);
    if (round_trips(e, v, t)) break;
  }
  if (p == 17) snprintf(e, sizeof e, "%.*e", p - 1, v);
  /* split "-d.ddde+XX" into sign, digits and exponent */
  const char *q = e;
  bool neg = *q == '-';
  if (neg) q++;
  char dig[24];
  int nd = 0;
  for (; *q && *q != 'e' && nd < 20; q++)
    if (*q >= '0' && *q <= '9') dig[nd++] = *q;
  while (nd > 1 && dig[nd - 1] == '0') nd--; /* "%.*e" may pad zeros */
  dig[nd] = 0;
  int ex = *q == 'e' ? atoi(q + 1) : 0;
  size_t o = 0;
#define PUT(c)                                                                 \
  do {                                                                         \
    if (o + 1 < len) buf[o++] = (c);                                           \
  } while (0)
  if (neg) PUT('-');
  double a = fabs(v);
  if (a >= 1e-4 && a < 1e16) {
    if (ex >= 0) {
      for (int i = 0; i <= ex; i++) PUT(i < nd ? dig[i] : '0');
      PUT('.');
      if (ex + 1 >= nd) PUT('0');
      for (int i = ex + 1; i < nd; i++) PUT(dig[i]);
    } else {
      PUT('0');
      PUT('.');
      for (int i = 0; i < -ex - 1; i++) PUT('0');
      for (int i = 0; i < nd; i++) PUT(dig[i]);
    }
    buf[o] = 0;
  } else {
    PUT(dig[0]);
    if (nd > 1) {
      PUT('.');
      for (int i = 1; i < nd; i++) PUT(dig[i]);
    }
    buf[o] = 0;
    snprintf(buf + o, len - o, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
  }
#undef PUT
}

static void elem_text(char *buf, size_t len, const void *data, kn_dtype t, int64_t i) {
  if (kn_dtype_is_float(t)) {
    float_text(buf, len, kn_load_f64(data, t, i), t);
  } else if (t == KN_DTYPE_BOOL) {
    snprintf(buf, len, ((const uint8_t *)data)[i] ? "True" : "False");
  } else if (t == KN_DTYPE_U64) {
    snprintf(buf, len, "%llu", (unsigned long long)((const uint64_t *)data)[i]);
  } else {
    snprintf(buf, len, "%lld", (long long)kn_load_i64(data, t, i));
  }
}

static bool ieq(const char *a, const char *b) {
  for (; *a && *b; a++, b++) {
    char x = (char)(*a >= 'A' && *a <= 'Z' ? *a + 32 : *a);
    char y = (char)(*b >= 'A' && *b <= 'Z' ? *b + 32 : *b);
    if (x != y) return false;
  }
  return *a == *b;
}

static void store_text(void *data, kn_dtype t, int64_t i, const char *s) {
  if (!s) s = "";
  while (*s == ' ' || *s == '\t' || *s == '\n') s++;
  if (t == KN_DTYPE_BOOL && (ieq(s, "true") || ieq(s, "false"))) {
    ((uint8_t *)data)[i] = ieq(s, "true");
    return;
  }
  if (kn_dtype_is_int(t) || t == KN_DTYPE_BOOL) {
    char *end;
    errno = 0;
    if (t == KN_DTYPE_U64 && *s != '-') {
      unsigned long long u = strtoull(s, &end, 10);
      if (end != s && *end == 0 && errno == 0) {
        ((uint64_t *)data)[i] = u;
        return;
      }
    } else {
      long long v = strtoll(s, &end, 10);
      if (end != s && *end == 0 && errno == 0) {
        kn_store_i64(data, t, i, v);
        return;
      }
    }
  }
  kn_store_f64(data, t, i, strtod(s, NULL));
}

static kn_status cast_to(kn_op_ctx *ctx, kn_dtype *to) {
  if (strcmp(ctx->node->op_type, "CastLike") == 0) {
    const kn_tensor *like = kn_in(ctx, 1);
    *to = like ? like->dtype : KN_DTYPE_UNDEFINED;
    if (!like && !ctx->static_infer)
      return kn_op_fail(ctx, KN_ERR_MISSING, "input 1 (target_type) is required");
    return KN_OK;
  }
  const kn_attr *a = kn_attr_get(ctx, "to");
  if (!a || a->type != KN_ATTR_INT)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "attribute 'to' (an integer dtype) is required");
  if (!kn_dtype_is_valid((int32_t)a->i) || a->i != (int32_t)a->i)
    return kn_op_fail(ctx, KN_ERR_UNSUPPORTED, "cannot cast to dtype %lld: kiln lacks it",
                      (long long)a->i);
  *to = (kn_dtype)a->i;
  return KN_OK;
}

static kn_status cast_infer(kn_op_ctx *ctx) {
  kn_dtype to;
  kn_status st = cast_to(ctx, &to);
  if (st) return st;
  const kn_tensor *x = kn_in(ctx, 0);
  if (!x && !ctx->static_infer)
    return kn_op_fail(ctx, KN_ERR_MISSING, "input 0 is required");
  kn_out_like(ctx, 0, 0, to);
  return KN_OK;
}

static kn_status cast_run(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_dtype to;
  kn_status st = kn_in_req(ctx, 0, &x);
  if (!st) st = cast_to(ctx, &to);
  if (st) return st;
  if (!kn_dtype_is_valid(to) || !kn_dtype_is_valid(x->dtype))
    return kn_op_fail(ctx, KN_ERR_DTYPE, "cannot cast from dtype %d to %d",
                      (int)x->dtype, (int)to);
  kn_tensor *o = kn_out(ctx, 0);
  bool ok = o->dtype == to && o->rank == x->rank && (o->data || kn_tensor_numel(x) == 0);
  for (int32_t i = 0; ok && i < x->rank; i++) ok = o->dims[i] == x->dims[i];
  if (!ok) {
    st = kn_out_alloc(ctx, 0, to, x->rank, x->dims);
    if (st) return st;
    o = kn_out(ctx, 0);
  }
  int64_t n = kn_tensor_numel(x);
  if (x->dtype == to && to != KN_DTYPE_STRING) {
    if (n) memcpy(o->data, x->data, (size_t)n * kn_dtype_size(to));
    return KN_OK;
  }
  if (to == KN_DTYPE_STRING) {
    char **s = o->data;
    char buf[80];
    for (int64_t i = 0; i < n; i++) {
      const char *src = buf;
      if (x->dtype == KN_DTYPE_STRING) {
        src = ((char *const *)x->data)[i];
        if (!src) src = "";
      } else {
        elem_text(buf, sizeof buf, x->data, x->dtype, i);
      }
      free(s[i]);
      s[i] = kn_strdup(src);
      if (!s[i]) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory making strings");
    }
    return KN_OK;
  }
  if (x->dtype == KN_DTYPE_STRING) {
    char *const *s = x->data;
    for (int64_t i = 0; i < n; i++) store_text(o->data, to, i, s[i]);
    return KN_OK;
  }
  kn_convert(x->data, x->dtype, o->data, to, n);
  return KN_OK;
}

const kn_op_def kn_ops_cast[] = {
    {"Cast", NULL, 1, 1, 1, 1, 1, 22, cast_infer, cast_run, NULL},
    {"CastLike", NULL, 2, 2, 1, 1, 15, 22, cast_infer, cast_run, NULL},
    KN_OP_END,
};
