/*
 * Convolutions: Conv, ConvTranspose, ConvInteger, QLinearConv, for any
 * number of spatial dims.
 *
 * Conv lowers each group to GEMM: the patches of a bounded block of output
 * positions are gathered into a [C/group * prod(kernel), block] matrix
 * (im2col) and multiplied by the group's weights.  1x1 stride-1 unpadded
 * kernels skip the gather; 2-D depthwise float32 convolutions run a direct
 * loop.  ConvTranspose is the adjoint: weights^T times a block of input
 * positions, scattered back into the image (col2im).
 *
 * Three element kinds share the drivers: float32 (float16/bfloat16 convert
 * to it), float64, and int32 (the quantized ops, after removing zero
 * points, accumulate exactly in int32 as ONNX specifies).  The fast
 * convolutions (src/kernels/conv) run from src/tactics/conv.
 */
#include "op.h"

#include <math.h>

#include "conv_ref.h"
#include "kernels/gemm/ref-gemm.h"


/* Largest im2col / col2im block, in elements. */
#define CONV_SCRATCH_ELEMS ((int64_t)1 << 20)
/* Bounds on attribute values and dims: keeps every size computation below
 * 2^62 without overflow checks at each step. */
#define CONV_MAX_DIM ((int64_t)1 << 40)
#define CONV_MAX_STEP ((int64_t)1 << 20)

typedef enum ekind { EK_F32, EK_F64, EK_I32 } ekind;

static size_t ek_size(ekind ek) {
  return ek == EK_F64 ? sizeof(double) : ek == EK_F32 ? sizeof(float) : sizeof(int32_t);
}

typedef kn_conv_geom conv_geom;

