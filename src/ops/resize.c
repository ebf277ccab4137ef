/* Resampling: Resize (opsets 10 to 19) and Upsample (opsets 7 and 9).
 *
 * Semantics follow the ONNX reference implementation (interpolate_nd in
 * onnx/backend/test/case/node/resize.py and onnx/reference/ops/op_resize.py):
 * every output coordinate is mapped to an input coordinate x by the
 * coordinate transformation mode, then
 *  - nearest picks one input index from x by nearest_mode;
 *  - linear and cubic weigh the input points around x, with edge padding,
 *    separably along each axis.  With antialias the filter is stretched by
 *    1/scale when downsampling.
 * Opset 10 Resize and Upsample have no coordinate mode: they are asymmetric,
 * and nearest rounds like onnxruntime's pre-opset-11 kernels (truncate when
 * upsampling, ceil when downsampling).
 *
 * Linear and cubic run one pass per resized axis over a float64 buffer; an
 * axis whose map is the identity is skipped.  Nearest is a gather through
 * one index table per axis and works for every dtype.  The float32 2-D
 * kernels are src/tactics/resize_tactics.c. */
#include "resize.h"

#include <math.h>

enum { MODE_NEAREST = KN_RESIZE_NEAREST, MODE_LINEAR = KN_RESIZE_LINEAR,
       MODE_CUBIC = KN_RESIZE_CUBIC };
enum {
  CT_HALF_PIXEL,
  CT_HALF_PIXEL_SYMMETRIC,
  CT_PYTORCH_HALF_PIXEL,
  CT_ALIGN_CORNERS,
  CT_ASYMMETRIC,
  CT_TF_HALF_PIXEL_FOR_NN,
  CT_TF_CROP_AND_RESIZE
};
enum { NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL, NM_FLOOR, NM_CEIL, NM_SIMPLE };

typedef kn_resize_params rs_params;

static int lookup(const char *s, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

static kn_status parse_attrs(kn_op_ctx *ctx, rs_params *p, bool legacy) {
  static const char *const modes[] = {"nearest", "linear", "cubic"};
  const char *m = kn_attr_str(ctx, "mode", "nearest");
  p->mode = lookup(m, modes, legacy ? 2 : 3);
  if (p->mode < 0 && legacy && strcmp(m, "bilinear") == 0) p->mode = MODE_LINEAR;
  if (p->mode < 0)
    return kn_op_fail(ctx, KN_ERR_UNSUPPORTED, "mode '%s' is not one of nearest, linear%s",
                      m, legacy ? "" : ", cubic");
  if (legacy) {
    p->ctm = CT_ASYMMETRIC;
    p->nearest = NM_SIMPLE;
    p->cubic_a = -0.75;
    return KN_OK;
  }
  static const char *const cts[] = {"half_pixel",    "half_pixel_symmetric",
                                    "pytorch_half_pixel", "align_corners",
                                    "asymmetric",    "tf_half_pixel_for_nn",
                                    "tf_crop_and_resize"};
  const char *c = kn_attr_str(ctx, "coordinate_transformation_mode", "half_pixel");
  p->ctm = lookup(c, cts, 7);
  if (p->ctm < 0)
    return kn_op_fail(ctx, KN_ERR_UNSUPPORTED,
                      "coordinate_transformation_mode '%s' is not supported", c);
  static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                    "ceil"};
  const char *n = kn_attr_str(ctx, "nearest_mode", "round_prefer_floor");
  p->nearest = lookup(n, nms, 4);
  if (p->nearest < 0)
    return kn_op_fail(ctx, KN_ERR_UNSUPPORTED, "nearest_mode '%s' is not supported", n);
  p->cubic_a = kn_attr_float(ctx, "cubic_coeff_a", -0.75f);
  p->exclude_outside = kn_attr_int(ctx, "exclude_outside", 0) != 0;
  p->extrap = kn_attr_float(ctx, "extrapolation_value", 0.0f);
  p->antialias = kn_attr_int(ctx, "antialias", 0) != 0;
  return KN_OK;
}

/* A float tensor of at most KN_MAX_RANK * 2 values into v. */
static kn_status read_floats(kn_op_ctx *ctx, const kn_tensor *t, const char *what,
                             double *v, int64_t *n) {
  *n = kn_tensor_numel(t);
  if (!kn_dtype_is_float(t->dtype))
    return kn_op_fail(ctx, KN_ERR_DTYPE, "%s must be a float tensor, got %s", what,
                      kn_dtype_name(t->dtype));
  if (*n < 0 || *n > 2 * KN_MAX_RANK)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "%s has %lld elements, too many", what,
                      (long long)*n);
  for (int64_t i = 0; i < *n; i++) v[i] = kn_load_f64(t->data, t->dtype, i);
  return KN_OK;
}

