/* Detection and sampling ops: GridSample (opsets 16 and 20), RoiAlign
 * (opsets 10 and 16), NonMaxSuppression (opsets 10 and 11).
 *
 * Semantics follow onnxruntime's CPU kernels, which the ONNX reference
 * implementation mirrors:
 *  - GridSample maps normalised grid coordinates to pixels (align_corners),
 *    applies the padding mode to the source coordinate when it lies outside
 *    the image, then reads every tap through the padding mode again.
 *    Nearest rounds half to even.  Linear and nearest work for any number of
 *    spatial dims; cubic is 2-D only, as the spec says.
 *  - RoiAlign averages (or takes the max of) bilinear samples on a regular
 *    grid in each bin; max mode keeps onnxruntime's per-sample maximum of
 *    the weighted corners.
 *  - NonMaxSuppression keeps boxes with score > score_threshold, greedily in
 *    decreasing score (lower index first on ties), dropping any box whose
 *    IoU with a kept box exceeds iou_threshold. */
#include "op.h"

#include <math.h>

static const kn_dtype float_types[] = {KN_DTYPE_F32, KN_DTYPE_F64, KN_DTYPE_F16,
                                       KN_DTYPE_BF16, 0};

/* ---- GridSample ------------------------------------------------------------- */

enum { GS_NEAREST, GS_LINEAR, GS_CUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

typedef struct gs_params {
  int mode, pad;
  bool align;
  int32_t k; /* spatial dims */
} gs_params;

static kn_status gs_parse(kn_op_ctx *ctx, gs_params *p) {
  const char *m = kn_attr_str(ctx, "mode", ctx->opset >= 20 ? "linear" : "bilinear");
  if (strcmp(m, "nearest") == 0) p->mode = GS_NEAREST;
  else if (strcmp(m, "bilinear") == 0 || strcmp(m, "linear") == 0) p->mode = GS_LINEAR;
  else if (strcmp(m, "bicubic") == 0 || strcmp(m, "cubic") == 0) p->mode = GS_CUBIC;
  else
    return kn_op_fail(ctx, KN_ERR_UNSUPPORTED,
                      "mode '%s' is not one of nearest, linear, cubic", m);
  const char *pm = kn_attr_str(ctx, "padding_mode", "zeros");
  if (strcmp(pm, "zeros") == 0) p->pad = GS_ZEROS;
  else if (strcmp(pm, "border") == 0) p->pad = GS_BORDER;
  else if (strcmp(pm, "reflection") == 0) p->pad = GS_REFLECTION;
  else
    return kn_op_fail(ctx, KN_ERR_UNSUPPORTED,
                      "padding_mode '%s' is not one of zeros, border, reflection", pm);
  p->align = kn_attr_int(ctx, "align_corners", 0) != 0;
  return KN_OK;
}

static kn_status gs_check(kn_op_ctx *ctx, const kn_tensor *x, const kn_tensor *g,
                          gs_params *p) {
  kn_status st;
  if ((st = gs_parse(ctx, p))) return st;
  if ((st = kn_check_dtype(ctx, 1, g, float_types))) return st;
  if (x->rank < 0 || g->rank < 0) return KN_OK;
  if (x->rank < 3 || g->rank != x->rank)
    return kn_op_fail(ctx, KN_ERR_SHAPE,
                      "X must be (N, C, D1..Dk) and grid (N, D1_out..Dk_out, k); got "
                      "ranks %d and %d",
                      (int)x->rank, (int)g->rank);
  p->k = x->rank - 2;
  if (g->dims[g->rank - 1] >= 0 && g->dims[g->rank - 1] != p->k)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "grid's last dim is %lld, expected %d",
                      (long long)g->dims[g->rank - 1], (int)p->k);
  if (x->dims[0] >= 0 && g->dims[0] >= 0 && x->dims[0] != g->dims[0])
    return kn_op_fail(ctx, KN_ERR_SHAPE, "X has batch %lld but grid has %lld",
                      (long long)x->dims[0], (long long)g->dims[0]);
  if (p->mode == GS_CUBIC && p->k != 2)
    return kn_op_fail(ctx, KN_ERR_UNSUPPORTED, "cubic mode needs 2 spatial dims, got %d",
                      (int)p->k);
  return KN_OK;
}

