/*
 * The GEMM tactics (src/tactics/gemm): MatMul, Gemm, MatMulInteger,
 * MatMulIntegerToFloat (matmul_tactics.c, with the family's table kn_tactics_gemm)
 * and FusedGemm (fused_gemm.c) on the packed GEMM (gemm_packed, gemm) and
 * the int8 GEMM (qgemm_integer).  What they share (gemm_tactic.c):
 * prepacking a constant B in their `pack` hooks, finding it again at run,
 * and running kn_sgemm on the context's runtime, in the node's precision
 * (gemm_lowp.c); the convolutions' reduced precisions use the weight
 * quantization and the input quantization attributes too.
 */
#ifndef KN_GEMM_TACTIC_H
#define KN_GEMM_TACTIC_H

#include "kernels/gemm/gemm.h"
#include "tactics/tactics.h"

/* What a pack hook stores: op(B) (k x n) packed for `isa`, and the cache
 * blocking of the machine it was packed on (read once, here). */
typedef struct kn_gemm_packed {
  kn_packed hdr; /* a relocatable block (kn_packed): no pointers inside */
  int64_t k, n;
  kn_sgemm_blocking blocking;
  uint64_t b_off; /* packed B, from the block's start (64-byte aligned) */
} kn_gemm_packed;

static inline const float *kn_gemm_packed_b(const kn_gemm_packed *p) {
  return (const float *)((const char *)p + p->b_off);
}

/* Pack hook body: input `input` of node n must be a 2-D float constant;
 * packs op(B) (trans: stored n x k) into a new kn_gemm_packed. */
kn_status kn_gemm_pack_const_b(const kn_graph *g, const kn_node *n, const kn_target *target,
                               int32_t input, bool trans, void **packed, kn_error *err) KN_WUR;
/* The `loops` hook of MatMul, Gemm and FusedGemm: batch, rows m, columns
 * n, depth k (loop order), A[batch?, m, k], B[batch?, k, n] (weights when
 * constant), C[batch, m, n] and a residual Z[batch, m, n] when present. */
bool kn_gemm_loops(const kn_graph *g, const kn_node *n, kn_loopnest *l);
/* The `tiling` hook of the GEMM ops: the packed block's blocking. */
void kn_gemm_tiling(const kn_graph *g, const kn_node *n, const void *packed,
                    const kn_target *target, char *buf, size_t len);

/* ctx->packed when it was made for this ISA and these sizes, else NULL. */
const kn_gemm_packed *kn_gemm_packed_for(const kn_op_ctx *ctx, int64_t k, int64_t n);

/* Whether value v of g is statically a float32 tensor of known rank in
 * [min_rank, max_rank]. */
bool kn_gemm_f32_rank(const kn_graph *g, int32_t v, int32_t min_rank, int32_t max_rank);

/* Scratch from ctx->rt for `extra` bytes of the op's own (returned in
 * *extra_out, 64-byte aligned) followed by kn_sgemm's for g on `threads`
 * (in *gemm_out); an OOM status when it cannot be had. */
kn_status kn_gemm_scratch(kn_op_ctx *ctx, const kn_sgemm_args *g, int32_t threads,
                          size_t extra, void **extra_out, void **gemm_out) KN_WUR;

/* ---- reduced precision (docs/PRECISION.md) -------------------------------
 * Helpers the GEMM and convolution ops share for steps whose
 * n->precision is not fp32 (src/builder/step_precision.c chose it). */

/* Symmetric int8 quantization of a weight per output channel, the
 * channels being the rows (per_row: B stored n x k, as transB and conv
 * weights [m][c/g * kh * kw]) or the columns (B stored k x n) of a rows x
 * cols fp32 matrix b: scale[ch] = max |w| / 127 over the channel (1 when
 * it is all zero), q = clamp(round_half_even(w / scale[ch]), -127, 127),
 * written in b's layout.  When `given` is not NULL its scales are used
 * instead (a Q/DQ model's; q then recovers its int8 weights exactly). */
void kn_quantize_weights_s8(const float *b, int64_t rows, int64_t cols, bool per_row,
                            const float *given, int8_t *q, float *scale);
/* Steps with constant B in reduced precision (gemm_lowp.c).  Bytes of
 * the block kn_gemm_lowp_pack makes (0 when `precision` packs no such
 * block: fp32). */
size_t kn_gemm_lowp_block_size(int32_t precision, kn_isa isa, uint64_t features, int64_t k,
                               int64_t n);
/* Pack hook body for a node whose precision is not fp32: t the 2-D fp32
 * constant B (trans: stored n x k). */
kn_status kn_gemm_lowp_pack(const kn_node *n, const kn_tensor *t, bool trans,
                            const kn_target *target, void **packed, kn_error *err) KN_WUR;
/* Whether block p can run here for ctx's node. */
bool kn_gemm_lowp_block_ok(const kn_op_ctx *ctx, const kn_gemm_packed *p);
/* Scratch and run of g (as the op would run it on kn_sgemm: raw A without
 * trans_a, B raw or g->b NULL and ctx->packed its block) at ctx->node's
 * precision. */
size_t kn_gemm_lowp_scratch_size(const kn_op_ctx *ctx, const kn_sgemm_args *g, int32_t threads);
void kn_gemm_lowp_run(kn_op_ctx *ctx, const kn_sgemm_args *g, void *scratch);
/* What the GEMM ops call instead of kn_sgemm: the node's precision. */
void kn_gemm_run(kn_op_ctx *ctx, const kn_sgemm_args *g, void *scratch);
/* The `precisions` hook body of a GEMM node with B = input 1 (trans_b as
 * given): reduced precisions for a 2-D fp32 constant B without transA. */
uint32_t kn_gemm_precisions(const kn_graph *g, const kn_node *n, bool trans_b);


/* FusedGemm's hooks and run (fused_gemm.c), for the family's table. */
int32_t kn_fgemm_select(const kn_graph *g, const kn_node *n, int32_t isa);
kn_status kn_fgemm_pack(const kn_graph *g, const kn_node *n, const kn_target *target,
                        void **packed, kn_error *err) KN_WUR;
uint32_t kn_fgemm_precisions(const kn_graph *g, const kn_node *n, int32_t isa);
kn_status kn_fgemm_fast(kn_op_ctx *ctx);

#endif
