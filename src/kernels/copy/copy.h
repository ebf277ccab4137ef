/*
 * Data movement kernels (tactic `copy`): Transpose, Slice, Split, Concat and
 * Gather move elements by size (1, 2, 4 or 8 bytes: any non-string dtype)
 * and never convert them, so every path gives bit-identical results, for
 * any thread count.
 *
 * kn_copy_strided is the general gather the reference ops use
 * (dst[i] = src[off + sum_k idx_k * strides[k]] over a dense dst):
 * after merging dims it is either
 *  - runs: the innermost dim is contiguous in src: one memcpy per run;
 *  - transpose: some other dim is contiguous in src: 2-D tiles between that
 *    dim and the innermost one go through a register transpose
 *    (16x16 with AVX-512, 8x8 with AVX2 for 4-byte elements; a cache-blocked
 *    scalar loop otherwise);
 *  - strided: neither, an element loop.
 * Work is split over threads in whole runs / tiles when it is large enough
 * to pay for waking the pool.
 */
#ifndef KN_COPY_H
#define KN_COPY_H

#include "kernels/kernels.h"

/* dst (dense, shape dims[0..rank), rank <= 2 * KN_MAX_RANK) =
 * src[off + sum_k idx_k * strides[k]], strides in elements (any sign). */
void kn_copy_strided(kn_isa isa, kn_pool *pool, size_t es, void *dst, const void *src,
                     int32_t rank, const int64_t *dims, const int64_t *strides, int64_t off);

/* rows x row_bytes bytes: dst + r * ld_dst <- src + r * ld_src (bytes). */
void kn_copy_rows(kn_pool *pool, void *dst, int64_t ld_dst, const void *src, int64_t ld_src,
                  int64_t rows, int64_t row_bytes);

/* Gather along one axis: src [outer, n, inner] -> dst [outer, ni, inner]
 * with dst[o, j, :] = src[o, idx[j], :]; idx already validated and made
 * non-negative (0 <= idx[j] < n). */
void kn_copy_gather(kn_pool *pool, size_t es, void *dst, const void *src, int64_t outer,
                    int64_t n, int64_t inner, const int64_t *idx, int64_t ni);

/* 4-byte 2-D transpose: dst[c * ldd + r] = src[r * lds + c] for r < rows,
 * c < cols (element strides).  Per ISA; exposed for tests and benchmarks. */
void kn_x32_transpose(kn_isa isa, const uint32_t *src, int64_t lds, uint32_t *dst,
                      int64_t ldd, int64_t rows, int64_t cols);

#ifdef KN_HAVE_X86_KERNELS
void kn_x32_transpose__avx512(const uint32_t *src, int64_t lds, uint32_t *dst, int64_t ldd,
                              int64_t rows, int64_t cols);
void kn_x32_transpose__avx2(const uint32_t *src, int64_t lds, uint32_t *dst, int64_t ldd,
                            int64_t rows, int64_t cols);
#endif

#endif