static kn_status gs_infer(kn_op_ctx *ctx) {
  const kn_tensor *x, *g;
  kn_status st;
  gs_params p;
  if ((st = kn_in_req(ctx, 0, &x)) || (st = kn_in_req(ctx, 1, &g))) return st;
  if (x->dtype == KN_DTYPE_STRING || x->dtype == KN_DTYPE_BOOL)
    return kn_op_fail(ctx, KN_ERR_DTYPE, "X must be numeric, got %s",
                      kn_dtype_name(x->dtype));
  if ((st = gs_check(ctx, x, g, &p))) return st;
  if (x->rank < 0 || g->rank < 0) {
    kn_out_set(ctx, 0, x->dtype, x->rank >= 0 ? x->rank : g->rank, NULL);
    if (x->rank >= 0 || g->rank >= 0) {
      kn_tensor *y = kn_out(ctx, 0);
      for (int32_t i = 0; i < y->rank; i++) y->dims[i] = -1;
    }
    return KN_OK;
  }
  int64_t d[KN_MAX_RANK];
  d[0] = x->dims[0] >= 0 ? x->dims[0] : g->dims[0];
  d[1] = x->dims[1];
  for (int32_t i = 0; i < p.k; i++) d[2 + i] = g->dims[1 + i];
  kn_out_set(ctx, 0, x->dtype, x->rank, d);
  return KN_OK;
}

static double gs_reflect(double x, double lo, double hi) {
  double rng = hi - lo;
  if (rng <= 0) return lo;
  if (x < lo) {
    double dx = lo - x;
    double n = floor(dx / rng), r = dx - n * rng;
    return fmod(n, 2) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi;
    double n = floor(dx / rng), r = dx - n * rng;
    return fmod(n, 2) == 0 ? hi - r : lo + r;
  }
  return x;
}

/* Index of tap i along a dim of size n through the padding mode, or -1 for
 * a zero. */
static int64_t gs_tap(const gs_params *p, double i, int64_t n) {
  if (p->pad == GS_ZEROS) return i >= 0 && i < (double)n ? (int64_t)i : -1;
  if (p->pad == GS_BORDER) return i < 0 ? 0 : (i > (double)(n - 1) ? n - 1 : (int64_t)i);
  double lo = p->align ? 0 : -0.5, hi = p->align ? (double)(n - 1) : (double)n - 0.5;
  int64_t r = (int64_t)gs_reflect(i, lo, hi);
  return r < 0 ? 0 : (r >= n ? n - 1 : r);
}

