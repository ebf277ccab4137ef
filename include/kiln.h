/*
 * kiln — ONNX models in, fast inference out.  The one public header.
 *
 * Conventions
 *  - Every fallible function returns a kn_status; on failure it fills the
 *    caller's kn_error (may be NULL) with one line: what failed, where
 *    (file, node, input) and what was expected.
 *  - Objects come in create/free (or load/free) pairs.  Freeing NULL is a no-op.
 *  - A kn_model is read-only after loading and may be shared between threads;
 *    a kn_context holds the per-run state and belongs to one thread at a time.
 *  - Tensors are dense, row-major (C order), with no padding between
 *    elements.  Element counts and byte sizes are int64/size_t.
 */
#ifndef KILN_H
#define KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KN_VERSION_MAJOR 0
#define KN_VERSION_MINOR 1
#define KN_VERSION_PATCH 0
#define KN_VERSION_STRING "0.1.0"

/* Largest tensor rank kiln handles; deeper tensors are refused at load. */
#define KN_MAX_RANK 8

typedef enum kn_status {
  KN_OK = 0,
  KN_ERR_INVALID_ARG,  /* a caller passed something unusable            */
  KN_ERR_IO,           /* a file could not be opened, read or written   */
  KN_ERR_PARSE,        /* a file is truncated, corrupt or not ONNX       */
  KN_ERR_UNSUPPORTED,  /* an op, opset, dtype or feature kiln lacks     */
  KN_ERR_SHAPE,        /* a shape does not fit what the op expects       */
  KN_ERR_DTYPE,        /* a dtype does not fit what the op expects       */
  KN_ERR_MISSING,      /* a required input or value was not given        */
  KN_ERR_LIMIT,        /* a size exceeds kiln's limits (memory, rank)    */
  KN_ERR_OOM,          /* the allocator failed                           */
  KN_ERR_INTERNAL,     /* a bug in kiln                                  */
  KN_ERR_CANCELLED     /* a run stopped by its cancel hook or deadline  */
} kn_status;

/* Element types.  The numbers are those of ONNX's TensorProto.DataType. */
typedef enum kn_dtype {
  KN_DTYPE_UNDEFINED = 0,
  KN_DTYPE_F32 = 1,
  KN_DTYPE_U8 = 2,
  KN_DTYPE_I8 = 3,
  KN_DTYPE_U16 = 4,
  KN_DTYPE_I16 = 5,
  KN_DTYPE_I32 = 6,
  KN_DTYPE_I64 = 7,
  KN_DTYPE_STRING = 8, /* elements are char* (NUL-terminated, owned by the tensor) */
  KN_DTYPE_BOOL = 9,   /* one byte per element, 0 or 1 */
  KN_DTYPE_F16 = 10,
  KN_DTYPE_F64 = 11,
  KN_DTYPE_U32 = 12,
  KN_DTYPE_U64 = 13,
  KN_DTYPE_BF16 = 16
} kn_dtype;

/* Room for one error line. */
typedef struct kn_error {
  kn_status status;
  char msg[1024];
} kn_error;

/*
 * A dense tensor.  `data` holds numel(dims) elements of `dtype`.
 * When `owned` is non-zero the tensor owns `data` (and, for strings, every
 * element) and kn_tensor_release frees them; otherwise the caller does.
 * A rank-0 tensor is a scalar with one element.
 */
typedef struct kn_tensor {
  kn_dtype dtype;
  int32_t rank;
  int64_t dims[KN_MAX_RANK];
  void *data;
  size_t nbytes;
  int32_t owned;
} kn_tensor;

/* Name and size in bytes of one element ("float32", 4); NULL / 0 when unknown. */
const char *kn_dtype_name(kn_dtype dtype);
size_t kn_dtype_size(kn_dtype dtype);

/* Number of elements (1 for a scalar). */
int64_t kn_tensor_numel(const kn_tensor *t);

/* Allocate an owned, zero-filled tensor.  Fails with KN_ERR_LIMIT when the
 * size overflows or exceeds kiln's per-tensor limit. */
kn_status kn_tensor_alloc(kn_tensor *t, kn_dtype dtype, int32_t rank,
                          const int64_t *dims, kn_error *err)
    __attribute__((warn_unused_result));

/* Free what an owned tensor holds and reset it to an empty tensor. */
void kn_tensor_release(kn_tensor *t);

/* Read a serialized ONNX TensorProto (.pb) or a NumPy .npy file (chosen by
 * the file's contents).  `name_out`, when not NULL, receives the tensor's
 * name (malloc'd, may be NULL); the caller frees it. */
kn_status kn_tensor_read_file(const char *path, kn_tensor *out, char **name_out,
                              kn_error *err) __attribute__((warn_unused_result));
kn_status kn_tensor_write_pb(const char *path, const kn_tensor *t,
                             const char *name, kn_error *err)
    __attribute__((warn_unused_result));
kn_status kn_tensor_write_npy(const char *path, const kn_tensor *t,
                              kn_error *err) __attribute__((warn_unused_result));

/* ---- models ------------------------------------------------------------ */

typedef struct kn_model kn_model;

/* Load an ONNX model or a kiln engine file (told apart by their first
 * bytes).  ONNX external data is resolved relative to the model's folder
 * and refused when it points outside it. */
kn_status kn_model_load(const char *path, kn_model **out, kn_error *err)
    __attribute__((warn_unused_result));
/* Same from memory.  `base_dir` (may be NULL) resolves external data;
 * `label` names the model in messages. */
kn_status kn_model_load_buffer(const void *data, size_t size,
                               const char *base_dir, const char *label,
                               kn_model **out, kn_error *err)
    __attribute__((warn_unused_result));
void kn_model_free(kn_model *model);

/* Shape and dtype of a graph input or output.  dims[i] < 0 is a dynamic
 * dimension; dim_params[i] is its symbolic name or NULL.  rank < 0: unknown. */
typedef struct kn_value_info {
  const char *name;
  kn_dtype dtype;
  int32_t rank;
  int64_t dims[KN_MAX_RANK];
  const char *dim_params[KN_MAX_RANK];
} kn_value_info;

int32_t kn_model_input_count(const kn_model *model);
int32_t kn_model_output_count(const kn_model *model);
kn_status kn_model_input_info(const kn_model *model, int32_t index,
                              kn_value_info *out);
kn_status kn_model_output_info(const kn_model *model, int32_t index,
                               kn_value_info *out);
/* The value input `index` is pinned to (kn_build_options.fixed), as given
 * ("16000", "1,0,2"); NULL when it is not pinned. */
