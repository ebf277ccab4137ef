/*
 * The elementwise kernels, written once against a small vector interface and
 * instantiated per ISA: eltwise-avx512.c (16 lanes), eltwise-avx2.c (8) and
 * eltwise-portable.c (1 lane, plain C).  The including file defines:
 *
 *   V, M, VD          float vector, lane mask, vector of double accumulators
 *   VN                lanes
 *   KN_EW_TABLE       name of the kn_ew_ukernels table to define
 *   v_ld v_st         unaligned load / store of VN floats
 *   v_ldn(p, n, f)    load n < VN floats, other lanes f; v_stn(p, v, n)
 *   v_set v_add v_sub v_mul v_div v_sqrt v_abs v_neg
 *   v_fma(a, b, c)    a * b + c (fused on x86; two roundings in portable C)
 *   v_fnma(a, b, c)   c - a * b
 *   v_max(a, b)       a > b ? a : b   (x86 maxps: b when either is NaN)
 *   v_min(a, b)       a < b ? a : b
 *   v_clamp_abs(a, l) a with |a| limited to l > 0, sign kept, NaN stays NaN
 *                     (one vrangeps on AVX-512)
 *   v_lt v_gt v_nan   comparisons to M (false on NaN), isnan
 *   v_or(m1, m2)      mask or;  v_sel(m, t, f): m ? t : f per lane
 *   v_copysign(a, s)  |a| with the sign of s
 *   v_rnd_exp(x, &n)  n = round-to-nearest(x) as a float, |x| < 2^22
 *   v_ldexp(p, n)     p * 2^n for integral n in [-150, 128], rounded once
 *                     (results below 2^-126 are denormals, not flushed)
 *   v_hsum v_hmax     horizontal sum / max
 *   vd_zero vd_acc vd_hsum   double accumulation of float vectors
 *
 * Argument order in v_max / v_min is chosen everywhere so that NaN inputs
 * propagate as they do in the reference ops (src/ops).
 *
 * ---- the approximations (coefficients fitted with mpmath.chebyfit on the
 * stated intervals; errors MEASURED by tests/unit/test_vmath.c against
 * double-precision libm over every 256th float bit pattern, i.e. 2^24
 * values covering every exponent, and over all 2^32 with KILN_LONG_TESTS=1;
 * ulp = spacing of floats at the exact result, 2^-149 in the denormal
 * range; the bounds below are the largest over AVX-512, AVX2 and portable):
 *
 * exp(x): n = round(x / ln 2), r = x - n ln 2 (two-part ln 2),
 *   e^r = 1 + r (1 + r P(r)), P of degree 4 fitted for minimax relative
 *   error (Lawson's algorithm) on [-ln2/2, ln2/2] (3e-9), then
 *   scaled by 2^n in two exact steps so denormal results are rounded once.
 *   x > 88.7228 gives +inf, x < -103.98 gives 0, NaN gives NaN.
 *   Max error: 1.2 ulp, relative 1e-7 (measured 0.85 ulp with FMA, 1.12
 *   in portable C) over all x with a finite result.
 * erf(x): |x| < 1: x + x (P(x^2) - 1), P of degree 6 (relative 1e-9);
 *   1 <= |x| < 3.92: a degree-14 polynomial in |x| - 2.46 (absolute
 *   7e-9); |x| >= 3.92: +-1 (erfc(3.92) = 5e-9 is below half an ulp of 1).
 *   Max error: 1.6 ulp, absolute 9.2e-8, relative 1.1e-7 (measured over
 *   all 2^32 inputs: 1.39 ulp with FMA, 1.53 portable).
 * tanh(x): |x| < 0.625: x + x^3 P(x^2), P of degree 5;  otherwise
 *   (1 - e) / (1 + e) with e = exp(-2|x|), sign restored.
 *   Max error: 1.6 ulp, relative 1.6e-7 (measured 1.50 / 1.52).
 * sigmoid(x): e = exp(-|x|), q = e / (1 + e); x < 0 ? q : 1 - q.
 *   Max error: 2.5 ulp, relative 1.9e-7 (measured over all 2^32 inputs:
 *   2.40 with FMA and portable); below
 *   about -87 the exact result is
 *   a denormal or underflows and the absolute error stays below 2^-126.
 * SiLU(x) = x sigmoid(x), computed as x / (1 + e^-x): a shorter chain
 *   than x times the sigmoid above (5.8 against 4.7 Gelem/s on Zen 5).
 *   Max error: 2.5 ulp, relative 2e-7 for x >= -88.  Below, where the
 *   exact result lies in (-6e-37, 0), e^-x overflows near -88.7 and the
 *   result becomes -0: absolute error under 6e-37.  -inf gives NaN, as
 *   -inf * sigmoid(-inf) does in the reference.
 * GELU (erf form) 0.5 x (1 + erf(x / sqrt 2)) and the tanh form inherit
 *   erf's / tanh's absolute error times |x| / 2, like the float reference:
 *   for x < -3 the cancellation in 1 + erf leaves an absolute error of
 *   about |x| 6e-8, which is also the reference's.
 * (test_vmath.c asserts these bounds; update both together.)
 */
