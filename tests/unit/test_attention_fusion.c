/* The attention pass on the forms exporters other than Hugging Face write
 * (hand-built with the testkit): Q, K, V split out of one packed projection
 * (Slice, Split, Reshape+Transpose+Gather), the scale on Q, on K, on both or
 * on the scores, or none; masks constant, computed or none; [B,H,S,D] and
 * [B*H,S,D] head layouts, keys pre-transposed; opset-11 Softmax.  Each must
 * fuse into one Attention and keep the unoptimized graph's results (also
 * through the streamed kernel); the near misses (Softmax over another axis,
 * a scale computed at run time, V of another rank) must not fuse.  Then the
 * small modules exported from PyTorch (tests/data/attention, made by
 * scripts/make_attention_models.py). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/cpu.h"
#include "engine/engine.h"
#include "kernels/kernels.h"
#include "testkit.h"

enum { B = 2, S = 5, H = 2, D = 4, E = H * D };

static int32_t best_isa(void) { return (int32_t)kn_isa_detect(kn_cpu_features()); }

static int32_t reshape(kn_graph *g, int32_t x, int32_t n, const int64_t *dims) {
  return tk_node(g, "Reshape", 2, (int32_t[]){x, tk_const_i64(g, n, dims)});
}

static int32_t transpose(kn_graph *g, int32_t x, int32_t n, const int64_t *perm) {
  int32_t y = tk_node(g, "Transpose", 1, (int32_t[]){x});
  assert_true(kn_node_set_ints(tk_last(g), "perm", perm, n));
  return y;
}

static int32_t matmul(kn_graph *g, int32_t a, int32_t b) {
  return tk_node(g, "MatMul", 2, (int32_t[]){a, b});
}

static int32_t softmax(kn_graph *g, int32_t x, int64_t axis) {
  int32_t y = tk_node(g, "Softmax", 1, (int32_t[]){x});
  assert_true(kn_node_set_int(tk_last(g), "axis", axis));
  return y;
}

/* [B, S, E] -> [B, H, S, D] */
static int32_t heads(kn_graph *g, int32_t x) {
  return transpose(g, reshape(g, x, 4, (int64_t[]){B, S, H, D}), 4, (int64_t[]){0, 2, 1, 3});
}

/* [B, H, S, D] -> [B, S, E] */
static int32_t merge(kn_graph *g, int32_t o) {
  return reshape(g, transpose(g, o, 4, (int64_t[]){0, 2, 1, 3}), 3, (int64_t[]){B, S, E});
}

/* Runs the pass (the results must stay), then checks whether it fused. */
static void check(kn_ir_model *m, bool fires) {
  kn_graph *g = m->graph;
  tk_prepare(m);
  tk_results ref = tk_run(m, TK_FILL_SEEDED);
  bool changed = tk_passes_keep_close(m, kn_pass_attention, NULL, true);
  if (fires) {
    assert_true(changed);
    assert_int_equal(tk_count_op(g, "Attention"), 1);
    assert_int_equal(tk_count_op(g, "Softmax"), 0);
    /* and through the streamed kernel */
    tk_results fast = tk_run_fast(m, TK_FILL_SEEDED, best_isa(), 1);
    tk_assert_close(&ref, &fast, true);
  } else {
    assert_int_equal(tk_count_op(g, "Attention"), 0);
    tk_results_free(&ref);
  }
  kn_ir_model_free(m);
}

/* The scores of q, k, v [B, H, S, D] with the scale on them, the mask, the
 * softmax and the product with v: the output [B, H, S, D]. */
static int32_t core(kn_graph *g, int32_t qh, int32_t kt, int32_t vh, int32_t mask, float div) {
  int32_t s = matmul(g, qh, kt);
  if (div != 1.0f) s = tk_node(g, "Div", 2, (int32_t[]){s, tk_const_scalar(g, div)});
  if (mask >= 0) s = tk_node(g, "Add", 2, (int32_t[]){s, mask});
  return matmul(g, softmax(g, s, -1), vh);
}