/* Fill p from the node and its inputs.  At load, unknown scales/sizes leave
 * p->known false. */
static kn_status setup(kn_op_ctx *ctx, const kn_tensor *x, rs_params *p) {
  kn_status st;
  bool upsample = strcmp(ctx->node->op_type, "Upsample") == 0;
  bool legacy = upsample || ctx->opset < 11;
  memset(p, 0, sizeof *p);
  if ((st = parse_attrs(ctx, p, legacy))) return st;
  int32_t r = p->rank = x->rank;
  if (r < 0) return KN_OK;
  if (r < 1) return kn_op_fail(ctx, KN_ERR_SHAPE, "input must have rank >= 1, got a scalar");
  for (int32_t i = 0; i < r; i++) {
    p->in[i] = x->dims[i];
    p->roi_lo[i] = 0;
    p->roi_hi[i] = 1;
    p->scale[i] = 1;
    p->out[i] = -1;
  }

  /* Axes the scales/sizes/roi refer to (opset 18). */
  int32_t axes[KN_MAX_RANK], na = r;
  for (int32_t i = 0; i < r; i++) axes[i] = i;
  const int64_t *av;
  int32_t nav = legacy ? 0 : kn_attr_ints(ctx, "axes", &av);
  if (nav > 0) {
    if (nav > r)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "axes has %d entries for rank %d", (int)nav,
                        (int)r);
    bool seen[KN_MAX_RANK] = {false};
    for (int32_t i = 0; i < nav; i++) {
      if ((st = kn_axis(ctx, av[i], r, &axes[i]))) return st;
      if (seen[axes[i]])
        return kn_op_fail(ctx, KN_ERR_SHAPE, "axis %lld is repeated in axes",
                          (long long)av[i]);
      seen[axes[i]] = true;
    }
    na = nav;
  }

  const kn_tensor *scales = NULL, *sizes = NULL, *roi = NULL;
  double sv[2 * KN_MAX_RANK];
  if (upsample && ctx->opset < 9) {
    const float *f;
    int32_t nf = kn_attr_floats(ctx, "scales", &f);
    if (nf != r)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "attribute scales has %d values, expected one per input dim (%d)",
                        (int)nf, (int)r);
    for (int32_t i = 0; i < r; i++) sv[i] = f[i];
  } else if (legacy) {
    if ((st = kn_in_req(ctx, 1, &scales))) return st;
  } else {
    roi = kn_in(ctx, 1);
    scales = kn_in(ctx, 2);
    sizes = kn_in(ctx, 3);
    /* Opset 11 passes empty tensors for the unused inputs; at load, one
     * whose size is unknown may still turn out empty. */
    if ((scales && !kn_shape_known(scales)) || (sizes && !kn_shape_known(sizes))) {
      if (ctx->static_infer) return KN_OK;
      return kn_op_fail(ctx, KN_ERR_INTERNAL, "scales or sizes has an unknown shape");
    }
    if (scales && kn_tensor_numel(scales) == 0) scales = NULL;
    if (sizes && kn_tensor_numel(sizes) == 0) sizes = NULL;
    if (roi && kn_shape_known(roi) && kn_tensor_numel(roi) == 0) roi = NULL;
    if (!scales && !sizes)
      return kn_op_fail(ctx, KN_ERR_MISSING, "one of scales and sizes must be given");
    if (scales && sizes)
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                        "scales and sizes were both given, expected only one");
    if (sizes && !kn_dtype_is_int(sizes->dtype) && sizes->dtype)
      return kn_op_fail(ctx, KN_ERR_DTYPE, "sizes must be int64, got %s",
                        kn_dtype_name(sizes->dtype));
  }
  if (scales && !kn_has_data(scales)) return KN_OK;
  if (sizes && !kn_has_data(sizes)) return KN_OK;

  if (roi && p->ctm == CT_TF_CROP_AND_RESIZE) {
    if (!kn_has_data(roi)) return KN_OK;
    double rv[2 * KN_MAX_RANK];
    int64_t n;
    if ((st = read_floats(ctx, roi, "roi", rv, &n))) return st;
    if (n != 2 * na)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "roi has %lld values, expected %d",
                        (long long)n, (int)(2 * na));
    for (int32_t i = 0; i < na; i++) {
      p->roi_lo[axes[i]] = rv[i];
      p->roi_hi[axes[i]] = rv[na + i];
    }
  }

  if (scales) {
    int64_t n;
    if ((st = read_floats(ctx, scales, "scales", sv, &n))) return st;
    if (n != na)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "scales has %lld values, expected %d",
                        (long long)n, (int)na);
  }
  if (!sizes) {
    for (int32_t i = 0; i < na; i++) {
      double s = sv[i];
      if (!(s > 0) || isinf(s))
        return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "scale %g for axis %d must be positive",
                          s, (int)axes[i]);
      p->scale[axes[i]] = s;
    }
    for (int32_t i = 0; i < r; i++) {
      if (p->in[i] < 0) {
        p->out[i] = -1;
        continue;
      }
      double o = floor(p->scale[i] * (double)p->in[i]);
      if (o > (double)INT64_MAX / 2)
        return kn_op_fail(ctx, KN_ERR_LIMIT, "output dim %d is too large", (int)i);
      p->out[i] = (int64_t)o;
    }
    p->known = true;
    return KN_OK;
  }

  int64_t zv[KN_MAX_RANK], n;
  if ((st = kn_read_ints(ctx, sizes, zv, KN_MAX_RANK, &n))) return st;
  if (n != na)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "sizes has %lld values, expected %d",
                      (long long)n, (int)na);
  for (int32_t i = 0; i < r; i++) p->out[i] = p->in[i];
  for (int32_t i = 0; i < na; i++) {
    if (zv[i] < 0)
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "size %lld for axis %d is negative",
                        (long long)zv[i], (int)axes[i]);
    p->out[axes[i]] = zv[i];
  }
  const char *pol = legacy ? "stretch" : kn_attr_str(ctx, "keep_aspect_ratio_policy", "stretch");
  bool stretch = strcmp(pol, "stretch") == 0;
  /* Scales follow from the sizes (needs the input dims). */
  for (int32_t i = 0; i < r; i++)
    if (p->in[i] < 0) {
      if (!stretch)
        for (int32_t j = 0; j < na; j++) p->out[axes[j]] = -1;
      return KN_OK;
    }
  for (int32_t i = 0; i < na; i++) {
    int32_t a = axes[i];
    if (p->in[a] == 0) {
      if (p->out[a] != 0)
        return kn_op_fail(ctx, KN_ERR_SHAPE, "cannot resize an empty axis %d to %lld",
                          (int)a, (long long)p->out[a]);
      continue;
    }
    p->scale[a] = (double)p->out[a] / (double)p->in[a];
  }
  if (!stretch) {
    bool larger = strcmp(pol, "not_smaller") == 0;
    if (!larger && strcmp(pol, "not_larger") != 0)
      return kn_op_fail(ctx, KN_ERR_UNSUPPORTED,
                        "keep_aspect_ratio_policy '%s' is not one of stretch, "
                        "not_larger, not_smaller",
                        pol);
    double s = p->scale[axes[0]];
    for (int32_t i = 1; i < na; i++) {
      double t = p->scale[axes[i]];
      if (larger ? t > s : t < s) s = t;
    }
    for (int32_t i = 0; i < na; i++) {
      int32_t a = axes[i];
      p->scale[a] = s;
      p->out[a] = (int64_t)(s * (double)p->in[a] + 0.5);
    }
  }
  p->known = true;
  return KN_OK;
}