#ifndef KN_EW_TABLE
#error "define the vector interface before including eltwise-impl.h"
#endif

#include <math.h>

#define KN_EW_INLINE static inline __attribute__((always_inline))

/* ---- exp ------------------------------------------------------------------ */

#define EXP_HI 89.0f   /* e^89 > FLT_MAX: +inf after scaling */
#define EXP_LO -104.0f /* e^-104 < 2^-150: 0 after rounding */
#define LOG2E 1.44269504088896341f
#define LN2_HI 0.693145751953125f     /* ln 2 with 9 trailing zero bits */
#define LN2_LO 1.42860682030941723e-6f /* ln 2 - LN2_HI */
#define EXP_C2 0.49999993451353547f
#define EXP_C3 0.16666520691192696f
#define EXP_C4 0.04166838751888473f
#define EXP_C5 0.008368709679731655f
#define EXP_C6 0.0013814600464927985f

KN_EW_INLINE V vexp(V x) {
  x = v_min(v_set(EXP_HI), v_max(v_set(EXP_LO), x)); /* NaN stays NaN */
  V n;
  v_rnd_exp(v_mul(x, v_set(LOG2E)), &n);
  V r = v_fnma(n, v_set(LN2_HI), x);
  r = v_fnma(n, v_set(LN2_LO), r);
  V q = v_fma(v_set(EXP_C6), r, v_set(EXP_C5));
  q = v_fma(q, r, v_set(EXP_C4));
  q = v_fma(q, r, v_set(EXP_C3));
  q = v_fma(q, r, v_set(EXP_C2));
  q = v_fma(q, r, v_set(1.0f));
  V p = v_fma(q, r, v_set(1.0f));
  return v_ldexp(p, n);
}

/* ---- erf ------------------------------------------------------------------ */

#define ERF_SPLIT 1.0f
#define ERF_ONE 3.92f
#define ERF_MID 2.46f

