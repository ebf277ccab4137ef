/* Data movement kernels: plan (dim merging, path choice), thread split and
 * the portable loops.  The 4-byte register transposes are in
 * x32-transpose-<isa>.c. */
#include "copy.h"

#include <string.h>

#define CP_MAX_RANK (2 * KN_MAX_RANK)
/* Copies smaller than this stay on the calling thread: waking the pool
 * costs a few microseconds, about what copying 256 KiB at cache speed
 * takes. */
#define CP_PAR_BYTES ((int64_t)256 << 10)
/* Transpose tiles: 64 x 64 elements (16 KiB each way for 4-byte elements)
 * keep a tile's source and destination lines in L1 (32-48 KiB) while the
 * register transpose walks it. */
#define CP_TILE 64
/* Runs shorter than this many bytes are copied by an element loop rather
 * than memcpy (whose call and size dispatch dominate tiny copies). */
#define CP_MEMCPY_MIN 32

enum { CP_RUNS, CP_TRANSPOSE, CP_STRIDED };

typedef struct cp_plan {
  kn_isa isa;
  size_t es;
  char *dst;
  const char *src; /* at the offset */
  int32_t r;
  int64_t d[CP_MAX_RANK], st[CP_MAX_RANK], dst_st[CP_MAX_RANK];
  int64_t numel;
  int kind;
  /* transpose: dim k is contiguous in src; tiles of (k, r-1) */
  int32_t k;
  int64_t outer, ti, tj; /* outer count, tiles along k and along r-1 */
  int64_t ntasks;
} cp_plan;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

#define LOOP_STRIDED(T)                                          \
  do {                                                           \
    T *d_ = (T *)dst;                                            \
    const T *s_ = (const T *)src;                                \
    for (int64_t j = 0; j < len; j++) d_[j] = s_[j * stride];    \
  } while (0)

/* len elements: dst[j] = src[j * stride]. */
static void copy_run(size_t es, char *dst, const char *src, int64_t len, int64_t stride) {
  if (stride == 1 && (int64_t)es * len >= CP_MEMCPY_MIN) {
    memcpy(dst, src, (size_t)len * es);
    return;
  }
  switch (es) {
  case 1: LOOP_STRIDED(uint8_t); break;
  case 2: LOOP_STRIDED(uint16_t); break;
  case 4: LOOP_STRIDED(uint32_t); break;
  default: LOOP_STRIDED(uint64_t); break;
  }
}

/* Runs and strided: dst elements [e0, e1) in order. */
static void runs_range(const cp_plan *pl, int64_t e0, int64_t e1) {
  int32_t r = pl->r;
  int64_t len = pl->d[r - 1], s = pl->st[r - 1];
  int64_t row = e0 / len, col = e0 % len;
  int64_t idx[CP_MAX_RANK], p = 0;
  for (int32_t k = r - 2; k >= 0; k--) {
    idx[k] = row % pl->d[k];
    row /= pl->d[k];
    p += idx[k] * pl->st[k];
  }
  int64_t e = e0;
  while (e < e1) {
    int64_t n = min64(len - col, e1 - e);
    copy_run(pl->es, pl->dst + (size_t)e * pl->es,
             pl->src + (ptrdiff_t)(p + col * s) * (ptrdiff_t)pl->es, n, s);
    e += n;
    col = 0;
    for (int32_t k = r - 2; k >= 0; k--) {
      p += pl->st[k];
      if (++idx[k] < pl->d[k]) break;
      p -= pl->st[k] * pl->d[k];
      idx[k] = 0;
    }
  }
}

#define LOOP_TR(T)                                                          \
  do {                                                                      \
    const T *s_ = (const T *)src;                                           \
    T *d_ = (T *)dst;                                                       \
    for (int64_t c = 0; c < cols; c++)                                      \
      for (int64_t r0 = 0; r0 < rows; r0++) d_[c * ldd + r0] = s_[r0 * lds + c]; \
  } while (0)

/* dst[c * ldd + r] = src[r * lds + c]: a scalar loop writing dst in order
 * (the caller keeps the block L1-sized). */
static void transpose_scalar(size_t es, const void *src, int64_t lds, void *dst, int64_t ldd,
                             int64_t rows, int64_t cols) {
  switch (es) {
  case 1: LOOP_TR(uint8_t); break;
  case 2: LOOP_TR(uint16_t); break;
  case 4: LOOP_TR(uint32_t); break;
  default: LOOP_TR(uint64_t); break;
  }
}