const char *kn_model_input_fixed(const kn_model *model, int32_t index);

/* Summary used by `kiln inspect`.  Dynamic dimensions count as 1. */
typedef struct kn_model_stats {
  int64_t nodes;          /* top-level nodes, i.e. steps once built */
  int64_t onnx_nodes;     /* top-level nodes as imported (-1: an engine) */
  uint64_t arena_bytes;   /* activation arena of the memory plan (0: not built) */
  uint64_t lower_bound_bytes; /* most bytes live at any one step */
  uint64_t naive_activation_bytes; /* sum of all planned intermediates */
  int64_t params;         /* elements in initializers and Constant nodes */
  int64_t param_bytes;
  double flops;           /* estimated for one run, 1 multiply-add = 2 */
  int64_t ir_version;
  int64_t opset;          /* default-domain opset */
  /* tactic selection of the build (0 for an engine or a model not built):
   * steps offering a choice, step shapes timed now (a repeated shape
   * once), steps decided by the timing cache, and steps where the winner
   * is not the heuristic's first choice */
  int32_t tactic_choices, tactic_timed, tactic_cached, tactic_changed;
  double tactic_seconds;  /* spent timing */
} kn_model_stats;
kn_status kn_model_stats_get(const kn_model *model, kn_model_stats *out,
                             kn_error *err);
/* Op histogram: calls `fn` once per distinct op type with its count,
 * sorted by decreasing count. */
void kn_model_op_histogram(const kn_model *model,
                           void (*fn)(const char *op, int64_t count, void *arg),
                           void *arg);

/* ---- the machine ------------------------------------------------------- */

/* What kiln knows of a machine (`kiln probe`; docs/MACHINE.md): the IO
 * model's capacities, bandwidths and peaks.  Index [0] of each pair is one
 * thread (one core), [1] all threads together.  A rate of 0 means "not
 * available" (no such instruction, or not measured). */
#define KN_MACHINE_MAX_LEVELS 6
#define KN_MACHINE_FAMILIES 8 /* kernel families with a fitted factor */
typedef struct kn_mem_level {
  char name[8];         /* "L1", "L2", "L3", "DRAM" (caches are data caches) */
  uint64_t bytes;       /* capacity of one instance (DRAM: physical memory) */
  uint32_t line_bytes;  /* transfer unit */
  int32_t shared_by;    /* logical CPUs sharing one instance */
  double read_gbs[2];   /* sustained read bandwidth, GB/s (1e9 bytes/s) */
  double write_gbs[2];  /* sustained write bandwidth (ordinary stores) */
} kn_mem_level;

typedef struct kn_machine {
  char cpu[64];         /* CPU model as the CPU names itself */
  char vendor[16];      /* "AuthenticAMD", "GenuineIntel", ... */
  int32_t family, model;
  uint64_t features;    /* CPU feature bits (docs/ENGINE_FORMAT.md numbers them) */
  int32_t cores;        /* physical cores kiln may use */
  int32_t threads_per_core; /* SMT: logical CPUs per core */
  double fp32_gflops[2];    /* fused multiply-add peak, GFLOP/s */
  double bf16_gflops[2];    /* bf16 dot products into fp32 (vdpbf16ps) */
  double int8_gops[2];      /* u8 x s8 dot products into int32 (vpdpbusd) */
  double dram_copy_gbs[2];  /* memcpy, read + write bytes counted */
  int32_t n_levels;         /* memory levels, nearest first; the last is DRAM */
  kn_mem_level levels[KN_MACHINE_MAX_LEVELS];
  char source[16];          /* "probe" or "fallback" (where the numbers came from) */
  double probe_seconds;     /* how long the probe took (0: not probed) */
  /* Per kernel family (docs/MACHINE.md lists them), what a step of the
   * family takes on this machine over the IO model's roofline time for it
   * (its arithmetic at the peak or its bytes at the bandwidths, whichever
   * is longer), one thread and all threads: `kiln probe` fits them from
   * calibration runs.  0: not measured (the model then uses 1). */
  double factors[KN_MACHINE_FAMILIES][2];
  /* Where and when the factors were fitted (factors_cpu empty: never). */
  char factors_cpu[64];     /* the CPU's model name */
  int32_t factors_family, factors_model; /* its family and model numbers */
  char factors_isa[16];     /* the kernels' ISA: "avx512", "avx2", ... */
  char factors_when[24];    /* UTC, "2026-12-08T01:40:00Z" */
  double factors_seconds;   /* how long the calibration runs took */
} kn_machine;

/* Measure the machine running this call: topology and capacities from the
 * CPU and OS (the L3 checked by measurement: VMs report the host's), peaks
 * and bandwidths by timing register-only and streaming loops on 1 thread
 * and on `threads` threads (0: every CPU this process may use).  Takes a
 * few seconds; run it on a quiet machine. */
kn_status kn_machine_probe(int32_t threads, kn_machine *out, kn_error *err)
    __attribute__((warn_unused_result));
/* The shipped description used when probing is off: this CPU's topology
 * and capacities as the OS reports them, nominal rates for its ISA. */
void kn_machine_fallback(kn_machine *out);
/* Read / write a description as JSON (docs/MACHINE.md).  Loading checks
 * every field and names the first bad one. */
kn_status kn_machine_load(const char *path, kn_machine *out, kn_error *err)
    __attribute__((warn_unused_result));
kn_status kn_machine_save(const kn_machine *m, const char *path, kn_error *err)
    __attribute__((warn_unused_result));
/* Whether m describes the CPU running this call (model name and features). */
int32_t kn_machine_is_this_cpu(const kn_machine *m);
/* The description builds use when given none: $KILN_MACHINE (a file, or
 * "fallback"); else the cached probe (~/.cache/kiln/machine.json, under
 * $XDG_CACHE_HOME when set) when it describes this CPU; else a probe now,
 * saved to that cache; with KILN_PROBE=0, the fallback instead of probing. */
kn_status kn_machine_default(kn_machine *out, kn_error *err)
    __attribute__((warn_unused_result));
/* The cache file's path into buf ("" when no home directory is known). */
const char *kn_machine_cache_path(char *buf, size_t len);

/* ---- building ---------------------------------------------------------- */

/* kn_build_options.tactics */
enum { KN_TACTICS_DEFAULT = 0, KN_TACTICS_TIMED = 1, KN_TACTICS_HEURISTIC = 2 };

