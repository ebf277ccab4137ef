/* Helpers for the fast-kernel tests (test_copy_kernels.c, test_rnn_kernels.c):
 * run the one node of a tiny testkit graph directly through its op, either
 * with the reference kernel (ctx->rt NULL, outputs zeroed as the executor
 * does) or with a kn_rt and the tactic its tactics' `select` picks (outputs
 * poisoned with 0xff bytes first, since the executor does not zero them for
 * fast tactics: an element the fast path forgets to write shows up).
 * Header-only so each test executable stays one file plus the testkit. */
#ifndef KILN_FASTKIT_H
#define KILN_FASTKIT_H

#include "core/cpu.h"
#include "kernels/kernels.h"
#include "testkit.h"

#include <stdlib.h>
#include <string.h>

/* Graph inputs' values of one case, by value index (n_values slots). */
typedef struct fk_inputs {
  int32_t n;
  kn_slot *v;
} fk_inputs;

/* Random contents for every non-constant graph input (bytes for integer
 * dtypes, values in [-2, 2] for floats). */
static inline fk_inputs fk_make_inputs(const kn_graph *g, uint32_t seed) {
  fk_inputs in = {g->n_values, kn_calloc((size_t)g->n_values, sizeof(kn_slot))};
  assert_non_null(in.v);
  for (int32_t i = 0; i < g->n_inputs; i++) {
    const kn_value *v = &g->values[g->inputs[i]];
    if (v->constant) continue;
    kn_slot *s = &in.v[g->inputs[i]];
    s->kind = KN_KIND_TENSOR;
    assert_int_equal(kn_tensor_alloc(&s->t, v->type.dtype, v->type.rank, v->type.dims, NULL),
                     KN_OK);
    int64_t n = kn_tensor_numel(&s->t);
    if (v->type.dtype == KN_DTYPE_F32) {
      float *d = s->t.data;
      for (int64_t k = 0; k < n; k++) d[k] = 2.0f * tk_pseudo(&seed);
    } else {
      uint8_t *d = s->t.data;
      for (size_t k = 0; k < s->t.nbytes; k++) d[k] = (uint8_t)(tk_pseudo(&seed) * 127.0f + 128.0f);
    }
  }
  return in;
}

static inline void fk_inputs_free(fk_inputs *in) {
  for (int32_t i = 0; i < in->n; i++) kn_slot_release(&in->v[i]);
  free(in->v);
}

/* Runs node n of g on `in`; outputs into outs[0..n->n_outputs) (owned).
 * rt NULL: the reference kernel; packed: its tactics' pack hook's result. */
static inline void fk_run(const kn_ir_model *m, const kn_graph *g, const kn_node *n,
                          const fk_inputs *in, kn_rt *rt, const void *packed, kn_slot *outs) {
  kn_slot vals[16], *pin[16], *pout[8];
  assert_true(n->n_inputs <= 16 && n->n_outputs <= 8);
  memset(vals, 0, sizeof vals);
  for (int32_t k = 0; k < n->n_inputs; k++) {
    int32_t v = n->inputs[k];
    pin[k] = NULL;
    if (v < 0) continue;
    if (g->values[v].constant) {
      vals[k].kind = KN_KIND_TENSOR;
      vals[k].t = kn_tensor_view(g->values[v].constant);
    } else {
      vals[k] = in->v[v];
      vals[k].t.owned = 0;
    }
    pin[k] = &vals[k];
  }
  for (int32_t o = 0; o < n->n_outputs; o++) {
    memset(&outs[o], 0, sizeof outs[o]);
    outs[o].t.rank = -1;
    pout[o] = &outs[o];
  }
  kn_error err;
  kn_node bound = *n; /* with its tactics, whether or not they were selected */
  bound.impl = kn_tactics_of(n);
  kn_op_ctx ctx = {.node = &bound, .opset = n->opset, .n_in = n->n_inputs, .in = pin,
                   .n_out = n->n_outputs, .out = pout, .err = &err, .label = m->label,
                   .rt = rt, .packed = packed};
  if (n->op->infer(&ctx)) fail_msg("infer: %s", err.msg);
  for (int32_t o = 0; o < n->n_outputs; o++) {
    kn_slot *s = &outs[o];
    if (s->kind != KN_KIND_TENSOR || !kn_shape_known(&s->t) || s->t.data) continue;
    kn_tensor shape = s->t;
    assert_int_equal(kn_tensor_alloc(&s->t, shape.dtype, shape.rank, shape.dims, NULL), KN_OK);
    if (rt) memset(s->t.data, 0xff, s->t.nbytes);
  }
  if (kn_tactics_run(&ctx)) fail_msg("run: %s", err.msg);
}

/* The ISAs this machine runs, portable first; returns the count. */
static inline int32_t fk_isas(kn_isa *out) {
  int32_t c = 0;
  uint64_t f = kn_cpu_features();
  for (int i = 0; i < KN_ISA_COUNT; i++)
    if (kn_isa_available((kn_isa)i, f)) out[c++] = (kn_isa)i;
  return c;
}

#endif
