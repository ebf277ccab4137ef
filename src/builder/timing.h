/*
 * Tactic selection by timing, as TensorRT does it: for every step whose op
 * offers more than one tactic (kn_op_def.candidates), the best few by the
 * IO model's prediction are timed on the step's real shapes, on this
 * machine, with the build's threads, and the fastest wins.  Results go
 * into a timing cache that later builds reuse.
 *
 * The timing cache is a text file (docs/MACHINE.md):
 *     # kiln timing cache 1
 *     KEY<TAB>TACTIC<TAB>MICROSECONDS<TAB>OTHERS
 * one line per step shape timed, KEY naming the op, its input dtypes,
 * shapes and constness, a hash of its attributes, the ISA, the threads,
 * the CPU (model and features) and the kiln version.  Lines a reader does
 * not understand are skipped.  A build rereads the file under an exclusive
 * lock (FILE.lock) before writing it back with its own entries added, and
 * writes it beside the target and renames it over: builds running at the
 * same time lose nothing and never see half a file.
 */
#ifndef KN_TIMING_H
#define KN_TIMING_H

#include "core/core.h"
#include "engine/engine.h" /* kn_timing_report, kept in the model */
#include "ir/ir.h"

typedef struct kn_timing_options {
  bool heuristic;         /* take the first choice, time nothing */
  int32_t candidates;     /* how many to time per step (>= 1) */
  const char *cache_path; /* NULL: no cache */
  int32_t threads;        /* threads to time with (>= 1) */
  int32_t isa;            /* the build's kn_isa */
  const kn_machine *machine;
} kn_timing_options;


/* After kn_tactics_select: choose among the candidates of every
 * top-level step of m (n->tactic is set to the winner).  Fails only on
 * out of memory or a cache that cannot be written; a step that cannot be
 * timed (unknown shapes, an error in its run) keeps its first choice. */
kn_status kn_tactics_time(kn_ir_model *m, const kn_timing_options *o, kn_timing_report *rep,
                          kn_error *err) KN_WUR;

/* TensorRT's reading of a precision flag: a reduced precision is allowed,
 * not imposed.  After kn_tactics_time, every node with revocable[i] (from
 * kn_precision_assign) and a reduced precision is timed in it and in fp32
 * (with fp32's first-choice tactic), and goes back to fp32 when that is
 * more than 10% faster (a 3-channel stem, where converting and gathering
 * the input costs more than the products save).  Each such step is a
 * decision line "precision: STEP: fp32, ...".  Nothing is timed with
 * o->heuristic. */
kn_status kn_precisions_time(kn_ir_model *m, const kn_timing_options *o,
                             const uint8_t *revocable, kn_timing_report *rep,
                             kn_error *err) KN_WUR;

#endif
