/*
 * Channels-last depthwise convolution (conv.h: conv_depthwise_nhwc):
 * packing and the driver of the row kernels of f32-dwconv-nhwc.h (one
 * per ISA, all from f32-dwconv-nhwc-impl.h).
 *
 * Weights are packed once as [kh * kw][q][cp] (channel-contiguous, cp =
 * c rounded up to 16 with zeros, whatever the ISA; q the channels of a
 * group, 1 for depthwise), so a tap's weights for a channel vector are one
 * aligned-stride load.  Narrow groups (q = 2, 4, 8; f32-dwconv-nhwc.h) run
 * the same kernels.
 *
 * The kernels finish Relu / Clip / no activation and the residual in
 * registers; any other activation (Sigmoid, Silu, HardSwish, Gelu, ...)
 * runs with kn_f32_epilogue over the rows just written (contiguous in
 * NHWC: rows x ow x c floats), in chunks of about a quarter of the L2
 * (post_floats) so they are still in L2.  A residual added after such an
 * activation goes with it; one added before it stays in the kernel.
 * The kernels' channel groups are sized by the L1d (kn_dwn_args).
 *
 * Tasks: (image, chunk of output rows); one thread runs each image as one
 * task.  Every output element is computed by one task in a fixed order,
 * so any thread count gives the same bits.
 */
#include "kernels/conv/conv.h"
#include "kernels/conv/f32-dwconv-nhwc.h"

/* Outputs per post-pass chunk: a quarter of the L2 (kn_caches; 256 KiB
 * of Zen 5's 1 MiB), where the rows the kernel just wrote still are.
 * 32 KiB (L1) made each kernel call one output row on 7x7 maps of 1152
 * channels, which then read their input window of kh rows once per row:
 * EfficientNet-B0's depthwise steps 1.38 -> 1.33 ms at 256 KiB, 1 thread.
 * Never less than one output row. */
static int64_t post_floats(const kn_caches *caches) {
  return (int64_t)(kn_caches_or_common(caches).l2 / 4 / sizeof(float));
}

int64_t kn_f32_dwconv_nhwc_post_rows(const kn_conv2d *g, const kn_caches *caches) {
  int64_t row = g->ow * g->c, floats = post_floats(caches);
  return row >= floats || row <= 0 ? 1 : floats / row;
}

static int64_t dwn_cp(int64_t c) { return (c + KN_DWN_CALIGN - 1) / KN_DWN_CALIGN * KN_DWN_CALIGN; }

bool kn_f32_dwconv_nhwc_fits(const kn_conv2d *g, bool scaled) {
  if (g->kd > 0 || g->group < 1 || g->m != g->c || g->c % g->group) return false;
  int64_t q = g->c / g->group;
  return q == 1 || (!scaled && (q == 2 || q == 4 || q == 8));
}

/* Channels per group. */
static int64_t dwn_q(const kn_conv2d *g) { return g->c / g->group; }

size_t kn_f32_dwconv_nhwc_pack_size(kn_isa isa, const kn_conv2d *g) {
  (void)isa;
  return (size_t)(g->kh * g->kw * dwn_q(g) * dwn_cp(g->c));
}

void kn_f32_dwconv_nhwc_pack(kn_isa isa, const kn_conv2d *g, const float *w, float *dst) {
  (void)isa;
  KN_ASSERT(kn_f32_dwconv_nhwc_fits(g, false));
  int64_t taps = g->kh * g->kw, cp = dwn_cp(g->c), q = dwn_q(g);
  /* w [c][q][taps]: output channel ch's input channel i of its group */
  for (int64_t t = 0; t < taps; t++)
    for (int64_t i = 0; i < q; i++)
      for (int64_t ch = 0; ch < cp; ch++)
        dst[(t * q + i) * cp + ch] = ch < g->c ? w[(ch * q + i) * taps + t] : 0.0f;
}

size_t kn_f32_dwconv_nhwc_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads,
                                  const kn_caches *caches) {
  (void)isa, (void)g, (void)threads, (void)caches;
  /* nothing: the kernels read the input in place (64 bytes so that the
   * caller's scratch request is never for zero bytes) */
  return 64;
}

typedef struct dwn_job {
  kn_dwn_args a;
  kn_dwn_rows_fn rows;
  kn_isa isa;
  kn_epilogue post; /* activation (and residual after it) not done inline */
  bool has_post;
  int64_t chunks, chunk_rows, post_rows;
} dwn_job;

