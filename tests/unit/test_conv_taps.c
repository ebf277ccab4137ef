/* Kernel taps that read only padding, cut from convolutions
 * (src/passes/conv_taps.c), on small hand-built graphs: the kernel and
 * pads shrink exactly where no output reads the input through a tap, the
 * results stay those of the unoptimized graph through the reference and
 * the fast kernels, and convs with every tap live keep their kernel. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testkit.h"

enum { C = 6, M = 5 };

/* A Conv of rank nd + 2 on x (spatial dims sp) with kernel k, stride s,
 * dilation d and pads (begin, end per dim) pads, bias. */
static int32_t conv(kn_graph *g, int32_t x, int32_t nd, const int64_t *k, const int64_t *s,
                    const int64_t *d, const int64_t *pads, uint32_t seed) {
  int64_t wd[5] = {M, C};
  for (int32_t i = 0; i < nd; i++) wd[2 + i] = k[i];
  int32_t in[3] = {x, tk_const_rand(g, nd + 2, wd, seed, 0),
                   tk_const_rand(g, 1, (int64_t[]){M}, seed + 1, 0)};
  int32_t y = tk_node(g, "Conv", 3, in);
  kn_node *n = tk_last(g);
  assert_true(kn_node_set_ints(n, "kernel_shape", k, nd));
  assert_true(kn_node_set_ints(n, "strides", s, nd));
  assert_true(kn_node_set_ints(n, "dilations", d, nd));
  assert_true(kn_node_set_ints(n, "pads", pads, 2 * nd));
  return y;
}

/* The kernel_shape of the live Conv that writes value y. */
static void kernel_of(const kn_graph *g, int32_t y, int32_t nd, int64_t *k) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (n->dead || n->n_outputs < 1 || n->outputs[0] != y) continue;
    const kn_attr *a = kn_node_attr(n, "kernel_shape");
    assert_non_null(a);
    assert_int_equal(a->n, nd);
    for (int32_t j = 0; j < nd; j++) k[j] = a->ints[j];
    const kn_value *w = &g->values[n->inputs[1]];
    for (int32_t j = 0; j < nd; j++) assert_int_equal(w->type.dims[2 + j], k[j]);
    return;
  }
  fail_msg("no conv writes value %d", (int)y);
}

typedef struct taps_case {
  int32_t nd;
  int64_t sp[3], k[3], s[3], d[3], pads[6];
  int64_t want[3]; /* the kernel after the pass */
} taps_case;

static void run_case(const taps_case *tc) {
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int64_t xd[5] = {1, C};
  for (int32_t i = 0; i < tc->nd; i++) xd[2 + i] = tc->sp[i];
  int32_t x = tk_input(g, "x", tc->nd + 2, xd);
  int32_t y = conv(g, x, tc->nd, tc->k, tc->s, tc->d, tc->pads, 3);
  tk_output(g, y);
  tk_prepare(m);
  bool want_change = false;
  for (int32_t i = 0; i < tc->nd; i++) want_change |= tc->want[i] != tc->k[i];
  bool changed = tk_passes_keep_close(m, kn_pass_conv_taps, NULL, false);
  assert_int_equal(changed, want_change);
  int64_t k[3];
  kernel_of(g, g->outputs[0], tc->nd, k);
  for (int32_t i = 0; i < tc->nd; i++) assert_int_equal(k[i], tc->want[i]);
  tk_assert_fast_close(m);
  kn_ir_model_free(m);
}

static void test_conv_taps(void **state) {
  (void)state;
  const taps_case cases[] = {
      /* ASPP on a 20x20 map: dilation 24 and 36 -> 1x1; 12 keeps 3x3
       * (its outer taps read the input for some outputs) */
      {2, {20, 20}, {3, 3}, {1, 1}, {24, 24}, {24, 24, 24, 24}, {1, 1}},
      {2, {20, 20}, {3, 3}, {1, 1}, {36, 36}, {36, 36, 36, 36}, {1, 1}},
      {2, {20, 20}, {3, 3}, {1, 1}, {12, 12}, {12, 12, 12, 12}, {3, 3}},
      /* one dim only, asymmetric pads: the leading taps go */
      {2, {4, 9}, {3, 3}, {1, 1}, {5, 1}, {10, 1, 0, 1}, {1, 3}},
      /* the trailing taps go (pads at the end only), stride 2 */
      {2, {5, 6}, {5, 3}, {2, 1}, {3, 1}, {0, 1, 12, 1}, {2, 3}},
      /* 1-D: dilation 8 on 6 samples -> the center tap */
      {1, {6}, {3}, {1}, {8}, {8, 8}, {1}},
      /* 3-D: depth 2 with dilation 4 -> 1 tap in depth, h and w kept */
      {3, {2, 5, 5}, {3, 3, 3}, {1, 1, 1}, {4, 1, 1}, {4, 1, 1, 4, 1, 1}, {1, 3, 3}},
      /* a plain 3x3 pad 1 conv keeps every tap */
      {2, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, {3, 3}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_taps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
