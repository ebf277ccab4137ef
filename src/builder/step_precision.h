/* Step precisions: which precision each step runs in (docs/PRECISION.md). */
#ifndef KN_BUILDER_STEP_PRECISION_H
#define KN_BUILDER_STEP_PRECISION_H

#include "core/core.h"
#include "ir/ir.h"

typedef struct kn_precision_options {
  int32_t precision;                 /* kn_precision, or KN_PRECISION_BEST */
  const char *const *overrides;      /* "PATTERN=PRECISION" */
  int32_t n_overrides;
  int32_t weights;                   /* KN_WEIGHTS_* for steps left in fp32 */
  const kn_calibration *calibration; /* NULL: none */
  int32_t isa;                       /* the build's kn_isa */
  const kn_machine *machine;         /* the build's machine (rates, features) */
  int32_t threads;                   /* for the IO model's predictions */
  kn_lines *decisions;               /* one line per step not in fp32, and why */
  /* NULL, or one byte per top-level node, set to 1 where the node's
   * reduced precision came from the default (--precision, best), not from
   * an override or a Q/DQ model: kn_precisions_time may take it back to
   * fp32 where that is measured faster */
  uint8_t *revocable;
} kn_precision_options;

/* Give every top-level node the precision it runs in (kn_node.precision),
 * before tactics are selected: the default, the first matching override,
 * or for `best` the fastest precision by the IO model among those the
 * node's op can run it in (kn_op_def.precisions) and the machine has an
 * instruction for.  int8 nodes get the quantization of their input 0 from
 * the calibration table (attributes kiln.a_scale, kiln.a_zero), looked up
 * by the tensor's ONNX name, through reshapes and transposes that kept the
 * values; a node whose input has no range stays fp32 (said in a decision
 * line), unless an override asked for int8 by name: then the build fails.
 * Fails on a malformed override, one that matches no step, or int8
 * without a calibration table. */
kn_status kn_precision_assign(kn_ir_model *m, const kn_precision_options *o,
                              kn_error *err) KN_WUR;

#endif