/* Output rows [oy0, oy1) of image b, on the calling thread. */
static void dwn_rows(const dwn_job *j, int64_t b, int64_t oy0, int64_t oy1) {
  const kn_conv2d *g = j->a.g;
  if (!j->has_post) {
    if (oy0 < oy1) j->rows(&j->a, b, oy0, oy1);
    return;
  }
  int64_t row = g->ow * g->c;
  for (int64_t r0 = oy0; r0 < oy1; r0 += j->post_rows) {
    int64_t r1 = r0 + j->post_rows < oy1 ? r0 + j->post_rows : oy1, n = (r1 - r0) * row;
    int64_t off = (b * g->oh + r0) * row;
    j->rows(&j->a, b, r0, r1);
    kn_epilogue e = j->post;
    if (e.res) e.res += off;
    e.ldr = n;
    kn_f32_epilogue(j->isa, &e, j->a.y + off, n, 0, 1, 0, n);
  }
}

static void dwn_task(void *arg, int64_t task, int32_t thread) {
  (void)thread;
  const dwn_job *j = arg;
  const kn_conv2d *g = j->a.g;
  int64_t b = task / j->chunks, oy0 = task % j->chunks * j->chunk_rows;
  int64_t oy1 = oy0 + j->chunk_rows < g->oh ? oy0 + j->chunk_rows : g->oh;
  dwn_rows(j, b, oy0, oy1);
}

static kn_dwn_rows_fn dwn_rows_fn(kn_isa isa) {
#ifdef KN_HAVE_X86_KERNELS
  if (isa == KN_ISA_AVX512) return kn_f32_dwconv_nhwc_rows__avx512;
  if (isa == KN_ISA_AVX2) return kn_f32_dwconv_nhwc_rows__avx2;
#endif
  (void)isa;
  return kn_f32_dwconv_nhwc_rows__portable;
}

/* The job of one call, less its split over threads. */
static void dwn_setup(kn_isa isa, const kn_conv2d *g, const float *x, const float *s,
                      const float *wpacked, const kn_epilogue *ep, float *y,
                      const kn_caches *caches, dwn_job *j) {
  KN_ASSERT(kn_f32_dwconv_nhwc_fits(g, s != NULL));
  *j = (dwn_job){.a = {.g = g, .x = x, .s = s, .w = wpacked, .cp = dwn_cp(g->c), .q = dwn_q(g),
                       .y = y,
                       .group_bytes = kn_f32_dwconv_nhwc_group_bytes(caches)},
                 .rows = dwn_rows_fn(isa), .isa = isa};
  if (ep) {
    j->a.bias = ep->bias;
    if (kn_f32_dwconv_inline_act(ep->act.act)) {
      j->a.act = ep->act;
      j->a.res = ep->res;
      j->a.res_after = !ep->res_first;
    } else {
      /* residual first: inline, before the post-pass activation */
      j->a.res = ep->res && ep->res_first ? ep->res : NULL;
      j->has_post = true;
      j->post = (kn_epilogue){.act = ep->act, .res = ep->res_first ? NULL : ep->res};
    }
  }
  j->post_rows = kn_f32_dwconv_nhwc_post_rows(g, caches);
}

void kn_f32_dwconv_nhwc_rows(kn_isa isa, const kn_conv2d *g, const float *x,
                             const float *wpacked, const kn_epilogue *ep, float *y, int64_t b,
                             int64_t oy0, int64_t oy1, const kn_caches *caches) {
  if (g->c * g->ow == 0 || oy0 >= oy1) return;
  dwn_job j;
  dwn_setup(isa, g, x, NULL, wpacked, ep, y, caches, &j);
  dwn_rows(&j, b, oy0, oy1);
}

void kn_f32_dwconv_nhwc(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                        const float *s, const float *wpacked, const kn_epilogue *ep, float *y,
                        void *scratch, const kn_caches *caches) {
  (void)scratch;
  KN_ASSERT(kn_f32_dwconv_nhwc_fits(g, s != NULL));
  if (g->n * g->c * g->oh * g->ow == 0) return;
  dwn_job j;
  dwn_setup(isa, g, x, s, wpacked, ep, y, caches, &j);
  /* Split: one task per image on one thread; else at least 4 tasks per
   * thread (rows of an image are independent), chunks of whole rows. */
  int32_t threads = kn_pool_threads(pool);
  int64_t chunks = 1;
  if (threads > 1) {
    chunks = (4 * (int64_t)threads + g->n - 1) / g->n;
    if (chunks > g->oh) chunks = g->oh;
  }
  j.chunk_rows = (g->oh + chunks - 1) / chunks;
  j.chunks = (g->oh + j.chunk_rows - 1) / j.chunk_rows;
  double flops = 2.0 * (double)(g->n * g->oh * g->ow * g->c * g->kh * g->kw * dwn_q(g));
  double bytes = 4.0 * (double)(g->n * (g->h * g->w + g->oh * g->ow) * g->c);
  kn_pool_for(kn_pool_worth(pool, flops, bytes), g->n * j.chunks, dwn_task, &j);
}