static double gs_cubic_w(double x) {
  const double a = -0.75;
  x = fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

static kn_status gs_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *g = kn_in(ctx, 1);
  kn_tensor *y = kn_out(ctx, 0);
  kn_status st;
  gs_params p;
  if ((st = gs_check(ctx, x, g, &p))) return st;
  int32_t k = p.k;
  int64_t N = x->dims[0], C = x->dims[1];
  const int64_t *in = x->dims + 2;
  int64_t xs[KN_MAX_RANK];
  kn_strides(k, in, xs);
  int64_t plane = kn_shape_numel(k, in), npts = kn_shape_numel(k, g->dims + 1);
  int32_t ncorner = p.mode == GS_LINEAR ? 1 << k : 1;
  if (plane == 0) return KN_OK; /* nothing to sample: every output is a zero pad */
  for (int64_t n = 0; n < N; n++)
    for (int64_t pt = 0; pt < npts; pt++) {
      /* Source coordinate per spatial dim (grid lists x, y, ... i.e. last dim first). */
      double c[KN_MAX_RANK];
      for (int32_t d = 0; d < k; d++) {
        double v = kn_load_f64(g->data, g->dtype, (n * npts + pt) * k + (k - 1 - d));
        double len = (double)in[d];
        double s = p.align ? (v + 1) / 2 * (len - 1) : ((v + 1) * len - 1) / 2;
        if (p.mode == GS_NEAREST) s = nearbyint(s);
        double lo = p.align ? 0 : -0.5, hi = p.align ? len - 1 : len - 0.5;
        if (s < lo || s > hi) {
          if (p.pad == GS_BORDER) s = s < 0 ? 0 : (s > len - 1 ? len - 1 : s);
          else if (p.pad == GS_REFLECTION) s = gs_reflect(s, lo, hi);
        }
        if (!isfinite(s)) s = -1e9; /* far outside: zeros, or the padded edge */
        c[d] = s;
      }
      for (int64_t ch = 0; ch < C; ch++) {
        int64_t xbase = (n * C + ch) * plane;
        double acc = 0;
        if (p.mode == GS_NEAREST) {
          int64_t off = 0;
          for (int32_t d = 0; d < k && off >= 0; d++) {
            int64_t t = gs_tap(&p, c[d], in[d]);
            off = t < 0 ? -1 : off + t * xs[d];
          }
          acc = off < 0 ? 0 : kn_load_f64(x->data, x->dtype, xbase + off);
        } else if (p.mode == GS_LINEAR) {
          for (int32_t m = 0; m < ncorner; m++) {
            double w = 1;
            int64_t off = 0;
            for (int32_t d = 0; d < k; d++) {
              double f = floor(c[d]), t = c[d] - f;
              bool hi = (m >> (k - 1 - d)) & 1;
              w *= hi ? t : 1 - t;
              int64_t ti = gs_tap(&p, f + hi, in[d]);
              if (ti < 0) {
                off = -1;
                break;
              }
              off += ti * xs[d];
            }
            if (off >= 0 && w != 0) acc += w * kn_load_f64(x->data, x->dtype, xbase + off);
          }
        } else {
          double fy = floor(c[0]), fx = floor(c[1]);
          double ty = c[0] - fy, tx = c[1] - fx;
          for (int32_t i = 0; i < 4; i++) {
            int64_t ry = gs_tap(&p, fy - 1 + i, in[0]);
            double wy = gs_cubic_w(ty - (i - 1));
            for (int32_t j = 0; j < 4; j++) {
              int64_t rx = gs_tap(&p, fx - 1 + j, in[1]);
              if (ry < 0 || rx < 0) continue;
              acc += wy * gs_cubic_w(tx - (j - 1)) *
                     kn_load_f64(x->data, x->dtype, xbase + ry * xs[0] + rx);
            }
          }
        }
        kn_store_f64(y->data, y->dtype, (n * C + ch) * npts + pt, acc);
      }
    }
  return KN_OK;
}

/* ---- RoiAlign --------------------------------------------------------------- */

typedef struct roi_params {
  bool max_mode, half_pixel;
  int64_t oh, ow, sampling;
  double scale;
} roi_params;

static kn_status roi_parse(kn_op_ctx *ctx, roi_params *p) {
  const char *m = kn_attr_str(ctx, "mode", "avg");
  if (strcmp(m, "avg") != 0 && strcmp(m, "max") != 0)
    return kn_op_fail(ctx, KN_ERR_UNSUPPORTED, "mode '%s' is not one of avg, max", m);
  p->max_mode = m[1] == 'a';
  const char *ct = kn_attr_str(ctx, "coordinate_transformation_mode",
                               ctx->opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (strcmp(ct, "half_pixel") != 0 && strcmp(ct, "output_half_pixel") != 0)
    return kn_op_fail(ctx, KN_ERR_UNSUPPORTED,
                      "coordinate_transformation_mode '%s' is not one of half_pixel, "
                      "output_half_pixel",
                      ct);
  p->half_pixel = strcmp(ct, "half_pixel") == 0;
  p->oh = kn_attr_int(ctx, "output_height", 1);
  p->ow = kn_attr_int(ctx, "output_width", 1);
  p->sampling = kn_attr_int(ctx, "sampling_ratio", 0);
  p->scale = kn_attr_float(ctx, "spatial_scale", 1.0f);
  if (p->oh < 1 || p->ow < 1 || p->oh > (1 << 20) || p->ow > (1 << 20))
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                      "output_height %lld and output_width %lld must be positive",
                      (long long)p->oh, (long long)p->ow);
  if (p->sampling < 0 || p->sampling > 1024)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "sampling_ratio %lld must be in [0, 1024]",
                      (long long)p->sampling);
  return KN_OK;
}