static int64_t floor_div2(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

/* Reads the attributes and shapes of a Conv-like node (transpose: the
 * ConvTranspose weight layout and output rule).  Unknown shape parts give
 * -1 output dims (rank -1 when no rank is known); *complete says whether
 * every field of g is set. */
static kn_status conv_geometry(kn_op_ctx *ctx, const kn_tensor *x,
                               const kn_tensor *w, bool transpose, conv_geom *g,
                               int32_t *rout, int64_t *dout, bool *complete) {
  memset(g, 0, sizeof *g);
  *complete = false;
  int32_t rank = x->rank >= 0 ? x->rank : w->rank;
  if (x->rank >= 0 && x->rank < 3)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "input X must have rank >= 3 (N x C x spatial...), got %d",
                      (int)x->rank);
  if (w->rank >= 0 && w->rank < 3)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "weights W must have rank >= 3, got %d", (int)w->rank);
  if (x->rank >= 0 && w->rank >= 0 && x->rank != w->rank)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "X has rank %d but W has rank %d; they must match",
                      (int)x->rank, (int)w->rank);
  const int64_t *ks, *st, *dl, *pd, *op, *os;
  int32_t nks = kn_attr_ints(ctx, "kernel_shape", &ks);
  int32_t nst = kn_attr_ints(ctx, "strides", &st);
  int32_t ndl = kn_attr_ints(ctx, "dilations", &dl);
  int32_t npd = kn_attr_ints(ctx, "pads", &pd);
  int32_t nop = transpose ? kn_attr_ints(ctx, "output_padding", &op) : 0;
  int32_t nos = transpose ? kn_attr_ints(ctx, "output_shape", &os) : 0;
  if (rank < 0 && nks > 0) rank = nks + 2;
  if (rank < 0) {
    *rout = -1;
    return KN_OK;
  }
  int32_t nd = rank - 2;
  g->nd = nd;
  if ((nks && nks != nd) || (nst && nst != nd) || (ndl && ndl != nd) ||
      (npd && npd != 2 * nd) || (nop && nop != nd) ||
      (nos && nos != nd && nos != nd + 2))
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "attribute lengths do not fit %d spatial dims (kernel_shape %d, "
                      "strides %d, dilations %d, pads %d (2x), output_padding %d, "
                      "output_shape %d)",
                      (int)nd, (int)nks, (int)nst, (int)ndl, (int)npd, (int)nop,
                      (int)nos);
  g->group = kn_attr_int(ctx, "group", 1);
  if (g->group < 1 || g->group > CONV_MAX_DIM)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "group must be >= 1, got %lld",
                      (long long)g->group);
  const char *ap = kn_attr_str(ctx, "auto_pad", "NOTSET");
  int mode; /* 0 NOTSET/explicit, 1 SAME_UPPER, 2 SAME_LOWER, 3 VALID */
  if (!strcmp(ap, "NOTSET") || !*ap) mode = 0;
  else if (!strcmp(ap, "SAME_UPPER")) mode = 1;
  else if (!strcmp(ap, "SAME_LOWER")) mode = 2;
  else if (!strcmp(ap, "VALID")) mode = 3;
  else
    return kn_op_fail(ctx, KN_ERR_UNSUPPORTED,
                      "auto_pad '%s' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID",
                      ap);

  /* channels */
  int64_t c = x->rank >= 0 ? x->dims[1] : -1;
  int64_t wc0 = w->rank >= 0 ? w->dims[0] : -1, wc1 = w->rank >= 0 ? w->dims[1] : -1;
  int64_t m;
  if (!transpose) {
    if (c >= 0 && wc1 >= 0 && wc1 * g->group != c)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "X has %lld channels but W expects %lld x group %lld",
                        (long long)c, (long long)wc1, (long long)g->group);
    if (wc0 >= 0 && wc0 % g->group)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "W has %lld output channels, not a multiple of group %lld",
                        (long long)wc0, (long long)g->group);
    m = wc0;
  } else {
    if (c >= 0 && wc0 >= 0 && wc0 != c)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "X has %lld channels but W's first dim is %lld",
                        (long long)c, (long long)wc0);
    if (c >= 0 && c % g->group)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "X has %lld channels, not a multiple of group %lld",
                        (long long)c, (long long)g->group);
    m = wc1 >= 0 ? wc1 * g->group : -1;
  }
  bool known = x->rank >= 0 && w->rank >= 0 && kn_shape_known(x) && kn_shape_known(w);
  dout[0] = x->rank >= 0 ? x->dims[0] : -1;
  dout[1] = m;
  for (int32_t i = 0; i < nd; i++) {
    int64_t kd = w->rank >= 0 ? w->dims[i + 2] : -1;
    if (nks) {
      if (ks[i] < 1 || ks[i] > CONV_MAX_DIM || (kd >= 0 && kd != ks[i]))
        return kn_op_fail(ctx, KN_ERR_SHAPE,
                          "kernel_shape[%d] = %lld does not match W's dim %lld",
                          (int)i, (long long)ks[i], (long long)kd);
      kd = ks[i];
    }
    int64_t s = nst ? st[i] : 1, d = ndl ? dl[i] : 1;
    if (s < 1 || s > CONV_MAX_STEP || d < 1 || d > CONV_MAX_STEP)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "strides and dilations must be in [1, %lld], got %lld and %lld",
                        (long long)CONV_MAX_STEP, (long long)s, (long long)d);
    int64_t pb = npd ? pd[i] : 0, pe = npd ? pd[i + nd] : 0;
    int64_t opad = nop ? op[i] : 0;
    if (pb < 0 || pe < 0 || pb > CONV_MAX_DIM || pe > CONV_MAX_DIM || opad < 0 ||
        opad > CONV_MAX_DIM)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "pads and output_padding must be in [0, %lld], got %lld, %lld, %lld",
                        (long long)CONV_MAX_DIM, (long long)pb, (long long)pe,
                        (long long)opad);
    int64_t in = x->rank >= 0 ? x->dims[i + 2] : -1;
    if (in > CONV_MAX_DIM || kd > CONV_MAX_DIM)
      return kn_op_fail(ctx, KN_ERR_LIMIT, "spatial dim %lld or kernel dim %lld too large",
                        (long long)in, (long long)kd);
    g->k[i] = kd;
    g->s[i] = s;
    g->d[i] = d;
    g->x_sp[i] = in;
    int64_t out = -1;
    if (in >= 0 && kd >= 0) {
      int64_t dk = (kd - 1) * d + 1;
      if (!transpose) {
        if (mode == 1 || mode == 2) {
          out = (in + s - 1) / s;
          int64_t total = (out - 1) * s + dk - in;
          if (total < 0) total = 0;
          pb = mode == 1 ? total / 2 : total - total / 2;
          pe = total - pb;
        } else {
          if (mode == 3) pb = pe = 0;
          if (in + pb + pe < dk)
            return kn_op_fail(ctx, KN_ERR_SHAPE,
                              "spatial dim %d: padded input %lld is smaller than the "
                              "dilated kernel %lld",
                              (int)i, (long long)(in + pb + pe), (long long)dk);
          out = (in + pb + pe - dk) / s + 1;
        }
      } else {
        int64_t target = -1;
        if (nos) target = os[nos == nd ? i : i + 2];
        else if (mode == 1 || mode == 2) target = in * s;
        if (nos && target < 0)
          return kn_op_fail(ctx, KN_ERR_SHAPE, "output_shape value %lld is negative",
                            (long long)target);
        if (target >= 0) {
          if (target > CONV_MAX_DIM)
            return kn_op_fail(ctx, KN_ERR_LIMIT, "output_shape %lld too large",
                              (long long)target);
          int64_t total = s * (in - 1) + opad + dk - target;
          if (mode == 1) {
            pb = floor_div2(total);
            pe = total - pb;
          } else {
            pe = floor_div2(total);
            pb = total - pe;
          }
          out = target;
        } else {
          if (mode == 3) pb = pe = 0;
          out = s * (in - 1) + opad + dk - pb - pe;
        }
        if (out < 0)
          return kn_op_fail(ctx, KN_ERR_SHAPE,
                            "spatial dim %d: output size %lld is negative", (int)i,
                            (long long)out);
      }
    } else if (nos) {
      out = os[nos == nd ? i : i + 2]; /* explicit output size, pads unknown */
      if (out < 0 || out > CONV_MAX_DIM)
        return kn_op_fail(ctx, KN_ERR_SHAPE, "output_shape value %lld is out of range",
                          (long long)out);
    }
    g->pb[i] = pb;
    g->pe[i] = pe;
    g->y_sp[i] = out;
    dout[i + 2] = out;
  }
  *rout = rank;
  if (!known) return KN_OK;
  g->n = x->dims[0];
  g->c = c;
  g->m = m;
  g->ksz = kn_shape_numel(nd, g->k);
  g->x_size = kn_shape_numel(nd, g->x_sp);
  g->y_size = kn_shape_numel(nd, g->y_sp);
  int64_t outn = kn_shape_numel(rank, dout);
  if (g->ksz < 0 || g->x_size < 0 || g->y_size < 0 || outn < 0) {
    char so[128];
    return kn_op_fail(ctx, KN_ERR_LIMIT, "output shape %s is too large",
                      kn_shape_str(rank, dout, so, sizeof so));
  }
  *complete = true;
  return KN_OK;
}

