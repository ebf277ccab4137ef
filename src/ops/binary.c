/*
 * Elementwise ops on two or more inputs with numpy broadcasting: arithmetic
 * (Add, Sub, Mul, Div, Mod, Pow), bit and logic ops, comparisons, PRelu,
 * Where and the variadic Min, Max, Sum, Mean.
 *
 * Every kernel works on one "row": n output elements whose inputs advance
 * by a stride of 0 or 1.  bcast_walk coalesces the broadcast shape into as
 * few dimensions as the strides allow and calls the row kernel once per
 * row, so the innermost loop never divides.  float16/bfloat16 inputs are
 * widened to float32 first and the result is rounded back, which matches
 * numpy's half-precision arithmetic.
 *
 * Integer semantics (ONNX leaves them open; these match numpy/ORT where
 * those are defined): Add/Sub/Mul wrap around; Div truncates toward zero;
 * x/0 and x%0 give 0; INT_MIN/-1 wraps to INT_MIN; Mod with fmod=0 takes
 * the sign of the divisor, with fmod=1 that of the dividend; BitShift by
 * the bit width or more gives 0; Pow with a negative integer exponent
 * gives 1/x truncated (0 unless |x| == 1).
 *
 * The vectorised float32 kernels of Add, Sub, Mul, Div, PRelu and the
 * variadic ops are src/tactics/binary_tactics.c.
 */
#include "binary.h"

#include <math.h>

#define MAX_IN 3
#define N_DT (KN_DTYPE_BF16 + 1)

/* ---- broadcast walk ------------------------------------------------------ */

typedef void (*row_fn)(const void *user, int64_t n, char *out,
                       const char *const *in, const int64_t *stride);

/* Walk the output shape (rank, dims), whose elements are oesz bytes, with
 * n_in inputs broadcast to it, calling fn once per contiguous row. */
static void bcast_walk(int32_t rank, const int64_t *dims, void *out, size_t oesz,
                       int32_t n_in, const void *const *data, const size_t *esz,
                       const int32_t *ranks, const int64_t *const *idims,
                       row_fn fn, const void *user) {
  int64_t numel = kn_shape_numel(rank, dims);
  if (numel <= 0) return;
  int64_t st[MAX_IN][KN_MAX_RANK];
  for (int32_t k = 0; k < n_in; k++)
    kn_broadcast_strides(ranks[k], idims[k], rank, dims, st[k]);
  int64_t cd[KN_MAX_RANK], cs[MAX_IN][KN_MAX_RANK];
  int32_t cr = 0;
  for (int32_t i = 0; i < rank; i++) {
    if (dims[i] == 1) continue;
    if (cr > 0) {
      bool merge = true;
      for (int32_t k = 0; k < n_in; k++)
        if (cs[k][cr - 1] != st[k][i] * dims[i]) merge = false;
      if (merge) {
        cd[cr - 1] *= dims[i];
        for (int32_t k = 0; k < n_in; k++) cs[k][cr - 1] = st[k][i];
        continue;
      }
    }
    cd[cr] = dims[i];
    for (int32_t k = 0; k < n_in; k++) cs[k][cr] = st[k][i];
    cr++;
  }
  if (cr == 0) {
    cd[0] = 1;
    for (int32_t k = 0; k < n_in; k++) cs[k][0] = 0;
    cr = 1;
  }
  int64_t inner = cd[cr - 1], ist[MAX_IN], off[MAX_IN] = {0},
          idx[KN_MAX_RANK] = {0};
  for (int32_t k = 0; k < n_in; k++) ist[k] = cs[k][cr - 1];
  int64_t rows = numel / inner;
  const char *p[MAX_IN] = {0};
  char *o = out;
  for (int64_t r = 0; r < rows; r++) {
    for (int32_t k = 0; k < n_in; k++)
      p[k] = (const char *)data[k] + (size_t)off[k] * esz[k];
    fn(user, inner, o + (size_t)(r * inner) * oesz, p, ist);
    for (int32_t d = cr - 2; d >= 0; d--) {
      idx[d]++;
      for (int32_t k = 0; k < n_in; k++) off[k] += cs[k][d];
      if (idx[d] < cd[d]) break;
      for (int32_t k = 0; k < n_in; k++) off[k] -= cs[k][d] * cd[d];
      idx[d] = 0;
    }
  }
}

/* ---- binary kernels ------------------------------------------------------ */

typedef void (*bin_k)(int64_t n, const void *a, int64_t sa, const void *b,
                      int64_t sb, void *o);

#define BIN_KERNEL(NAME, TA, TB, TO, EXPR)                                     \
  static void NAME(int64_t n, const void *pa, int64_t sa, const void *pb,      \
                   int64_t sb, void *po) {                                     \
    const TA *A = pa;                                                          \
    const TB *B = pb;                                                          \
    TO *O = po;                                                                \
    if (sa == 1 && sb == 1) {                                                  \
      for (int64_t i = 0; i < n; i++) {                                        \
        TA x = A[i];                                                           \
        TB y = B[i];                                                           \
        O[i] = (TO)(EXPR);                                                     \
      }                                                                        \
    } else if (sa == 1 && sb == 0) {                                           \
      TB y = B[0];                                                             \
      for (int64_t i = 0; i < n; i++) {                                        \
        TA x = A[i];                                                           \
        O[i] = (TO)(EXPR);                                                     \
      }                                                                        \
    } else if (sa == 0 && sb == 1) {                                           \
      TA x = A[0];                                                             \
      for (int64_t i = 0; i < n; i++) {                                        \
        TB y = B[i];                                                           \
        O[i] = (TO)(EXPR);                                                     \
      }                                                                        \
    } else {                                                                   \
      for (int64_t i = 0; i < n; i++) {                                        \
        TA x = A[i * sa];                                                      \
        TB y = B[i * sb];                                                      \
        O[i] = (TO)(EXPR);                                                     \
      }                                                                        \
    }                                                                          \
  }