/* How `kn_model_build` turns a loaded model into an optimized engine. */
typedef struct kn_calibration kn_calibration; /* int8 ranges (below) */
typedef struct kn_build_options {
  /* Fixed sizes for dynamic inputs, each "NAME=1x3x224x224". */
  const char *const *shapes;
  int32_t n_shapes;
  /* Dynamic ranges, each "NAME=MIN:OPT:MAX" with three shapes such as
   * 1x3x32x32:1x3x224x224:8x3x224x224: the input stays dynamic within the
   * range (memory is planned for MAX); a run outside it is refused. */
  const char *const *profiles;
  int32_t n_profiles;
  /* Optimization passes not to run, by name (`kiln build --help` lists them). */
  const char *const *disabled_passes;
  int32_t n_disabled_passes;
  /* Largest constant (bytes) that constant folding may create; 0: 16 MiB. */
  uint64_t fold_max_bytes;
  /* Cap on the activation arena in bytes; 0: none.  Above it the planner
   * runs early steps patch by patch (bands of rows, halos recomputed),
   * chosen by the IO model's predicted cost (docs/MEMORY.md); the build
   * fails only when no plan fits. */
  uint64_t workspace;
  /* Skip the optimization passes (the reference graph, as imported). */
  int32_t no_optimize;
  /* Give every step the reference kernel (tactic 0) instead of choosing
   * fast kernels: the oracle the fast kernels are compared with. */
  int32_t reference_kernels;
  /* The machine to build for (tile sizes, tactics); NULL: kn_machine_default. */
  const kn_machine *machine;
  /* Tactics: where a step has several (a 3x3 convolution: Winograd or
   * GEMM), the best `tactic_candidates` (0: 3) by the IO model are timed on
   * the step's shapes with `threads` threads (0: kn_default_threads) and
   * the fastest wins (KN_TACTICS_TIMED); KN_TACTICS_HEURISTIC takes the
   * first choice instead, for fast and deterministic builds;
   * KN_TACTICS_DEFAULT: $KILN_TACTICS ("timed" or "heuristic"), else timed.
   * timing_cache: a file of earlier timings to reuse and extend
   * (docs/MACHINE.md); NULL: none. */
  int32_t tactics;
  int32_t tactic_candidates;
  int32_t threads;
  const char *timing_cache;
  /* Reduced precision (docs/PRECISION.md).  precision: what the steps that
   * can run in reduced precision (GEMMs and convolutions with constant
   * weights) run in: a kn_precision (KN_PRECISION_FP32 by default), or
   * KN_PRECISION_BEST: per step, the precision the IO model predicts
   * fastest on the build's machine among those it has an instruction for
   * (int8 only where `calibration` has the step's input).  Steps of other
   * ops stay fp32.  int8 needs `calibration` (borrowed during the build):
   * without it the build is refused. */
  int32_t precision;
  /* Per-step overrides, each "PATTERN=PRECISION" (fp32, bf16, fp16, int8):
   * PATTERN an ONNX node name or a glob (fnmatch: * ? [...]) matched
   * against each step's name and the ONNX nodes it covers; the last
   * override that matches wins.  A pattern that matches no step fails the
   * build (a typo would otherwise pass silently). */
  const char *const *layer_precisions;
  int32_t n_layer_precisions;
  /* Weight-only compression of the steps left in fp32: KN_WEIGHTS_FP32
   * (0: none), KN_WEIGHTS_FP16 or KN_WEIGHTS_INT8 (per output channel):
   * weights stored compressed, activations and arithmetic in fp32. */
  int32_t weights;
  const kn_calibration *calibration;
  /* Pinned inputs, each "NAME=VALUE" (a scalar, or a one-element input) or
   * "NAME=V1,V2,..." (every element of an input of static shape, in
   * order): the value is folded into the graph at build (an If it decides
   * is inlined, a Shape it sizes folds), and the engine refuses any other
   * value for that input with an error naming both.  The input stays one
   * of the model's inputs, so callers pass it as before. */
  const char *const *fixed;
  int32_t n_fixed;
} kn_build_options;

/* kn_build_options.precision, kn_step_info.precision */
typedef enum kn_precision {
  KN_PRECISION_FP32 = 0,
  KN_PRECISION_BF16 = 1,   /* bf16 weights, activations rounded to bf16, fp32 sums */
  KN_PRECISION_FP16 = 2,   /* fp16 weights, activations rounded to fp16, fp32 sums */
  KN_PRECISION_INT8 = 3,   /* u8 activations x s8 weights, exact s32 sums */
  KN_PRECISION_FP16_WEIGHTS = 4, /* weight-only: fp16 weights, fp32 compute */
  KN_PRECISION_INT8_WEIGHTS = 5, /* weight-only: s8 weights, fp32 compute */
  KN_PRECISION_COUNT,
  KN_PRECISION_BEST = 64   /* build option only */
} kn_precision;
/* kn_build_options.weights */
enum { KN_WEIGHTS_FP32 = 0, KN_WEIGHTS_FP16 = 1, KN_WEIGHTS_INT8 = 2 };
/* "fp32", "bf16", "fp16", "int8", "fp16-weights", "int8-weights", "best";
 * NULL for anything else. */
const char *kn_precision_name(int32_t precision);
/* The inverse (exact names); -1 when unknown. */
int32_t kn_precision_from_name(const char *name);

/* Zero/default options. */
void kn_build_options_init(kn_build_options *o);

/* Optimize the model in place: fix the given input shapes, run the graph
 * passes and plan memory.  Contexts created afterwards run the optimized
 * graph.  Fails on a malformed or unknown --shape, a pass error, or a
 * workspace too small for any plan the memory planner can make. */
kn_status kn_model_build(kn_model *model, const kn_build_options *options,
                         kn_error *err) __attribute__((warn_unused_result));

/* Write a built model as an engine file (docs/ENGINE_FORMAT.md):
 * kn_model_load reads it back quickly: constants stay in the file mapping;
 * the prepacked weights for this CPU are copied once into huge pages. */
kn_status kn_model_save(const kn_model *model, const char *path, kn_error *err)
    __attribute__((warn_unused_result));

/* One step of a model: a node of its (optimized, once built) graph. */
typedef struct kn_step_info {
  const char *name;
  const char *op;       /* op type, e.g. "FusedConv" */
  const char *domain;   /* "" for ONNX ops, "kiln" for fused ones */
  const char *covers;   /* the ONNX node names it computes, comma-separated */
  const char *tactic;   /* the kernel that runs it */
  char tiling[64];      /* its cache blocking, chosen for the build's machine
                           ("kc 256 mc 144 nc 3072"); "" when it has none */
  int32_t n_outputs;
  kn_value_info outputs[4]; /* the first (up to) four outputs */
  int32_t n_inputs;         /* tensor inputs (absent optional ones skipped) */
  const char *inputs[8];    /* the first (up to) eight inputs' value names: the
                               graph's edges, to a producing step's output */
  double flops;
  uint64_t bytes_read, bytes_written; /* tensor inputs and outputs */
  uint64_t arena_live_bytes; /* the memory plan's arena bytes in use while the
                                step runs (its inputs, outputs and every tensor
                                live across it); 0 when not planned */
  int32_t precision;         /* kn_precision the step runs in */
  float input_scale;         /* int8 steps: the u8 quantization of input 0 */
  int32_t input_zero;
} kn_step_info;