/* Q, K, V sliced out of one [B, S, 3E] projection, HF head layout. */
static void test_packed_slice(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 3, (int64_t[]){B, S, E});
  int32_t mask = tk_input(g, "mask", 4, (int64_t[]){B, 1, 1, S});
  int32_t qkv = matmul(g, x, tk_const_rand(g, 2, (int64_t[]){E, 3 * E}, 1, 0));
  int32_t part[3];
  for (int32_t i = 0; i < 3; i++)
    part[i] = tk_node(g, "Slice", 4,
                      (int32_t[]){qkv, tk_const_i64(g, 1, (int64_t[]){i * E}),
                                  tk_const_i64(g, 1, (int64_t[]){(i + 1) * E}),
                                  tk_const_i64(g, 1, (int64_t[]){-1})});
  int32_t kt = transpose(g, reshape(g, part[1], 4, (int64_t[]){B, S, H, D}), 4,
                         (int64_t[]){0, 2, 3, 1});
  int32_t o = core(g, heads(g, part[0]), kt, heads(g, part[2]), mask, 2.0f);
  tk_output(g, merge(g, o));
  check(m, true);
}

/* Split into three, the scale as a Mul on the scores, a constant mask. */
static void test_packed_split(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 3, (int64_t[]){B, S, E});
  int32_t qkv = matmul(g, x, tk_const_rand(g, 2, (int64_t[]){E, 3 * E}, 2, 0));
  int32_t part[3];
  tk_node_n(g, "Split", 2, (int32_t[]){qkv, tk_const_i64(g, 3, (int64_t[]){E, E, E})}, 3, part);
  assert_true(kn_node_set_int(tk_last(g), "axis", 2));
  int32_t kt = transpose(g, heads(g, part[1]), 4, (int64_t[]){0, 1, 3, 2});
  int32_t s = matmul(g, heads(g, part[0]), kt);
  s = tk_node(g, "Mul", 2, (int32_t[]){tk_const_scalar(g, 0.5f), s});
  s = tk_node(g, "Add", 2, (int32_t[]){tk_const_rand(g, 2, (int64_t[]){S, S}, 3, -1), s});
  int32_t o = matmul(g, softmax(g, s, 3), heads(g, part[2]));
  tk_output(g, merge(g, o));
  check(m, true);
}

/* ViT style: Reshape [B, S, 3, H, D], Transpose to [3, B, H, S, D], Gather
 * 0/1/2; q * scale before the product; no mask. */
static void test_packed_gather(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 3, (int64_t[]){B, S, E});
  int32_t qkv = matmul(g, x, tk_const_rand(g, 2, (int64_t[]){E, 3 * E}, 4, 0));
  qkv = reshape(g, qkv, 5, (int64_t[]){B, S, 3, H, D});
  qkv = transpose(g, qkv, 5, (int64_t[]){2, 0, 3, 1, 4});
  int32_t part[3];
  for (int64_t i = 0; i < 3; i++) {
    part[i] = tk_node(g, "Gather", 2, (int32_t[]){qkv, tk_const_i64(g, -1, &i)});
    assert_true(kn_node_set_int(tk_last(g), "axis", 0));
  }
  int32_t q = tk_node(g, "Mul", 2, (int32_t[]){part[0], tk_const_scalar(g, 0.5f)});
  int32_t kt = transpose(g, part[1], 4, (int64_t[]){0, 1, 3, 2});
  int32_t o = core(g, q, kt, part[2], -1, 1.0f);
  tk_output(g, merge(g, o));
  check(m, true);
}

/* Older torch MultiheadAttention: [S, B, E] rows, heads as [B*H, S, D]
 * batches of 3-D MatMuls, the scale on q before the heads are split, the
 * keys transposed by a second Transpose, a computed [B*H, S, S] mask,
 * opset-11 Softmax over axis 2. */