static inline int64_t sdiv(int64_t x, int64_t y) {
  if (y == 0) return 0;
  if (y == -1) return (int64_t)(0 - (uint64_t)x);
  return x / y;
}
static inline uint64_t udiv(uint64_t x, uint64_t y) { return y ? x / y : 0; }
static inline int64_t smod(int64_t x, int64_t y) {
  if (y == 0 || y == -1) return 0;
  int64_t r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}
static inline int64_t sfmod(int64_t x, int64_t y) {
  if (y == 0 || y == -1) return 0;
  return x % y;
}
static inline uint64_t umod(uint64_t x, uint64_t y) { return y ? x % y : 0; }
static inline double dmod(double x, double y) {
  double r = fmod(x, y);
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}
static inline float fmodpy(float x, float y) {
  float r = fmodf(x, y);
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}
static inline int64_t ipow(int64_t x, int64_t e) {
  if (e < 0) {
    if (x == 1) return 1;
    if (x == -1) return (e & 1) ? -1 : 1;
    return 0;
  }
  uint64_t r = 1, b = (uint64_t)x;
  uint64_t ue = (uint64_t)e;
  while (ue) {
    if (ue & 1) r *= b;
    b *= b;
    ue >>= 1;
  }
  return (int64_t)r;
}
static inline uint64_t shl(uint64_t x, uint64_t s, unsigned bits) {
  return s >= bits ? 0 : x << s;
}
static inline uint64_t shr(uint64_t x, uint64_t s, unsigned bits) {
  return s >= bits ? 0 : x >> s;
}

/* Kernels of one op for every numeric work dtype: FE for floats, SE for
 * signed and UE for unsigned integers (x, y are the elements). */