kn_status kn_conv_geometry(kn_op_ctx *ctx, const kn_tensor *x,
                           const kn_tensor *w, bool transpose, kn_conv_geom *g,
                           int32_t *rout, int64_t *dout, bool *complete) {
  return conv_geometry(ctx, x, w, transpose, g, rout, dout, complete);
}

/* One run of positions along the last spatial dim: element j (0 <= j < cnt)
 * of the patch row maps to image index start + j*step when that lies in
 * [0, limit).  Gather copies image -> col (zero outside), scatter adds
 * col -> image. */
static void patch_run(ekind ek, bool scatter, char *img, char *col, int64_t cnt,
                      int64_t start, int64_t step, int64_t limit) {
  int64_t lo = 0, hi = cnt; /* valid j in [lo, hi) */
  if (start < 0) lo = (-start + step - 1) / step;
  if (start + (cnt - 1) * step >= limit) {
    hi = limit - start <= 0 ? 0 : (limit - start + step - 1) / step;
  }
  if (hi < lo) hi = lo;
  if (hi > cnt) hi = cnt;
  switch (ek) {
#define PATCH_CASE(E, T)                                                      \
  case E: {                                                                   \
    T *im = (T *)img, *cl = (T *)col;                                         \
    if (!scatter) {                                                           \
      for (int64_t j = 0; j < lo; j++) cl[j] = 0;                             \
      if (step == 1) {                                                        \
        if (hi > lo) memcpy(cl + lo, im + start + lo, (size_t)(hi - lo) * sizeof(T)); \
      } else {                                                                \
        for (int64_t j = lo; j < hi; j++) cl[j] = im[start + j * step];       \
      }                                                                       \
      for (int64_t j = hi; j < cnt; j++) cl[j] = 0;                           \
    } else {                                                                  \
      for (int64_t j = lo; j < hi; j++) im[start + j * step] += cl[j];        \
    }                                                                         \
    break;                                                                    \
  }
    PATCH_CASE(EK_F32, float)
    PATCH_CASE(EK_F64, double)
    PATCH_CASE(EK_I32, int32_t)
#undef PATCH_CASE
  }
}

/* im2col (gather) or col2im (scatter) for `cg` channels of one image and
 * the positions [n0, n0+nb) of the position grid.  For Conv the image is
 * the input and the positions the output grid; for ConvTranspose
 * (tr) the image is the output and the positions the input grid.  col is
 * [cg * ksz, nb]. */
static void patches(const conv_geom *g, bool tr, ekind ek, bool scatter,
                    char *img, char *col, int64_t cg, int64_t n0, int64_t nb) {
  size_t es = ek_size(ek);
  int32_t nd = g->nd, last = nd - 1;
  const int64_t *isp = tr ? g->y_sp : g->x_sp, *psp = tr ? g->x_sp : g->y_sp;
  int64_t img_size = tr ? g->y_size : g->x_size;
  int64_t o0[KN_MAX_RANK], o[KN_MAX_RANK], kv[KN_MAX_RANK];
  int64_t rem = n0;
  for (int32_t i = nd - 1; i >= 0; i--) {
    o0[i] = rem % psp[i];
    rem /= psp[i];
  }
  for (int32_t i = 0; i < nd; i++) kv[i] = 0;
  int64_t rows = cg * g->ksz;
  for (int64_t r = 0; r < rows; r++) {
    int64_t ch = r / g->ksz;
    char *img_c = img + (size_t)(ch * img_size) * es;
    char *col_r = col + (size_t)(r * nb) * es;
    memcpy(o, o0, sizeof(int64_t) * (size_t)nd);
    int64_t t = 0;
    while (t < nb) {
      int64_t cnt = psp[last] - o[last];
      if (cnt > nb - t) cnt = nb - t;
      bool valid = true;
      int64_t off = 0;
      for (int32_t i = 0; i < last; i++) {
        int64_t ii = o[i] * g->s[i] - g->pb[i] + kv[i] * g->d[i];
        if (ii < 0 || ii >= isp[i]) {
          valid = false;
          break;
        }
        off = off * isp[i] + ii;
      }
      if (valid) {
        patch_run(ek, scatter, img_c + (size_t)(off * isp[last]) * es,
                  col_r + (size_t)t * es, cnt,
                  o[last] * g->s[last] - g->pb[last] + kv[last] * g->d[last],
                  g->s[last], isp[last]);
      } else if (!scatter) {
        memset(col_r + (size_t)t * es, 0, (size_t)cnt * es);
      }
      t += cnt;
      o[last] += cnt;
      for (int32_t i = last; i > 0 && o[i] >= psp[i]; i--) {
        o[i] = 0;
        o[i - 1]++;
      }
    }
    /* next kernel offset (wraps to the next channel) */
    for (int32_t i = nd - 1; i >= 0; i--) {
      if (++kv[i] < g->k[i]) break;
      kv[i] = 0;
    }
  }
}