KN_EW_INLINE V verf(V x) {
  V z = v_abs(x);
  /* |x| < 1: erf(z) / z as a polynomial in z^2 */
  V t = v_mul(z, z);
  V s = v_fma(v_set(7.875875062685488e-05f), t, v_set(-0.000801686428716587f));
  s = v_fma(s, t, v_set(0.005189087423433974f));
  s = v_fma(s, t, v_set(-0.026854212010626412f));
  s = v_fma(s, t, v_set(0.11283594715160218f));
  s = v_fma(s, t, v_set(-0.37612626666720334f));
  /* erf = z + z (P(t) - 1): the leading 1.128 z is not rounded twice */
  s = v_fma(s, t, v_set(0.1283791658483509f));
  s = v_fma(s, z, z);
  /* 1 <= |x| < 3.92: erf directly, a polynomial in u = z - 2.46 */
  V u = v_sub(v_min(v_set(ERF_ONE), z), v_set(ERF_MID));
  V l = v_fma(v_set(1.0989251044616579e-06f), u, v_set(8.3181555819262082e-08f));
  l = v_fma(l, u, v_set(-1.7363989928962038e-05f));
  l = v_fma(l, u, v_set(2.4786983368633081e-05f));
  l = v_fma(l, u, v_set(7.5916105740055529e-05f));
  l = v_fma(l, u, v_set(-0.0002998321068833967f));
  l = v_fma(l, u, v_set(0.0003557790692273377f));
  l = v_fma(l, u, v_set(0.00045960713322969437f));
  l = v_fma(l, u, v_set(-0.0029370916389787277f));
  l = v_fma(l, u, v_set(0.0067993736563741608f));
  l = v_fma(l, u, v_set(-0.0099142081431660284f));
  l = v_fma(l, u, v_set(0.0098325029653995085f));
  l = v_fma(l, u, v_set(-0.006534517988854991f));
  l = v_fma(l, u, v_set(0.0026562335678533707f));
  l = v_fma(l, u, v_set(0.99949664635944202f));
  l = v_min(v_set(1.0f), l);
  V r = v_sel(v_lt(z, v_set(ERF_SPLIT)), s, l);
  r = v_sel(v_gt(z, v_set(ERF_ONE)), v_set(1.0f), r);
  return v_copysign(r, x);
}

/* ---- tanh and sigmoid ----------------------------------------------------- */

#define TANH_SPLIT 0.625f

KN_EW_INLINE V vtanh(V x) {
  V z = v_abs(x);
  V t = v_mul(z, z);
  V q = v_fma(v_set(0.002292744816178142f), t, v_set(-0.008343945515839153f));
  q = v_fma(q, t, v_set(0.02176891865102821f));
  q = v_fma(q, t, v_set(-0.053959259577204544f));
  q = v_fma(q, t, v_set(0.1333330355691574f));
  q = v_fma(q, t, v_set(-0.3333333317214036f));
  V s = v_fma(v_mul(q, t), z, z);
  V e = vexp(v_mul(z, v_set(-2.0f)));
  V l = v_div(v_sub(v_set(1.0f), e), v_add(v_set(1.0f), e));
  V r = v_sel(v_lt(z, v_set(TANH_SPLIT)), s, l);
  return v_copysign(r, x);
}

KN_EW_INLINE V vsigmoid(V x) {
  V e = vexp(v_neg(v_abs(x)));
  V q = v_div(e, v_add(v_set(1.0f), e));
  return v_sel(v_lt(x, v_set(0.0f)), q, v_sub(v_set(1.0f), q));
}

/* SiLU, x / (1 + e^-x) (see the top).  e^-x as vexp computes it, with
 * fewer vector operations (the whole function is bound by their number,
 * about two a cycle on Zen 5): the argument clamped in one step (|x| <=
 * 104: e^-104 is 0 and e^104 inf after the scaling, as vexp's clamps give),
 * n = round(-x log2 e) from a multiply by the negated constant, r = x +
 * n ln 2 = -(vexp's r) and the polynomial with its odd terms' signs
 * flipped, P(-r).  Negation is exact in every step, so the bits are
 * vexp(-x)'s: 16 operations a vector become 14. */
KN_EW_INLINE V vsilu(V x) {
  V t = v_clamp_abs(x, v_set(-EXP_LO));
  V n;
  v_rnd_exp(v_mul(t, v_set(-LOG2E)), &n);
  V r = v_fma(n, v_set(LN2_HI), t);
  r = v_fma(n, v_set(LN2_LO), r);
  V q = v_fma(v_set(EXP_C6), r, v_set(-EXP_C5));
  q = v_fma(q, r, v_set(EXP_C4));
  q = v_fma(q, r, v_set(-EXP_C3));
  q = v_fma(q, r, v_set(EXP_C2));
  q = v_fma(q, r, v_set(-1.0f));
  V p = v_fma(q, r, v_set(1.0f));
  return v_div(x, v_add(v_set(1.0f), v_ldexp(p, n)));
}