int32_t kn_model_step_count(const kn_model *model);
kn_status kn_model_step_info(const kn_model *model, int32_t index, kn_step_info *out);
/* Report steps for these input shapes: kn_model_step_info's output dims,
 * FLOPs and bytes, kn_model_step_io and the diagrams are then inferred
 * from shapes[0..n) (model inputs by name, each fitting the input's static
 * shape; inputs not named keep theirs) instead of the static types, in
 * which a dynamic dimension counts as 1.  A profile of an engine built
 * without --shape calls it with the shapes it ran.  n = 0 goes back to the
 * static types; kn_model_build drops it.  Running is unaffected; not safe
 * while another thread reads the model's step reports. */
kn_status kn_model_set_report_shapes(kn_model *model, int32_t n, const kn_value_info *shapes,
                                     kn_error *err) __attribute__((warn_unused_result));

/* The IO model's view of a step (docs/ARCHITECTURE.md, "The IO model"): the bytes its
 * loop nest moves across each boundary of the memory hierarchy with the
 * tiles that fit each level, and the time that predicts on the machine
 * the model was built for (its description; for a model not built, this
 * machine as the OS reports it, with the fallback's rates). */
typedef struct kn_step_io {
  double flops;
  double bytes[4];      /* registers<->L1, L1<->L2, L2<->L3, L3<->DRAM */
  double predicted_us;  /* factor x max(compute, each boundary) + a per-step overhead */
  double time_us[6];    /* compute, each boundary (as bytes[]), the overhead */
  double factor;        /* the machine's factor for the step's kernel family (1: none) */
  const char *bound;    /* what limits it: "compute", "L1", "L2", "L3", "DRAM",
                           "overhead" */
  int32_t modelled;     /* 1: from the op's loop nest; 0: its tensors streamed once */
  double intensity;     /* arithmetic intensity: FLOPs per byte across the farthest
                           boundary it crosses (DRAM's, unless its data stays in a cache) */
  const char *layout;   /* "NHWC" (channels-last steps), "NCHW" (other 4-D
                           convolutions and pools), "" (no image layout) */
} kn_step_io;
kn_status kn_model_step_io(const kn_model *model, int32_t index, int32_t threads,
                           kn_step_io *out);
/* The machine description a model's steps are predicted for: the one it
 * was built for (kept in engines), else the fallback.  For rooflines and
 * reports. */
void kn_model_machine(const kn_model *model, kn_machine *out);
/* The choices the builder made, one line each, kept in engines: tactics
 * chosen by timing ("STEP: TACTIC 216.7 us; conv_igemm_nhwc 430.2 us")
 * and fusions with the IO model's predicted saving ("STEP: fuses 3 ONNX
 * ops, saving 784.0 KiB at each of 3 boundaries (registers to L2) and
 * 9.8 us predicted"). */
int32_t kn_model_decision_count(const kn_model *model);
const char *kn_model_decision(const kn_model *model, int32_t index);

/* The step's diagram as compact JSON (docs/MACHINE.md): *json is malloc'd
 * (free()), NULL when the step has no loop nest. */
kn_status kn_model_step_diagram(const kn_model *model, int32_t index, int32_t threads,
                                char **json);
/* Engine format version of a model loaded from an engine (0 otherwise),
 * and the format version this kiln writes. */
uint32_t kn_model_format_version(const kn_model *model);
uint32_t kn_engine_format_version(void);

/* ---- running ----------------------------------------------------------- */

typedef struct kn_context kn_context;

kn_status kn_context_create(const kn_model *model, kn_context **out,
                            kn_error *err) __attribute__((warn_unused_result));
void kn_context_free(kn_context *ctx);

/* Bind graph input `index` (non-initializer inputs, in graph order).  The
 * tensor is borrowed: it must stay valid until the next run completes.
 * Shape and dtype are checked against the model here. */
kn_status kn_context_set_input(kn_context *ctx, int32_t index,
                               const kn_tensor *t, kn_error *err)
    __attribute__((warn_unused_result));
/* Same, by input name; KN_ERR_INVALID_ARG when no input has that name. */
kn_status kn_context_set_input_by_name(kn_context *ctx, const char *name,
                                       const kn_tensor *t, kn_error *err)
    __attribute__((warn_unused_result));

/* Cap the bytes of intermediate tensors live at once during a run; a run
 * that would exceed it fails with KN_ERR_LIMIT naming the node.  The
 * default is the machine's physical memory. */
void kn_context_set_memory_limit(kn_context *ctx, uint64_t bytes);

/* Called during a run after each step with every tensor the step made,
 * named as in the graph; the tensor is valid only during the call.  For
 * debugging and per-layer comparison (`kiln compare --per-layer`).  NULL
 * turns it off. */
typedef void (*kn_tensor_observer)(const char *name, const kn_tensor *t, void *arg);
void kn_context_set_observer(kn_context *ctx, kn_tensor_observer fn, void *arg);

/* Threads the context's runs use (>= 1).  The default is
 * KILN_NUM_THREADS when set, else the CPUs this process may use.  A
 * context on 1 thread starts no worker thread; one on N keeps N - 1
 * workers, which spin briefly between steps and then sleep.  Results are
 * bit-identical for a given thread count.  Fails on n < 1 or when the
 * threads cannot be started. */
kn_status kn_context_set_threads(kn_context *ctx, int32_t n, kn_error *err)
    __attribute__((warn_unused_result));
int32_t kn_context_threads(const kn_context *ctx);

/* Profiling.  While on, each run records when every top-level step ran
 * and on which threads: one span on thread 0 (the thread that called
 * kn_context_run) from the step's start to its end, then one for each pool
 * worker (threads 1 ..) that ran part of it, from the start of its first
 * task to the end of its last.  Times are CLOCK_MONOTONIC nanoseconds.  It
 * costs two clock reads per step and per loop and thread (ResNet-50: well
 * under 1% of a run; docs/CLI.md "kiln profile" has the figure). */
