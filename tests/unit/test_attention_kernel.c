/* The streamed attention kernel (src/kernels/attention) against a plain
 * double-precision softmax(Q K^T * scale + mask) V, for every ISA this
 * machine has, on exact, smaller, larger and odd shapes, every layout the
 * op hands it (heads in the features, keys pre-transposed, broadcast
 * batch/query/mask axes), 1 and 2 threads (which must agree bit for bit);
 * the exp approximation's error; and the op's wiring (tactic
 * attention_streamed through the executor with a kn_rt) against the
 * op's reference kernel. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/cpu.h"
#include "kernels/attention/attention-kernels.h"
#include "ops/tactic.h"
#include "testkit.h"

/* ---- exp ------------------------------------------------------------------ */

static double ulp_err(float got, double want) {
  if (want == 0) return got == 0 ? 0 : INFINITY;
  float w = (float)want;
  double ulp = (double)nextafterf(fabsf(w), INFINITY) - fabsf(w);
  return fabs((double)got - want) / ulp;
}

/* Every 251st float in [-87.33, 0] (about 4.5 million), through the scalar
 * version and each ISA's exp_sum (m = 0). */
static void test_exp_error(void **state) {
  (void)state;
  enum { N = 4096 };
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
  assert_non_null(x);
  assert_non_null(y);
  uint64_t f = kn_cpu_features();
  double worst[KN_ISA_COUNT + 1] = {0};
  union {
    float f;
    uint32_t u;
  } b = {.f = -0.0f};
  int32_t n = 0;
  for (;;) {
    bool end = b.f < -87.33f;
    if (!end) x[n++] = b.f;
    if (n == N || (end && n > 0)) {
      for (int32_t i = 0; i < n; i++) {
        double e = ulp_err(kn_attention_expf(x[i]), exp((double)x[i]));
        if (e > worst[KN_ISA_COUNT]) worst[KN_ISA_COUNT] = e;
      }
      for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
        if (!kn_isa_available((kn_isa)isa, f)) continue;
        memcpy(y, x, (size_t)n * sizeof *y);
        kn_f32_attention_ukernels_for((kn_isa)isa)->exp_sum(y, n, 0.0f);
        for (int32_t i = 0; i < n; i++) {
          double e = ulp_err(y[i], exp((double)x[i]));
          if (e > worst[isa]) worst[isa] = e;
        }
      }
      n = 0;
    }
    if (end) break;
    b.u += 251;
  }
  printf("exp max error on [-87.33, 0]: scalar %.2f ulp", worst[KN_ISA_COUNT]);
  for (int isa = 0; isa < KN_ISA_COUNT; isa++)
    if (kn_isa_available((kn_isa)isa, f)) printf(", %s %.2f ulp", kn_isa_name((kn_isa)isa), worst[isa]);
  printf("\n");
  for (int i = 0; i <= KN_ISA_COUNT; i++) assert_true(worst[i] <= 2.0);
  /* the edges */
  assert_true(kn_attention_expf(-INFINITY) == 0.0f);
  assert_true(kn_attention_expf(-100.0f) == 0.0f);
  assert_true(isnan(kn_attention_expf(NAN)));
  assert_true(kn_attention_expf(0.0f) == 1.0f);
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, f)) continue;
    float e[4] = {-INFINITY, -1000.0f, 0.0f, NAN};
    kn_f32_attention_ukernels_for((kn_isa)isa)->exp_sum(e, 3, 0.0f);
    assert_true(e[0] == 0.0f && e[1] == 0.0f && e[2] == 1.0f);
    kn_f32_attention_ukernels_for((kn_isa)isa)->exp_sum(e + 3, 1, 0.0f);
    assert_true(isnan(e[3]));
  }
  free(x);
  free(y);
}

/* ---- the kernel against a naive softmax ----------------------------------- */

typedef struct shape {
  int64_t B, H, Sq, Sk, Dk, Dv;
} shape;

enum {
  MASK_NONE,
  MASK_FULL,    /* [B, H, Sq, Sk] with some -inf and one all -inf row */
  MASK_KEYS,    /* [B, 1, 1, Sk]: m_si = 0 */
  MASK_PER_ROW, /* [B, 1, Sq, 1]: m_sj = 0 */
};

typedef struct layout {
  bool k_transposed; /* k as [B, H, Dk, Sk] */
  bool q_one_row;    /* q holds one row, broadcast over Sq */
  bool kv_batch1;    /* k and v of batch 1, broadcast */
  int mask;
  size_t l1d;        /* the caches' L1 (0: the common sizes): sets the query tile */
} layout;