static void test_batched_3d(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(11);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 3, (int64_t[]){S, B, E});
  int32_t bias = tk_input(g, "bias", 3, (int64_t[]){B * H, S, S});
  int32_t mask = tk_node(g, "Mul", 2, (int32_t[]){bias, tk_const_scalar(g, 3.0f)});
  int32_t q = matmul(g, x, tk_const_rand(g, 2, (int64_t[]){E, E}, 5, 0));
  q = tk_node(g, "Mul", 2, (int32_t[]){q, tk_const_scalar(g, 0.5f)});
  int32_t k = matmul(g, x, tk_const_rand(g, 2, (int64_t[]){E, E}, 6, 0));
  int32_t v = matmul(g, x, tk_const_rand(g, 2, (int64_t[]){E, E}, 7, 0));
  const int64_t p102[3] = {1, 0, 2};
  int32_t qh = transpose(g, reshape(g, q, 3, (int64_t[]){S, B * H, D}), 3, p102);
  int32_t kh = transpose(g, reshape(g, k, 3, (int64_t[]){S, B * H, D}), 3, p102);
  int32_t vh = transpose(g, reshape(g, v, 3, (int64_t[]){S, B * H, D}), 3, p102);
  int32_t kt = transpose(g, kh, 3, (int64_t[]){0, 2, 1});
  int32_t s = tk_node(g, "Add", 2, (int32_t[]){matmul(g, qh, kt), mask});
  int32_t o = matmul(g, softmax(g, s, 2), vh);
  o = reshape(g, transpose(g, o, 3, p102), 3, (int64_t[]){S, B, E});
  tk_output(g, o);
  check(m, true);
}

/* Keys given pre-transposed [B, H, D, S], the scale on the scores after
 * the product as a Mul, no mask, output left per head. */
static void test_keys_pretransposed(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t q = tk_input(g, "q", 4, (int64_t[]){B, H, S, D});
  int32_t kt = tk_input(g, "kt", 4, (int64_t[]){B, H, D, S + 2});
  int32_t v = tk_input(g, "v", 4, (int64_t[]){B, H, S + 2, D + 1});
  int32_t s = tk_node(g, "Mul", 2, (int32_t[]){matmul(g, q, kt), tk_const_scalar(g, 0.3f)});
  tk_output(g, matmul(g, softmax(g, s, -1), v));
  check(m, true);
}

/* torch scaled_dot_product_attention: sqrt(scale) on q and on k^T, a mask
 * input [S, S] broadcast over batch and heads, [B, S, H, D] inputs. */
static void test_sdpa_both_scaled(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(14);
  kn_graph *g = m->graph;
  int32_t q = tk_input(g, "q", 4, (int64_t[]){B, S, H, D});
  int32_t k = tk_input(g, "k", 4, (int64_t[]){B, S, H, D});
  int32_t v = tk_input(g, "v", 4, (int64_t[]){B, S, H, D});
  int32_t mask = tk_input(g, "mask", 2, (int64_t[]){S, S});
  const int64_t p0213[4] = {0, 2, 1, 3};
  int32_t qs = tk_node(g, "Mul", 2,
                       (int32_t[]){transpose(g, q, 4, p0213), tk_const_scalar(g, 0.7071f)});
  int32_t kt = transpose(g, transpose(g, k, 4, p0213), 4, (int64_t[]){0, 1, 3, 2});
  kt = tk_node(g, "Mul", 2, (int32_t[]){kt, tk_const_scalar(g, 0.7071f)});
  int32_t o = core(g, qs, kt, transpose(g, v, 4, p0213), mask, 1.0f);
  tk_output(g, transpose(g, o, 4, p0213));
  check(m, true);
}

/* ---- near misses ------------------------------------------------------------ */

static void test_miss_softmax_axis(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t q = tk_input(g, "q", 4, (int64_t[]){B, H, S, D});
  int32_t k = tk_input(g, "k", 4, (int64_t[]){B, H, D, S});
  int32_t v = tk_input(g, "v", 4, (int64_t[]){B, H, S, D});
  tk_output(g, matmul(g, softmax(g, matmul(g, q, k), 2), v));
  check(m, false);
}

static void test_miss_runtime_scale(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t q = tk_input(g, "q", 4, (int64_t[]){B, H, S, D});
  int32_t k = tk_input(g, "k", 4, (int64_t[]){B, H, D, S});
  int32_t v = tk_input(g, "v", 4, (int64_t[]){B, H, S, D});
  int32_t c = tk_input(g, "c", 0, NULL);
  int32_t s = tk_node(g, "Mul", 2, (int32_t[]){matmul(g, q, k), c});
  tk_output(g, matmul(g, softmax(g, s, -1), v));
  check(m, false);
}