/* ---- activations and unary ops -------------------------------------------- */

typedef struct vparams {
  V alpha, beta, lo, hi;
} vparams;

KN_EW_INLINE vparams vparams_of(const kn_act_params *p) {
  vparams v;
  v.alpha = v_set(p ? p->alpha : 0.0f);
  v.beta = v_set(p ? p->beta : 0.0f);
  v.lo = v_set(p ? p->lo : 0.0f);
  v.hi = v_set(p ? p->hi : 0.0f);
  return v;
}

/* op(x) for a kn_act or kn_vop; op is a constant at every call site. */
KN_EW_INLINE V act_v(int op, const vparams *p, V x) {
  switch (op) {
  case KN_ACT_NONE: return x;
  case KN_ACT_RELU: return v_max(v_set(0.0f), x);
  case KN_ACT_CLIP: return v_min(p->hi, v_max(p->lo, x));
  case KN_ACT_LEAKYRELU: return v_sel(v_lt(x, v_set(0.0f)), v_mul(p->alpha, x), x);
  case KN_ACT_HARDSIGMOID:
    return v_max(v_min(v_fma(p->alpha, x, p->beta), v_set(1.0f)), v_set(0.0f));
  case KN_ACT_HARDSWISH:
    return v_mul(x, v_max(v_min(v_fma(x, v_set(1.0f / 6.0f), v_set(0.5f)), v_set(1.0f)),
                          v_set(0.0f)));
  case KN_ACT_SIGMOID: return vsigmoid(x);
  case KN_ACT_SILU: return vsilu(x);
  case KN_ACT_TANH: return vtanh(x);
  case KN_ACT_GELU: {
    V h = v_mul(x, v_set(0.5f));
    return v_fma(h, verf(v_mul(x, v_set(0.70710678118654752f))), h);
  }
  case KN_ACT_GELU_TANH: {
    V x3 = v_mul(v_mul(x, x), x);
    V u = v_mul(v_set(0.7978845608028654f), v_fma(v_set(0.044715f), x3, x));
    V h = v_mul(x, v_set(0.5f));
    return v_fma(h, vtanh(u), h);
  }
  case KN_VOP_EXP: return vexp(x);
  case KN_VOP_ERF: return verf(x);
  case KN_VOP_NEG: return v_neg(x);
  case KN_VOP_ABS: return v_abs(x);
  case KN_VOP_SQRT: return v_sqrt(x);
  case KN_VOP_RECIPROCAL: return v_div(v_set(1.0f), x);
  default: return x;
  }
}

/* Every op, as `case OP: CALL(OP); break;` */
#define EW_ALL_OPS(CALL)                                                       \
  case KN_ACT_NONE: CALL(KN_ACT_NONE); break;                                  \
  case KN_ACT_RELU: CALL(KN_ACT_RELU); break;                                  \
  case KN_ACT_CLIP: CALL(KN_ACT_CLIP); break;                                  \
  case KN_ACT_LEAKYRELU: CALL(KN_ACT_LEAKYRELU); break;                        \
  case KN_ACT_HARDSIGMOID: CALL(KN_ACT_HARDSIGMOID); break;                    \
  case KN_ACT_HARDSWISH: CALL(KN_ACT_HARDSWISH); break;                        \
  case KN_ACT_SIGMOID: CALL(KN_ACT_SIGMOID); break;                            \
  case KN_ACT_SILU: CALL(KN_ACT_SILU); break;                                  \
  case KN_ACT_TANH: CALL(KN_ACT_TANH); break;                                  \
  case KN_ACT_GELU: CALL(KN_ACT_GELU); break;                                  \
  case KN_ACT_GELU_TANH: CALL(KN_ACT_GELU_TANH); break;                        \
  case KN_VOP_EXP: CALL(KN_VOP_EXP); break;                                    \
  case KN_VOP_ERF: CALL(KN_VOP_ERF); break;                                    \
  case KN_VOP_NEG: CALL(KN_VOP_NEG); break;                                    \
  case KN_VOP_ABS: CALL(KN_VOP_ABS); break;                                    \
  case KN_VOP_SQRT: CALL(KN_VOP_SQRT); break;                                  \
  case KN_VOP_RECIPROCAL: CALL(KN_VOP_RECIPROCAL); break;

