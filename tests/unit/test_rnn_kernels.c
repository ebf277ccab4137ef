/* The rnn_gemm tactic (src/kernels/rnn) against the reference RNN, GRU and
 * LSTM: batch 1 and 3, hidden 1, 7 and 64, every direction, initial
 * states and biases given or not, weights prepacked (constants) or packed
 * per run (graph inputs), every ISA the machine has.  The fast path sums
 * in another order and uses the vectorised activations, so it must be
 * close to the reference; on 1 and 2 threads it must be bit-identical.
 * Cases the kernel does not take (sequence_lens shorter than the
 * sequence, other activations, clip) must fall back to the reference and
 * still write every output element. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fastkit.h"
#include "ops/tactic.h"

static kn_pool *pool2;

static void assert_close(const kn_tensor *a, const kn_tensor *b, const char *what) {
  assert_int_equal(a->nbytes, b->nbytes);
  const float *p = a->data, *q = b->data;
  for (int64_t k = 0; k < kn_tensor_numel(a); k++)
    if (!(fabsf(p[k] - q[k]) <= 1e-4f + 1e-3f * fabsf(q[k])))
      fail_msg("%s element %lld: fast %.9g, reference %.9g", what, (long long)k, (double)p[k],
               (double)q[k]);
}

/* Runs the node every way: the reference, then the fast path on each ISA
 * with and without prepacked weights, on 1 and 2 threads. */
static void check_rnn(kn_ir_model *m, int32_t want_tactic, const char *what) {
  kn_graph *g = m->graph;
  kn_node *n = &g->nodes[g->n_nodes - 1];
  fk_inputs in = fk_make_inputs(g, 77);
  kn_slot ref[8], got[8], one[8];
  n->tactic = 0;
  fk_run(m, g, n, &in, NULL, NULL, ref);
  kn_isa isas[KN_ISA_COUNT];
  int32_t ni = fk_isas(isas);
  for (int32_t i = 0; i < ni; i++) {
    const kn_op_tactics *tt = kn_tactics_of(n);
    int32_t t = tt->select(g, n, isas[i]);
    assert_int_equal(t, want_tactic);
    if (!t) continue;
    n->tactic = t;
    void *packed = NULL;
    kn_error err;
    if (tt->pack(g, n, &(kn_target){isas[i], NULL}, &packed, &err)) fail_msg("pack: %s", err.msg);
    for (int32_t pk = 0; pk < 2; pk++)
      for (int32_t th = 1; th <= 2; th++) {
        kn_rt rt = {.isa = isas[i], .pool = th == 2 ? pool2 : NULL};
        fk_run(m, g, n, &in, &rt, pk ? packed : NULL, th == 1 ? one : got);
        free(rt.scratch);
        if (th == 1) continue;
        for (int32_t o = 0; o < n->n_outputs; o++) {
          if (n->outputs[o] < 0) continue;
          char msg[160];
          snprintf(msg, sizeof msg, "%s isa %s packed %d output %d", what,
                   kn_isa_name(isas[i]), (int)pk, (int)o);
          assert_close(&one[o].t, &ref[o].t, msg);
          if (memcmp(one[o].t.data, got[o].t.data, one[o].t.nbytes))
            fail_msg("%s: 1 and 2 threads differ", msg);
        }
        for (int32_t o = 0; o < n->n_outputs; o++) {
          kn_slot_release(&one[o]);
          kn_slot_release(&got[o]);
        }
      }
    kn_packed_free(packed);
  }
  for (int32_t o = 0; o < n->n_outputs; o++) kn_slot_release(&ref[o]);
  fk_inputs_free(&in);
  kn_ir_model_free(m);
}

typedef struct rnn_case {
  const char *op;
  int64_t seq, batch, input, hidden;
  const char *dir;
  bool bias, init, peep, weights_const;
  int64_t lens; /* 0: no sequence_lens; else every row's length */
  bool lbr, input_forget;
  const char *acts; /* NULL: default */
  int32_t tactic;
} rnn_case;

static int32_t weight(kn_graph *g, bool as_const, const char *name, int32_t r, const int64_t *d,
                      uint32_t seed) {
  if (as_const) return tk_const_rand(g, r, d, seed, 0.0f);
  return tk_input(g, name, r, d);
}

