/*
 * Patch-based (depth-first) execution of a run of spatial steps, as in
 * MCUNetV2 (Lin et al., "MCUNetV2: Memory-Efficient Patch-based Inference
 * for Tiny Deep Learning", 2021): the run's last output is made in K bands
 * of rows, each band computing only the rows of every intermediate that
 * its rows need (their receptive field, halo included), so no intermediate
 * of the run is ever whole.  The memory planner (memplan.c) places the
 * bands' outputs inside the run's output, so the Concat that joins them
 * copies nothing.  The price is the halo rows computed twice and the steps'
 * fixed overhead, K times.
 */
#ifndef KN_PATCH_H
#define KN_PATCH_H

#include "ops/op.h"

/* What running steps [first, last] of g in `bands` bands would hold and
 * cost.  peak_bytes: the most bytes of band tensors live at once in any
 * band (the run's inputs and its output are whole and not counted);
 * rows[i - first]: rows node i computes over all bands divided by its
 * output's rows (>= 1; may be NULL); slice_bytes: bytes copied into band
 * inputs.  False when the steps cannot run in bands (see patch.c). */
bool kn_patch_estimate(const kn_graph *g, int32_t first, int32_t last, int32_t bands,
                       uint64_t *peak_bytes, double *rows, uint64_t *slice_bytes);

/* Rewrite steps [first, last] of m's top-level graph into `bands` bands
 * followed by a Concat making the run's output (the same value as
 * before), keeping every other step where it was; the new steps follow
 * the old first one in order and the graph is compacted and prepared.
 * Band steps are named "<step>#band<k>/<bands>", their row slices
 * "<step>#band<k>/<bands>:in<j>" and the Concat "<last step>#bands". */
kn_status kn_patch_apply(kn_ir_model *m, int32_t first, int32_t last, int32_t bands,
                         kn_error *err) KN_WUR;

/* Whether step n was made by kn_patch_apply (a band, slice or join). */
bool kn_patch_is_band(const kn_node *n);

#endif