KN_EW_INLINE void unary_body(int op, const vparams *p, const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 2 * VN <= n; i += 2 * VN) {
    V a = act_v(op, p, v_ld(x + i)), b = act_v(op, p, v_ld(x + i + VN));
    v_st(y + i, a);
    v_st(y + i + VN, b);
  }
  for (; i + VN <= n; i += VN) v_st(y + i, act_v(op, p, v_ld(x + i)));
  if (i < n) v_stn(y + i, act_v(op, p, v_ldn(x + i, n - i, 0.0f)), n - i);
}

static void ew_unary(int op, const kn_act_params *p, const float *x, float *y, int64_t n) {
  vparams vp = vparams_of(p);
#define CALL(OP) unary_body(OP, &vp, x, y, n)
  switch (op) { EW_ALL_OPS(CALL) default: KN_ASSERT(!"unknown unary op"); }
#undef CALL
}

/* ---- binary ops ----------------------------------------------------------- */

KN_EW_INLINE V bin_v(int op, V a, V b) {
  switch (op) {
  case KN_VBIN_ADD: return v_add(a, b);
  case KN_VBIN_SUB: return v_sub(a, b);
  case KN_VBIN_MUL: return v_mul(a, b);
  case KN_VBIN_DIV: return v_div(a, b);
  case KN_VBIN_MAX: return v_sel(v_or(v_gt(a, b), v_nan(a)), a, b);
  case KN_VBIN_MIN: return v_sel(v_or(v_lt(a, b), v_nan(a)), a, b);
  case KN_VBIN_PRELU: return v_sel(v_lt(a, v_set(0.0f)), v_mul(a, b), a);
  default: return a;
  }
}

/* sa, sb: 0 (one broadcast value) or 1; constants at every call site. */
KN_EW_INLINE void binary_body(int op, const float *a, int sa, const float *b, int sb,
                              float *y, int64_t n) {
  V a0 = sa ? v_set(0.0f) : v_set(a[0]), b0 = sb ? v_set(0.0f) : v_set(b[0]);
  int64_t i = 0;
  for (; i + VN <= n; i += VN)
    v_st(y + i, bin_v(op, sa ? v_ld(a + i) : a0, sb ? v_ld(b + i) : b0));
  if (i < n) {
    int64_t k = n - i;
    v_stn(y + i, bin_v(op, sa ? v_ldn(a + i, k, 1.0f) : a0, sb ? v_ldn(b + i, k, 1.0f) : b0),
          k);
  }
}

static void ew_binary(int op, const float *a, int sa, const float *b, int sb, float *y,
                      int64_t n) {
#define BIN_CASE(OP)                                                           \
  case OP:                                                                     \
    if (sa && sb) binary_body(OP, a, 1, b, 1, y, n);                           \
    else if (sa) binary_body(OP, a, 1, b, 0, y, n);                            \
    else if (sb) binary_body(OP, a, 0, b, 1, y, n);                            \
    else binary_body(OP, a, 0, b, 0, y, n);                                    \
    break;
  switch (op) {
    BIN_CASE(KN_VBIN_ADD)
    BIN_CASE(KN_VBIN_SUB)
    BIN_CASE(KN_VBIN_MUL)
    BIN_CASE(KN_VBIN_DIV)
    BIN_CASE(KN_VBIN_MAX)
    BIN_CASE(KN_VBIN_MIN)
    BIN_CASE(KN_VBIN_PRELU)
  default: KN_ASSERT(!"unknown binary op");
  }
#undef BIN_CASE
}