static void test_miss_v_rank(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t q = tk_input(g, "q", 4, (int64_t[]){B, H, S, D});
  int32_t k = tk_input(g, "k", 4, (int64_t[]){B, H, D, S});
  int32_t v = tk_input(g, "v", 2, (int64_t[]){S, D}); /* shared by every head */
  tk_output(g, matmul(g, softmax(g, matmul(g, q, k), -1), v));
  check(m, false);
}

/* Softmax(x) @ v where x is no product of two tensors. */
static void test_miss_no_product(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 4, (int64_t[]){B, H, S, S});
  int32_t v = tk_input(g, "v", 4, (int64_t[]){B, H, S, D});
  tk_output(g, matmul(g, softmax(g, x, -1), v));
  check(m, false);
}

/* ---- exported from PyTorch -------------------------------------------------- */

static void data_path(const char *name, char *buf, size_t len) {
  const char *src = __FILE__;
  const char *slash = strrchr(src, '/');
  int dir = slash ? (int)(slash - src) : 0;
  snprintf(buf, len, "%.*s%s../data/attention/%s.onnx", dir, src, slash ? "/" : "", name);
}

static const struct {
  const char *name;
  int32_t fused; /* Attention nodes expected */
} exported[] = {
    {"torch_mha_packed", 1},  /* nn.MultiheadAttention, packed in_proj, need_weights=False */
    {"torch_mha_weights", 0}, /* need_weights: the probabilities are an output, kept */
    {"torch_mha_mask", 1},    /* with a float attn_mask */
    {"torch_sdpa", 1},        /* scaled_dot_product_attention with a float mask */
    {"torch_sdpa_scale", 1},  /* ... with scale= and no mask */
    {"torch_vit_qkv", 1},     /* timm-style qkv Linear -> reshape/permute -> unbind */
};

static int32_t count_attention(const kn_graph *g) {
  int32_t c = 0;
  for (int32_t i = 0; i < g->n_nodes; i++)
    c += !g->nodes[i].dead && !strcmp(g->nodes[i].op_type, "Attention");
  return c;
}

static void test_exported(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof exported / sizeof exported[0]; i++) {
    char path[1024];
    data_path(exported[i].name, path, sizeof path);
    kn_error err;
    kn_model *mod = NULL;
    if (kn_model_load(path, &mod, &err)) fail_msg("%s: %s", exported[i].name, err.msg);
    kn_ir_model *m = (kn_ir_model *)kn_model_ir(mod);
    tk_results ref = tk_run(m, TK_FILL_SEEDED);
    if (kn_optimize(m, NULL, &err)) fail_msg("%s: optimize: %s", exported[i].name, err.msg);
    int32_t n = count_attention(m->graph);
    printf("%s: %d Attention, %d steps after optimization\n", exported[i].name, (int)n,
           (int)tk_count_op(m->graph, NULL));
    if (n != exported[i].fused)
      fail_msg("%s: %d Attention nodes, expected %d", exported[i].name, (int)n,
               (int)exported[i].fused);
    tk_results opt = tk_run(m, TK_FILL_SEEDED);
    tk_results fast = tk_run_fast(m, TK_FILL_SEEDED, best_isa(), 2);
    tk_results ref2 = tk_run(m, TK_FILL_SEEDED);
    tk_assert_close(&ref, &opt, true);
    tk_assert_close(&ref2, &fast, true);
    kn_model_free(mod);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_packed_slice),       cmocka_unit_test(test_packed_split),
      cmocka_unit_test(test_packed_gather),      cmocka_unit_test(test_batched_3d),
      cmocka_unit_test(test_keys_pretransposed), cmocka_unit_test(test_sdpa_both_scaled),
      cmocka_unit_test(test_miss_softmax_axis),  cmocka_unit_test(test_miss_runtime_scale),
      cmocka_unit_test(test_miss_v_rank),        cmocka_unit_test(test_miss_no_product),
      cmocka_unit_test(test_exported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