typedef struct kn_step_span {
  int32_t step;        /* index as in kn_model_step_info */
  int32_t thread;      /* 0: the caller; 1 .. threads - 1: the pool's workers */
  int64_t start_ns, end_ns;
  uint64_t heap_bytes; /* thread 0: intermediate tensors allocated outside the
                          arena, live after the step (0 for workers) */
} kn_step_span;
kn_status kn_context_set_profiling(kn_context *ctx, int32_t on, kn_error *err)
    __attribute__((warn_unused_result));
/* The last run's spans in the order the steps ran (each step's thread-0
 * span first); *spans is owned by the context and valid until the next
 * run.  0 when profiling was off or nothing has run. */
int32_t kn_context_spans(const kn_context *ctx, const kn_step_span **spans);

/* Cancellation, for servers and anything else that must bound a run's time.
 * Both are checked before every step of the graph and before every
 * iteration of a Loop or Scan body (so a model whose Loop never ends costs
 * one deadline, not a thread); a step already started runs to its end.  A
 * run that finds the hook returning nonzero, or CLOCK_MONOTONIC at or past
 * the deadline, returns KN_ERR_CANCELLED with a line naming the step it
 * stopped before; its outputs are not set and the context stays usable for
 * the next run.  The hook is called from the thread that called
 * kn_context_run (a few times per step: keep it cheap, e.g. an atomic
 * load).  fn NULL turns the hook off; deadline_ns 0 removes the deadline.
 * Both stay set for later runs until changed. */
typedef int32_t (*kn_cancel_fn)(void *arg);
void kn_context_set_cancel(kn_context *ctx, kn_cancel_fn fn, void *arg);
void kn_context_set_deadline(kn_context *ctx, int64_t deadline_ns);

/* Run the model on the bound inputs. */
kn_status kn_context_run(kn_context *ctx, kn_error *err)
    __attribute__((warn_unused_result));

/* Output `index` of the last run; owned by the context, valid until the
 * next run or kn_context_free.  NULL when out of range or not run. */
const kn_tensor *kn_context_output(const kn_context *ctx, int32_t index);

/* ---- int8 calibration (docs/CALIBRATION.md) ------------------------------
 * Per-tensor activation ranges for int8 engines, from a representative set
 * of inputs.  A calibrator runs a model's reference path (the graph as
 * imported, not optimized: its tensors keep the names the ONNX file gives
 * them, which is what a calibration table is keyed by) on each sample and
 * records, for every float tensor (each graph input and each node output
 * of the top-level graph; tensors inside If/Loop/Scan bodies are not
 * seen), its min, max and a histogram of |x|.  One pass per sample: the
 * histogram's range grows by merging whole bins.  A method then turns each
 * histogram into a symmetric threshold amax (int8 scale amax / 127); min
 * and max are kept for asymmetric (u8) use.  One calibrator can be
 * finished with several methods.  A calibrator holds a context: one thread
 * at a time. */
typedef enum kn_calib_method {
  KN_CALIB_MINMAX = 0,     /* amax = max |x| */
  KN_CALIB_PERCENTILE = 1, /* the P-th percentile of |x| (param P, 0 < P <= 100) */
  KN_CALIB_ENTROPY = 2,    /* TensorRT's: the threshold minimizing KL(P||Q), 128 levels */
  KN_CALIB_MSE = 3         /* the threshold minimizing int8's expected squared error */
} kn_calib_method;
#define KN_CALIB_DEFAULT_PERCENTILE 99.99
#define KN_CALIB_DEFAULT_BINS 2048

/* "minmax", "percentile", "entropy", "mse"; NULL when out of range. */
const char *kn_calib_method_name(kn_calib_method method);
/* The method of that name; -1 when none is. */
int32_t kn_calib_method_from_name(const char *name);

typedef struct kn_calib_options {
  int32_t bins;    /* |x| histogram bins per tensor, 128 .. 1048576; 0: 2048 */
  int32_t threads; /* threads of the calibrator's context; 0: its default */
} kn_calib_options;
void kn_calib_options_init(kn_calib_options *o);

typedef struct kn_calibrator kn_calibrator;
/* A calibrator over `model`, which it borrows (it must outlive the
 * calibrator): an ONNX model, loaded and either not built or built with
 * no_optimize (and any shapes); an engine or an optimized build is refused
 * (KN_ERR_INVALID_ARG), since its tensors are not the ONNX file's. */
kn_status kn_calibrator_create(const kn_model *model, const kn_calib_options *options,
                               kn_calibrator **out, kn_error *err)
    __attribute__((warn_unused_result));
/* Runs one sample: inputs[i] for graph input i (kn_model_input_count of
 * them, borrowed for the call), each checked as kn_context_set_input
 * checks it.  A bad input fails before anything is recorded; a run that
 * fails part-way leaves the calibrator unusable (later calls and
 * kn_calibrator_finish fail too). */
kn_status kn_calibrator_add_sample(kn_calibrator *cal, const kn_tensor *inputs,
                                   int32_t n_inputs, kn_error *err)
    __attribute__((warn_unused_result));
int64_t kn_calibrator_sample_count(const kn_calibrator *cal);
/* Values seen that were NaN or infinite (left out of every range). */
uint64_t kn_calibrator_nonfinite_count(const kn_calibrator *cal);
/* A table (*out, the caller frees it) from the samples so far, by `method`
 * with `param` (the percentile for KN_CALIB_PERCENTILE, 0 for its default
 * KN_CALIB_DEFAULT_PERCENTILE; ignored otherwise); tensors in the order
 * first seen (the graph inputs, then the nodes' outputs as they ran).
 * Fails with KN_ERR_MISSING before any sample. */
kn_status kn_calibrator_finish(const kn_calibrator *cal, kn_calib_method method,
                               double param, kn_calibration **out, kn_error *err)
    __attribute__((warn_unused_result));
void kn_calibrator_free(kn_calibrator *cal);

/* A calibration table (the "calibration cache"): one range per tensor
 * name.  Read-only once made; may be shared between threads. */
typedef struct kn_calib_range {
  const char *name;   /* the ONNX tensor name, owned by the table */
  float amax;         /* symmetric threshold, >= 0 */
  float scale;        /* amax / 127: int8 q = clamp(round(x / scale), -127, 127);
                         0 for a tensor that was all zeros */
  float min, max;     /* the values seen (min <= max; both 0 when all were
                         zeros or not finite) */
} kn_calib_range;

/* The text file (docs/CALIBRATION.md), written through PATH.tmp and a
 * rename so that a reader never sees half of it.  Floats are written with
 * 9 significant digits: loading gives back the same bits. */