static kn_status roi_infer(kn_op_ctx *ctx) {
  const kn_tensor *x, *rois, *bi;
  kn_status st;
  roi_params p;
  if ((st = kn_in_req(ctx, 0, &x)) || (st = kn_in_req(ctx, 1, &rois)) ||
      (st = kn_in_req(ctx, 2, &bi)))
    return st;
  if ((st = roi_parse(ctx, &p))) return st;
  if ((st = kn_check_dtype(ctx, 0, x, float_types)) ||
      (st = kn_check_dtype(ctx, 1, rois, float_types)) ||
      (st = kn_check_dtype(ctx, 2, bi, (const kn_dtype[]){KN_DTYPE_I64, KN_DTYPE_I32, 0})))
    return st;
  if (x->rank >= 0 && x->rank != 4)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "X must be 4-D (N, C, H, W), got rank %d",
                      (int)x->rank);
  if (rois->rank >= 0 && (rois->rank != 2 || (rois->dims[1] >= 0 && rois->dims[1] != 4)))
    return kn_op_fail(ctx, KN_ERR_SHAPE, "rois must be (num_rois, 4)");
  if (bi->rank >= 0 && bi->rank != 1)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "batch_indices must be 1-D, got rank %d",
                      (int)bi->rank);
  int64_t nr = rois->rank == 2 ? rois->dims[0] : (bi->rank == 1 ? bi->dims[0] : -1);
  if (rois->rank == 2 && bi->rank == 1 && rois->dims[0] >= 0 && bi->dims[0] >= 0 &&
      rois->dims[0] != bi->dims[0])
    return kn_op_fail(ctx, KN_ERR_SHAPE, "rois has %lld rows but batch_indices %lld",
                      (long long)rois->dims[0], (long long)bi->dims[0]);
  int64_t d[4] = {nr, x->rank == 4 ? x->dims[1] : -1, p.oh, p.ow};
  kn_out_set(ctx, 0, x->dtype, 4, d);
  return KN_OK;
}

