/*
 * Direct depthwise convolution (group == c == m), NCHW, any kernel size,
 * stride, dilation and padding: the driver of the row kernels of
 * f32-dwconv.h (one per ISA, all from f32-dwconv-impl.h).
 *
 * The kernels read the input in place (masked loads at the borders) and
 * finish the epilogue in registers for the activations they do inline;
 * any other activation (Sigmoid, Silu, Tanh, Gelu) runs over the rows
 * just written, in chunks of at most a third of the L1d of outputs
 * (post_floats) so they are still in L1.
 *
 * Tasks: groups of whole planes when there are enough planes (small
 * planes, 7x7 or 14x14, come many to a task so the per-call cost is
 * spread), else chunks of rows of single planes.  Every output element
 * is computed by one task in a fixed order, so any thread count gives the
 * same bits.
 */
#include "kernels/conv/conv.h"
#include "kernels/conv/f32-dwconv.h"

/* Outputs per post-pass chunk: a third of the L1d (kn_caches; 16 KiB of
 * 48 KiB). */
static int64_t post_floats(const kn_caches *caches) {
  return (int64_t)(kn_caches_or_common(caches).l1d / 3 / sizeof(float));
}

typedef struct dw_job {
  kn_dw_args a;
  kn_dw_rows_fn rows;
  kn_isa isa;
  kn_epilogue post; /* activation (and residual after it) not done inline */
  bool has_post;
  int64_t planes, group, chunks, chunk_rows, post_rows;
} dw_job;

size_t kn_f32_dwconv_scratch(kn_isa isa, const kn_conv2d *g, int32_t threads,
                             const kn_caches *caches) {
  (void)isa, (void)g, (void)threads, (void)caches;
  /* nothing: the kernels read the input in place (64 bytes so that the
   * caller's scratch request is never for zero bytes) */
  return 64;
}

/* Output rows [oy0, oy1) of planes [p0, p1). */
static void dw_run(const dw_job *j, int64_t p0, int64_t p1, int64_t oy0, int64_t oy1) {
  if (!j->has_post) {
    j->rows(&j->a, p0, p1, oy0, oy1);
    return;
  }
  const kn_conv2d *g = j->a.g;
  int64_t ohw = g->oh * g->ow;
  for (int64_t p = p0; p < p1; p++)
    for (int64_t r0 = oy0; r0 < oy1; r0 += j->post_rows) {
      int64_t r1 = r0 + j->post_rows < oy1 ? r0 + j->post_rows : oy1, n = (r1 - r0) * g->ow;
      j->rows(&j->a, p, p + 1, r0, r1);
      kn_epilogue e = j->post;
      if (e.res) e.res += p * ohw + r0 * g->ow;
      e.ldr = n;
      kn_f32_epilogue(j->isa, &e, j->a.y + p * ohw + r0 * g->ow, n, 0, 1, 0, n);
    }
}

static void dw_task(void *arg, int64_t task, int32_t thread) {
  (void)thread;
  const dw_job *j = arg;
  if (j->chunks > 1) {
    int64_t p = task / j->chunks, oy0 = task % j->chunks * j->chunk_rows;
    int64_t oy1 = oy0 + j->chunk_rows < j->a.g->oh ? oy0 + j->chunk_rows : j->a.g->oh;
    if (oy0 < oy1) dw_run(j, p, p + 1, oy0, oy1);
  } else {
    int64_t p0 = task * j->group, p1 = p0 + j->group < j->planes ? p0 + j->group : j->planes;
    dw_run(j, p0, p1, 0, j->a.g->oh);
  }
}

static kn_dw_rows_fn dw_rows_fn(kn_isa isa) {
#ifdef KN_HAVE_X86_KERNELS
  if (isa == KN_ISA_AVX512) return kn_f32_dwconv_rows__avx512;
  if (isa == KN_ISA_AVX2) return kn_f32_dwconv_rows__avx2;
#endif
  (void)isa;
  return kn_f32_dwconv_rows__portable;
}

void kn_f32_dwconv(kn_isa isa, kn_pool *pool, const kn_conv2d *g, const float *x,
                   const float *w, const kn_epilogue *ep, float *y, void *scratch,
                   const kn_caches *caches) {
  (void)scratch;
  KN_ASSERT(g->group == g->c && g->m == g->c);
  if (g->n * g->c * g->oh * g->ow == 0) return;
  dw_job j = {.a = {.g = g, .x = x, .w = w, .y = y}, .rows = dw_rows_fn(isa), .isa = isa};
  if (ep) {
    j.a.bias = ep->bias;
    if (kn_f32_dwconv_inline_act(ep->act.act)) {
      j.a.act = ep->act;
      j.a.res = ep->res;
      j.a.res_after = !ep->res_first;
    } else {
      /* residual first: inline, before the post-pass activation */
      j.a.res = ep->res && ep->res_first ? ep->res : NULL;
      j.has_post = true;
      j.post = (kn_epilogue){.act = ep->act, .res = ep->res_first ? NULL : ep->res};
    }
  }
  j.post_rows = post_floats(caches) / g->ow / 4 * 4;
  if (j.post_rows < 4) j.post_rows = 4;
  /* Split: 8 tasks per thread at most (the pool hands each thread one
   * contiguous block of tasks, so more only adds calls), fewer when there
   * are few planes; rows of single planes when there are too few planes
   * for the threads (chunks of a multiple of the kernels' 4-row blocks). */
  int32_t threads = kn_pool_threads(pool);
  j.planes = g->n * g->c;
  int64_t want = 8 * (int64_t)threads;
  if (threads > 1 && j.planes < 2 * (int64_t)threads && g->oh >= 8) {
    int64_t chunks = (4 * (int64_t)threads + j.planes - 1) / j.planes;
    j.chunk_rows = ((g->oh + chunks - 1) / chunks + 3) / 4 * 4;
    j.chunks = (g->oh + j.chunk_rows - 1) / j.chunk_rows;
    j.group = 1;
    kn_pool_for(pool, j.planes * j.chunks, dw_task, &j);
  } else {
    j.chunks = 1;
    int64_t tasks = j.planes < want ? j.planes : want;
    j.group = (j.planes + tasks - 1) / tasks;
    kn_pool_for(pool, (j.planes + j.group - 1) / j.group, dw_task, &j);
  }
}
