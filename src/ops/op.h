/*
 * The operator interface.  Each op family lives in one file
 * (src/ops/<family>.c) that defines a table `kn_ops_<family>[]` of
 * kn_op_def, terminated by an entry with name == NULL; families are listed
 * once in src/ops/families.inc.
 *
 * An op has two entry points, both given a kn_op_ctx:
 *
 *  infer  decides the kind, dtype and shape of every output from the
 *         inputs' kinds, dtypes, shapes and (where known) values, and
 *         validates the node (attributes, input dtypes and shapes).
 *         It runs twice:
 *          - at load (ctx->static_infer): inputs describe values before
 *            running: rank may be -1 (unknown), dims may be -1 (unknown) and
 *            data is NULL unless the value is a constant.  Infer must then
 *            propagate what it can and leave the rest unknown (rank -1 or
 *            dims -1), never fail because something is unknown.
 *          - at run time (not static_infer), with every shape known.  It
 *            must then set complete shapes for tensor outputs whenever they
 *            can be computed from the inputs; the executor allocates those.
 *            The executor's prepare phase (src/engine/exec.h) calls it once
 *            per input signature with the inputs' real shapes but data NULL
 *            for every value it does not know (graph inputs, what steps
 *            compute; it knows constants and shape arithmetic on them):
 *            where a value decides a shape, infer must then fail or leave
 *            the dim unknown, as at load -- never take a default -- and the
 *            step is inferred again, with its values, on every run.  A step
 *            infer completes for is not inferred again while the signature
 *            holds, so a check of an input's values that infer can make
 *            only with them belongs in run.
 *         Errors name what is wrong and what was expected (kn_op_fail).
 *  run    computes the outputs.  Any output infer did not size completely
 *         (data-dependent shapes such as If/Loop results, sequences) run
 *         builds itself (kn_out_alloc, kn_out_seq).  A tensor output whose
 *         shape infer set completely is allocated by the executor before
 *         run, and this is all run may assume about it (the output
 *         contract; src/engine/exec.h places the buffers):
 *          - it has exactly infer's dtype and shape, and its buffer
 *            overlaps no input's, except that output 0 of an op with
 *            kn_op_def.inplace may be the very buffer of input
 *            `inplace_input` (the memory planner's in-place reuse), and
 *            a Concat's inputs may already lie in its output, each where
 *            it would be copied (the planner's Concat parts);
 *          - its contents, with the reference tactic (ctx->rt == NULL:
 *            tactic 0, or a run without a runtime), are zero, except in
 *            the two cases above, where it holds the input's values
 *            (a KN_INPLACE_ALIAS op is then not run at all);
 *          - its contents, with a fast tactic (ctx->rt != NULL), are
 *            unspecified (what the arena's previous tensor or the
 *            previous run left there): run must write every element, on
 *            every path, including one that falls back to reference code
 *            which accumulates into its output (kn_out_zero_for_ref
 *            first there).  Checking builds (ASan, or KN_EXEC_CHECK) fill
 *            such outputs with NaN bytes to hold kernels to this.
 *         So a kernel never pays for zeroing it does not need, and only
 *         reference-tactic steps are zeroed by the executor.
 *
 * Different opset versions of one op share an entry; use ctx->opset (the
 * model's version of the node's domain) to select behaviour, e.g. Clip-6
 * reads min/max attributes while Clip-11 reads inputs.
 */
#ifndef KN_OP_H
#define KN_OP_H

#include "core/core.h"
#include "core/slot.h"
#include "ir/ir.h"

typedef struct kn_op_ctx kn_op_ctx;

/* Run subgraph `g` with the given input slots (borrowed; count must equal
 * g->n_inputs, omitted ones NULL) and write its outputs into `out`
 * (n_out slots, released first).  Outer-scope values resolve against the
 * calling node's environment. */
typedef kn_status (*kn_subgraph_fn)(kn_op_ctx *ctx, const kn_graph *g,
                                    int32_t n_in, const kn_slot *const *in,
                                    int32_t n_out, kn_slot *out);