static float rnd(uint32_t *s) { return tk_pseudo(s); }

enum { BF16_OFF, BF16_ROUNDED, BF16_DOT }; /* fp32; bf16 emulated; bf16 on vdpbf16ps */

static double bf(float x, int bf16) {
  return bf16 ? (double)kn_bf16_to_f32(kn_f32_to_bf16(x)) : (double)x;
}

/* Runs the kernel (isa, threads) and the naive reference; returns the
 * output (caller frees).  bf16: a bf16 step, whose reference rounds q, k
 * and v to bf16 first; its softmax weights are rounded too, relative to
 * the running maximum (which the reference cannot follow), each by at
 * most 2^-9 of itself, so the output may move by 2^-9 max|v| more. */
static float *run_case(const shape *s, const layout *l, kn_isa isa, int32_t threads,
                       bool check, int bf16) {
  int64_t B = s->B, H = s->H, Sq = s->Sq, Sk = s->Sk, Dk = s->Dk, Dv = s->Dv;
  int64_t qrows = l->q_one_row ? 1 : Sq, kvb = l->kv_batch1 ? 1 : B;
  uint32_t seed = 99;
  /* q [B, qrows, H*Dk]; k [kvb, Sk, H*Dk] or [kvb, H, Dk, Sk]; v [kvb, Sk, H*Dv] */
  size_t nq = (size_t)(B * qrows * H * Dk), nk = (size_t)(kvb * Sk * H * Dk);
  size_t nv = (size_t)(kvb * Sk * H * Dv), no = (size_t)(B * Sq * H * Dv);
  size_t nm = (size_t)(B * H * Sq * Sk);
  float *q = malloc(nq * 4 + 4), *k = malloc(nk * 4 + 4), *v = malloc(nv * 4 + 4);
  float *o = malloc(no * 4 + 4), *m = malloc(nm * 4 + 4);
  assert_true(q && k && v && o && m);
  for (size_t i = 0; i < nq; i++) q[i] = 2 * rnd(&seed);
  for (size_t i = 0; i < nk; i++) k[i] = 2 * rnd(&seed);
  for (size_t i = 0; i < nv; i++) v[i] = rnd(&seed);
  for (size_t i = 0; i < nm; i++) m[i] = rnd(&seed) < -0.6f ? -INFINITY : 3 * rnd(&seed);
  for (size_t i = 0; i < no; i++) o[i] = 12345.0f; /* must all be written */
  kn_f32_attention_args a = {
      .batch = B, .heads = H, .sq = Sq, .sk = Sk, .dk = Dk, .dv = Dv,
      .scale = 0.37f,
      .q = q, .q_sb = qrows * H * Dk, .q_sh = Dk, .q_si = l->q_one_row ? 0 : H * Dk,
      .k = k,
      .v = v, .v_sb = l->kv_batch1 ? 0 : Sk * H * Dv, .v_sh = Dv, .v_sj = H * Dv,
      .out = o, .o_sb = Sq * H * Dv, .o_sh = Dv, .o_si = H * Dv,
      .bf16 = bf16 != BF16_OFF, .bf16_dot = bf16 == BF16_DOT,
  };
  if (l->k_transposed) {
    a.k_sb = l->kv_batch1 ? 0 : H * Dk * Sk;
    a.k_sh = Dk * Sk;
    a.k_sd = Sk;
    a.k_sj = 1;
  } else {
    a.k_sb = l->kv_batch1 ? 0 : Sk * H * Dk;
    a.k_sh = Dk;
    a.k_sj = H * Dk;
    a.k_sd = 1;
  }
  if (l->mask != MASK_NONE) {
    a.mask = m;
    if (l->mask == MASK_FULL) {
      a.m_sb = H * Sq * Sk, a.m_sh = Sq * Sk, a.m_si = Sk, a.m_sj = 1;
      for (int64_t j = 0; j < Sk; j++) m[j] = -INFINITY; /* row 0 of head 0: NaN */
    } else if (l->mask == MASK_KEYS) {
      a.m_sb = Sk, a.m_sh = 0, a.m_si = 0, a.m_sj = 1;
      for (int64_t j = 0; j < B * Sk; j++)
        if (m[j] == -INFINITY) m[j] = -1e4f; /* keep rows finite */
    } else {
      a.m_sb = Sq, a.m_sh = 0, a.m_si = 1, a.m_sj = 0;
      for (int64_t j = 0; j < B * Sq; j++)
        if (m[j] == -INFINITY) m[j] = -5.0f;
    }
  }
  kn_caches ca = {l->l1d, 0, 0};
  if (l->l1d) a.caches = &ca;
  kn_pool *pool = NULL;
  kn_error err;
  if (threads > 1) assert_int_equal(kn_pool_create(threads, &pool, &err), KN_OK);
  size_t bytes = kn_f32_attention_scratch(&a, threads);
  void *scratch = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
  assert_non_null(scratch);
  kn_f32_attention(isa, pool, &a, scratch);
  free(scratch);
  kn_pool_free(pool);
  if (check) {
    double *sc = malloc((size_t)(Sk + 1) * sizeof *sc);
    assert_non_null(sc);
    for (int64_t b = 0; b < B; b++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < Sq; i++) {
          const float *qi = q + b * a.q_sb + h * a.q_sh + i * a.q_si;
          const float *mi = a.mask ? a.mask + b * a.m_sb + h * a.m_sh + i * a.m_si : NULL;
          double mx = -INFINITY;
          for (int64_t j = 0; j < Sk; j++) {
            const float *kj = k + b * a.k_sb + h * a.k_sh + j * a.k_sj;
            double d = 0;
            for (int64_t e = 0; e < Dk; e++) d += bf(qi[e], bf16) * bf(kj[e * a.k_sd], bf16);
            sc[j] = d * a.scale + (mi ? mi[j * a.m_sj] : 0.0);
            if (sc[j] > mx) mx = sc[j];
          }
          double sum = 0;
          for (int64_t j = 0; j < Sk; j++) sum += sc[j] = mx == -INFINITY ? 0 : exp(sc[j] - mx);
          for (int64_t e = 0; e < Dv; e++) {
            double acc = 0;
            for (int64_t j = 0; j < Sk; j++)
              acc += sc[j] * bf(v[b * a.v_sb + h * a.v_sh + j * a.v_sj + e], bf16);
            double want = acc / sum;
            float got = o[b * a.o_sb + h * a.o_sh + i * a.o_si + e];
            if (isnan(want) && isnan(got)) continue;
            /* v in [-1, 1): the weights' rounding moves the output by 2^-9 */
            double tol = 2e-5 + 1e-4 * fabs(want) + (bf16 ? 1.0 / 512 : 0.0);
            if (!(fabs(got - want) <= tol))
              fail_msg("%s%s B%lld H%lld Sq%lld Sk%lld Dk%lld Dv%lld kt%d q1%d kv1%d mask%d: "
                       "[%lld,%lld,%lld,%lld] %.8g, expected %.8g",
                       kn_isa_name(isa),
                       bf16 == BF16_DOT ? " bf16 dot" : bf16 ? " bf16 rounded" : "",
                       (long long)B, (long long)H, (long long)Sq,
                       (long long)Sk, (long long)Dk, (long long)Dv, l->k_transposed,
                       l->q_one_row, l->kv_batch1, l->mask, (long long)b, (long long)h,
                       (long long)i, (long long)e, (double)got, want);
          }
        }
    free(sc);
  }
  free(q);
  free(k);
  free(v);
  free(m);
  return o;
}