kn_status kn_calibration_save(const kn_calibration *cal, const char *path, kn_error *err)
    __attribute__((warn_unused_result));
/* The same text, malloc'd and NUL-terminated (free()); NULL when out of memory. */
char *kn_calibration_to_text(const kn_calibration *cal);
/* Reads a file strictly: anything malformed, truncated (no "end" line) or
 * duplicated fails with KN_ERR_PARSE and one line "FILE:LINE: what was
 * wrong; expected what"; KN_ERR_IO when it cannot be read. */
kn_status kn_calibration_load(const char *path, kn_calibration **out, kn_error *err)
    __attribute__((warn_unused_result));
/* The same from memory; `label` names it in messages. */
kn_status kn_calibration_parse(const char *text, size_t size, const char *label,
                               kn_calibration **out, kn_error *err)
    __attribute__((warn_unused_result));
void kn_calibration_free(kn_calibration *cal);

/* What made the table: its method (and the percentile in *param when not
 * NULL, else 0; rounded to a float, as the file keeps it) and the number
 * of samples. */
kn_calib_method kn_calibration_method(const kn_calibration *cal, double *param);
int64_t kn_calibration_samples(const kn_calibration *cal);
int32_t kn_calibration_count(const kn_calibration *cal);
/* Entry `index` (0 .. count - 1, in file order); KN_ERR_INVALID_ARG when out
 * of range. */
kn_status kn_calibration_entry(const kn_calibration *cal, int32_t index, kn_calib_range *out);
/* The range of the tensor named `name` (exact bytes); 1 when found, 0 when
 * the table has no such tensor (*out untouched).  O(log n): for builders. */
int32_t kn_calibration_get(const kn_calibration *cal, const char *name, kn_calib_range *out);

/* The asymmetric u8 quantization of a tensor with range r, as kiln's int8
 * steps and `kiln quantize` use it for activations:
 *   real = scale * (q - zero),  q = clamp(round(x / scale) + zero, 0, 255)
 * over [lo, hi] = [max(min, -amax), min(max, amax)] widened to hold 0 (so
 * that 0, ReLU's floor and padding, is exact), scale = (hi - lo) / 255 and
 * zero = round(-lo / scale) in [0, 255].  A range of all zeros gives
 * scale 1, zero 0. */
void kn_calib_u8_params(const kn_calib_range *r, float *scale, int32_t *zero);

/* ---- Q/DQ ONNX models (`kiln quantize`; docs/CALIBRATION.md) ----------------
 * kn_quantize_onnx_file writes the ONNX model at model_path as a Q/DQ model
 * (the "QDQ format" of ONNX Runtime's quantize_static) to out_path, through
 * out_path.tmp and a rename.  For every Conv, ConvTranspose, Gemm and
 * MatMul of the top-level graph whose weight (input 1) is an initializer:
 *  - its data input (input 0) gets QuantizeLinear -> DequantizeLinear, u8
 *    per tensor with kn_calib_u8_params of that tensor's entry in cal (one
 *    pair per tensor, shared by the ops it feeds);
 *  - its float weight W becomes an int8 initializer W_quantized, symmetric
 *    per output channel (Conv axis 0, ConvTranspose axis 1, MatMul the last
 *    axis, Gemm axis 0 with transB else 1): scale max|w| / 127 (1 for a
 *    channel of zeros), q = clamp(round half to even(w / scale), -127, 127),
 *    a float scale and an int8 zero point of zeros, read by a
 *    DequantizeLinear with `axis`; per tensor (one scale) when the model's
 *    default-domain opset is below 13, which has no `axis`.  W itself is
 *    dropped once nothing else reads it (and so is its graph input, when
 *    the model lists it as one).  Biases stay float.
 * An op whose input has no entry in cal (or whose weight is not float32)
 * is left in fp32, and note(line, note_arg) is called with one line naming
 * it and why (note may be NULL); so is a line when the opset forces
 * per-tensor weights, and one when weight inputs were dropped.
 * Everything else (other nodes and initializers, value_info, opsets,
 * metadata) is written as read; added names collide with none of the
 * model's.
 * Fails (nothing written) on a file that is not an ONNX model, a model
 * with external data (KN_ERR_UNSUPPORTED), a default-domain opset below 10
 * (no QuantizeLinear), a model with no op to quantize
 * (KN_ERR_INVALID_ARG) or none whose input cal has (KN_ERR_MISSING). */
typedef void (*kn_note_fn)(const char *line, void *arg);
typedef struct kn_quantize_report {
  int32_t candidates;        /* Conv/ConvTranspose/Gemm/MatMul with an initializer weight */
  int32_t ops_quantized;     /* of those, given Q/DQ inputs (the others: a note each) */
  int32_t activation_pairs;  /* QuantizeLinear -> DequantizeLinear pairs added */
  int32_t weights_quantized; /* int8 weights added, each with its DequantizeLinear */
  int32_t per_channel;       /* 1: weight scales per output channel; 0: per tensor */
  int64_t opset;             /* the model's default-domain opset (kept) */
  uint64_t bytes;            /* size of the file written */
} kn_quantize_report;
kn_status kn_quantize_onnx_file(const char *model_path, const kn_calibration *cal,
                                const char *out_path, kn_note_fn note, void *note_arg,
                                kn_quantize_report *report, kn_error *err)
    __attribute__((warn_unused_result));

/* ---- accuracy: validation gates and budgets (docs/CLI.md, docs/PRECISION.md)
 * What `kiln validate`, `kiln build`'s limits and accuracy budgets and
 * `kiln debug precision` measure, for any caller.  Accuracy is measured
 * against the reference path of the ONNX model: the graph as imported,
 * unoptimized (kn_model_build with no_optimize and the given shapes, as
 * `kiln compare` runs it), on the same inputs.  Per output and sample: the
 * largest |result - reference| of any element (infinite where one side is
 * NaN), the largest relative error |a - b| / max(|b|, 1e-4), and the
 * cosine similarity of the flattened outputs (1 when both are all zeros;
 * NaN when one side has a NaN, which fails any limit); the limits check
 * the worst over outputs and samples.  The top-1 accuracy is that of
 * output 0 (the argmax over its last axis, one prediction per row; batch-1
 * samples make one each) against labels, in percent.  Messages name the
 * CLI's options (--data, --against, ...) where a CLI user would fix the
 * problem with one, as kn_model_build's do. */