/* C[m,n] (ldc) += op(A)[m,k] * B[k,n] (ldb), per element kind. */
static bool ek_gemm(ekind ek, int64_t m, int64_t n, int64_t k, const char *a,
                    int64_t lda, bool ta, const char *b, int64_t ldb, char *c,
                    int64_t ldc) {
  if (ek == EK_F32)
    return kn_f32_gemm(m, n, k, 1.0f, (const float *)a, lda, ta,
                       (const float *)b, ldb, false, (float *)c, ldc);
  for (int64_t i = 0; i < m; i++)
    for (int64_t p = 0; p < k; p++) {
      if (ek == EK_F64) {
        const double *bp = (const double *)b + p * ldb;
        double *ci = (double *)c + i * ldc;
        double av = ta ? ((const double *)a)[p * lda + i] : ((const double *)a)[i * lda + p];
        if (av != 0.0)
          for (int64_t j = 0; j < n; j++) ci[j] += av * bp[j];
      } else {
        const int32_t *bp = (const int32_t *)b + p * ldb;
        uint32_t *ci = (uint32_t *)c + i * ldc;
        int32_t av = ta ? ((const int32_t *)a)[p * lda + i] : ((const int32_t *)a)[i * lda + p];
        if (av != 0)
          for (int64_t j = 0; j < n; j++) ci[j] += (uint32_t)av * (uint32_t)bp[j];
      }
    }
  return true;
}

/* Positions per im2col block: bounded scratch, at least one. */
static int64_t block_positions(int64_t rows, int64_t total) {
  int64_t nb = rows > 0 ? CONV_SCRATCH_ELEMS / rows : total;
  if (nb < 16) nb = 16;
  if (nb > total) nb = total;
  return nb < 1 ? 1 : nb;
}

/* Direct 2-D depthwise float32 convolution of one channel. */
static void depthwise2d_f32(const conv_geom *g, const float *x, const float *w,
                            float *y) {
  int64_t ih = g->x_sp[0], iw = g->x_sp[1], oh = g->y_sp[0], ow = g->y_sp[1];
  for (int64_t kh = 0; kh < g->k[0]; kh++)
    for (int64_t kw = 0; kw < g->k[1]; kw++) {
      float wv = w[kh * g->k[1] + kw];
      int64_t xoff = kw * g->d[1] - g->pb[1];
      /* output columns whose input column lies inside [0, iw) */
      int64_t lo = xoff < 0 ? (-xoff + g->s[1] - 1) / g->s[1] : 0;
      int64_t hi = iw - xoff <= 0 ? 0 : (iw - xoff + g->s[1] - 1) / g->s[1];
      if (hi > ow) hi = ow;
      for (int64_t r = 0; r < oh; r++) {
        int64_t xr = r * g->s[0] - g->pb[0] + kh * g->d[0];
        if (xr < 0 || xr >= ih) continue;
        const float *xrow = x + xr * iw;
        float *yrow = y + r * ow;
        if (g->s[1] == 1)
          for (int64_t cidx = lo; cidx < hi; cidx++) yrow[cidx] += wv * xrow[cidx + xoff];
        else
          for (int64_t cidx = lo; cidx < hi; cidx++)
            yrow[cidx] += wv * xrow[cidx * g->s[1] + xoff];
      }
    }
}

/* y (zeroed, [n, m, y_sp]) += conv(x, w); epi as kn_conv_forward_f32 (float32
 * only). */