static const shape shapes[] = {
    {1, 1, 1, 1, 1, 1},      {1, 2, 128, 128, 64, 64}, {2, 3, 17, 13, 7, 5},
    {1, 1, 33, 65, 16, 24},  {1, 2, 5, 200, 64, 64},   {2, 1, 64, 64, 3, 67},
    {1, 1, 31, 1, 8, 8},     {1, 3, 70, 129, 31, 17},  {3, 2, 6, 7, 64, 64},
    {1, 1, 97, 63, 65, 15},
};

/* The query tile comes from the L1: 32 rows on 48 KiB at Dk = Dv = 64, 16
 * on half of it (the floor), 64 (the cap) on 256 KiB; wider heads take
 * fewer rows. */
static void test_query_rows_from_l1(void **state) {
  (void)state;
  kn_caches c48 = {48 << 10, 0, 0}, c24 = {24 << 10, 0, 0}, c256 = {256 << 10, 0, 0},
            c96 = {96 << 10, 0, 0};
  assert_int_equal(kn_f32_attention_query_rows(64, 64, &c48), 32);
  assert_int_equal(kn_f32_attention_query_rows(64, 64, &c24), KN_ATT_QB_MIN);
  assert_int_equal(kn_f32_attention_query_rows(64, 64, &c256), KN_ATT_QB_MAX);
  assert_int_equal(kn_f32_attention_query_rows(64, 64, &c96), 64);
  assert_int_equal(kn_f32_attention_query_rows(128, 128, &c96), 40);
  assert_int_equal(kn_f32_attention_query_rows(64, 64, NULL), 32); /* the common 48 KiB */
}