static kn_status resize_infer(kn_op_ctx *ctx) {
  const kn_tensor *x;
  kn_status st;
  rs_params p;
  if ((st = kn_in_req(ctx, 0, &x))) return st;
  if (x->dtype == KN_DTYPE_STRING || x->dtype == KN_DTYPE_BOOL) {
    /* Only nearest moves such values without arithmetic. */
    if (strcmp(kn_attr_str(ctx, "mode", "nearest"), "nearest") != 0)
      return kn_op_fail(ctx, KN_ERR_DTYPE, "%s input needs mode nearest",
                        kn_dtype_name(x->dtype));
  }
  if ((st = setup(ctx, x, &p))) return st;
  if (x->rank < 0) {
    kn_out_set(ctx, 0, x->dtype, -1, NULL);
    return KN_OK;
  }
  int64_t d[KN_MAX_RANK];
  for (int32_t i = 0; i < x->rank; i++) d[i] = p.out[i];
  kn_out_set(ctx, 0, x->dtype, x->rank, d);
  return KN_OK;
}

/* Input coordinate of output index o along axis d; *outside set when
 * tf_crop_and_resize lands outside the input. */
static double src_coord(const rs_params *p, int32_t d, int64_t o, bool *outside) {
  double s = p->scale[d], in = (double)p->in[d], x = (double)o;
  double ow = s * in; /* the reference's (fractional) output length */
  *outside = false;
  switch (p->ctm) {
  case CT_HALF_PIXEL: return (x + 0.5) / s - 0.5;
  case CT_HALF_PIXEL_SYMMETRIC: {
    double adj = (double)p->out[d] / ow, center = in / 2;
    return center * (1 - adj) + (x + 0.5) / s - 0.5;
  }
  case CT_PYTORCH_HALF_PIXEL: return ow == 1 ? -0.5 : (x + 0.5) / s - 0.5;
  case CT_ALIGN_CORNERS: return ow == 1 ? 0 : x * (in - 1) / (ow - 1);
  case CT_ASYMMETRIC: return x / s;
  case CT_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / s;
  default: {
    double lo = p->roi_lo[d], hi = p->roi_hi[d], v;
    if (ow == 1) v = (hi - lo) * (in - 1) / 2;
    else v = x * (hi - lo) * (in - 1) / (ow - 1);
    v += lo * (in - 1);
    if (v < 0 || v > in - 1) *outside = true;
    return v;
  }
  }
}