static kn_status roi_run(kn_op_ctx *ctx) {
  const kn_tensor *x = kn_in(ctx, 0), *rois = kn_in(ctx, 1), *bi = kn_in(ctx, 2);
  kn_tensor *y = kn_out(ctx, 0);
  kn_status st;
  roi_params p;
  if ((st = roi_parse(ctx, &p))) return st;
  int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
  int64_t nr = rois->dims[0];
  if ((H == 0 || W == 0) && nr > 0 && C > 0)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "X has an empty spatial dim (%lldx%lld)",
                      (long long)H, (long long)W);
  double off = p.half_pixel ? 0.5 : 0;
  for (int64_t r = 0; r < nr; r++) {
    int64_t b = kn_load_i64(bi->data, bi->dtype, r);
    if (b < 0 || b >= N)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "batch index %lld of roi %lld is outside [0, %lld)",
                        (long long)b, (long long)r, (long long)N);
    double x1 = kn_load_f64(rois->data, rois->dtype, r * 4) * p.scale - off;
    double y1 = kn_load_f64(rois->data, rois->dtype, r * 4 + 1) * p.scale - off;
    double x2 = kn_load_f64(rois->data, rois->dtype, r * 4 + 2) * p.scale - off;
    double y2 = kn_load_f64(rois->data, rois->dtype, r * 4 + 3) * p.scale - off;
    double rw = x2 - x1, rh = y2 - y1;
    if (!p.half_pixel) {
      if (rw < 1) rw = 1;
      if (rh < 1) rh = 1;
    }
    double bh = rh / (double)p.oh, bw = rw / (double)p.ow;
    double fgh = p.sampling > 0 ? (double)p.sampling : ceil(rh / (double)p.oh);
    double fgw = p.sampling > 0 ? (double)p.sampling : ceil(rw / (double)p.ow);
    if (!(fgh <= 65536 && fgw <= 65536))
      return kn_op_fail(ctx, KN_ERR_LIMIT, "roi %lld needs too many samples per bin",
                        (long long)r);
    /* A degenerate or inverted roi samples nothing. */
    int64_t gh = fgh > 0 ? (int64_t)fgh : 0, gw = fgw > 0 ? (int64_t)fgw : 0;
    double count = gh * gw > 0 ? (double)(gh * gw) : 1;
    for (int64_t c = 0; c < C; c++) {
      int64_t base = (b * C + c) * H * W;
      for (int64_t ph = 0; ph < p.oh; ph++)
        for (int64_t pw = 0; pw < p.ow; pw++) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; iy++) {
            double yy = y1 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
            for (int64_t ix = 0; ix < gw; ix++) {
              double xx = x1 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
              double v = 0;
              if (yy >= -1.0 && yy <= (double)H && xx >= -1.0 && xx <= (double)W) {
                double yv = yy <= 0 ? 0 : yy, xv = xx <= 0 ? 0 : xx;
                int64_t yl = (int64_t)yv, xl = (int64_t)xv, yh, xh;
                if (yl >= H - 1) {
                  yh = yl = H - 1;
                  yv = (double)yl;
                } else {
                  yh = yl + 1;
                }
                if (xl >= W - 1) {
                  xh = xl = W - 1;
                  xv = (double)xl;
                } else {
                  xh = xl + 1;
                }
                double ly = yv - (double)yl, lx = xv - (double)xl, hy = 1 - ly, hx = 1 - lx;
                double v1 = hy * hx * kn_load_f64(x->data, x->dtype, base + yl * W + xl);
                double v2 = hy * lx * kn_load_f64(x->data, x->dtype, base + yl * W + xh);
                double v3 = ly * hx * kn_load_f64(x->data, x->dtype, base + yh * W + xl);
                double v4 = ly * lx * kn_load_f64(x->data, x->dtype, base + yh * W + xh);
                if (p.max_mode) v = fmax(fmax(v1, v2), fmax(v3, v4));
                else v = v1 + v2 + v3 + v4;
              }
              if (p.max_mode) {
                acc = first ? v : fmax(acc, v);
                first = false;
              } else {
                acc += v;
              }
            }
          }
          if (!p.max_mode) acc /= count;
          kn_store_f64(y->data, y->dtype, ((r * C + c) * p.oh + ph) * p.ow + pw, acc);
        }
    }
  }
  return KN_OK;
}

/* ---- NonMaxSuppression ------------------------------------------------------ */

typedef struct nms_box {
  double x0, y0, x1, y1;
} nms_box;

static nms_box nms_read(const kn_tensor *b, int64_t i, bool center) {
  double v[4];
  for (int k = 0; k < 4; k++) v[k] = kn_load_f64(b->data, b->dtype, i * 4 + k);
  nms_box r;
  if (center) {
    r.x0 = v[0] - v[2] / 2;
    r.x1 = v[0] + v[2] / 2;
    r.y0 = v[1] - v[3] / 2;
    r.y1 = v[1] + v[3] / 2;
  } else {
    r.y0 = fmin(v[0], v[2]);
    r.y1 = fmax(v[0], v[2]);
    r.x0 = fmin(v[1], v[3]);
    r.x1 = fmax(v[1], v[3]);
  }
  return r;
}