/* ---- the fused epilogue ----------------------------------------------------- */

/* Whole vectors of the epilogue: the bias of the row (brow, when
 * row_bias) or of the columns (bcol), the residual before or after the
 * activation, in the reference order. */
typedef struct epi_row {
  V brow;
  bool row_bias;
  const float *bcol, *res;
  bool res_first, res_last;
} epi_row;

KN_EW_INLINE V epilogue_v(int op, const vparams *p, const epi_row *e, V v, int64_t j) {
  const float *res = e->res;
  if (e->row_bias) v = v_add(v, e->brow);
  else if (e->bcol) v = v_add(v, v_ld(e->bcol + j));
  if (e->res_first) v = v_add(v, v_ld(res + j));
  v = act_v(op, p, v);
  if (e->res_last) v = v_add(v, v_ld(res + j));
  return v;
}

KN_EW_INLINE void epilogue_body(int op, const vparams *p, const kn_epilogue *ep, float *c,
                                int64_t ldc, int64_t r0, int64_t m, int64_t c0,
                                int64_t n) {
  const bool has_bias = ep->bias != NULL, per_row = ep->bias_per_row;
  const bool res_first = ep->res && ep->res_first, res_last = ep->res && !ep->res_first;
  for (int64_t i = 0; i < m; i++) {
    float *row = c + i * ldc;
    const float *res = ep->res ? ep->res + (r0 + i) * ep->ldr + c0 : NULL;
    const float *bcol = has_bias && !per_row ? ep->bias + c0 : NULL;
    V brow = v_set(has_bias && per_row ? ep->bias[r0 + i] : 0.0f);
    const epi_row e = {brow, has_bias && per_row, bcol, res, res_first, res_last};
    int64_t j = 0;
    /* two vectors per step: the activations are long dependency chains
     * (SiLU on 6 x 64 tiles, with a copy in: 3.0 -> 3.7 Gelem/s) */
    for (; j + 2 * VN <= n; j += 2 * VN) {
      V v = epilogue_v(op, p, &e, v_ld(row + j), j);
      V w = epilogue_v(op, p, &e, v_ld(row + j + VN), j + VN);
      v_st(row + j, v);
      v_st(row + j + VN, w);
    }
    for (; j + VN <= n; j += VN) v_st(row + j, epilogue_v(op, p, &e, v_ld(row + j), j));
    if (j < n) {
      int64_t k = n - j;
      V v = v_ldn(row + j, k, 0.0f);
      if (has_bias) v = v_add(v, per_row ? brow : v_ldn(bcol + j, k, 0.0f));
      if (res_first) v = v_add(v, v_ldn(res + j, k, 0.0f));
      v = act_v(op, p, v);
      if (res_last) v = v_add(v, v_ldn(res + j, k, 0.0f));
      v_stn(row + j, v, k);
    }
  }
}

static void ew_epilogue(const kn_epilogue *ep, float *c, int64_t ldc, int64_t r0, int64_t m,
                        int64_t c0, int64_t n) {
  vparams vp = vparams_of(&ep->act);
#define CALL(OP) epilogue_body(OP, &vp, ep, c, ldc, r0, m, c0, n)
  switch ((int)ep->act.act) { EW_ALL_OPS(CALL) default: KN_ASSERT(!"unknown activation"); }
#undef CALL
}

/* ---- softmax ---------------------------------------------------------------- */