static int64_t clamp_idx(int64_t i, int64_t n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }

/* Nearest input index for coordinate x (before clamping). */
static int64_t nearest_idx(const rs_params *p, int32_t d, double x) {
  if (p->nearest == NM_SIMPLE) {
    if (p->scale[d] < 1) return (int64_t)ceil(x);
    return (int64_t)floor(x);
  }
  double f = floor(x);
  if (x == f) return (int64_t)f;
  double r = x - f;
  switch (p->nearest) {
  case NM_ROUND_PREFER_FLOOR: return (int64_t)f + (r > 0.5);
  case NM_ROUND_PREFER_CEIL: return (int64_t)f + (r >= 0.5);
  case NM_FLOOR: return (int64_t)f;
  default: return (int64_t)f + 1;
  }
}

/* Copy element si of src to di of dst (any dtype; strings duplicated). */
static kn_status put_elem(kn_op_ctx *ctx, kn_tensor *y, int64_t di, const kn_tensor *x,
                          int64_t si) {
  return kn_copy_elems(ctx, y->data, di, x->data, si, 1, x->dtype);
}

static kn_status run_nearest(kn_op_ctx *ctx, const rs_params *p, const kn_tensor *x,
                             kn_tensor *y) {
  int32_t r = p->rank;
  int64_t total = 0, xs[KN_MAX_RANK], base[KN_MAX_RANK];
  kn_strides(r, p->in, xs);
  for (int32_t d = 0; d < r; d++) {
    base[d] = total;
    total += p->out[d];
  }
  /* map[base[d] + o]: input offset along axis d, or -1 outside the roi. */
  int64_t *map = kn_malloc((size_t)(total ? total : 1) * sizeof *map);
  if (!map) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
  for (int32_t d = 0; d < r; d++)
    for (int64_t o = 0; o < p->out[d]; o++) {
      bool outside;
      double c = src_coord(p, d, o, &outside);
      map[base[d] + o] = outside ? -1 : clamp_idx(nearest_idx(p, d, c), p->in[d]) * xs[d];
    }
  kn_status st = KN_OK;
  int64_t n = kn_tensor_numel(y), coord[KN_MAX_RANK] = {0}, last = p->out[r - 1];
  const int64_t *lm = map + base[r - 1];
  for (int64_t i = 0; i < n; i += last) {
    int64_t off = 0;
    bool outside = false;
    for (int32_t d = 0; d < r - 1; d++) {
      int64_t m = map[base[d] + coord[d]];
      if (m < 0) outside = true;
      off += m;
    }
    for (int64_t j = 0; j < last; j++) {
      if (outside || lm[j] < 0) {
        if (x->dtype != KN_DTYPE_STRING) kn_store_f64(y->data, y->dtype, i + j, p->extrap);
      } else if ((st = put_elem(ctx, y, i + j, x, off + lm[j]))) {
        goto done;
      }
    }
    for (int32_t d = r - 2; d >= 0; d--) {
      if (++coord[d] < p->out[d]) break;
      coord[d] = 0;
    }
  }
done:
  free(map);
  return st;
}