static void test_kernel_vs_naive(void **state) {
  (void)state;
  uint64_t f = kn_cpu_features();
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, f)) continue;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
      for (int variant = 0; variant < 8; variant++) {
        /* the query tile from the L1: 16 rows (16 KiB), 64 (256 KiB), the
         * common 48 KiB's 32 at Dk = Dv = 64 */
        static const size_t l1s[] = {0, 16 << 10, 256 << 10};
        layout l = {.k_transposed = variant & 1, .q_one_row = variant == 2,
                    .kv_batch1 = variant == 4, .mask = (variant >> 1) & 3,
                    .l1d = l1s[(variant + si) % 3]};
        if (l.q_one_row && l.mask == MASK_FULL) l.mask = MASK_PER_ROW;
        float *o1 = run_case(&shapes[si], &l, (kn_isa)isa, 1, true, BF16_OFF);
        float *o2 = run_case(&shapes[si], &l, (kn_isa)isa, 2, false, BF16_OFF);
        const shape *s = &shapes[si];
        size_t no = (size_t)(s->B * s->Sq * s->H * s->Dv);
        /* one task computes each row in a fixed order: same bits on any
           thread count (NaN rows compare equal bit for bit too) */
        assert_memory_equal(o1, o2, no * sizeof *o1);
        free(o1);
        free(o2);
      }
  }
}

/* A bf16 step: rounded operands through the fp32 micro-kernels on every
 * ISA, and on vdpbf16ps where the CPU has it; the two take the same
 * rounded products and differ only in the order of the fp32 sums. */
static void test_kernel_bf16(void **state) {
  (void)state;
  uint64_t f = kn_cpu_features();
  bool dot = kn_isa_available(KN_ISA_AVX512, f) && (f & KN_CPU_BIT(AVX512BF16)) &&
             kn_bf16_attention_ukernels_for(KN_ISA_AVX512);
  if (!dot) printf("(no AVX512_BF16 here: the vdpbf16ps products are not run)\n");
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, f)) continue;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
      for (int variant = 0; variant < 8; variant += 3) {
        layout l = {.k_transposed = variant & 1, .q_one_row = variant == 6,
                    .kv_batch1 = variant == 3, .mask = (variant >> 1) & 3};
        if (l.q_one_row && l.mask == MASK_FULL) l.mask = MASK_PER_ROW;
        const shape *s = &shapes[si];
        size_t no = (size_t)(s->B * s->Sq * s->H * s->Dv);
        float *r1 = run_case(s, &l, (kn_isa)isa, 1, true, BF16_ROUNDED);
        float *r2 = run_case(s, &l, (kn_isa)isa, 2, false, BF16_ROUNDED);
        assert_memory_equal(r1, r2, no * sizeof *r1);
        if (dot && isa == KN_ISA_AVX512) {
          float *d1 = run_case(s, &l, (kn_isa)isa, 1, true, BF16_DOT);
          float *d2 = run_case(s, &l, (kn_isa)isa, 2, false, BF16_DOT);
          assert_memory_equal(d1, d2, no * sizeof *d1);
          for (size_t i = 0; i < no; i++) {
            if (isnan(d1[i]) && isnan(r1[i])) continue;
            if (!(fabsf(d1[i] - r1[i]) <= 5e-5f + 1e-4f * fabsf(r1[i])))
              fail_msg("shape %zu variant %d element %zu: vdpbf16ps %.8g, rounded fp32 %.8g",
                       si, variant, i, (double)d1[i], (double)r1[i]);
          }
          free(d1);
          free(d2);
        }
        free(r1);
        free(r2);
      }
  }
}

/* ---- the op's wiring -------------------------------------------------------- */

/* Attention(q, k, v, mask) in both layouts, run by the executor with the
 * reference kernel and with tactic attention_streamed on each ISA. */