static void ew_softmax_rows(const float *x, float *y, int64_t rows, int64_t len, bool log) {
  if (len <= 0) return;
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * len;
    float *yr = y + r * len;
    V mv = v_set(-INFINITY);
    int64_t i = 0;
    for (; i + VN <= len; i += VN) mv = v_max(v_ld(xr + i), mv);
    if (i < len) mv = v_max(v_ldn(xr + i, len - i, -INFINITY), mv);
    float m = v_hmax(mv);
    V vm = v_set(m);
    V s0 = v_set(0.0f), s1 = v_set(0.0f);
    i = 0;
    for (; i + 2 * VN <= len; i += 2 * VN) {
      V e0 = vexp(v_sub(v_ld(xr + i), vm)), e1 = vexp(v_sub(v_ld(xr + i + VN), vm));
      if (!log) {
        v_st(yr + i, e0);
        v_st(yr + i + VN, e1);
      }
      s0 = v_add(s0, e0);
      s1 = v_add(s1, e1);
    }
    for (; i + VN <= len; i += VN) {
      V e = vexp(v_sub(v_ld(xr + i), vm));
      if (!log) v_st(yr + i, e);
      s0 = v_add(s0, e);
    }
    if (i < len) {
      /* lanes past the row load -inf: e^-inf = 0 adds nothing */
      V e = vexp(v_sub(v_ldn(xr + i, len - i, -INFINITY), vm));
      if (!log) v_stn(yr + i, e, len - i);
      s0 = v_add(s0, e);
    }
    float sum = v_hsum(v_add(s0, s1));
    if (!log) {
      V inv = v_set(1.0f / sum);
      for (i = 0; i + VN <= len; i += VN) v_st(yr + i, v_mul(v_ld(yr + i), inv));
      if (i < len) v_stn(yr + i, v_mul(v_ldn(yr + i, len - i, 0.0f), inv), len - i);
    } else {
      V sh = v_set(m + logf(sum));
      for (i = 0; i + VN <= len; i += VN) v_st(yr + i, v_sub(v_ld(xr + i), sh));
      if (i < len) v_stn(yr + i, v_sub(v_ldn(xr + i, len - i, 0.0f), sh), len - i);
    }
  }
}

/* Loads / stores of `cols` lanes starting at p (full vectors, then a tail). */
#define COLS_LOOP(BODY)                                                        \
  do {                                                                         \
    int64_t c_ = 0;                                                            \
    for (; c_ + VN <= cols; c_ += VN) {                                        \
      const int64_t k_ = VN;                                                   \
      (void)k_;                                                                \
      BODY                                                                     \
    }                                                                          \
    if (c_ < cols) {                                                           \
      const int64_t k_ = cols - c_;                                            \
      BODY                                                                     \
    }                                                                          \
  } while (0)
#define LDK(p) (k_ == VN ? v_ld(p) : v_ldn(p, k_, 0.0f))
#define STK(p, v) (k_ == VN ? v_st(p, v) : v_stn(p, v, k_))

static void ew_softmax_cols(const float *x, float *y, int64_t len, int64_t stride,
                            int64_t cols, bool log) {
  KN_ASSERT(cols <= KN_EW_SOFTMAX_COLS);
  float mx[KN_EW_SOFTMAX_COLS], sm[KN_EW_SOFTMAX_COLS];
  if (len <= 0 || cols <= 0) return;
  COLS_LOOP({ STK(mx + c_, LDK(x + c_)); });
  for (int64_t l = 1; l < len; l++) {
    const float *xr = x + l * stride;
    COLS_LOOP({ STK(mx + c_, v_max(LDK(xr + c_), LDK(mx + c_))); });
  }
  COLS_LOOP({ STK(sm + c_, v_set(0.0f)); });
  for (int64_t l = 0; l < len; l++) {
    const float *xr = x + l * stride;
    float *yr = y + l * stride;
    COLS_LOOP({
      V e = vexp(v_sub(LDK(xr + c_), LDK(mx + c_)));
      if (!log) STK(yr + c_, e);
      STK(sm + c_, v_add(LDK(sm + c_), e));
    });
  }
  if (!log) {
    COLS_LOOP({ STK(sm + c_, v_div(v_set(1.0f), LDK(sm + c_))); });
    for (int64_t l = 0; l < len; l++) {
      float *yr = y + l * stride;
      COLS_LOOP({ STK(yr + c_, v_mul(LDK(yr + c_), LDK(sm + c_))); });
    }
  } else {
    for (int64_t c = 0; c < cols; c++) sm[c] = mx[c] + logf(sm[c]);
    for (int64_t l = 0; l < len; l++) {
      const float *xr = x + l * stride;
      float *yr = y + l * stride;
      COLS_LOOP({ STK(yr + c_, v_sub(LDK(xr + c_), LDK(sm + c_))); });
    }
  }
}
#undef LDK
#undef STK
#undef COLS_LOOP