#define DEF_NUM(OP, TO_F32, TO_F64, TO_I, TO_U, FE, SE, UE)                    \
  BIN_KERNEL(OP##_f32, float, float, TO_F32, FE)                               \
  BIN_KERNEL(OP##_f64, double, double, TO_F64, FE)                             \
  BIN_KERNEL(OP##_i8, int8_t, int8_t, TO_I(int8_t), SE)                        \
  BIN_KERNEL(OP##_i16, int16_t, int16_t, TO_I(int16_t), SE)                    \
  BIN_KERNEL(OP##_i32, int32_t, int32_t, TO_I(int32_t), SE)                    \
  BIN_KERNEL(OP##_i64, int64_t, int64_t, TO_I(int64_t), SE)                    \
  BIN_KERNEL(OP##_u8, uint8_t, uint8_t, TO_U(uint8_t), UE)                     \
  BIN_KERNEL(OP##_u16, uint16_t, uint16_t, TO_U(uint16_t), UE)                 \
  BIN_KERNEL(OP##_u32, uint32_t, uint32_t, TO_U(uint32_t), UE)                 \
  BIN_KERNEL(OP##_u64, uint64_t, uint64_t, TO_U(uint64_t), UE)
#define SAME(T) T
#define BOOLT(T) uint8_t
#define TAB_INTS(OP)                                                           \
  [KN_DTYPE_I8] = OP##_i8, [KN_DTYPE_I16] = OP##_i16,                          \
  [KN_DTYPE_I32] = OP##_i32, [KN_DTYPE_I64] = OP##_i64,                        \
  [KN_DTYPE_U8] = OP##_u8, [KN_DTYPE_U16] = OP##_u16,                          \
  [KN_DTYPE_U32] = OP##_u32, [KN_DTYPE_U64] = OP##_u64
#define TAB_NUM(OP)                                                            \
  {[KN_DTYPE_F32] = OP##_f32, [KN_DTYPE_F64] = OP##_f64, TAB_INTS(OP)}

#define WRAP(E) ((uint64_t)x E (uint64_t)y)
DEF_NUM(add, float, double, SAME, SAME, x + y, WRAP(+), WRAP(+))
DEF_NUM(sub, float, double, SAME, SAME, x - y, WRAP(-), WRAP(-))
DEF_NUM(mul, float, double, SAME, SAME, x * y, WRAP(*), WRAP(*))
DEF_NUM(div, float, double, SAME, SAME, x / y, sdiv(x, y), udiv(x, y))
DEF_NUM(max, float, double, SAME, SAME, (x > y || x != x) ? x : y,
        x > y ? x : y, x > y ? x : y)
DEF_NUM(min, float, double, SAME, SAME, (x < y || x != x) ? x : y,
        x < y ? x : y, x < y ? x : y)
DEF_NUM(eq, uint8_t, uint8_t, BOOLT, BOOLT, x == y, x == y, x == y)
DEF_NUM(lt, uint8_t, uint8_t, BOOLT, BOOLT, x < y, x < y, x < y)
DEF_NUM(gt, uint8_t, uint8_t, BOOLT, BOOLT, x > y, x > y, x > y)
DEF_NUM(le, uint8_t, uint8_t, BOOLT, BOOLT, x <= y, x <= y, x <= y)
DEF_NUM(ge, uint8_t, uint8_t, BOOLT, BOOLT, x >= y, x >= y, x >= y)
DEF_NUM(prelu, float, double, SAME, SAME, x < 0 ? x * y : x,
        x < 0 ? WRAP(*) : (uint64_t)x, ((void)y, x))
BIN_KERNEL(mod_f32, float, float, float, fmodpy(x, y))
BIN_KERNEL(mod_f64, double, double, double, dmod(x, y))
BIN_KERNEL(fmod_f32, float, float, float, fmodf(x, y))
BIN_KERNEL(fmod_f64, double, double, double, fmod(x, y))
#define DEF_INT(OP, SE, UE)                                                    \
  BIN_KERNEL(OP##_i8, int8_t, int8_t, int8_t, SE)                              \
  BIN_KERNEL(OP##_i16, int16_t, int16_t, int16_t, SE)                          \
  BIN_KERNEL(OP##_i32, int32_t, int32_t, int32_t, SE)                          \
  BIN_KERNEL(OP##_i64, int64_t, int64_t, int64_t, SE)                          \
  BIN_KERNEL(OP##_u8, uint8_t, uint8_t, uint8_t, UE)                           \
  BIN_KERNEL(OP##_u16, uint16_t, uint16_t, uint16_t, UE)                       \
  BIN_KERNEL(OP##_u32, uint32_t, uint32_t, uint32_t, UE)                       \
  BIN_KERNEL(OP##_u64, uint64_t, uint64_t, uint64_t, UE)
DEF_INT(mod, smod(x, y), umod(x, y))
DEF_INT(fmod, sfmod(x, y), umod(x, y))
#define DEF_UINT(OP, UE)                                                       \
  BIN_KERNEL(OP##_u8, uint8_t, uint8_t, uint8_t, UE)                           \
  BIN_KERNEL(OP##_u16, uint16_t, uint16_t, uint16_t, UE)                       \
  BIN_KERNEL(OP##_u32, uint32_t, uint32_t, uint32_t, UE)                       \
  BIN_KERNEL(OP##_u64, uint64_t, uint64_t, uint64_t, UE)
DEF_UINT(band, x & y)
DEF_UINT(bor, x | y)
DEF_UINT(bxor, x ^ y)
DEF_UINT(shl, shl(x, y, 8 * sizeof x))
DEF_UINT(shr, shr(x, y, 8 * sizeof x))
BIN_KERNEL(pow_f32, float, float, float, powf(x, y))
BIN_KERNEL(pow_f64, double, double, double, pow(x, y))
BIN_KERNEL(pow_i64, int64_t, int64_t, int64_t, ipow(x, y))
BIN_KERNEL(and_b, uint8_t, uint8_t, uint8_t, (x != 0) & (y != 0))
BIN_KERNEL(or_b, uint8_t, uint8_t, uint8_t, (x != 0) | (y != 0))
BIN_KERNEL(xor_b, uint8_t, uint8_t, uint8_t, (x != 0) ^ (y != 0))

static const bin_k add_tab[N_DT] = TAB_NUM(add), sub_tab[N_DT] = TAB_NUM(sub),
                   mul_tab[N_DT] = TAB_NUM(mul), div_tab[N_DT] = TAB_NUM(div),
                   max_tab[N_DT] = TAB_NUM(max), min_tab[N_DT] = TAB_NUM(min),
                   prelu_tab[N_DT] = TAB_NUM(prelu), mod_tab[N_DT] = TAB_NUM(mod),
                   fmod_tab[N_DT] = TAB_NUM(fmod);
#define TAB_CMP(OP)                                                            \
  {[KN_DTYPE_F32] = OP##_f32, [KN_DTYPE_F64] = OP##_f64,                       \
   [KN_DTYPE_BOOL] = OP##_u8, TAB_INTS(OP)}
static const bin_k eq_tab[N_DT] = TAB_CMP(eq), lt_tab[N_DT] = TAB_CMP(lt),
                   gt_tab[N_DT] = TAB_CMP(gt), le_tab[N_DT] = TAB_CMP(le),
                   ge_tab[N_DT] = TAB_CMP(ge);
#define TAB_BITS(OP)                                                           \
  {[KN_DTYPE_I8] = OP##_u8,   [KN_DTYPE_I16] = OP##_u16,                       \
   [KN_DTYPE_I32] = OP##_u32, [KN_DTYPE_I64] = OP##_u64,                       \
   [KN_DTYPE_U8] = OP##_u8,   [KN_DTYPE_U16] = OP##_u16,                       \
   [KN_DTYPE_U32] = OP##_u32, [KN_DTYPE_U64] = OP##_u64}
static const bin_k band_tab[N_DT] = TAB_BITS(band), bor_tab[N_DT] = TAB_BITS(bor),
                   bxor_tab[N_DT] = TAB_BITS(bxor);
#define TAB_UINT(OP)                                                           \
  {[KN_DTYPE_U8] = OP##_u8, [KN_DTYPE_U16] = OP##_u16,                         \
   [KN_DTYPE_U32] = OP##_u32, [KN_DTYPE_U64] = OP##_u64}
static const bin_k shl_tab[N_DT] = TAB_UINT(shl), shr_tab[N_DT] = TAB_UINT(shr);
static const bin_k and_tab[N_DT] = {[KN_DTYPE_BOOL] = and_b},
                   or_tab[N_DT] = {[KN_DTYPE_BOOL] = or_b},
                   xor_tab[N_DT] = {[KN_DTYPE_BOOL] = xor_b};

/* ---- dtype conversion for work buffers ----------------------------------- */

static kn_dtype work_dtype(kn_dtype t) {
  return (t == KN_DTYPE_F16 || t == KN_DTYPE_BF16) ? KN_DTYPE_F32 : t;
}

/* data of t as dtype w: t's own data, or a converted copy left in *tmp. */
static kn_status as_work(kn_op_ctx *ctx, const kn_tensor *t, kn_dtype w,
                         const void **data, void **tmp) {
  *tmp = NULL;
  if (t->dtype == w) {
    *data = t->data;
    return KN_OK;
  }
  int64_t n = kn_tensor_numel(t);
  void *buf = kn_malloc((size_t)n * kn_dtype_size(w));
  if (!buf) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory converting an input");
  kn_convert(t->data, t->dtype, buf, w, n);
  *data = buf;
  *tmp = buf;
  return KN_OK;
}

/* Output buffer of dtype w for output tensor o: o's data or a new buffer. */
static kn_status out_work(kn_op_ctx *ctx, kn_tensor *o, kn_dtype w, void **data,
                          void **tmp) {
  *tmp = NULL;
  if (o->dtype == w) {
    *data = o->data;
    return KN_OK;
  }
  int64_t n = kn_tensor_numel(o);
  void *buf = kn_calloc((size_t)n, kn_dtype_size(w));
  if (!buf) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for a work buffer");
  *data = buf;
  *tmp = buf;
  return KN_OK;
}

/* The output tensor infer sized; checks the executor allocated it as told. */
static kn_status out_checked(kn_op_ctx *ctx, kn_dtype dt, int32_t rank,
                             const int64_t *dims, kn_tensor **o) {
  kn_tensor *t = kn_out(ctx, 0);
  bool ok = t->dtype == dt && t->rank == rank &&
            (t->data || kn_shape_numel(rank, dims) == 0);
  for (int32_t i = 0; ok && i < rank; i++) ok = t->dims[i] == dims[i];
  if (!ok) {
    kn_status st = kn_out_alloc(ctx, 0, dt, rank, dims);
    if (st) return st;
    t = kn_out(ctx, 0);
  }
  *o = t;
  return KN_OK;
}

/* ---- two-input ops ------------------------------------------------------- */

typedef struct bin_def {
  const char *name;
  const bin_k *tab;  /* kernels indexed by work dtype */
  bool bool_out;
  bool old_bcast;    /* has the `broadcast`/`axis` attributes before opset 7 */
} bin_def;

static const bin_def bin_defs[] = {
    {"Add", add_tab, false, true},
    {"Sub", sub_tab, false, true},
    {"Mul", mul_tab, false, true},
    {"Div", div_tab, false, true},
    {"Mod", mod_tab, false, false},
    {"Pow", NULL, false, true},
    {"BitShift", NULL, false, false},
    {"And", and_tab, true, true},
    {"Or", or_tab, true, true},
    {"Xor", xor_tab, true, true},
    {"BitwiseAnd", band_tab, false, false},
    {"BitwiseOr", bor_tab, false, false},
    {"BitwiseXor", bxor_tab, false, false},
    {"Equal", eq_tab, true, true},
    {"Less", lt_tab, true, true},
    {"Greater", gt_tab, true, true},
    {"LessOrEqual", le_tab, true, false},
    {"GreaterOrEqual", ge_tab, true, false},
    {"PRelu", prelu_tab, false, false},
};

static const bin_def *find_bin(const kn_op_ctx *ctx) {
  for (size_t i = 0; i < sizeof bin_defs / sizeof bin_defs[0]; i++)
    if (strcmp(bin_defs[i].name, ctx->node->op_type) == 0) return &bin_defs[i];
  KN_ASSERT(!"binary op without a row in bin_defs");
  return NULL;
}

/* The kernel table of def for this node (Mod and BitShift read attributes). */
static kn_status bin_table(kn_op_ctx *ctx, const bin_def *def, const bin_k **tab) {
  if (strcmp(def->name, "Mod") == 0) {
    int64_t f = kn_attr_int(ctx, "fmod", 0);
    if (f != 0 && f != 1)
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "attribute fmod is %lld, expected 0 or 1",
                        (long long)f);
    *tab = f ? fmod_tab : mod_tab;
  } else if (strcmp(def->name, "BitShift") == 0) {
    const char *d = kn_attr_str(ctx, "direction", NULL);
    if (!d || (strcmp(d, "LEFT") != 0 && strcmp(d, "RIGHT") != 0))
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                        "attribute direction is %s, expected \"LEFT\" or \"RIGHT\"",
                        d ? d : "missing");
    *tab = strcmp(d, "LEFT") == 0 ? shl_tab : shr_tab;
  } else {
    *tab = def->tab;
  }
  return KN_OK;
}

/* Shape of input b as broadcast against a: before opset 7 a `broadcast`
 * attribute aligns b with a's dims starting at `axis` (default: suffix). */
static kn_status b_shape(kn_op_ctx *ctx, const bin_def *def, const kn_tensor *a,
                         const kn_tensor *b, int32_t *rb, int64_t *db) {
  *rb = b->rank;
  for (int32_t i = 0; i < b->rank; i++) db[i] = b->dims[i];
  if (!def->old_bcast || ctx->opset >= 7 || kn_attr_int(ctx, "broadcast", 0) == 0)
    return KN_OK;
  if (a->rank < 0 || b->rank < 0) {
    *rb = -1;
    return KN_OK;
  }
  int64_t axis = kn_attr_int(ctx, "axis", a->rank - b->rank);
  if (axis < 0) axis += a->rank;
  if (axis < 0 || axis + b->rank > a->rank)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "input B of rank %d cannot be aligned with input A of rank %d "
                      "at axis %lld",
                      (int)b->rank, (int)a->rank, (long long)axis);
  for (int32_t i = 0; i < a->rank; i++) {
    int64_t j = i - axis;
    db[i] = (j >= 0 && j < b->rank) ? b->dims[j] : 1;
  }
  *rb = a->rank;
  return KN_OK;
}

/* PRelu slope shape: unidirectional broadcast to X; before opset 7 (and as
 * a fallback) a 1-D slope of X.dims[1] elements is per channel. */
static kn_status prelu_slope_shape(kn_op_ctx *ctx, const kn_tensor *x,
                                   const kn_tensor *s, int32_t *rs, int64_t *ds) {
  *rs = s->rank;
  for (int32_t i = 0; i < s->rank; i++) ds[i] = s->dims[i];
  if (x->rank < 0 || s->rank < 0) return KN_OK;
  bool numpy_ok = s->rank <= x->rank;
  for (int32_t i = 0; numpy_ok && i < s->rank; i++) {
    int64_t sd = s->dims[i], xd = x->dims[x->rank - s->rank + i];
    numpy_ok = sd == 1 || sd == xd || sd < 0 || xd < 0;
  }
  bool chan = s->rank == 1 && x->rank >= 2 && s->dims[0] == x->dims[1] &&
              s->dims[0] != 1;
  if (chan && (ctx->opset < 7 || !numpy_ok)) {
    *rs = x->rank - 1;
    ds[0] = s->dims[0];
    for (int32_t i = 1; i < *rs; i++) ds[i] = 1;
    return KN_OK;
  }
  if (!numpy_ok) {
    char sx[128], ss[128];
    return kn_op_fail(ctx, KN_ERR_SHAPE, "slope of shape %s does not broadcast to X of shape %s",
                      kn_shape_str(s->rank, s->dims, ss, sizeof ss),
                      kn_shape_str(x->rank, x->dims, sx, sizeof sx));
  }
  return KN_OK;
}

static kn_status bin_shapes(kn_op_ctx *ctx, const bin_def *def, const kn_tensor *a,
                            const kn_tensor *b, int32_t *rb, int64_t *db,
                            int32_t *ro, int64_t *dout) {
  kn_status st = strcmp(def->name, "PRelu") == 0
                     ? prelu_slope_shape(ctx, a, b, rb, db)
                     : b_shape(ctx, def, a, b, rb, db);
  if (st) return st;
  return kn_broadcast(ctx, a->rank, a->dims, *rb, db, ro, dout);
}

static kn_status pow_check(kn_op_ctx *ctx, kn_dtype ta, kn_dtype tb) {
  if (ta && !(kn_dtype_is_float(ta) || ta == KN_DTYPE_I32 || ta == KN_DTYPE_I64))
    return kn_op_fail(ctx, KN_ERR_DTYPE,
                      "base has dtype %s, expected a float type, int32 or int64",
                      kn_dtype_name(ta));
  if (tb && !(kn_dtype_is_float(tb) || kn_dtype_is_int(tb)))
    return kn_op_fail(ctx, KN_ERR_DTYPE, "exponent has dtype %s, expected a number type",
                      kn_dtype_name(tb));
  return KN_OK;
}

static kn_status bin_infer(kn_op_ctx *ctx) {
  const bin_def *def = find_bin(ctx);
  const kn_tensor *a = kn_in(ctx, 0), *b = kn_in(ctx, 1);
  const bin_k *tab;
  kn_status st = bin_table(ctx, def, &tab);
  if (st) return st;
  kn_dtype ta = a ? a->dtype : KN_DTYPE_UNDEFINED;
  kn_dtype tb = b ? b->dtype : KN_DTYPE_UNDEFINED;
  bool is_pow = strcmp(def->name, "Pow") == 0;
  if (is_pow) {
    st = pow_check(ctx, ta, tb);
    if (st) return st;
  } else {
    if (ta && tb && ta != tb)
      return kn_op_fail(ctx, KN_ERR_DTYPE, "inputs have dtypes %s and %s, expected the same",
                        kn_dtype_name(ta), kn_dtype_name(tb));
    kn_dtype t = ta ? ta : tb;
    bool str_eq = t == KN_DTYPE_STRING && strcmp(def->name, "Equal") == 0;
    if (t && !str_eq && (!kn_dtype_is_valid(t) || !tab[work_dtype(t)]))
      return kn_op_fail(ctx, KN_ERR_DTYPE, "dtype %s is not supported by %s",
                        kn_dtype_name(t) ? kn_dtype_name(t) : "unknown", def->name);
  }
  kn_dtype odt = def->bool_out ? KN_DTYPE_BOOL : (is_pow ? ta : (ta ? ta : tb));
  if (!a || !b) {
    if (!ctx->static_infer)
      return kn_op_fail(ctx, KN_ERR_MISSING, "both inputs are required");
    kn_out_set(ctx, 0, odt, -1, NULL);
    return KN_OK;
  }
  int32_t rb, ro;
  int64_t db[KN_MAX_RANK], dout[KN_MAX_RANK];
  st = bin_shapes(ctx, def, a, b, &rb, db, &ro, dout);
  if (st) return st;
  if (strcmp(def->name, "PRelu") == 0 && ro >= 0 && a->rank >= 0) {
    /* unidirectional: the output keeps X's shape */
    if (ro != a->rank)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "slope has more dims than X");
    for (int32_t i = 0; i < ro; i++) {
      if (a->dims[i] >= 0 && dout[i] != a->dims[i])
        return kn_op_fail(ctx, KN_ERR_SHAPE, "slope does not broadcast to X's shape");
      dout[i] = a->dims[i];
    }
  }
  kn_out_set(ctx, 0, odt, ro, dout);
  return KN_OK;
}

typedef struct bin_user {
  bin_k k;
} bin_user;

static void bin_row(const void *user, int64_t n, char *out, const char *const *in,
                    const int64_t *st) {
  ((const bin_user *)user)->k(n, in[0], st[0], in[1], st[1], out);
}

/* out (rank ro, dims dout, dtype wo) = k(a, b) with broadcasting; a and b
 * hold work-dtype data. */
static void bin_apply(bin_k k, int32_t ro, const int64_t *dout, void *out,
                      kn_dtype wo, const void *a, kn_dtype wa, int32_t ra,
                      const int64_t *da, const void *b, kn_dtype wb, int32_t rb,
                      const int64_t *db) {
  const void *data[2] = {a, b};
  size_t esz[2] = {kn_dtype_size(wa), kn_dtype_size(wb)};
  int32_t ranks[2] = {ra, rb};
  const int64_t *dims[2] = {da, db};
  bin_user u = {k};
  bcast_walk(ro, dout, out, kn_dtype_size(wo), 2, data, esz, ranks, dims, bin_row, &u);
}

static kn_status pow_run(kn_op_ctx *ctx, const kn_tensor *a, const kn_tensor *b,
                         int32_t rb, const int64_t *db, kn_tensor *o) {
  kn_dtype wa, wb;
  bin_k k;
  if (kn_dtype_is_float(a->dtype)) {
    wa = wb = a->dtype == KN_DTYPE_F64 ? KN_DTYPE_F64 : KN_DTYPE_F32;
    k = wa == KN_DTYPE_F64 ? pow_f64 : pow_f32;
  } else if (kn_dtype_is_int(b->dtype)) {
    wa = wb = KN_DTYPE_I64;
    k = pow_i64;
  } else {
    wa = wb = KN_DTYPE_F64;
    k = pow_f64;
  }
  const void *pa, *pb;
  void *ta = NULL, *tb = NULL, *po, *to = NULL;
  kn_status st = as_work(ctx, a, wa, &pa, &ta);
  if (!st) st = as_work(ctx, b, wb, &pb, &tb);
  if (!st) st = out_work(ctx, o, wa, &po, &to);
  if (!st) {
    bin_apply(k, o->rank, o->dims, po, wa, pa, wa, a->rank, a->dims, pb, wb, rb, db);
    if (to) kn_convert(to, wa, o->data, o->dtype, kn_tensor_numel(o));
  }
  free(ta);
  free(tb);
  free(to);
  return st;
}

static void str_eq_row(const void *user, int64_t n, char *out,
                       const char *const *in, const int64_t *st) {
  (void)user;
  const char *const *a = (const char *const *)(const void *)in[0];
  const char *const *b = (const char *const *)(const void *)in[1];
  for (int64_t i = 0; i < n; i++) {
    const char *x = a[i * st[0]], *y = b[i * st[1]];
    out[i] = strcmp(x ? x : "", y ? y : "") == 0;
  }
}

/* The start of a two-input op's run: inputs, shapes and output (binary.h),
 * and the op's kernel table. */
static kn_status bin_begin(kn_op_ctx *ctx, const bin_def *def, kn_binary_args *r,
                           const bin_k **tab) {
  kn_status st = kn_in_req(ctx, 0, &r->a);
  if (!st) st = kn_in_req(ctx, 1, &r->b);
  if (st) return st;
  st = bin_table(ctx, def, tab);
  if (st) return st;
  st = bin_shapes(ctx, def, r->a, r->b, &r->rb, r->db, &r->ro, r->dout);
  if (st) return st;
  kn_dtype odt = def->bool_out ? KN_DTYPE_BOOL : r->a->dtype;
  return out_checked(ctx, odt, r->ro, r->dout, &r->o);
}

kn_status kn_binary_begin(kn_op_ctx *ctx, kn_binary_args *r) {
  const bin_k *tab;
  return bin_begin(ctx, find_bin(ctx), r, &tab);
}

static kn_status bin_run(kn_op_ctx *ctx) {
  const bin_def *def = find_bin(ctx);
  kn_binary_args r;
  const bin_k *tab;
  kn_status st = bin_begin(ctx, def, &r, &tab);
  if (st) return st;
  const kn_tensor *a = r.a, *b = r.b;
  kn_tensor *o = r.o;
  int32_t rb = r.rb, ro = r.ro;
  const int64_t *db = r.db, *dout = r.dout;
  if (strcmp(def->name, "Pow") == 0) return pow_run(ctx, a, b, rb, db, o);
  if (a->dtype != b->dtype)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "inputs have dtypes %s and %s, expected the same",
                      kn_dtype_name(a->dtype), kn_dtype_name(b->dtype));
  if (a->dtype == KN_DTYPE_STRING && strcmp(def->name, "Equal") == 0) {
    const void *data[2] = {a->data, b->data};
    size_t esz[2] = {sizeof(char *), sizeof(char *)};
    int32_t ranks[2] = {a->rank, rb};
    const int64_t *dims[2] = {a->dims, db};
    bcast_walk(ro, dout, o->data, 1, 2, data, esz, ranks, dims, str_eq_row, NULL);
    return KN_OK;
  }
  kn_dtype w = work_dtype(a->dtype);
  bin_k k = kn_dtype_is_valid(w) ? tab[w] : NULL;
  if (!k)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "dtype %s is not supported by %s",
                      kn_dtype_name(a->dtype), def->name);
  kn_dtype wo = def->bool_out ? KN_DTYPE_BOOL : w;
  const void *pa, *pb;
  void *ta = NULL, *tb = NULL, *po, *to = NULL;
  st = as_work(ctx, a, w, &pa, &ta);
  if (!st) st = as_work(ctx, b, w, &pb, &tb);
  if (!st) st = out_work(ctx, o, wo, &po, &to);
  if (!st) {
    bin_apply(k, ro, dout, po, wo, pa, w, a->rank, a->dims, pb, w, rb, db);
    if (to) kn_convert(to, wo, o->data, o->dtype, kn_tensor_numel(o));
  }
  free(ta);
  free(tb);
  free(to);
  return st;
}

/* ---- variadic Min, Max, Sum, Mean ---------------------------------------- */

static const bin_k *var_table(const kn_op_ctx *ctx) {
  const char *n = ctx->node->op_type;
  if (strcmp(n, "Min") == 0) return min_tab;
  if (strcmp(n, "Max") == 0) return max_tab;
  return add_tab;
}

static kn_status var_infer(kn_op_ctx *ctx) {
  bool mean = strcmp(ctx->node->op_type, "Mean") == 0;
  const bin_k *tab = var_table(ctx);
  kn_dtype dt = KN_DTYPE_UNDEFINED;
  int32_t ro = 0;
  int64_t dout[KN_MAX_RANK];
  if (ctx->n_in < 1) return kn_op_fail(ctx, KN_ERR_MISSING, "needs at least one input");
  for (int32_t i = 0; i < ctx->n_in; i++) {
    const kn_tensor *t = kn_in(ctx, i);
    if (!t) {
      if (!ctx->static_infer)
        return kn_op_fail(ctx, KN_ERR_MISSING, "input %d is missing", (int)i);
      ro = -1;
      continue;
    }
    if (t->dtype) {
      if (dt && t->dtype != dt)
        return kn_op_fail(ctx, KN_ERR_DTYPE, "input %d has dtype %s, expected %s like input 0",
                          (int)i, kn_dtype_name(t->dtype), kn_dtype_name(dt));
      dt = t->dtype;
    }
    if (i == 0) {
      ro = t->rank;
      for (int32_t d = 0; d < t->rank; d++) dout[d] = t->dims[d];
    } else {
      int64_t tmp[KN_MAX_RANK];
      int32_t rt;
      kn_status st = kn_broadcast(ctx, ro, dout, t->rank, t->dims, &rt, tmp);
      if (st) return st;
      ro = rt;
      for (int32_t d = 0; d < rt; d++) dout[d] = tmp[d];
    }
  }
  if (dt) {
    kn_dtype w = work_dtype(dt);
    if (!kn_dtype_is_valid(dt) || !tab[w] || (mean && !kn_dtype_is_float(dt)))
      return kn_op_fail(ctx, KN_ERR_DTYPE, "dtype %s is not supported by %s",
                        kn_dtype_name(dt) ? kn_dtype_name(dt) : "unknown",
                        ctx->node->op_type);
  }
  kn_out_set(ctx, 0, dt, ro, dout);
  return KN_OK;
}

kn_status kn_variadic_begin(kn_op_ctx *ctx, int32_t *ro, int64_t *dout, kn_tensor **o) {
  kn_status st = var_infer(ctx);
  if (st) return st;
  const kn_tensor *in0 = kn_in(ctx, 0);
  kn_tensor *req = kn_out(ctx, 0);
  *ro = req->rank;
  for (int32_t d = 0; d < *ro; d++) dout[d] = req->dims[d];
  return out_checked(ctx, in0->dtype, *ro, dout, o);
}

static kn_status var_run(kn_op_ctx *ctx) {
  int32_t ro;
  int64_t dout[KN_MAX_RANK];
  kn_tensor *o;
  kn_status st = kn_variadic_begin(ctx, &ro, dout, &o);
  if (st) return st;
  bool mean = strcmp(ctx->node->op_type, "Mean") == 0;
  const kn_tensor *in0 = kn_in(ctx, 0);
  kn_dtype w = work_dtype(in0->dtype);
  bin_k k = var_table(ctx)[w];
  size_t es = kn_dtype_size(w);
  void *po, *to = NULL;
  st = out_work(ctx, o, w, &po, &to);
  if (st) return st;
  int64_t n = kn_tensor_numel(o);
  if (ctx->n_in == 1) {
    /* o has in0's shape */
    const void *p = NULL;
    void *tmp;
    st = as_work(ctx, in0, w, &p, &tmp);
    if (st) goto done;
    memcpy(po, p, (size_t)n * es);
    free(tmp);
  }
  for (int32_t i = 1; i < ctx->n_in; i++) {
    const kn_tensor *t = kn_in(ctx, i);
    const void *p = NULL;
    void *tmp;
    st = as_work(ctx, t, w, &p, &tmp);
    if (st) goto done;
    if (i == 1) {
      const void *p0;
      void *tmp0;
      st = as_work(ctx, in0, w, &p0, &tmp0);
      if (st) {
        free(tmp);
        goto done;
      }
      bin_apply(k, ro, dout, po, w, p0, w, in0->rank, in0->dims, p, w, t->rank,
                t->dims);
      free(tmp0);
    } else {
      bin_apply(k, ro, dout, po, w, po, w, ro, dout, p, w, t->rank, t->dims);
    }
    free(tmp);
  }
  if (mean) {
    if (w == KN_DTYPE_F64) {
      double *x = po;
      for (int64_t i = 0; i < n; i++) x[i] /= (double)ctx->n_in;
    } else {
      float *x = po;
      for (int64_t i = 0; i < n; i++) x[i] /= (float)ctx->n_in;
    }
  }
  if (to) kn_convert(to, w, o->data, o->dtype, n);
done:
  free(to);
  return st;
}

/* ---- Where --------------------------------------------------------------- */

#define WHERE_ROW(NAME, T)                                                     \
  static void NAME(const void *user, int64_t n, char *out,                     \
                   const char *const *in, const int64_t *st) {                 \
    (void)user;                                                                \
    const uint8_t *c = (const uint8_t *)in[0];                                 \
    const T *x = (const T *)(const void *)in[1];                               \
    const T *y = (const T *)(const void *)in[2];                               \
    T *o = (T *)(void *)out;                                                   \
    for (int64_t i = 0; i < n; i++)                                            \
      o[i] = c[i * st[0]] ? x[i * st[1]] : y[i * st[2]];                       \
  }
WHERE_ROW(where_1, uint8_t)
WHERE_ROW(where_2, uint16_t)
WHERE_ROW(where_4, uint32_t)
WHERE_ROW(where_8, uint64_t)

static kn_status where_shape(kn_op_ctx *ctx, const kn_tensor *c, const kn_tensor *x,
                             const kn_tensor *y, int32_t *ro, int64_t *dout) {
  int64_t tmp[KN_MAX_RANK];
  int32_t rt;
  kn_status st = kn_broadcast(ctx, c->rank, c->dims, x->rank, x->dims, &rt, tmp);
  if (st) return st;
  return kn_broadcast(ctx, rt, tmp, y->rank, y->dims, ro, dout);
}

static kn_status where_infer(kn_op_ctx *ctx) {
  const kn_tensor *c = kn_in(ctx, 0), *x = kn_in(ctx, 1), *y = kn_in(ctx, 2);
  if (c && c->dtype && c->dtype != KN_DTYPE_BOOL)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "condition has dtype %s, expected bool",
                      kn_dtype_name(c->dtype));
  kn_dtype dt = x && x->dtype ? x->dtype : (y ? y->dtype : KN_DTYPE_UNDEFINED);
  if (x && y && x->dtype && y->dtype && x->dtype != y->dtype)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "X has dtype %s and Y %s, expected the same",
                      kn_dtype_name(x->dtype), kn_dtype_name(y->dtype));
  if (!c || !x || !y) {
    if (!ctx->static_infer)
      return kn_op_fail(ctx, KN_ERR_MISSING, "all three inputs are required");
    kn_out_set(ctx, 0, dt, -1, NULL);
    return KN_OK;
  }
  int32_t ro;
  int64_t dout[KN_MAX_RANK];
  kn_status st = where_shape(ctx, c, x, y, &ro, dout);
  if (st) return st;
  kn_out_set(ctx, 0, dt, ro, dout);
  return KN_OK;
}

static kn_status where_run(kn_op_ctx *ctx) {
  const kn_tensor *c, *x, *y;
  kn_status st = kn_in_req(ctx, 0, &c);
  if (!st) st = kn_in_req(ctx, 1, &x);
  if (!st) st = kn_in_req(ctx, 2, &y);
  if (st) return st;
  if (c->dtype != KN_DTYPE_BOOL || x->dtype != y->dtype)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "expected a bool condition and X, Y of one dtype");
  int32_t ro;
  int64_t dout[KN_MAX_RANK];
  st = where_shape(ctx, c, x, y, &ro, dout);
  if (st) return st;
  kn_tensor *o;
  st = out_checked(ctx, x->dtype, ro, dout, &o);
  if (st) return st;
  size_t es = kn_dtype_size(x->dtype);
  row_fn fn = es == 1 ? where_1 : es == 2 ? where_2 : es == 4 ? where_4 : where_8;
  KN_ASSERT(es == 1 || es == 2 || es == 4 || es == 8);
  const void *data[3] = {c->data, x->data, y->data};
  size_t esz[3] = {1, es, es};
  int32_t ranks[3] = {c->rank, x->rank, y->rank};
  const int64_t *dims[3] = {c->dims, x->dims, y->dims};
  bcast_walk(ro, dout, o->data, es, 3, data, esz, ranks, dims, fn, NULL);
  if (x->dtype == KN_DTYPE_STRING) {
    /* the walk copied borrowed pointers: make them owned copies */
    char **s = o->data;
    int64_t n = kn_tensor_numel(o);
    for (int64_t i = 0; i < n; i++) {
      s[i] = kn_strdup(s[i] ? s[i] : "");
      if (!s[i]) {
        for (int64_t j = i; j < n; j++) s[j] = NULL;
        return kn_op_fail(ctx, KN_ERR_OOM, "out of memory copying strings");
      }
    }
  }
  return KN_OK;
}

#define BIN(NAME, SINCE)                                                       \
  {NAME, NULL, 2, 2, 1, 1, SINCE, 22, bin_infer, bin_run, NULL}
#define VAR(NAME)                                                              \
  {NAME, NULL, 1, -1, 1, 1, 1, 22, var_infer, var_run, NULL}

const kn_op_def kn_ops_binary[] = {
    BIN("Add", 1),
    BIN("Sub", 1),
    BIN("Mul", 1),
    BIN("Div", 1),
    BIN("Mod", 10),
    BIN("Pow", 1),
    BIN("BitShift", 11),
    BIN("And", 1),
    BIN("Or", 1),
    BIN("Xor", 1),
    BIN("BitwiseAnd", 18),
    BIN("BitwiseOr", 18),
    BIN("BitwiseXor", 18),
    BIN("Equal", 1),
    BIN("Less", 1),
    BIN("Greater", 1),
    BIN("LessOrEqual", 12),
    BIN("GreaterOrEqual", 12),
    BIN("PRelu", 1),
    VAR("Min"),
    VAR("Max"),
    VAR("Sum"),
    VAR("Mean"),
    {"Where", NULL, 3, 3, 1, 1, 9, 22, where_infer, where_run, NULL},
    KN_OP_END,
};