struct kn_op_ctx {
  const kn_node *node;
  int64_t opset;
  int32_t n_in;
  kn_slot **in;   /* in[i] == NULL: input omitted (empty name); a slot of
                     kind KN_KIND_NONE: an empty optional (treat as omitted
                     unless the op is about optionals) */
  int32_t n_out;
  kn_slot **out;  /* always non-NULL (scratch when the output is unused) */
  bool static_infer; /* at load; then a slot of kind NONE means "not known" */
  kn_error *err;
  const char *label;          /* model file name, for messages */
  kn_subgraph_fn run_subgraph; /* NULL during static inference */
  void *exec;                 /* executor state, for run_subgraph */
  /* For the fast runs of src/tactics (tactics.h), which the executor calls
   * instead of `run` for steps whose tactic is not the reference one: the
   * fast kernels' runtime (ISA, thread pool, scratch; src/kernels), set for
   * such steps, and the node's prepacked constant inputs (its tactics'
   * `pack`, made once at build or engine load, shared read-only by every
   * context) or NULL.  An op's own `run` is the reference kernel and
   * ignores both (a fast run hands it the cases it does not take). */
  struct kn_rt *rt;
  const void *packed;
};

typedef kn_status (*kn_op_fn)(kn_op_ctx *ctx);

typedef struct kn_op_def {
  const char *name;   /* ONNX op_type */
  const char *domain; /* NULL or "" for the default domain */
  int16_t min_inputs, max_inputs;   /* max -1: variadic */
  int16_t min_outputs, max_outputs; /* max -1: variadic */
  int16_t since;      /* oldest opset at which kiln runs the op (usually 1) */
  int16_t until;      /* the op's newest ONNX version kiln implements
                         (informational: every version of the op up to
                         KN_MAX_OPSET is handled; `kiln ops` prints it) */
  kn_op_fn infer;
  kn_op_fn run;
  /* Estimated FLOPs of one run after infer (NULL: one per output element). */
  double (*flops)(const kn_op_ctx *ctx);
  /* Output 0 may share input `inplace_input`'s buffer (input 0 unless
   * set) when their sizes are equal (the memory planner's in-place
   * reuse): one of KN_INPLACE_* below. */
  uint8_t inplace;
  /* Whether output shapes depend on input *values* (KN_DATA_SHAPE_*):
   * the executor's prepare phase decides a step's shapes once per input
   * signature only when they cannot change with those values; other steps
   * are inferred on every run (src/engine/exec.h). */
  uint8_t data_shape;
  /* The input output 0 may share with `inplace` (0 unless set). */
  uint8_t inplace_input;
} kn_op_def;

/* kn_op_def.inplace */
#define KN_INPLACE_NONE 0
/* Elementwise: run reads element i of the input before writing element i
 * of output 0, so both may be one buffer. */
#define KN_INPLACE_ELEMWISE 1
/* Pure aliasing: output 0 holds input 0's bytes unchanged (Reshape and the
 * like); run only copies them, so the executor skips it when the two
 * buffers are the same. */
#define KN_INPLACE_ALIAS 2

/* kn_op_def.data_shape: inputs whose values decide output shapes, for
 * every value (NonZero) or not (Resize: a scales input that is a constant,
 * or computed from shapes, decides them once per signature).  Besides
 * these, a step is inferred on every run when it has subgraphs, when its
 * infer cannot complete without values prepare does not know (see infer
 * above: a Reshape to a computed shape), or when it reads such a step's
 * output. */
#define KN_DATA_SHAPE_NONE 0 /* shapes follow from input shapes */
/* Values of inputs other than the first decide shapes (Resize scales,
 * OneHot depth): reusable when those inputs are constants. */
#define KN_DATA_SHAPE_ARGS 1
/* Values of any input decide shapes (NonZero, NonMaxSuppression, Range). */
#define KN_DATA_SHAPE_ALL 2

/* Every family's table, kn_ops_<family>[] (families.inc), ends with
 * KN_OP_END. */
#define KN_FAMILY(f) extern const kn_op_def kn_ops_##f[];
#include "families.inc"
#undef KN_FAMILY

/* Registry (src/ops/registry.c): every family's table.  Op families never
 * call it (the registry references them all): an op that runs another
 * names that op's family table, kn_op_in. */
const kn_op_def *kn_op_find(const char *domain, const char *name);
/* The op `name` of `domain` in one family's table (kn_ops_<family>[]), or
 * NULL; domains "" and "ai.onnx" are one (op_util.c). */
const kn_op_def *kn_op_in(const kn_op_def *family, const char *domain, const char *name);
/* Whether two op domains are the same ("", NULL and "ai.onnx" are). */
bool kn_domain_eq(const char *a, const char *b);
/* Calls fn for every registered op. */
void kn_op_foreach(void (*fn)(const kn_op_def *op, void *arg), void *arg);

/* Domain of kiln's own ops (fused steps made by the optimizer). */
#define KN_DOMAIN "kiln"