static double cubic_w(double x, double a) {
  x = fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

typedef kn_resize_axis_taps axis_taps;

kn_status kn_resize_build_taps(kn_op_ctx *ctx, const rs_params *p, int32_t d, axis_taps *t) {
  double s = p->scale[d];
  double sa = p->antialias && s < 1 ? s : 1; /* filter scale */
  int64_t start;
  if (p->mode == MODE_LINEAR) start = (int64_t)floor(-1 / sa) + 1;
  else start = (int64_t)floor(-2 / sa) + 1;
  int64_t nt = 2 - 2 * start;
  int64_t in = p->in[d], out = p->out[d];
  if (nt > ((int64_t)1 << 24) || (out > 0 && nt > INT64_MAX / 16 / out))
    return kn_op_fail(ctx, KN_ERR_LIMIT, "resize filter for axis %d is too large", (int)d);
  t->ntaps = (int32_t)nt;
  size_t cnt = out > 0 ? (size_t)(out * nt) : 1;
  t->idx = kn_malloc(cnt * sizeof *t->idx);
  t->w = kn_malloc(cnt * sizeof *t->w);
  if (!t->idx || !t->w) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
  t->identity = in == out;
  for (int64_t o = 0; o < out; o++) {
    int64_t *ix = t->idx + o * nt;
    double *w = t->w + o * nt;
    bool outside;
    double x = src_coord(p, d, o, &outside);
    if (outside) {
      for (int64_t k = 0; k < nt; k++) {
        ix[k] = 0;
        w[k] = 0;
      }
      w[0] = NAN;
      t->identity = false;
      continue;
    }
    /* base + ratio == x with ratio in (0, 1], as the reference does. */
    double f = floor(x);
    int64_t b = (int64_t)f;
    double ratio = x - f;
    if (ratio == 0) {
      b -= 1;
      ratio = 1;
    }
    double sum = 0;
    for (int64_t k = 0; k < nt; k++) {
      int64_t i = start + k;
      double wk;
      if (p->mode == MODE_LINEAR) {
        wk = 1 - fabs(((double)i - ratio) * sa);
        if (wk < 0) wk = 0;
      } else {
        wk = cubic_w(((double)i - ratio) * sa, p->cubic_a);
      }
      int64_t src = b + i;
      if (p->exclude_outside && (src < 0 || src >= in)) wk = 0;
      ix[k] = clamp_idx(src, in);
      w[k] = wk;
      sum += wk;
    }
    if ((p->antialias || p->exclude_outside) && sum != 0)
      for (int64_t k = 0; k < nt; k++) w[k] /= sum;
    for (int64_t k = 0; k < nt; k++)
      if (w[k] != 0 && (ix[k] != o || w[k] != 1)) t->identity = false;
  }
  return KN_OK;
}

/* One separable pass: src [outer, in, inner] -> dst [outer, out, inner]. */
static void apply_taps(const axis_taps *t, double extrap, const double *src, double *dst,
                       int64_t outer, int64_t in, int64_t out, int64_t inner) {
  int32_t nt = t->ntaps;
  for (int64_t o0 = 0; o0 < outer; o0++) {
    const double *s = src + o0 * in * inner;
    double *dd = dst + o0 * out * inner;
    for (int64_t o = 0; o < out; o++) {
      const int64_t *ix = t->idx + o * nt;
      const double *w = t->w + o * nt;
      double *row = dd + o * inner;
      if (isnan(w[0])) {
        for (int64_t k = 0; k < inner; k++) row[k] = extrap;
        continue;
      }
      if (inner == 1) {
        double acc = 0;
        for (int32_t k = 0; k < nt; k++) acc += w[k] * s[ix[k]];
        row[0] = acc;
        continue;
      }
      for (int64_t k = 0; k < inner; k++) row[k] = 0;
      for (int32_t k = 0; k < nt; k++) {
        if (w[k] == 0) continue;
        const double *sr = s + ix[k] * inner;
        double wk = w[k];
        for (int64_t j = 0; j < inner; j++) row[j] += wk * sr[j];
      }
    }
  }
}

static kn_status run_interp(kn_op_ctx *ctx, const rs_params *p, const kn_tensor *x,
                            kn_tensor *y) {
  int32_t r = p->rank;
  kn_status st = KN_OK;
  axis_taps taps[KN_MAX_RANK];
  memset(taps, 0, sizeof taps);
  double *a = NULL, *b = NULL;
  for (int32_t d = 0; d < r; d++)
    if ((st = kn_resize_build_taps(ctx, p, d, &taps[d]))) goto done;
  /* Buffers big enough for every intermediate shape. */
  int64_t cur[KN_MAX_RANK], maxn = kn_tensor_numel(x);
  memcpy(cur, p->in, sizeof(int64_t) * (size_t)r);
  for (int32_t d = 0; d < r; d++) {
    if (taps[d].identity) continue;
    cur[d] = p->out[d];
    int64_t n = kn_shape_numel(r, cur);
    if (n < 0 || (uint64_t)n > KN_MAX_TENSOR_BYTES / sizeof(double)) {
      st = kn_op_fail(ctx, KN_ERR_LIMIT, "resize intermediate is too large");
      goto done;
    }
    if (n > maxn) maxn = n;
  }
  a = kn_malloc((size_t)(maxn ? maxn : 1) * sizeof(double));
  b = kn_malloc((size_t)(maxn ? maxn : 1) * sizeof(double));
  if (!a || !b) {
    st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
    goto done;
  }
  int64_t nx = kn_tensor_numel(x);
  if (x->dtype == KN_DTYPE_F32) {
    const float *xf = x->data;
    for (int64_t i = 0; i < nx; i++) a[i] = xf[i];
  } else {
    for (int64_t i = 0; i < nx; i++) a[i] = kn_load_f64(x->data, x->dtype, i);
  }
  memcpy(cur, p->in, sizeof(int64_t) * (size_t)r);
  for (int32_t d = 0; d < r; d++) {
    if (taps[d].identity) continue;
    int64_t outer = kn_shape_numel(d, cur), inner = kn_shape_numel(r - d - 1, cur + d + 1);
    apply_taps(&taps[d], p->extrap, a, b, outer, cur[d], p->out[d], inner);
    cur[d] = p->out[d];
    double *t = a;
    a = b;
    b = t;
  }
  int64_t ny = kn_tensor_numel(y);
  if (y->dtype == KN_DTYPE_F32) {
    float *yf = y->data;
    for (int64_t i = 0; i < ny; i++) yf[i] = (float)a[i];
  } else {
    for (int64_t i = 0; i < ny; i++) kn_store_f64(y->data, y->dtype, i, a[i]);
  }
done:
  for (int32_t d = 0; d < r; d++) {
    free(taps[d].idx);
    free(taps[d].w);
  }
  free(a);
  free(b);
  return st;
}

/* Nearest source index of output o along axis d, -1 outside the roi (what
 * run_nearest's map holds, divided by the stride). */
int64_t kn_resize_nearest_src(const rs_params *p, int32_t d, int64_t o) {
  bool outside;
  double c = src_coord(p, d, o, &outside);
  return outside ? -1 : clamp_idx(nearest_idx(p, d, c), p->in[d]);
}

kn_status kn_resize_plan(kn_op_ctx *ctx, const kn_tensor *x, const kn_tensor *y, rs_params *p,
                         bool *empty) {
  kn_status st;
  *empty = false;
  if ((st = setup(ctx, x, p))) return st;
  if (!p->known) return kn_op_fail(ctx, KN_ERR_INTERNAL, "output size is unknown at run time");
  if (kn_tensor_numel(y) == 0) {
    *empty = true;
    return KN_OK;
  }
  for (int32_t i = 0; i < p->rank; i++)
    if (p->in[i] == 0)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "cannot resize an empty axis %d to %lld",
                        (int)i, (long long)p->out[i]);
  return KN_OK;
}

static kn_status resize_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0);
  kn_tensor *y = kn_out(ctx, 0);
  rs_params p;
  bool empty;
  kn_status st = kn_resize_plan(ctx, x, y, &p, &empty);
  if (st || empty) return st;
  if (p.mode == MODE_NEAREST) return run_nearest(ctx, &p, x, y);
  return run_interp(ctx, &p, x, y);
}

const kn_op_def kn_ops_resize[] = {
    {"Resize", NULL, 1, 4, 1, 1, 10, 21, resize_infer, resize_run, NULL, 0, KN_DATA_SHAPE_ARGS},
    {"Upsample", NULL, 1, 2, 1, 1, 7, 10, resize_infer, resize_run, NULL, 0, KN_DATA_SHAPE_ARGS},
    KN_OP_END,
};