static bool nms_suppress(const nms_box *a, const nms_box *b, double thr) {
  double ix0 = fmax(a->x0, b->x0), ix1 = fmin(a->x1, b->x1);
  if (ix1 <= ix0) return false;
  double iy0 = fmax(a->y0, b->y0), iy1 = fmin(a->y1, b->y1);
  if (iy1 <= iy0) return false;
  double inter = (ix1 - ix0) * (iy1 - iy0);
  double aa = (a->x1 - a->x0) * (a->y1 - a->y0), ab = (b->x1 - b->x0) * (b->y1 - b->y0);
  double uni = aa + ab - inter;
  if (inter <= 0 || aa <= 0 || ab <= 0 || uni <= 0) return false;
  return inter / uni > thr;
}

static kn_status nms_check(kn_op_ctx *ctx, const kn_tensor *boxes, const kn_tensor *scores) {
  kn_status st;
  if ((st = kn_check_dtype(ctx, 0, boxes, (const kn_dtype[]){KN_DTYPE_F32, 0})) ||
      (st = kn_check_dtype(ctx, 1, scores, (const kn_dtype[]){KN_DTYPE_F32, 0})))
    return st;
  int64_t cpb = kn_attr_int(ctx, "center_point_box", 0);
  if (cpb != 0 && cpb != 1)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "center_point_box must be 0 or 1, got %lld",
                      (long long)cpb);
  if (boxes->rank >= 0 && (boxes->rank != 3 || (boxes->dims[2] >= 0 && boxes->dims[2] != 4)))
    return kn_op_fail(ctx, KN_ERR_SHAPE, "boxes must be (batches, boxes, 4)");
  if (scores->rank >= 0 && scores->rank != 3)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "scores must be (batches, classes, boxes)");
  if (boxes->rank == 3 && scores->rank == 3) {
    if (boxes->dims[0] >= 0 && scores->dims[0] >= 0 && boxes->dims[0] != scores->dims[0])
      return kn_op_fail(ctx, KN_ERR_SHAPE, "boxes has %lld batches but scores %lld",
                        (long long)boxes->dims[0], (long long)scores->dims[0]);
    if (boxes->dims[1] >= 0 && scores->dims[2] >= 0 && boxes->dims[1] != scores->dims[2])
      return kn_op_fail(ctx, KN_ERR_SHAPE, "boxes has %lld boxes but scores %lld",
                        (long long)boxes->dims[1], (long long)scores->dims[2]);
  }
  for (int32_t i = 2; i < 5 && i < ctx->n_in; i++) {
    const kn_tensor *t = kn_in(ctx, i);
    if (t && t->rank >= 0 && kn_shape_known(t) && kn_tensor_numel(t) != 1)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "input %d must hold one value, got %lld", (int)i,
                        (long long)kn_tensor_numel(t));
  }
  if ((st = kn_check_dtype(ctx, 2, kn_in(ctx, 2), (const kn_dtype[]){KN_DTYPE_I64, 0})) ||
      (st = kn_check_dtype(ctx, 3, kn_in(ctx, 3), (const kn_dtype[]){KN_DTYPE_F32, 0})) ||
      (st = kn_check_dtype(ctx, 4, kn_in(ctx, 4), (const kn_dtype[]){KN_DTYPE_F32, 0})))
    return st;
  return KN_OK;
}

static kn_status nms_infer(kn_op_ctx *ctx) {
  const kn_tensor *boxes, *scores;
  kn_status st;
  if ((st = kn_in_req(ctx, 0, &boxes)) || (st = kn_in_req(ctx, 1, &scores))) return st;
  if ((st = nms_check(ctx, boxes, scores))) return st;
  kn_out_set(ctx, 0, KN_DTYPE_I64, 2, (const int64_t[]){-1, 3});
  return KN_OK;
}

/* Sort candidate ids by decreasing score, ties by increasing id (merge sort,
 * stable on ids already in increasing order). */
static void nms_sort(const float *s, int64_t *v, int64_t *tmp, int64_t n) {
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) tmp[k++] = s[v[j]] > s[v[i]] ? v[j++] : v[i++];
      while (i < mid) tmp[k++] = v[i++];
      while (j < hi) tmp[k++] = v[j++];
    }
    memcpy(v, tmp, (size_t)n * sizeof *v);
  }
}