static bool conv_forward_epi(const conv_geom *g, ekind ek, const void *xv,
                             const void *wv, void *yv, kn_conv_epilogue_fn epi,
                             void *arg) {
  size_t es = ek_size(ek);
  const char *x = xv, *w = wv;
  char *y = yv;
  int64_t cg = g->c / g->group, mg = g->m / g->group, kdim = cg * g->ksz;
  if (g->y_size == 0 || mg == 0) return true;
  bool pointwise = true;
  for (int32_t i = 0; i < g->nd; i++)
    if (g->k[i] != 1 || g->s[i] != 1 || g->pb[i] != 0 || g->pe[i] != 0)
      pointwise = false;
  bool depthwise = ek == EK_F32 && g->nd == 2 && cg == 1;
  int64_t nb = block_positions(kdim, g->y_size);
  char *col = NULL;
  if (!pointwise && !depthwise) {
    col = kn_malloc((size_t)(kdim * nb) * es);
    if (!col) return false;
  }
  bool ok = true;
  for (int64_t b = 0; b < g->n && ok; b++)
    for (int64_t gi = 0; gi < g->group && ok; gi++) {
      const char *xg = x + (size_t)((b * g->c + gi * cg) * g->x_size) * es;
      const char *wg = w + (size_t)(gi * mg * kdim) * es;
      char *yg = y + (size_t)((b * g->m + gi * mg) * g->y_size) * es;
      if (depthwise) {
        for (int64_t j = 0; j < mg; j++) {
          depthwise2d_f32(g, (const float *)xg, (const float *)wg + j * g->ksz,
                          (float *)yg + j * g->y_size);
          if (epi) epi(arg, (float *)y, b, gi * mg + j, 1, 0, g->y_size);
        }
      } else if (pointwise) {
        ok = ek_gemm(ek, mg, g->y_size, cg, wg, kdim, false, xg, g->x_size, yg,
                     g->y_size);
        if (ok && epi) epi(arg, (float *)y, b, gi * mg, mg, 0, g->y_size);
      } else {
        for (int64_t n0 = 0; n0 < g->y_size && ok; n0 += nb) {
          int64_t cnt = g->y_size - n0 < nb ? g->y_size - n0 : nb;
          patches(g, false, ek, false, (char *)xg, col, cg, n0, cnt);
          ok = ek_gemm(ek, mg, cnt, kdim, wg, kdim, false, col, cnt,
                       yg + (size_t)n0 * es, g->y_size);
          if (ok && epi) epi(arg, (float *)y, b, gi * mg, mg, n0, cnt);
        }
      }
    }
  free(col);
  return ok;
}

static bool conv_forward(const conv_geom *g, ekind ek, const void *xv,
                         const void *wv, void *yv) {
  return conv_forward_epi(g, ek, xv, wv, yv, NULL, NULL);
}

bool kn_conv_forward_f32(const kn_conv_geom *g, const float *x, const float *w,
                         float *y, kn_conv_epilogue_fn epi, void *arg) {
  return conv_forward_epi(g, EK_F32, x, w, y, epi, arg);
}

/* y (zeroed, [n, m, y_sp]) += conv_transpose(x, w). */
static bool conv_transpose_forward(const conv_geom *g, ekind ek, const void *xv,
                                   const void *wv, void *yv) {
  size_t es = ek_size(ek);
  const char *x = xv, *w = wv;
  char *y = yv;
  int64_t cg = g->c / g->group, mg = g->m / g->group, rows = mg * g->ksz;
  if (g->x_size == 0 || rows == 0 || g->y_size == 0) return true;
  int64_t nb = block_positions(rows, g->x_size);
  char *col = kn_malloc((size_t)(rows * nb) * es);
  if (!col) return false;
  bool ok = true;
  for (int64_t b = 0; b < g->n && ok; b++)
    for (int64_t gi = 0; gi < g->group && ok; gi++) {
      const char *xg = x + (size_t)((b * g->c + gi * cg) * g->x_size) * es;
      const char *wg = w + (size_t)(gi * cg * rows) * es;
      char *yg = y + (size_t)((b * g->m + gi * mg) * g->y_size) * es;
      for (int64_t n0 = 0; n0 < g->x_size && ok; n0 += nb) {
        int64_t cnt = g->x_size - n0 < nb ? g->x_size - n0 : nb;
        memset(col, 0, (size_t)(rows * cnt) * es);
        ok = ek_gemm(ek, rows, cnt, cg, wg, rows, true, xg + (size_t)n0 * es,
                     g->x_size, col, cnt);
        if (ok) patches(g, true, ek, true, yg, col, mg, n0, cnt);
      }
    }
  free(col);
  return ok;
}

/* ---- float Conv / ConvTranspose ----------------------------------------- */

static const kn_dtype conv_types[] = {KN_DTYPE_F32, KN_DTYPE_F64, KN_DTYPE_F16,
                                      KN_DTYPE_BF16, 0};

static kn_status check_bias(kn_op_ctx *ctx, int32_t input, const kn_tensor *bias,
                            int64_t m) {
  if (!bias || bias->rank < 0) return KN_OK;
  if (bias->rank != 1 || (m >= 0 && bias->dims[0] >= 0 && bias->dims[0] != m))
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "bias (input %d) must be 1-D with %lld elements, got rank %d "
                      "with %lld",
                      (int)input, (long long)m, (int)bias->rank,
                      (long long)(bias->rank >= 1 ? bias->dims[0] : 1));
  return KN_OK;
}