/* Reads sample `index`'s inputs into inputs[0 .. n_inputs) (zeroed
 * tensors), in graph input order; kiln releases them (kn_tensor_release)
 * when done.  May be called more than once for a sample (kn_validate reads
 * each sample once for the engine and once for the reference, so that only
 * one sample's inputs are in memory at a time).  A failure stops the caller
 * with err. */
typedef kn_status (*kn_sample_read_fn)(void *arg, int32_t index, kn_tensor *inputs,
                                       int32_t n_inputs, kn_error *err);

/* The inputs the measurements run on.  count 0: one sample generated from
 * `seed` as `kiln compare` generates inputs: floats uniform in [-1, 1),
 * integers and bools 0 or 1 (other dtypes are refused), a dynamic dim from
 * the call's shapes (NAME=DIMS: kn_validate_options.shapes,
 * kn_build_options.shapes), else (kn_validate) the smallest of the
 * engine's --profile range, else 1.  count > 0: `tensors` in memory,
 * sample k's input i at tensors[k * n_inputs + i] (borrowed for the call;
 * n_inputs must be the model's input count), or `read` (tensors NULL).
 * Each tensor is checked as kn_context_set_input checks it. */
typedef struct kn_samples {
  int32_t count;
  int32_t n_inputs;
  const kn_tensor *tensors;
  kn_sample_read_fn read;
  void *read_arg;
  /* count names (folders, files) naming a sample in messages and reports;
   * NULL: none.  source: where they come from ("DIR"), NULL: none. */
  const char *const *names;
  const char *source;
  uint64_t seed;
  /* Class labels for the top-1 accuracy: one per prediction (row of
   * output 0), in sample order; borrowed.  When given, top-1 is measured
   * (and their count must be the predictions') whether or not a bound uses
   * it.  labels_name names them in messages (their file); NULL: "labels". */
  const int64_t *labels;
  int64_t n_labels;
  const char *labels_name;
} kn_samples;
/* One generated sample, seed 1 (zeroes the rest). */
void kn_samples_init(kn_samples *s);

/* An accuracy budget against the reference path; each bound applies only
 * when its has_ flag is non-zero. */
typedef struct kn_accuracy_budget {
  int32_t has_min_cosine, has_max_abs_error, has_max_accuracy_drop;
  double min_cosine;        /* -1 .. 1: the worst output's cosine at least this */
  double max_abs_error;     /* >= 0: no output element off by more */
  double max_accuracy_drop; /* percentage points, 0 .. 100: top-1 at most this far below
                               the reference path's; needs labels */
} kn_accuracy_budget;

/* ---- validation gates (`kiln validate`, `kiln build`'s limits) ---------- */

/* kn_validate_report.gates, in this order */
enum {
  KN_GATE_MAX_P99_MS = 0, KN_GATE_MAX_RSS, KN_GATE_MAX_ABS_ERROR, KN_GATE_MIN_COSINE,
  KN_GATE_MAX_ACCURACY_DROP, KN_GATE_COUNT
};

typedef struct kn_validate_options {
  const char *label;          /* the engine's name in messages; NULL: "engine" */
  /* NAME=DIMS of dynamic inputs: the reference build's shapes and the
   * generated sample's dims */
  const char *const *shapes;
  int32_t n_shapes;
  int64_t runs;               /* timed runs on the first sample (>= 1; init: 20) */
  int64_t warmup;             /* untimed runs before them (init: 3) */
  int32_t threads;            /* of both runs; 0: kn_context's default */
  const kn_machine *machine;  /* of the reference build; NULL: kn_machine_default */
  /* the limits, each checked when its has_ flag is non-zero */
  int32_t has_max_p99_ms, has_max_rss;
  double max_p99_ms;          /* p99 latency of the timed runs, ms */
  uint64_t max_rss;           /* peak RSS, bytes (see kn_validate) */
  kn_accuracy_budget accuracy;
} kn_validate_options;
void kn_validate_options_init(kn_validate_options *o);

/* One limit, measured. */
typedef struct kn_gate {
  const char *name;     /* "max-p99-ms", "max-rss", "max-abs-error", "min-cosine",
                           "max-accuracy-drop" (static) */
  int32_t given;        /* the limit was set; the others are measured only */
  int32_t pass;         /* measured within the limit (a NaN fails) */
  int32_t upper;        /* 1: a maximum; 0: a minimum (min-cosine) */
  double measured, limit;
  double margin;        /* room left: limit - measured for a maximum, measured - limit
                           for a minimum; negative when it fails */
  int32_t output, sample; /* accuracy: the output and sample of the worst (-1: none) */
} kn_gate;

/* One output's accuracy, the worst over the samples. */
typedef struct kn_output_accuracy {
  char *name;           /* owned by the report */
  int32_t compared;     /* 0: not a numeric tensor (the rest is unset) */
  kn_dtype dtype;
  int32_t rank;
  int64_t dims[KN_MAX_RANK]; /* the reference's, as first compared */
  double max_abs_error, max_rel_error, cosine;
  int32_t worst_abs_sample, worst_cosine_sample;
} kn_output_accuracy;

typedef struct kn_validate_report {
  int32_t pass;          /* every limit given passes */
  int32_t samples;       /* samples run */
  int32_t threads;       /* threads of the runs */
  int64_t runs, warmup;
  char inputs[512];      /* the first sample's dims: "input=1x3x32x32", "no inputs" */
  int32_t n_outputs;
  kn_output_accuracy *outputs;
  double max_abs_error, min_cosine; /* the worst over outputs and samples */
  double *latency_ms;    /* the runs' times, sorted ascending (runs of them) */
  double latency_min_ms, latency_mean_ms, latency_p50_ms, latency_p90_ms, latency_p99_ms,
      latency_max_ms;    /* percentiles interpolate between order statistics */
  uint64_t peak_rss;     /* bytes */
  int64_t top1_rows;     /* predictions scored against labels (0: no labels) */
  double top1, reference_top1; /* percent; -1 without labels */
  kn_gate gates[KN_GATE_COUNT];
} kn_validate_report;

/* Measures `engine` (a built model: an engine file loaded, or an ONNX model
 * after kn_model_build; borrowed, not modified) against the reference path
 * of the ONNX model at model_path (the one it was built from), as `kiln
 * validate` does, and checks every limit given:
 *  1. the engine runs every sample (samples NULL: one generated, seed 1),
 *     keeping the outputs; on the first, after `warmup` untimed runs,
 *     `runs` timed ones; then the peak RSS is read: getrusage's high-water
 *     mark of the whole process (what it held before the call included),
 *     with the engine loaded and run, before the reference is loaded;
 *  2. the ONNX model is loaded, built as its reference path with
 *     options->shapes, checked to take the engine's inputs (names, dtypes,
 *     fixed dims) and give its outputs (names), run on the same samples,
 *     and freed.
 * KN_OK when everything was measured, whether or not the limits pass
 * (report->pass; each gate says); a failure to measure (a file, a sample,
 * a run, a mismatch between engine and model) returns its status with one
 * line in err.  report is filled (zeroed first, even on failure): release
 * it with kn_validate_report_release.  The engine and its samples are used
 * by one thread: not safe to call with a model another thread is building. */