static kn_status nms_run(kn_op_ctx *ctx) {
  const kn_tensor *boxes = kn_in(ctx, 0), *scores = kn_in(ctx, 1);
  kn_status st = KN_OK;
  const kn_tensor *tm = kn_in(ctx, 2), *ti = kn_in(ctx, 3), *ts = kn_in(ctx, 4);
  int64_t max_out = tm && kn_tensor_numel(tm) == 1 ? kn_scalar_i64(tm) : 0;
  double iou = ti && kn_tensor_numel(ti) == 1 ? kn_scalar_f64(ti) : 0;
  bool has_st = ts && kn_tensor_numel(ts) == 1;
  float sthr = has_st ? (float)kn_scalar_f64(ts) : 0;
  if (!(iou >= 0 && iou <= 1))
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "iou_threshold %g must be in [0, 1]", iou);
  bool center = kn_attr_int(ctx, "center_point_box", 0) == 1;
  int64_t B = boxes->dims[0], nb = boxes->dims[1], C = scores->dims[1];
  if (max_out < 0) max_out = 0;
  if (max_out > nb) max_out = nb;
  int64_t m = nb ? nb : 1, cap = 0, cnt = 0;
  int64_t *cand = kn_malloc((size_t)m * sizeof *cand);
  int64_t *tmp = kn_malloc((size_t)m * sizeof *tmp);
  int64_t *kept = kn_malloc((size_t)m * sizeof *kept);
  nms_box *bx = kn_malloc((size_t)m * sizeof *bx);
  int64_t *sel = NULL;
  if (!cand || !tmp || !kept || !bx) {
    st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
    goto done;
  }
  for (int64_t b = 0; b < B && max_out > 0; b++) {
    for (int64_t i = 0; i < nb; i++) bx[i] = nms_read(boxes, b * nb + i, center);
    for (int64_t c = 0; c < C; c++) {
      const float *s = (const float *)scores->data + (b * C + c) * nb;
      int64_t nc = 0, nk = 0;
      for (int64_t i = 0; i < nb; i++)
        if (!has_st || s[i] > sthr) cand[nc++] = i;
      nms_sort(s, cand, tmp, nc);
      for (int64_t i = 0; i < nc && nk < max_out; i++) {
        bool drop = false;
        for (int64_t j = 0; j < nk && !drop; j++)
          drop = nms_suppress(&bx[cand[i]], &bx[kept[j]], iou);
        if (drop) continue;
        kept[nk++] = cand[i];
        if (cnt + 1 > cap) {
          int64_t nc2 = cap ? cap * 2 : 64;
          int64_t *ns = kn_realloc(sel, (size_t)nc2 * 3 * sizeof *sel);
          if (!ns) {
            st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
            goto done;
          }
          sel = ns;
          cap = nc2;
        }
        sel[cnt * 3] = b;
        sel[cnt * 3 + 1] = c;
        sel[cnt * 3 + 2] = cand[i];
        cnt++;
      }
    }
  }
  {
    int64_t d[2] = {cnt, 3};
    if ((st = kn_out_alloc(ctx, 0, KN_DTYPE_I64, 2, d))) goto done;
    if (cnt) memcpy(kn_out(ctx, 0)->data, sel, (size_t)cnt * 3 * sizeof *sel);
  }
done:
  free(cand);
  free(tmp);
  free(kept);
  free(bx);
  free(sel);
  return st;
}

const kn_op_def kn_ops_detection[] = {
    {"GridSample", NULL, 2, 2, 1, 1, 16, 21, gs_infer, gs_run, NULL},
    {"RoiAlign", NULL, 3, 3, 1, 1, 10, 21, roi_infer, roi_run, NULL},
    {"NonMaxSuppression", NULL, 2, 5, 1, 1, 10, 21, nms_infer, nms_run, NULL, 0, KN_DATA_SHAPE_ALL},
    KN_OP_END,
};