static kn_status fconv_infer_common(kn_op_ctx *ctx, bool transpose) {
  const kn_tensor *x, *w, *bias = kn_in(ctx, 2);
  kn_status st;
  if ((st = kn_in_req(ctx, 0, &x)) || (st = kn_in_req(ctx, 1, &w)) ||
      (st = kn_check_dtype(ctx, 0, x, conv_types)) ||
      (st = kn_check_dtype(ctx, 1, w, conv_types)))
    return st;
  if (x->dtype && w->dtype && x->dtype != w->dtype)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "X is %s but W is %s; they must match",
                      kn_dtype_name(x->dtype), kn_dtype_name(w->dtype));
  if (bias && x->dtype && bias->dtype && bias->dtype != x->dtype)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "B is %s but X is %s; they must match",
                      kn_dtype_name(bias->dtype), kn_dtype_name(x->dtype));
  conv_geom g;
  int32_t r;
  int64_t d[KN_MAX_RANK];
  bool complete;
  if ((st = conv_geometry(ctx, x, w, transpose, &g, &r, d, &complete))) return st;
  if ((st = check_bias(ctx, 2, bias, r >= 2 ? d[1] : -1))) return st;
  kn_out_set(ctx, 0, x->dtype ? x->dtype : w->dtype, r, d);
  return KN_OK;
}

static kn_status conv_infer(kn_op_ctx *ctx) { return fconv_infer_common(ctx, false); }
static kn_status convt_infer(kn_op_ctx *ctx) { return fconv_infer_common(ctx, true); }

static kn_status fconv_run_common(kn_op_ctx *ctx, bool transpose) {
  const kn_tensor *x = kn_in(ctx, 0), *w = kn_in(ctx, 1), *bias = kn_in(ctx, 2);
  conv_geom g;
  int32_t r;
  int64_t d[KN_MAX_RANK];
  bool complete;
  kn_status st = conv_geometry(ctx, x, w, transpose, &g, &r, d, &complete);
  if (st) return st;
  kn_tensor *y = kn_out(ctx, 0);
  int64_t total = kn_tensor_numel(y);
  if (total == 0) return KN_OK;
  kn_dtype t = y->dtype;
  bool (*fwd)(const conv_geom *, ekind, const void *, const void *, void *) =
      transpose ? conv_transpose_forward : conv_forward;
  if (t == KN_DTYPE_F32 || t == KN_DTYPE_F64) {
    kn_out_zero_for_ref(ctx, 0); /* fwd adds into y */
    ekind ek = t == KN_DTYPE_F32 ? EK_F32 : EK_F64;
    if (!fwd(&g, ek, x->data, w->data, y->data))
      return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for convolution scratch");
    if (bias && kn_tensor_numel(bias) > 0)
      for (int64_t b = 0; b < g.n; b++)
        for (int64_t m = 0; m < g.m; m++) {
          int64_t base = (b * g.m + m) * g.y_size;
          if (ek == EK_F32) {
            float bv = ((const float *)bias->data)[m];
            float *yp = (float *)y->data + base;
            for (int64_t i = 0; i < g.y_size; i++) yp[i] += bv;
          } else {
            double bv = ((const double *)bias->data)[m];
            double *yp = (double *)y->data + base;
            for (int64_t i = 0; i < g.y_size; i++) yp[i] += bv;
          }
        }
    return KN_OK;
  }
  /* float16 / bfloat16 through float32 */
  float *fx = kn_tensor_f32(x), *fw = kn_tensor_f32(w);
  float *fy = kn_calloc((size_t)total, sizeof(float));
  st = KN_OK;
  if (!fx || !fw || !fy || !fwd(&g, EK_F32, fx, fw, fy))
    st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory for convolution scratch");
  if (!st) {
    for (int64_t b = 0; b < g.n; b++)
      for (int64_t m = 0; m < g.m; m++) {
        int64_t base = (b * g.m + m) * g.y_size;
        float bv = bias && kn_tensor_numel(bias) > 0
                       ? (float)kn_load_f64(bias->data, bias->dtype, m)
                       : 0.0f;
        for (int64_t i = 0; i < g.y_size; i++)
          kn_store_f64(y->data, t, base + i, (double)(fy[base + i] + bv));
      }
  }
  free(fx);
  free(fw);
  free(fy);
  return st;
}

static kn_status conv_run(kn_op_ctx *ctx) { return fconv_run_common(ctx, false); }
static kn_status convt_run(kn_op_ctx *ctx) { return fconv_run_common(ctx, true); }

static double conv_flops_common(const kn_op_ctx *ctx, bool transpose) {
  const kn_tensor *x = kn_in(ctx, 0), *w = kn_in(ctx, 1);
  const kn_tensor *y = ctx->n_out > 0 ? &ctx->out[0]->t : NULL;
  if (!strcmp(ctx->node->op_type, "QLinearConv")) w = kn_in(ctx, 3);
  if (!x || !w || !y || w->rank < 3 || y->rank < 0 || x->rank < 0) return 0;
  double per = 1; /* multiply-adds per element of the iterated tensor */
  for (int32_t i = 1; i < w->rank; i++) per *= w->dims[i] < 0 ? 1 : (double)w->dims[i];
  const kn_tensor *it = transpose ? x : y;
  double cnt = 1;
  for (int32_t i = 0; i < it->rank; i++) cnt *= it->dims[i] < 0 ? 1 : (double)it->dims[i];
  return 2.0 * cnt * per;
}