kn_status kn_validate(const kn_model *engine, const char *model_path, const kn_samples *samples,
                      const kn_validate_options *options, kn_validate_report *report,
                      kn_error *err) __attribute__((warn_unused_result));
/* Frees what a report owns and zeroes it. */
void kn_validate_report_release(kn_validate_report *r);

/* ---- accuracy-budget builds (`kiln build --min-cosine ...`, `kiln debug
 * precision`) ----------------------------------------------------------------
 * A build in reduced precision (kn_build_options.precision, or
 * layer_precisions) that must keep an accuracy budget: the requested
 * build is measured against the fp32 reference path on the samples; when
 * it breaks the budget, some of its reduced-precision steps (the
 * candidates: the steps it runs in bf16, fp16 or int8, in step order) are
 * kept in fp32, each trial a fresh load and build of the model in this
 * process (the overrides appended to layer_precisions name each step
 * exactly), run on every sample and measured.  Two searches:
 *  - KN_SEARCH_SENSITIVITY (`kiln build`): every candidate's sensitivity,
 *    the error with only it reduced and every other candidate in fp32
 *    (errors this small add nearly linearly: a step's error alone ranks it
 *    by what it contributes); then the smallest k for which the k most
 *    sensitive in fp32 keep the budget, by bisection: 2 + N + log2(N)
 *    builds;
 *  - KN_SEARCH_BISECT (`kiln debug precision`, polygraphy's): the smallest
 *    k for which the first k candidates in step order (reverse: the last
 *    k) in fp32 keep it, by bisection, then each of those k reduced again
 *    in turn, staying so when the budget still holds: 2 + log2(N) + k.
 * Both first try every candidate in fp32: when that breaks the budget
 * too, no choice of steps can keep it. */
enum { KN_SEARCH_SENSITIVITY = 0, KN_SEARCH_BISECT = 1 };

typedef struct kn_budget_search_options {
  kn_accuracy_budget budget;   /* at least one bound */
  int32_t search;              /* KN_SEARCH_* (init: sensitivity) */
  int32_t reverse;             /* KN_SEARCH_BISECT: from the last candidate */
  int32_t threads;             /* of the trial runs; 0: kn_context's default */
  /* KN_SEARCH_SENSITIVITY: the median latency of time_runs runs (after
   * time_warmup) on the first sample at 1 thread of the requested build,
   * the one returned and all-fp32, when a step was kept in fp32; 0: none */
  int64_t time_runs, time_warmup;
  const char *label;           /* who asks, in messages ("kiln build"); NULL:
                                  "kn_model_build_budgeted" */
} kn_budget_search_options;
void kn_budget_search_options_init(kn_budget_search_options *o);

/* kn_budget_trial.phase */
enum {
  KN_TRIAL_REQUESTED = 0, /* the build as requested */
  KN_TRIAL_ALL_FP32,      /* every candidate in fp32 */
  KN_TRIAL_SENSITIVITY,   /* only `step` reduced */
  KN_TRIAL_BISECT,        /* a bisection's set in fp32 */
  KN_TRIAL_REFINE         /* KN_SEARCH_BISECT's refinement */
};

/* One trial build, measured against the reference path. */
typedef struct kn_budget_trial {
  int32_t phase;
  int32_t step;           /* KN_TRIAL_SENSITIVITY: the candidate reduced; else -1 */
  int32_t n_fp32;         /* candidates kept in fp32 */
  uint8_t *fp32;          /* n_steps flags, 1: kept in fp32 (owned by the report) */
  double cosine, max_abs_error; /* the worst over outputs and samples */
  double top1, top1_drop; /* percent and points below the reference; -1 and 0
                             without labels */
  double used;            /* the largest fraction of a bound used (> 1: broken) */
  int32_t pass;           /* every bound holds */
} kn_budget_trial;

typedef struct kn_budget_report {
  int32_t n_steps;        /* candidates */
  char **steps;           /* their step names, in step order */
  char **patterns;        /* each name as a layer_precisions PATTERN only it matches
                             (fnmatch's * ? [ ] \ escaped) */
  int32_t *precisions;    /* each one's reduced kn_precision */
  double reference_top1;  /* percent; -1 without labels */
  int32_t n_trials;
  kn_budget_trial *trials; /* in the order built */
  int32_t *order;         /* KN_SEARCH_SENSITIVITY: candidates, most sensitive first
                             (NULL until every one is ranked) */
  int32_t pass;           /* the build returned keeps the budget */
  int32_t n_fp32;         /* the candidates it keeps in fp32 ... */
  uint8_t *fp32;          /* ... n_steps flags (NULL until found) */
  double ms_requested, ms_found, ms_fp32; /* time_runs' medians; -1: not timed */
  int32_t builds;         /* trial builds */
  double seconds;         /* the whole search */
} kn_budget_report;

/* Loads the ONNX model at model_path and builds it with `build` (copied;
 * its strings and calibration borrowed for the call) under the budget, as
 * above.  samples: those of the measurements (NULL: one generated, seed 1;
 * labels for max_accuracy_drop, one per prediction of all samples).  On
 * success *out (may be NULL: not kept) is the built model whose reduced
 * steps keep the budget: the requested build itself when it does, else the
 * build with the candidates the search found in fp32 (report->fp32; the
 * smallest such set that search tries, not a global minimum).  When no
 * build can keep it (no candidate and the requested build breaks it, or
 * every candidate in fp32 breaks it too): KN_ERR_LIMIT, report->pass 0.
 * Other failures (the model, a sample, labels that do not match the
 * predictions, a build or run) return their status.  report (may be NULL)
 * is filled in either case with what was measured: release it with
 * kn_budget_report_release. */
kn_status kn_model_build_budgeted(const char *model_path, const kn_build_options *build,
                                  const kn_samples *samples,
                                  const kn_budget_search_options *options, kn_model **out,
                                  kn_budget_report *report, kn_error *err)
    __attribute__((warn_unused_result));
void kn_budget_report_release(kn_budget_report *r);

#ifdef __cplusplus
}
#endif
#endif /* KILN_H */
