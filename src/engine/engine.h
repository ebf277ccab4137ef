/* Internal view of models and contexts, for the CLI's inspection code and
 * the conformance tests (which feed sequences and optionals). */
#ifndef KN_ENGINE_H
#define KN_ENGINE_H

#include "exec.h"
#include "format.h"

/* What the build's tactic selection did (src/builder/timing.c fills it),
 * kept in the model for its report and its engine file. */
typedef struct kn_timing_report {
  int32_t steps_with_choice; /* steps with more than one candidate */
  int32_t timed;             /* step shapes timed now (a repeated shape once) */
  int32_t cached;            /* steps whose choice came from the cache */
  int32_t changed;           /* steps where the winner is not the first choice */
  double seconds;            /* spent timing */
  /* one line per step with a choice made by timing or the cache: "STEP:
   * TACTIC, timed 216.7 us; conv_igemm_nhwc 430.2 us", appended to the
   * lines it held (the passes' decisions) */
  kn_lines decisions;
} kn_timing_report;

void kn_timing_report_free(kn_timing_report *r);

/* A model from an IR graph made in code (finished: kn_graph_finish), as
 * kn_model_load makes one from an ONNX file: its ops resolved, ready for
 * kn_model_build.  Takes ir (freed on failure). */
kn_status kn_model_from_ir(kn_ir_model *ir, kn_model **out, kn_error *err) KN_WUR;

struct kn_model {
  kn_ir_model *ir;
  int32_t n_inputs;  /* graph inputs not backed by an initializer */
  int32_t *inputs;   /* indices into ir->graph->inputs */
  kn_mem_plan plan;  /* of the top-level graph; n_tensors 0 until built */
  bool built;        /* optimized and planned (kn_model_build or an engine) */
  bool optimized;    /* the passes ran (kn_model_build without no_optimize) */
  bool from_engine;  /* loaded from an engine file */
  int64_t onnx_nodes; /* top-level nodes as imported */
  kn_engine_info info;  /* engines: what the header said */
  /* the build configuration, recorded in engine files */
  int32_t n_shapes, n_disabled, n_profiles, n_fixed;
  char **shapes, **disabled, **profiles, **fixed;
  /* per model input: the value it is pinned to (kn_build_options.fixed;
   * dtype 0: not pinned), checked when the input is set */
  kn_tensor *pinned;
  uint64_t workspace;
  char precision[48]; /* "fp32", "int8", "best weights=fp16", ... */
  /* per model input: the profile's range (rank -1: no profile) */
  kn_value_info *prof_min, *prof_max;
  /* per top-level node: its prepacked weights (its tactics' pack), or NULL */
  void **packed;       /* kn_packed blocks (src/tactics/tactics.h) */
  bool *packed_owned;  /* false: in packed_copy (or mapped from the engine) */
  int32_t n_packed;
  /* an engine's blocks for this ISA, copied out of the mapping into one
   * huge-page buffer (kn_big_alloc) */
  void *packed_copy;
  size_t packed_copy_bytes;
  /* an engine's small originals that steps read as they are, copied out of
   * the mapping into one heap block (model.c) */
  void *small_copy;
  /* a model built in memory: the originals its blocks stand in for, moved
   * out of the heap as they are packed (kn_model_pack); NULL: none */
  kn_spill *spill;
  bool spill_tried;
  /* the machine it was built for (kn_model_build; not kept in engines) */
  kn_machine machine;
  bool has_machine;
  kn_timing_report timing; /* the build's tactic selection */
  /* kn_model_set_report_shapes: the top-level graph with its values' types
   * inferred for given input shapes (shallow copies sharing the model's
   * names, nodes and constants; only the values array is its own), which
   * step costs are reported from; NULL: the static types */
  kn_ir_model *report_ir;
};

const kn_ir_model *kn_model_ir(const kn_model *m);
/* The ISA a build packs for: the best both the described machine (when
 * the model has one) and this one have. */
int32_t kn_model_build_isa(const kn_model *m);
/* Prepack the weights of every top-level step whose tactic packs them and
 * that has no block for the target ISA yet (model.c). */
kn_status kn_model_pack(kn_model *m, kn_error *err) KN_WUR;
/* What becomes of a top-level constant once the steps have their packed
 * blocks (kn_model_originals).  Every fate but KN_ORIG_PACKED keeps the
 * original where it is: in an engine, file pages that become resident
 * when the step reads them; in a model built in memory, its heap bytes
 * (all of them: a build keeps every original). */
typedef enum kn_orig_fate {
  KN_ORIG_PACKED,    /* every step reading it runs from a block standing in
                        for it: an engine drops its pages */
  KN_ORIG_REFERENCE, /* a step on its reference kernel reads it */
  KN_ORIG_NO_BLOCK,  /* a step whose tactic made no packed block reads it */
  KN_ORIG_BESIDE,    /* a packed step reads it beside its block (a bias, zero
                        points: the block stands in for its weights only) */
  KN_ORIG_OUTPUT,    /* it is a graph output */
  KN_ORIG_SUBGRAPH,  /* a Loop, Scan or If body reads it */
  KN_ORIG_UNREAD,    /* nothing reads it */
} kn_orig_fate;

typedef struct kn_original {
  int32_t value;  /* in the top-level graph */
  uint64_t bytes;
  kn_orig_fate fate;
  int32_t step;   /* the step behind the fate, or -1 */
} kn_original;

/* One entry per top-level constant (value order) into out, at most max;
 * returns how many there are (model.c). */
int32_t kn_model_originals(const kn_model *m, kn_original *out, int32_t max);
/* Why a fate keeps the original, in a few words ("packed" for
 * KN_ORIG_PACKED). */
const char *kn_orig_fate_name(kn_orig_fate f);
/* Bytes of the steps' packed blocks (those the runs use) and their count. */
uint64_t kn_model_packed_bytes(const kn_model *m, int32_t *blocks);

/* "1x3x224x224" (the bytes [p, end)) -> dims; false when malformed. */
bool kn_parse_dims(const char *p, const char *end, int64_t *dims, int32_t *rank);
/* The model input named by spec's "NAME=" prefix (eq points at its '='),
 * or -1. */
int32_t kn_model_input_named(const kn_model *m, const char *spec, const char *eq);
/* Parse "NAME=V1,V2,..." into the value input NAME is pinned to
 * (m->pinned); with `fold`, also make every reader of the input read that
 * value as a constant (a build; an engine's graph has it folded already). */
kn_status kn_model_apply_fix(kn_model *m, const char *spec, bool fold, kn_error *err) KN_WUR;
/* Parse "NAME=MIN:OPT:MAX" into the input's range (builds and engine files
 * with profiles); dims equal across the range become static. */
kn_status kn_model_apply_profile(kn_model *m, const char *spec, kn_error *err) KN_WUR;
/* NULL-terminated copies of n strings (NULL when out of memory), and their
 * release. */
char **kn_strings_dup(const char *const *v, int32_t n);
void kn_strings_free(char **v, int32_t n);
/* Drops kn_model_set_report_shapes' copy (model.c). */
void kn_model_report_free(kn_model *m);
/* Bind any kind of value (tensor, sequence, none) to input `index`. */
kn_status kn_context_set_input_slot(kn_context *ctx, int32_t index,
                                    const kn_slot *s, kn_error *err) KN_WUR;
const kn_slot *kn_context_output_slot(const kn_context *ctx, int32_t index);

#endif