static double conv_flops(const kn_op_ctx *ctx) { return conv_flops_common(ctx, false); }
static double convt_flops(const kn_op_ctx *ctx) { return conv_flops_common(ctx, true); }

/* ---- ConvInteger / QLinearConv ------------------------------------------- */

static const kn_dtype q8_types[] = {KN_DTYPE_U8, KN_DTYPE_I8, 0};
static const kn_dtype qscale_types[] = {KN_DTYPE_F32, KN_DTYPE_F16, KN_DTYPE_BF16, 0};

/* A per-tensor (one element) or per-output-channel (m elements) parameter. */
static kn_status check_per_channel(kn_op_ctx *ctx, int32_t input,
                                   const kn_tensor *t, int64_t m, bool allow_m) {
  if (!t || !kn_shape_known(t)) return KN_OK;
  int64_t n = kn_tensor_numel(t);
  if (n == 1 || (allow_m && t->rank == 1 && (m < 0 || n == m))) return KN_OK;
  return kn_op_fail(ctx, KN_ERR_SHAPE,
                    "input %d must be a scalar%s, got %lld elements", (int)input,
                    allow_m ? " or a 1-D tensor with one value per output channel" : "",
                    (long long)n);
}

static kn_status check_same_dtype(kn_op_ctx *ctx, int32_t ia, const kn_tensor *a,
                                  int32_t ib, const kn_tensor *b) {
  if (a && b && a->dtype && b->dtype && a->dtype != b->dtype)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "input %d (%s) and input %d (%s) must have the same dtype",
                      (int)ia, kn_dtype_name(a->dtype), (int)ib, kn_dtype_name(b->dtype));
  return KN_OK;
}

/* int32 accumulation of conv(x - xzp, w - wzp[m]) into acc (zeroed). */
static kn_status int_conv(kn_op_ctx *ctx, const conv_geom *g, const kn_tensor *x,
                          const kn_tensor *xzp, const kn_tensor *w,
                          const kn_tensor *wzp, int32_t *acc) {
  int64_t nx = kn_tensor_numel(x), nw = kn_tensor_numel(w);
  int32_t *xi = kn_malloc((size_t)(nx > 0 ? nx : 1) * sizeof(int32_t));
  int32_t *wi = kn_malloc((size_t)(nw > 0 ? nw : 1) * sizeof(int32_t));
  kn_status st = KN_OK;
  if (!xi || !wi) {
    st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory for convolution scratch");
    goto done;
  }
  int64_t xz = xzp && kn_tensor_numel(xzp) > 0 ? kn_load_i64(xzp->data, xzp->dtype, 0) : 0;
  for (int64_t i = 0; i < nx; i++)
    xi[i] = (int32_t)(kn_load_i64(x->data, x->dtype, i) - xz);
  int64_t per_m = g->m > 0 ? nw / g->m : 0;
  int64_t nwz = wzp ? kn_tensor_numel(wzp) : 0;
  for (int64_t i = 0; i < nw; i++) {
    int64_t mi = per_m ? i / per_m : 0;
    int64_t wz = nwz == 0 ? 0 : kn_load_i64(wzp->data, wzp->dtype, nwz == 1 ? 0 : mi);
    wi[i] = (int32_t)(kn_load_i64(w->data, w->dtype, i) - wz);
  }
  if (!conv_forward(g, EK_I32, xi, wi, acc))
    st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory for convolution scratch");
done:
  free(xi);
  free(wi);
  return st;
}

static kn_status convi_infer(kn_op_ctx *ctx) {
  const kn_tensor *x, *w, *xzp = kn_in(ctx, 2), *wzp = kn_in(ctx, 3);
  kn_status st;
  if ((st = kn_in_req(ctx, 0, &x)) || (st = kn_in_req(ctx, 1, &w)) ||
      (st = kn_check_dtype(ctx, 0, x, q8_types)) ||
      (st = kn_check_dtype(ctx, 1, w, q8_types)) ||
      (st = kn_check_dtype(ctx, 2, xzp, q8_types)) ||
      (st = kn_check_dtype(ctx, 3, wzp, q8_types)) ||
      (st = check_same_dtype(ctx, 0, x, 2, xzp)) ||
      (st = check_same_dtype(ctx, 1, w, 3, wzp)))
    return st;
  conv_geom g;
  int32_t r;
  int64_t d[KN_MAX_RANK];
  bool complete;
  if ((st = conv_geometry(ctx, x, w, false, &g, &r, d, &complete)) ||
      (st = check_per_channel(ctx, 2, xzp, -1, false)) ||
      (st = check_per_channel(ctx, 3, wzp, r >= 2 ? d[1] : -1, true)))
    return st;
  kn_out_set(ctx, 0, KN_DTYPE_I32, r, d);
  return KN_OK;
}

static kn_status convi_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *w = kn_in(ctx, 1);
  conv_geom g;
  int32_t r;
  int64_t d[KN_MAX_RANK];
  bool complete;
  kn_status st = conv_geometry(ctx, x, w, false, &g, &r, d, &complete);
  if (st) return st;
  kn_tensor *y = kn_out(ctx, 0);
  if (kn_tensor_numel(y) == 0) return KN_OK;
  return int_conv(ctx, &g, x, kn_in(ctx, 2), w, kn_in(ctx, 3), y->data);
}