/* Newest default-domain opset kiln loads. */
#define KN_MAX_OPSET 21

/* Resolve every node of the model (and its subgraphs) to an op, check
 * opsets and arity, and run static shape and type inference (prepare.c). */
kn_status kn_ops_prepare(kn_ir_model *m, kn_error *err) KN_WUR;

/* Static inference for one graph whose input types are set (used by
 * control-flow ops for their bodies). */
kn_status kn_ops_infer_graph(const kn_ir_model *m, kn_graph *g,
                             kn_error *err) KN_WUR;

/* Re-infers the types of `vals`, a copy of the top-level graph's values
 * (shared names and constants) whose graph-input types the caller set,
 * node by node in order, into vals only: the model is not changed and
 * subgraphs are not entered (their ops infer from their bodies' types).
 * A node that cannot be inferred keeps its outputs' types.  Fails only
 * when out of memory. */
kn_status kn_ops_infer_values(const kn_ir_model *m, kn_value *vals, kn_error *err) KN_WUR;

/* Estimated FLOPs of one run of the top-level graph, with every unknown
 * graph-input dimension taken as `dyn_dim`.  Subgraph bodies count once. */
kn_status kn_ops_estimate_flops(const kn_ir_model *m, int64_t dyn_dim,
                                double *flops, kn_error *err) KN_WUR;

/* Static cost of node `i` of the top-level graph from its values' inferred
 * types: FLOPs (as kn_ops_estimate_flops counts them) and the bytes of its
 * tensor inputs and outputs (unknown sizes count 0). */
void kn_ops_node_cost(const kn_ir_model *m, int32_t i, double *flops,
                      uint64_t *bytes_read, uint64_t *bytes_written);

/* ---- helpers for op implementations (src/ops/op_util.c) ----------------- */

/* Fail with "node 'N' (Op): <message>". */
kn_status kn_op_fail(kn_op_ctx *ctx, kn_status st, const char *fmt, ...)
    KN_PRINTF(3, 4);

/* Input i as a tensor, NULL when omitted/absent or not a tensor. */
const kn_tensor *kn_in(const kn_op_ctx *ctx, int32_t i);
/* Input tensor i, failing with a clear message when it is omitted or is
 * not a tensor (required inputs are checked by the executor, so this is
 * mostly for optional-but-needed inputs). */
kn_status kn_in_req(kn_op_ctx *ctx, int32_t i, const kn_tensor **out) KN_WUR;
/* Input tensor i of an op that needs it: like kn_in_req, except that during
 * static inference an input whose value is not known yet gives *t = NULL
 * and KN_OK (infer then leaves what depends on it unknown). */
kn_status kn_in_need(kn_op_ctx *ctx, int32_t i, const kn_tensor **t) KN_WUR;
/* Output i as a tensor slot (sets its kind to TENSOR). */
kn_tensor *kn_out(kn_op_ctx *ctx, int32_t i);
/* In infer: declare output i as a tensor with dtype and shape (rank -1 or
 * dims -1 for unknown parts; dims NULL: all dims unknown). */
void kn_out_set(kn_op_ctx *ctx, int32_t i, kn_dtype dtype, int32_t rank,
                const int64_t *dims);
/* Same shape and dtype as input `in` (dtype overridden when not 0). */
void kn_out_like(kn_op_ctx *ctx, int32_t out, int32_t in, kn_dtype dtype);
/* In run: allocate output i (for outputs infer could not size). */
kn_status kn_out_alloc(kn_op_ctx *ctx, int32_t i, kn_dtype dtype, int32_t rank,
                       const int64_t *dims) KN_WUR;
/* In run: output i, which infer must have sized (the executor allocated
 * it); NULL after failing with KN_ERR_INTERNAL when it was not. */
kn_tensor *kn_out_ready(kn_op_ctx *ctx, int32_t i);
/* In run, before reference code that accumulates into output i: zeroes it
 * unless the output contract already has (ctx->rt == NULL: the reference
 * tactic's outputs are zero); a fast tactic's fallback needs it. */
void kn_out_zero_for_ref(kn_op_ctx *ctx, int32_t i);
/* True when output i is present on the node (given and not an empty name),
 * i.e. someone reads it; ops skip optional outputs nobody wants. */
bool kn_out_wanted(const kn_op_ctx *ctx, int32_t i);

/* True when every dim of t is known (rank >= 0, dims >= 0). */
bool kn_shape_known(const kn_tensor *t);
/* True when t's values are available (runtime, or a constant at load). */
static inline bool kn_has_data(const kn_tensor *t) {
  return t && (t->data != NULL || (t->rank >= 0 && kn_shape_known(t) &&
                                   kn_tensor_numel(t) == 0));
}