/* ---- row normalisation ------------------------------------------------------ */

static void ew_norm_rows(const float *x, float *y, int64_t rows, int64_t len, double eps,
                         int64_t seg, int64_t pmod, int64_t pmul, const float *sc,
                         const float *bi, double *mean_out, double *inv_out) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * len;
    float *yr = y + r * len;
    /* mean in double (inputs far from zero keep their spread), then the
     * squared deviations from the float mean mf, corrected for mean - mf */
    VD acc = vd_zero();
    int64_t j = 0;
    for (; j + VN <= len; j += VN) acc = vd_acc(acc, v_ld(xr + j));
    if (j < len) acc = vd_acc(acc, v_ldn(xr + j, len - j, 0.0f));
    double mean = len ? vd_hsum(acc) / (double)len : 0;
    float mf = (float)mean;
    V vm = v_set(mf), s0 = v_set(0.0f), s1 = v_set(0.0f);
    for (j = 0; j + 2 * VN <= len; j += 2 * VN) {
      V d0 = v_sub(v_ld(xr + j), vm), d1 = v_sub(v_ld(xr + j + VN), vm);
      s0 = v_fma(d0, d0, s0);
      s1 = v_fma(d1, d1, s1);
    }
    for (; j + VN <= len; j += VN) {
      V d = v_sub(v_ld(xr + j), vm);
      s0 = v_fma(d, d, s0);
    }
    if (j < len) {
      V d = v_sub(v_ldn(xr + j, len - j, mf), vm);
      s0 = v_fma(d, d, s0);
    }
    double dm = mean - (double)mf;
    double var = len ? (double)v_hsum(v_add(s0, s1)) / (double)len - dm * dm : 0;
    if (var < 0) var = 0;
    double inv = 1.0 / sqrt(var + eps);
    if (mean_out) mean_out[r] = mean;
    if (inv_out) inv_out[r] = inv;
    int64_t pb = (r % pmod) * pmul;
    float ivf = (float)inv;
    V viv = v_set(ivf);
    if (seg == 1) {
      const float *scr = sc + pb, *bir = bi + pb;
      for (j = 0; j + VN <= len; j += VN)
        v_st(yr + j, v_fma(v_mul(v_sub(v_ld(xr + j), vm), viv), v_ld(scr + j), v_ld(bir + j)));
      if (j < len) {
        int64_t k = len - j;
        v_stn(yr + j,
              v_fma(v_mul(v_sub(v_ldn(xr + j, k, 0.0f), vm), viv), v_ldn(scr + j, k, 0.0f),
                    v_ldn(bir + j, k, 0.0f)),
              k);
      }
    } else {
      for (int64_t j0 = 0; j0 < len; j0 += seg) {
        int64_t p = pb + j0 / seg;
        float a = ivf * sc[p], b = bi[p] - mf * a;
        V va = v_set(a), vb = v_set(b);
        const float *xs = xr + j0;
        float *ys = yr + j0;
        for (j = 0; j + VN <= seg; j += VN) v_st(ys + j, v_fma(v_ld(xs + j), va, vb));
        if (j < seg) v_stn(ys + j, v_fma(v_ldn(xs + j, seg - j, 0.0f), va, vb), seg - j);
      }
    }
  }
}

const kn_ew_ukernels KN_EW_TABLE = {
    .unary = ew_unary,
    .binary = ew_binary,
    .epilogue = ew_epilogue,
    .softmax_rows = ew_softmax_rows,
    .softmax_cols = ew_softmax_cols,
    .norm_rows = ew_norm_rows,
};