static kn_status qlconv_infer(kn_op_ctx *ctx) {
  const kn_tensor *in[8], *bias = kn_in(ctx, 8);
  kn_status st;
  for (int32_t i = 0; i < 8; i++)
    if ((st = kn_in_req(ctx, i, &in[i]))) return st;
  static const int32_t qi[] = {0, 2, 3, 5, 7};
  for (size_t i = 0; i < sizeof qi / sizeof qi[0]; i++)
    if ((st = kn_check_dtype(ctx, qi[i], in[qi[i]], q8_types))) return st;
  static const int32_t si[] = {1, 4, 6};
  for (size_t i = 0; i < sizeof si / sizeof si[0]; i++)
    if ((st = kn_check_dtype(ctx, si[i], in[si[i]], qscale_types))) return st;
  if ((st = check_same_dtype(ctx, 0, in[0], 2, in[2])) ||
      (st = check_same_dtype(ctx, 3, in[3], 5, in[5])))
    return st;
  static const kn_dtype i32[] = {KN_DTYPE_I32, 0};
  if (bias && (st = kn_check_dtype(ctx, 8, bias, i32))) return st;
  conv_geom g;
  int32_t r;
  int64_t d[KN_MAX_RANK];
  bool complete;
  int64_t m = -1;
  if ((st = conv_geometry(ctx, in[0], in[3], false, &g, &r, d, &complete))) return st;
  if (r >= 2) m = d[1];
  if ((st = check_per_channel(ctx, 1, in[1], m, false)) ||
      (st = check_per_channel(ctx, 2, in[2], m, false)) ||
      (st = check_per_channel(ctx, 4, in[4], m, true)) ||
      (st = check_per_channel(ctx, 5, in[5], m, true)) ||
      (st = check_per_channel(ctx, 6, in[6], m, false)) ||
      (st = check_per_channel(ctx, 7, in[7], m, false)) ||
      (st = check_bias(ctx, 8, bias, m)))
    return st;
  kn_out_set(ctx, 0, in[7]->dtype ? in[7]->dtype : KN_DTYPE_U8, r, d);
  return KN_OK;
}

static kn_status qlconv_run(kn_op_ctx *ctx) {
  const kn_tensor *in[9];
  for (int32_t i = 0; i < 9; i++) in[i] = kn_in(ctx, i);
  conv_geom g;
  int32_t r;
  int64_t d[KN_MAX_RANK];
  bool complete;
  kn_status st = conv_geometry(ctx, in[0], in[3], false, &g, &r, d, &complete);
  if (st) return st;
  kn_tensor *y = kn_out(ctx, 0);
  int64_t total = kn_tensor_numel(y);
  if (total == 0) return KN_OK;
  int32_t *acc = kn_calloc((size_t)total, sizeof(int32_t));
  if (!acc) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory for convolution scratch");
  st = int_conv(ctx, &g, in[0], in[2], in[3], in[5], acc);
  if (!st) {
    float xs = (float)kn_load_f64(in[1]->data, in[1]->dtype, 0);
    float ys = (float)kn_load_f64(in[6]->data, in[6]->dtype, 0);
    double yz = (double)kn_load_i64(in[7]->data, in[7]->dtype, 0);
    int64_t nws = kn_tensor_numel(in[4]);
    bool has_bias = in[8] && kn_tensor_numel(in[8]) > 0;
    double lo = y->dtype == KN_DTYPE_U8 ? 0 : -128, hi = y->dtype == KN_DTYPE_U8 ? 255 : 127;
    for (int64_t b = 0; b < g.n; b++)
      for (int64_t m = 0; m < g.m; m++) {
        float ws = (float)kn_load_f64(in[4]->data, in[4]->dtype, nws == 1 ? 0 : m);
        float mult = xs * ws / ys;
        int32_t bv = has_bias ? ((const int32_t *)in[8]->data)[m] : 0;
        int64_t base = (b * g.m + m) * g.y_size;
        for (int64_t i = 0; i < g.y_size; i++) {
          int32_t a = (int32_t)((uint32_t)acc[base + i] + (uint32_t)bv);
          double v = nearbyint((double)a * mult) + yz;
          if (!(v >= lo)) v = lo;
          if (v > hi) v = hi;
          kn_store_i64(y->data, y->dtype, base + i, (int64_t)v);
        }
      }
  }
  free(acc);
  return st;
}

const kn_op_def kn_ops_conv[] = {
    {"Conv", NULL, 2, 3, 1, 1, 1, 22, conv_infer, conv_run, conv_flops},
    {"ConvTranspose", NULL, 2, 3, 1, 1, 1, 22, convt_infer, convt_run, convt_flops},
    {"ConvInteger", NULL, 2, 4, 1, 1, 10, 22, convi_infer, convi_run, conv_flops},
    {"QLinearConv", NULL, 8, 9, 1, 1, 10, 22, qlconv_infer, qlconv_run, conv_flops},
    KN_OP_END,
};
