/*
 * Fast kernels: what every kernel family shares.
 *
 * Kernels sit just above src/core: ops (src/ops) call them, they call
 * nothing above core.  A kernel allocates nothing and validates nothing
 * beyond asserts: the op that calls it checked shapes and dtypes once, and
 * hands it scratch memory it sized beforehand (kn_rt_scratch).
 *
 * ISA dispatch: each family keeps one table of implementations indexed by
 * kn_isa, filled from per-ISA translation units (files named *-avx512.c and
 * *-avx2.c are compiled with their own -m flags; everything else is
 * portable C).  kn_isa_detect picks the best ISA once per context from
 * cpuid; the same binary runs on any x86-64 and builds elsewhere (where
 * only KN_ISA_PORTABLE exists).
 */
#ifndef KN_KERNELS_H
#define KN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "core/threadpool.h"

typedef enum kn_isa {
  KN_ISA_PORTABLE = 0, /* C, auto-vectorised for the baseline */
  KN_ISA_AVX2 = 1,     /* AVX2 + FMA + F16C */
  KN_ISA_AVX512 = 2,   /* AVX-512 F/BW/VL/DQ (full-width zmm) */
  KN_ISA_COUNT
} kn_isa;

/* Best ISA among those in `cpu_features` (kn_cpu_features() bits) that
 * this build has kernels for.  KILN_ISA=portable|avx2|avx512 caps it (for
 * tests and for comparing ISAs on one machine). */
kn_isa kn_isa_detect(uint64_t cpu_features);
const char *kn_isa_name(kn_isa isa);
/* True when this build has kernels for `isa` and the machine can run them. */
bool kn_isa_available(kn_isa isa, uint64_t cpu_features);

/* Cache capacities in bytes that kernels size their tiles by: one core's
 * L1d and L2, and the L3 (the machine description the model was built
 * for; src/core/machine.h).  0 in a field: the common size, below. */
typedef struct kn_caches {
  size_t l1d, l2, l3;
} kn_caches;
#define KN_COMMON_L1D ((size_t)48 << 10)
#define KN_COMMON_L2 ((size_t)1 << 20)
#define KN_COMMON_L3 ((size_t)32 << 20)

/* What an op needs to run its fast kernels: the ISA, the thread pool of the
 * context (NULL: one thread), a scratch buffer owned by the context and
 * the capacities to tile for.  A run with no kn_rt (ctx->rt == NULL) uses
 * the reference kernels. */
typedef struct kn_rt {
  kn_isa isa;
  kn_pool *pool;
  void *scratch;        /* 64-byte aligned */
  size_t scratch_bytes; /* its size */
  kn_caches caches;     /* fixed when the context is created */
  uint64_t features;    /* kn_cpu_features() bits the kernels may use (the
                           int8 and bf16 instructions), read once */
} kn_rt;

/* The capacities with defaults filled in (c may be NULL). */
static inline kn_caches kn_caches_or_common(const kn_caches *c) {
  kn_caches r = {KN_COMMON_L1D, KN_COMMON_L2, KN_COMMON_L3};
  if (c && c->l1d) r.l1d = c->l1d;
  if (c && c->l2) r.l2 = c->l2;
  if (c && c->l3) r.l3 = c->l3;
  return r;
}
static inline kn_caches kn_rt_caches(const kn_rt *rt) {
  return kn_caches_or_common(rt ? &rt->caches : NULL);
}

/* Scratch of at least `bytes` (64-byte aligned), grown when needed; NULL
 * when out of memory.  Ops call it before the kernel, never inside it. The
 * memory is reused by the next step: nothing survives a step. */
void *kn_rt_scratch(kn_rt *rt, size_t bytes);
static inline int32_t kn_rt_threads(const kn_rt *rt) {
  return rt ? kn_pool_threads(rt->pool) : 1;
}

/* ---- the fused epilogue (bias, activation, residual) ------------------- */

/* Activations the fusion pass produces (src/ops/fused.c defines each). */
#define KN_ACTS(X)              \
  X(NONE, "")                   \
  X(RELU, "Relu")               \
  X(CLIP, "Clip")               \
  X(LEAKYRELU, "LeakyRelu")     \
  X(HARDSIGMOID, "HardSigmoid") \
  X(HARDSWISH, "HardSwish")     \
  X(SIGMOID, "Sigmoid")         \
  X(SILU, "Silu")               \
  X(TANH, "Tanh")               \
  X(GELU, "Gelu")               \
  X(GELU_TANH, "GeluTanh")

typedef enum kn_act {
#define X(id, name) KN_ACT_##id,
  KN_ACTS(X)
#undef X
  KN_ACT_COUNT
} kn_act;

/* Activation by its attribute name; -1 when unknown. */
int kn_act_from_name(const char *name);
const char *kn_act_name(kn_act a);

typedef struct kn_act_params {
  kn_act act;
  float alpha, beta; /* LeakyRelu alpha; HardSigmoid alpha, beta */
  float lo, hi;      /* Clip bounds */
} kn_act_params;

/*
 * Epilogue applied to a finished block of an M x N output C (row stride
 * ldc) before it leaves the cache:
 *   res_first = 1:  C = act(P + bias + R)
 *   res_first = 0:  C = act(P + bias) + R
 * bias: NULL, one value per row (bias_per_row: conv channels in NCHW) or
 * one per column (Gemm's C of shape [N]); R: NULL or an M x N matrix with
 * row stride ldr.
 */
typedef struct kn_epilogue {
  kn_act_params act;
  const float *bias;
  bool bias_per_row;
  const float *res;
  int64_t ldr;
  bool res_first;
} kn_epilogue;

/* Apply the epilogue to rows [r0, r0+m) x columns [c0, c0+n) of C (the
 * block's own pointer c, row stride ldc).  The GEMM and convolution kernels
 * call it on each tile they finish. */
void kn_f32_epilogue(kn_isa isa, const kn_epilogue *ep, float *c, int64_t ldc,
                     int64_t r0, int64_t m, int64_t c0, int64_t n);

/* y[i] = act(x[i]) for n elements (x == y allowed).  Vectorised for the
 * ISA; exp, erf and tanh use the approximations of src/kernels/eltwise
 * (their maximum errors are documented there). */
void kn_f32_act(kn_isa isa, const kn_act_params *a, const float *x, float *y, int64_t n);

#endif
