/* Shared helpers for the unit tests: building small graphs by hand,
 * running passes and graphs through the executor, and comparing results.
 * Every helper fails the running cmocka test on error. */
#ifndef KILN_TESTKIT_H
#define KILN_TESTKIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/engine.h"
#include "engine/exec.h"
#include "kernels/kernels.h"
#include "ops/tactic.h"
#include "tactics/tactics.h"
#include "passes/pass.h"

#include <stdlib.h>
#include <string.h>

/* Whether this build has AddressSanitizer (ten times slower). */
static inline bool tk_sanitized(void) {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#endif
#endif
  return false;
}

/* Whether to shorten a long sweep: unless KILN_LONG_TESTS is 1, the suite
 * runs a sample of each exhaustive sweep (the whole suite has ten minutes
 * on a 2-core machine, and runs twice: gcc, then ASan, ten times slower). */
static inline bool tk_short_sweep(void) {
  const char *lt = getenv("KILN_LONG_TESTS");
  return !(lt && strcmp(lt, "1") == 0);
}

/* ---- building graphs ---------------------------------------------------- */

/* An empty model: one graph, the default domain at `opset`, label "test". */
kn_ir_model *tk_model_new(int64_t opset);

/* Appends v to a graph's int32 list (inputs, outputs). */
void tk_append(int32_t **arr, int32_t *n, int32_t v);

/* A float graph input; rank < 0: a tensor of unknown rank. */
int32_t tk_input(kn_graph *g, const char *name, int32_t rank, const int64_t *dims);

/* Marks v a graph output. */
void tk_output(kn_graph *g, int32_t v);

/* Deterministic values in about [-1, 1], seeded. */
float tk_pseudo(uint32_t *s);

/* Channel slices of wider outputs (kn_conv2d.ldy): a malloc'd buffer of np
 * pixels ldy floats apart plus a 64-float tail, every float `sentinel`. */
float *tk_slice_buffer(int64_t np, int64_t ldy, float sentinel);
/* Asserts that buf (from tk_slice_buffer) holds exactly plain ([np, m])
 * at channels [off, off + m) of each pixel and the sentinel everywhere
 * else; `what`, `isa` and `threads` name the case in the failure. */
void tk_check_slice(const float *buf, int64_t np, int64_t m, int64_t ldy, int64_t off,
                    const float *plain, float sentinel, const char *what, const char *isa,
                    int32_t threads);

/* A malloc'd buffer of n floats from tk_pseudo(seed) (the caller frees it). */
float *tk_rand_buf(int64_t n, uint32_t seed);

/* An activation of the fused epilogues (kernels.h) in double, the oracle
 * of the kernel tests; fails on one they do not cover. */
double tk_act_ref(const kn_act_params *a, double x);

/* A float constant of the given shape filled with tk_pseudo(seed) + offset. */
int32_t tk_const_rand(kn_graph *g, int32_t rank, const int64_t *dims, uint32_t seed,
                      float offset);

/* A float scalar constant. */
int32_t tk_const_scalar(kn_graph *g, float x);
/* A uint8 scalar constant (a zero point). */
int32_t tk_const_u8(kn_graph *g, uint8_t v);

/* A float constant holding `vals`. */
int32_t tk_const_f32(kn_graph *g, int32_t rank, const int64_t *dims, const float *vals);
/* A constant of any fixed-size dtype, its elements copied from vals. */
int32_t tk_const_typed(kn_graph *g, kn_dtype dtype, int32_t rank, const int64_t *dims,
                       const void *vals);

/* An int64 constant of rank 1 (or a scalar when n < 0: one element vals[0]). */
int32_t tk_const_i64(kn_graph *g, int32_t n, const int64_t *vals);

/* A Constant node holding a float scalar (as exporters write Clip bounds). */
int32_t tk_constant_node(kn_graph *g, float x);

/* A node with n_out (<= 4) fresh outputs; returns its first output's index
 * (all of them in outs when not NULL). */
int32_t tk_node_n(kn_graph *g, const char *op, int32_t n_in, const int32_t *in,
                  int32_t n_out, int32_t *outs);

/* A node with one fresh output, which it returns. */
int32_t tk_node(kn_graph *g, const char *op, int32_t n_in, const int32_t *in);

/* The node added last. */
kn_node *tk_last(kn_graph *g);

/* kn_graph_finish, kn_ops_prepare, and kn_tactics_bind. */
void tk_prepare(kn_ir_model *m);

/* ---- running passes and graphs ------------------------------------------ */

#define TK_FOLD_CAP ((int64_t)16 << 20)

/* Runs one pass with the given constant-folding cap (then compacts and
 * prepares when it changed the graph); returns whether it did. */