static void run_case(const rnn_case *c) {
  kn_ir_model *m = tk_model_new(14);
  kn_graph *g = m->graph;
  int64_t G = !strcmp(c->op, "LSTM") ? 4 : !strcmp(c->op, "GRU") ? 3 : 1;
  int64_t D = !strcmp(c->dir, "bidirectional") ? 2 : 1, H = c->hidden, B = c->batch;
  int32_t in[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  in[0] = tk_input(g, "x", 3, (int64_t[]){c->seq, B, c->input});
  in[1] = weight(g, c->weights_const, "w", 3, (int64_t[]){D, G * H, c->input}, 1);
  in[2] = weight(g, c->weights_const, "r", 3, (int64_t[]){D, G * H, H}, 2);
  if (c->bias) in[3] = weight(g, c->weights_const, "b", 2, (int64_t[]){D, 2 * G * H}, 3);
  if (c->lens) {
    kn_tensor t;
    memset(&t, 0, sizeof t);
    assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_I32, 1, &B, NULL), KN_OK);
    for (int64_t i = 0; i < B; i++) ((int32_t *)t.data)[i] = (int32_t)(i == 1 ? c->lens : c->seq);
    in[4] = kn_graph_add_constant(g, "lens", &t);
  }
  if (c->init) in[5] = tk_input(g, "h0", 3, (int64_t[]){D, B, H});
  int32_t n_in = c->init ? 6 : c->lens ? 5 : c->bias ? 4 : 3;
  if (G == 4 && c->init) {
    in[6] = tk_input(g, "c0", 3, (int64_t[]){D, B, H});
    n_in = 7;
  }
  if (G == 4 && c->peep) {
    in[7] = weight(g, c->weights_const, "p", 2, (int64_t[]){D, 3 * H}, 4);
    n_in = 8;
  }
  int32_t outs[3];
  tk_node_n(g, c->op, n_in, in, G == 4 ? 3 : 2, outs);
  kn_node *n = tk_last(g);
  assert_true(kn_node_set_int(n, "hidden_size", H));
  assert_true(kn_node_set_string(n, "direction", c->dir));
  if (c->lbr) assert_true(kn_node_set_int(n, "linear_before_reset", 1));
  if (c->input_forget) assert_true(kn_node_set_int(n, "input_forget", 1));
  if (c->acts) {
    const char *names[6];
    int32_t na = (int32_t)(G == 4 ? 3 : G == 3 ? 2 : 1) * (int32_t)D;
    for (int32_t i = 0; i < na; i++) names[i] = i % (na / D) == 0 ? c->acts : "Tanh";
    n->attrs = kn_realloc(n->attrs, (size_t)(n->n_attrs + 1) * sizeof *n->attrs);
    assert_non_null(n->attrs);
    kn_attr *at = &n->attrs[n->n_attrs++];
    memset(at, 0, sizeof *at);
    at->name = kn_strdup("activations");
    at->type = KN_ATTR_STRINGS;
    at->n = na;
    at->strings = kn_calloc((size_t)na, sizeof *at->strings);
    for (int32_t i = 0; i < na; i++) at->strings[i] = kn_strdup(names[i]);
  }
  for (int32_t o = 0; o < (G == 4 ? 3 : 2); o++) tk_output(g, outs[o]);
  tk_prepare(m);
  char what[200];
  snprintf(what, sizeof what, "%s seq %lld batch %lld input %lld hidden %lld %s%s%s%s%s",
           c->op, (long long)c->seq, (long long)B, (long long)c->input, (long long)H, c->dir,
           c->bias ? " bias" : "", c->init ? " init" : "", c->peep ? " peep" : "",
           c->weights_const ? " const" : "");
  check_rnn(m, c->tactic, what);
}

static void sweep(const char *op) {
  static const int64_t hidden[] = {1, 7, 64}, batch[] = {1, 3};
  static const char *const dirs[] = {"forward", "reverse", "bidirectional"};
  int32_t k = 0;
  for (size_t h = 0; h < 3; h++)
    for (size_t b = 0; b < 2; b++)
      for (size_t d = 0; d < 3; d++, k++) {
        rnn_case c = {.op = op, .seq = 1 + k % 4, .batch = batch[b], .input = 1 + (k * 5) % 17,
                      .hidden = hidden[h], .dir = dirs[d], .bias = k % 3 != 1,
                      .init = k % 2 == 0, .peep = k % 4 < 2, .weights_const = k % 5 != 3,
                      .lens = k % 7 == 0 ? 1 + k % 4 : 0, .lbr = k % 2 == 1,
                      .input_forget = k % 6 == 5, .tactic = KN_TACTIC_rnn_gemm};
        run_case(&c);
      }
}

static void test_lstm(void **state) {
  (void)state;
  sweep("LSTM");
}

static void test_gru(void **state) {
  (void)state;
  sweep("GRU");
}

static void test_rnn(void **state) {
  (void)state;
  sweep("RNN");
}

/* Runs the kernel does not take: the reference must still fill every
 * output (they are poisoned before the fast run). */
static void test_fallbacks(void **state) {
  (void)state;
  /* shorter sequences: Y past a row's end must be zero */
  rnn_case c = {.op = "LSTM", .seq = 5, .batch = 3, .input = 4, .hidden = 7,
                .dir = "bidirectional", .bias = true, .init = true, .weights_const = true,
                .lens = 2, .tactic = KN_TACTIC_rnn_gemm};
  run_case(&c);
  c.op = "GRU";
  run_case(&c);
  /* another activation: not selected */
  c.lens = 0;
  c.acts = "HardSigmoid";
  c.tactic = 0;
  run_case(&c);
}

/* The shape of the benchmark (seq 50, batch 1, input 128, hidden 256). */
static void test_lstm_large(void **state) {
  (void)state;
  rnn_case c = {.op = "LSTM", .seq = 10, .batch = 1, .input = 128, .hidden = 256,
                .dir = "bidirectional", .bias = true, .weights_const = true,
                .tactic = KN_TACTIC_rnn_gemm};
  run_case(&c);
}

int main(void) {
  kn_error err;
  if (kn_pool_create(2, &pool2, &err)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lstm),      cmocka_unit_test(test_gru),
      cmocka_unit_test(test_rnn),       cmocka_unit_test(test_fallbacks),
      cmocka_unit_test(test_lstm_large),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  kn_pool_free(pool2);
  return rc;
}