static void test_op_tactic(void **state) {
  (void)state;
  for (int mode = 0; mode < 2; mode++) {
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int32_t q, k, v, mask;
    if (mode == 0) { /* [B, S, H*D], 3 heads of 20 */
      q = tk_input(g, "q", 3, (int64_t[]){2, 37, 60});
      k = tk_input(g, "k", 3, (int64_t[]){2, 70, 60});
      v = tk_input(g, "v", 3, (int64_t[]){1, 70, 60});
      mask = tk_input(g, "mask", 4, (int64_t[]){2, 1, 1, 70});
    } else { /* per head: q [B,S,H,D], k pre-transposed [B,H,D,S], v [B,H,S,D] */
      q = tk_input(g, "q", 4, (int64_t[]){2, 37, 3, 20});
      k = tk_input(g, "k", 4, (int64_t[]){2, 3, 20, 70});
      v = tk_input(g, "v", 4, (int64_t[]){2, 3, 70, 12});
      mask = tk_input(g, "mask", 3, (int64_t[]){3, 37, 70});
    }
    int32_t y = tk_node(g, "Attention", 4, (int32_t[]){q, k, v, mask});
    kn_node *n = tk_last(g);
    free(n->domain);
    n->domain = kn_strdup(KN_DOMAIN);
    assert_true(kn_node_set_float(n, "scale", 0.25f));
    if (mode == 0) {
      assert_true(kn_node_set_int(n, "num_heads", 3));
    } else {
      assert_true(kn_node_set_ints(n, "q_perm", (int64_t[]){0, 2, 1, 3}, 4));
      assert_true(kn_node_set_ints(n, "k_perm", (int64_t[]){0, 1, 3, 2}, 4));
      assert_true(kn_node_set_ints(n, "v_perm", (int64_t[]){0, 1, 2, 3}, 4));
      assert_true(kn_node_set_ints(n, "out_perm", (int64_t[]){0, 2, 1, 3}, 4));
    }
    tk_output(g, y);
    tk_prepare(m);
    n = &g->nodes[0];
    assert_int_equal(kn_tactics_of(n)->select(g, n, KN_ISA_AVX512), KN_TACTIC_attention_streamed);
    tk_results ref = tk_run(m, TK_FILL_SEEDED);
    uint64_t f = kn_cpu_features();
    for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
      if (!kn_isa_available((kn_isa)isa, f)) continue;
      for (int32_t threads = 1; threads <= 2; threads++) {
        kn_rt rt = {.isa = (kn_isa)isa};
        kn_error err;
        if (threads > 1) assert_int_equal(kn_pool_create(threads, &rt.pool, &err), KN_OK);
        g->nodes[0].tactic = KN_TACTIC_attention_streamed;
        /* run through the executor with the runtime */
        kn_slot in[4];
        const kn_slot *pin[4];
        uint32_t seed = 7;
        memset(in, 0, sizeof in);
        for (int32_t i = 0; i < 4; i++) {
          const kn_value *val = &g->values[g->inputs[i]];
          in[i].kind = KN_KIND_TENSOR;
          assert_int_equal(
              kn_tensor_alloc(&in[i].t, KN_DTYPE_F32, val->type.rank, val->type.dims, NULL),
              KN_OK);
          float *d = in[i].t.data;
          for (int64_t e = 0; e < kn_tensor_numel(&in[i].t); e++) d[e] = 2.0f * tk_pseudo(&seed);
          pin[i] = &in[i];
        }
        tk_results fast = {1, kn_calloc(1, sizeof(kn_slot))};
        kn_mem_budget mem = {.limit = UINT64_MAX, .rt = &rt};
        if (kn_exec_graph(m, g, NULL, pin, fast.outs, &mem, &err)) fail_msg("%s", err.msg);
        for (int32_t i = 0; i < 4; i++) kn_slot_release(&in[i]);
        assert_non_null(rt.scratch); /* the streamed kernel ran */
        tk_results again = tk_run(m, TK_FILL_SEEDED); /* no rt: the reference */
        tk_assert_close(&again, &fast, false);
        g->nodes[0].tactic = 0;
        free(rt.scratch);
        kn_pool_free(rt.pool);
      }
    }
    tk_results_free(&ref);
    kn_ir_model_free(m);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exp_error),
      cmocka_unit_test(test_query_rows_from_l1),
      cmocka_unit_test(test_kernel_vs_naive),
      cmocka_unit_test(test_kernel_bf16),
      cmocka_unit_test(test_op_tactic),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