/* Attributes */
const kn_attr *kn_attr_get(const kn_op_ctx *ctx, const char *name);
int64_t kn_attr_int(const kn_op_ctx *ctx, const char *name, int64_t dflt);
float kn_attr_float(const kn_op_ctx *ctx, const char *name, float dflt);
/* String attribute, or dflt when absent. */
const char *kn_attr_str(const kn_op_ctx *ctx, const char *name,
                        const char *dflt);
/* Integer list: returns count (0 when absent), *vals points into the attr. */
int32_t kn_attr_ints(const kn_op_ctx *ctx, const char *name,
                     const int64_t **vals);
int32_t kn_attr_floats(const kn_op_ctx *ctx, const char *name,
                       const float **vals);

/* [N, H, W, C] dims -> [N, C, H, W] and back (4 entries; in == out
 * allowed): the channels-last steps' view of their NCHW base ops. */
static inline void kn_dims_to_nchw(const int64_t *nhwc, int64_t *nchw) {
  int64_t d[4] = {nhwc[0], nhwc[3], nhwc[1], nhwc[2]};
  memcpy(nchw, d, sizeof d);
}
static inline void kn_dims_to_nhwc(const int64_t *nchw, int64_t *nhwc) {
  int64_t d[4] = {nchw[0], nchw[2], nchw[3], nchw[1]};
  memcpy(nhwc, d, sizeof d);
}

/* Normalise axis into [0, rank) (accepting [-rank, rank)); fails clearly. */
kn_status kn_axis(kn_op_ctx *ctx, int64_t axis, int32_t rank,
                  int32_t *out) KN_WUR;

/* Read an integer tensor (any int dtype) of at most `max` elements into
 * vals; *n receives the count.  Fails when it has more elements. */
kn_status kn_read_ints(kn_op_ctx *ctx, const kn_tensor *t, int64_t *vals,
                       int64_t max, int64_t *n) KN_WUR;
/* Scalar value of a (one-element) tensor as double / int64. */
double kn_scalar_f64(const kn_tensor *t);
int64_t kn_scalar_i64(const kn_tensor *t);

/* Numpy broadcasting of two shapes; unknown dims (-1) propagate.  Fails
 * with a message naming both shapes when they do not broadcast. */
kn_status kn_broadcast(kn_op_ctx *ctx, int32_t ra, const int64_t *da,
                       int32_t rb, const int64_t *db, int32_t *rout,
                       int64_t *dout) KN_WUR;
/* Strides (in elements) for reading a tensor of shape (r, d) broadcast to
 * (rout, dout): 0 along broadcast dims.  out_strides has rout entries. */
void kn_broadcast_strides(int32_t r, const int64_t *d, int32_t rout,
                          const int64_t *dout, int64_t *out_strides);
/* Product of dims[from..to) (no overflow check: for known, allocated
 * shapes; kn_shape_numel checks). */
int64_t kn_dims_prod(const int64_t *dims, int32_t from, int32_t to);
/* Contiguous strides of a shape. */
void kn_strides(int32_t rank, const int64_t *dims, int64_t *strides);

/* Copy n elements of dtype dt from src[si..] to dst[di..] (element
 * indices).  Strings are duplicated (NULL reads as "") and what dst held
 * is freed; fails with KN_ERR_OOM when a copy cannot be made. */
kn_status kn_copy_elems(kn_op_ctx *ctx, void *dst, int64_t di, const void *src,
                        int64_t si, int64_t n, kn_dtype dt) KN_WUR;
/* The whole of numeric tensor t as a new float32 buffer (kn_convert; the
 * caller frees it).  NULL when out of memory. */
float *kn_tensor_f32(const kn_tensor *t);

/* dtype check: fails unless t->dtype is in the zero-terminated list. */
kn_status kn_check_dtype(kn_op_ctx *ctx, int32_t input, const kn_tensor *t,
                         const kn_dtype *allowed) KN_WUR;

/* LayerNormalization of `rows` contiguous rows of len floats (x == y
 * allowed) with `len` scale and bias values, as the reference op computes
 * it (norm.c: mean and variance in double); FusedGemm's norm uses it. */
void kn_ref_layernorm_rows(const float *x, float *y, int64_t rows, int64_t len, double eps,
                           const float *scale, const float *bias);

#define KN_OP_END {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL}

#endif