void kn_x32_transpose(kn_isa isa, const uint32_t *src, int64_t lds, uint32_t *dst,
                      int64_t ldd, int64_t rows, int64_t cols) {
#ifdef KN_HAVE_X86_KERNELS
  if (isa == KN_ISA_AVX512) {
    kn_x32_transpose__avx512(src, lds, dst, ldd, rows, cols);
    return;
  }
  if (isa == KN_ISA_AVX2) {
    kn_x32_transpose__avx2(src, lds, dst, ldd, rows, cols);
    return;
  }
#endif
  (void)isa;
  transpose_scalar(4, src, lds, dst, ldd, rows, cols);
}

/* Transpose tile u: outer index, tile along k, tile along the last dim. */
static void transpose_tile(const cp_plan *pl, int64_t u) {
  int32_t r = pl->r, k = pl->k;
  int64_t tj = u % pl->tj;
  u /= pl->tj;
  int64_t ti = u % pl->ti;
  int64_t o = u / pl->ti;
  /* source and destination offsets of the outer index */
  int64_t p = 0, q = 0;
  for (int32_t a = r - 2; a >= 0; a--) {
    if (a == k) continue;
    int64_t c = o % pl->d[a];
    o /= pl->d[a];
    p += c * pl->st[a];
    q += c * pl->dst_st[a];
  }
  int64_t I = pl->d[k], J = pl->d[r - 1], s = pl->st[r - 1], ldd = pl->dst_st[k];
  int64_t i0 = ti * CP_TILE, j0 = tj * CP_TILE;
  int64_t ni = min64(CP_TILE, I - i0), nj = min64(CP_TILE, J - j0);
  /* as matrices: src rows j (stride s) x cols i; dst rows i (stride ldd) x cols j */
  const char *sp = pl->src + (ptrdiff_t)(p + i0 + j0 * s) * (ptrdiff_t)pl->es;
  char *dp = pl->dst + (ptrdiff_t)(q + i0 * ldd + j0) * (ptrdiff_t)pl->es;
  if (pl->es == 4)
    kn_x32_transpose(pl->isa, (const uint32_t *)sp, s, (uint32_t *)dp, ldd, nj, ni);
  else
    transpose_scalar(pl->es, sp, s, dp, ldd, nj, ni);
}

static void copy_task(void *arg, int64_t t, int32_t thread) {
  (void)thread;
  const cp_plan *pl = arg;
  if (pl->kind == CP_TRANSPOSE) {
    int64_t units = pl->outer * pl->ti * pl->tj;
    int64_t u0 = t * units / pl->ntasks, u1 = (t + 1) * units / pl->ntasks;
    for (int64_t u = u0; u < u1; u++) transpose_tile(pl, u);
    return;
  }
  runs_range(pl, t * pl->numel / pl->ntasks, (t + 1) * pl->numel / pl->ntasks);
}

void kn_copy_strided(kn_isa isa, kn_pool *pool, size_t es, void *dst, const void *src,
                     int32_t rank, const int64_t *dims, const int64_t *strides, int64_t off) {
  KN_ASSERT(rank <= CP_MAX_RANK && (es == 1 || es == 2 || es == 4 || es == 8));
  cp_plan pl;
  pl.isa = isa;
  pl.es = es;
  pl.dst = dst;
  pl.src = (const char *)src + (ptrdiff_t)off * (ptrdiff_t)es;
  /* drop dims of 1, merge a dim into the previous one when they walk src
   * as one */
  int32_t r = 0;
  for (int32_t i = 0; i < rank; i++) {
    if (dims[i] == 0) return;
    if (dims[i] == 1) continue;
    if (r > 0 && pl.st[r - 1] == strides[i] * dims[i]) {
      pl.d[r - 1] *= dims[i];
      pl.st[r - 1] = strides[i];
      continue;
    }
    pl.d[r] = dims[i];
    pl.st[r] = strides[i];
    r++;
  }
  if (r == 0) {
    pl.d[0] = 1;
    pl.st[0] = 1;
    r = 1;
  }
  pl.r = r;
  pl.numel = 1;
  for (int32_t i = r - 1; i >= 0; i--) {
    pl.dst_st[i] = pl.numel;
    pl.numel *= pl.d[i];
  }
  pl.kind = pl.st[r - 1] == 1 ? CP_RUNS : CP_STRIDED;
  pl.k = -1;
  if (pl.kind == CP_STRIDED)
    for (int32_t i = 0; i < r - 1; i++)
      if (pl.st[i] == 1) pl.k = i;
  int32_t threads = kn_pool_threads(pool);
  bool par = threads > 1 && pl.numel * (int64_t)es >= CP_PAR_BYTES;
  if (pl.k >= 0) {
    pl.kind = CP_TRANSPOSE;
    pl.ti = (pl.d[pl.k] + CP_TILE - 1) / CP_TILE;
    pl.tj = (pl.d[r - 1] + CP_TILE - 1) / CP_TILE;
    pl.outer = pl.numel / (pl.d[pl.k] * pl.d[r - 1]);
    int64_t units = pl.outer * pl.ti * pl.tj;
    pl.ntasks = par ? min64(units, threads) : 1;
  } else {
    pl.ntasks = par ? threads : 1;
  }
  if (pl.ntasks > 1) kn_pool_for(pool, pl.ntasks, copy_task, &pl);
  else copy_task(&pl, 0, 0);
}