bool tk_run_pass_cap(kn_ir_model *m, kn_pass_fn fn, int64_t cap);

/* tk_run_pass_cap with TK_FOLD_CAP. */
bool tk_run_pass(kn_ir_model *m, kn_pass_fn fn);

/* Live nodes of type op (of any type when op is NULL). */
int32_t tk_count_op(const kn_graph *g, const char *op);

/* The first node (dead or alive) of type op, or NULL. */
const kn_node *tk_find_op(const kn_graph *g, const char *op);

typedef struct tk_results {
  int32_t n;
  kn_slot *outs;
} tk_results;

/* How tk_run fills the (float) graph inputs. */
typedef enum tk_fill {
  TK_FILL_SEEDED,  /* 2 * tk_pseudo, one stream seeded 7 over all inputs */
  TK_FILL_PATTERN, /* ((k * 37 + i * 11) % 23) * 0.25 - 2.5 for element k of input i */
} tk_fill;

/* Runs the top-level graph with kn_exec_graph (no memory limit) on every
 * non-constant input filled as `fill` says; an unknown dim is taken as 2. */
tk_results tk_run(kn_ir_model *m, tk_fill fill);

/* As tk_run, with the fast kernels: every node gets its op's tactic for
 * `isa` (a kn_isa), its weights packed, and the run a kn_rt with `threads`
 * threads; the tactics are reset to the reference afterwards. */
tk_results tk_run_fast(kn_ir_model *m, tk_fill fill, int32_t isa, int32_t threads);

/* The tactic the first live node of type `op` would get for `isa` (0:
 * reference), or -1 when there is no such node. */
/* The same with the context's CPU features (kn_rt.features) given: the
 * weights are packed for this CPU, so features it lacks make the ops
 * repack per run (tk_run_fast passes kn_cpu_features()). */
tk_results tk_run_fast_features(kn_ir_model *m, tk_fill fill, int32_t isa, int32_t threads,
                                uint64_t features);
/* The same with every node that can run `tactic` (one of its op's
 * candidates) on it (0: the select choice). */
tk_results tk_run_fast_tactic(kn_ir_model *m, tk_fill fill, int32_t isa, int32_t threads,
                              uint64_t features, int32_t tactic);
int32_t tk_fast_tactic(const kn_ir_model *m, const char *op, int32_t isa);

void tk_results_free(tk_results *r);

/* Asserts bit-identical outputs, then frees both. */
void tk_assert_same(tk_results *a, tk_results *b);

/* Asserts float outputs of the same shapes and bits, naming `what` and the
 * first element that differs; frees neither. */
void tk_assert_bits(const tk_results *a, const tk_results *b, const char *what);

/* Asserts output 0 of `fast` within 2e-5 of the largest |element| of
 * `ref`'s (plus 1e-6) elementwise: a reduced-precision step against its
 * reference with the rounding made explicit; names `what` on failure. */
void tk_assert_near_ref(const tk_results *fast, const tk_results *ref, const char *what);

/* Runs context c of model km on its one float input, filled as tk_run
 * fills it (dynamic dims as 2), and returns copies of its outputs. */
tk_results tk_run_context(kn_context *c, const kn_model *km, tk_fill fill);

/* Asserts float outputs equal up to rounding, |a - b| <= 1e-5 + 1e-4 |b|,
 * then frees both; with `equal_ok`, equal values (infinities) and two NaNs
 * also pass. */
void tk_assert_close(tk_results *a, tk_results *b, bool equal_ok);

/* Runs `first` (and `second` when not NULL), then dce, with tk_run_pass;
 * asserts the results (TK_FILL_SEEDED) stay close (tk_assert_close with
 * equal_ok); returns whether `first` changed the graph. */
bool tk_passes_keep_close(kn_ir_model *m, kn_pass_fn first, kn_pass_fn second, bool equal_ok);

/* The model's results through the fast kernels (this machine's best ISA,
 * 1 and 2 threads) against its reference kernels (tk_assert_close). */
void tk_assert_fast_close(kn_ir_model *m);

/* The largest |a - b| over two tensors of the same dtype and size (two
 * NaNs count as equal, a NaN against a number as infinite); non-float
 * tensors must match bit for bit (0), strings are not compared. */
double tk_max_abs_diff(const kn_tensor *a, const kn_tensor *b);

/* ---- real models ---------------------------------------------------------- */

/* Loads ~/.cache/kiln/models/<name>.onnx and runs the whole optimizer on it;
 * NULL (after printing "<name>: not cached, skipped") when it is not
 * cached. */
kn_model *tk_load_cached_optimized(const char *name);

#endif