/* ---- rows (Concat) -------------------------------------------------------- */

typedef struct rows_args {
  char *dst;
  const char *src;
  int64_t ldd, lds, rows, row_bytes, ntasks;
} rows_args;

/* Bytes [b0, b1) of the rows laid end to end. */
static void rows_task(void *arg, int64_t t, int32_t thread) {
  (void)thread;
  const rows_args *a = arg;
  int64_t total = a->rows * a->row_bytes;
  int64_t b0 = t * total / a->ntasks, b1 = (t + 1) * total / a->ntasks;
  while (b0 < b1) {
    int64_t r = b0 / a->row_bytes, c = b0 % a->row_bytes;
    int64_t n = min64(a->row_bytes - c, b1 - b0);
    memcpy(a->dst + r * a->ldd + c, a->src + r * a->lds + c, (size_t)n);
    b0 += n;
  }
}

void kn_copy_rows(kn_pool *pool, void *dst, int64_t ld_dst, const void *src, int64_t ld_src,
                  int64_t rows, int64_t row_bytes) {
  if (rows <= 0 || row_bytes <= 0) return;
  rows_args a = {dst, src, ld_dst, ld_src, rows, row_bytes, 1};
  int32_t threads = kn_pool_threads(pool);
  if (threads > 1 && rows * row_bytes >= CP_PAR_BYTES) a.ntasks = threads;
  if (a.ntasks > 1) kn_pool_for(pool, a.ntasks, rows_task, &a);
  else rows_task(&a, 0, 0);
}

/* ---- gather (Gather) ------------------------------------------------------ */

typedef struct gather_args {
  size_t es;
  char *dst;
  const char *src;
  int64_t outer, n, inner, ni, ntasks;
  const int64_t *idx;
} gather_args;

#define LOOP_GATHER1(T)                                                \
  do {                                                                 \
    T *d_ = (T *)a->dst;                                               \
    const T *s_ = (const T *)a->src;                                   \
    for (int64_t q = q0; q < q1; q++) {                                \
      int64_t o = q / a->ni, j = q % a->ni;                            \
      d_[q] = s_[o * a->n + a->idx[j]];                                \
    }                                                                  \
  } while (0)

/* Output rows [q0, q1) of the [outer * ni] rows of `inner` elements. */
static void gather_task(void *arg, int64_t t, int32_t thread) {
  (void)thread;
  const gather_args *a = arg;
  int64_t rows = a->outer * a->ni;
  int64_t q0 = t * rows / a->ntasks, q1 = (t + 1) * rows / a->ntasks;
  if (a->inner == 1) {
    switch (a->es) {
    case 1: LOOP_GATHER1(uint8_t); break;
    case 2: LOOP_GATHER1(uint16_t); break;
    case 4: LOOP_GATHER1(uint32_t); break;
    default: LOOP_GATHER1(uint64_t); break;
    }
    return;
  }
  size_t rb = (size_t)a->inner * a->es;
  for (int64_t q = q0; q < q1; q++) {
    int64_t o = q / a->ni, j = q % a->ni;
    copy_run(a->es, a->dst + (size_t)q * rb, a->src + (size_t)(o * a->n + a->idx[j]) * rb,
             a->inner, 1);
  }
}

void kn_copy_gather(kn_pool *pool, size_t es, void *dst, const void *src, int64_t outer,
                    int64_t n, int64_t inner, const int64_t *idx, int64_t ni) {
  KN_ASSERT(es == 1 || es == 2 || es == 4 || es == 8);
  int64_t rows = outer * ni;
  if (rows <= 0 || inner <= 0) return;
  gather_args a = {es, dst, src, outer, n, inner, ni, 1, idx};
  int32_t threads = kn_pool_threads(pool);
  if (threads > 1 && rows * inner * (int64_t)es >= CP_PAR_BYTES)
    a.ntasks = min64(rows, threads);
  if (a.ntasks > 1) kn_pool_for(pool, a.ntasks, gather_task, &a);
  else gather_task(&a, 0, 0);
}
