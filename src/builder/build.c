/* kn_model_build (kiln.h): the builder's pipeline over a loaded model.
 *
 * Input shapes and profiles fixed, the passes, the memory plan (under the
 * workspace budget), each step's precision, its tactic (the ops' select
 * hooks, then timing among their candidates), the weights packed for the
 * target machine, and the decisions recorded for the build's report.  The
 * runtime below (src/engine) loads and runs what this leaves in the model;
 * it never calls up here. */
#include "builder/step_precision.h"
#include "builder/timing.h"
#include "core/cpu.h"
#include "core/machine.h"
#include "cost/iomodel.h"
#include "engine/engine.h"
#include "kernels/kernels.h"
#include "ops/tactic.h"
#include "passes/pass.h"
#include "plan/budget.h"
#include "tactics/tactics.h"

#include <stdlib.h>
#include <string.h>

void kn_build_options_init(kn_build_options *o) { memset(o, 0, sizeof *o); }

/* Size every value for the profiles' MAX shapes, plan memory, then restore
 * the dynamic dims. */
static kn_status plan_for_max(kn_model *m, uint64_t workspace, kn_error *err) {
  kn_graph *g = m->ir->graph;
  int64_t saved[64][KN_MAX_RANK];
  bool any = false;
  for (int32_t i = 0; m->prof_max && i < m->n_inputs && i < 64; i++) {
    if (m->prof_max[i].rank < 0) continue;
    kn_value *v = &g->values[g->inputs[m->inputs[i]]];
    memcpy(saved[i], v->type.dims, sizeof saved[i]);
    memcpy(v->type.dims, m->prof_max[i].dims, sizeof v->type.dims);
    any = true;
  }
  kn_status st = any ? kn_ops_prepare(m->ir, err) : KN_OK;
  /* over the workspace, the planner rewrites the graph (runs of steps in
   * bands of rows) when every shape is fixed; a --profile's range is not */
  kn_budget_options bo = {.workspace = workspace, .rewrite = !any, .machine = &m->machine,
                          .threads = 1, .decisions = &m->timing.decisions};
  if (!st) st = kn_plan_under_budget(m->ir, &bo, &m->plan, err);
  if (st) kn_error_prefix(err, "%s", m->ir->label);
  for (int32_t i = 0; any && m->prof_max && i < m->n_inputs && i < 64; i++) {
    if (m->prof_max[i].rank < 0) continue;
    memcpy(g->values[g->inputs[m->inputs[i]]].type.dims, saved[i], sizeof saved[i]);
  }
  if (any) {
    kn_status st2 = kn_ops_prepare(m->ir, err);
    if (!st) st = st2;
  }
  return st;
}

/* Parse "NAME=1x3x224x224" and fix that input's dims. */
static kn_status apply_shape(kn_model *m, const char *spec, kn_error *err) {
  const char *label = m->ir->label;
  const char *eq = strrchr(spec, '=');
  if (!eq || eq == spec)
    return kn_fail(err, KN_ERR_INVALID_ARG, "--shape '%s': expected NAME=DxDx...", spec);
  int32_t idx = kn_model_input_named(m, spec, eq);
  if (idx < 0)
    return kn_fail(err, KN_ERR_INVALID_ARG, "%s: --shape '%s': the model has no input named '%.*s'",
                   label, spec, (int)(eq - spec), spec);
  kn_value *v = &m->ir->graph->values[m->ir->graph->inputs[m->inputs[idx]]];
  int64_t dims[KN_MAX_RANK];
  int32_t rank = 0;
  if (eq[1] && !kn_parse_dims(eq + 1, eq + strlen(eq), dims, &rank))
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "%s: --shape '%s': dims must be non-negative integers joined by 'x'",
                   label, spec);
  if (v->type.kind != KN_KIND_TENSOR)
    return kn_fail(err, KN_ERR_INVALID_ARG, "%s: --shape: input '%s' is not a tensor", label,
                   v->name);
  char want[128];
  bool ok = v->type.rank < 0 || v->type.rank == rank;
  for (int32_t d = 0; ok && v->type.rank >= 0 && d < rank; d++)
    ok = v->type.dims[d] < 0 || v->type.dims[d] == dims[d];
  if (!ok)
    return kn_fail(err, KN_ERR_SHAPE, "%s: --shape %s: input '%s' is declared %s", label, spec,
                   v->name, kn_shape_str(v->type.rank, v->type.dims, want, sizeof want));
  v->type.rank = rank;
  memcpy(v->type.dims, dims, (size_t)rank * sizeof *dims);
  return KN_OK;
}

/* Each step's precision (step_precision.c), recorded as decisions. */
static kn_status assign_precisions(kn_model *m, const kn_build_options *o, uint8_t *revocable,
                                   kn_error *err) {
  bool reduced = o->precision != KN_PRECISION_FP32 || o->n_layer_precisions || o->weights;
  const char *pn = kn_precision_name(o->precision);
  if (!pn || (o->precision >= KN_PRECISION_FP16_WEIGHTS && o->precision != KN_PRECISION_BEST))
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "precision %d: expected fp32, bf16, fp16, int8 or best (weight-only "
                   "compression is the weights option)",
                   (int)o->precision);
  if (o->weights < KN_WEIGHTS_FP32 || o->weights > KN_WEIGHTS_INT8)
    return kn_fail(err, KN_ERR_INVALID_ARG, "weights %d: expected fp32, fp16 or int8",
                   (int)o->weights);
  if (reduced && o->reference_kernels)
    return kn_fail(err, KN_ERR_INVALID_ARG,
                   "%s: reference kernels run fp32 only; drop the precision, layer precision "
                   "and weights options, or the reference-kernels one",
                   m->ir->label);
  snprintf(m->precision, sizeof m->precision, "%s%s", pn,
           o->weights == KN_WEIGHTS_FP16   ? " weights=fp16"
           : o->weights == KN_WEIGHTS_INT8 ? " weights=int8"
                                           : "");
  kn_precision_options po = {.precision = o->precision,
                             .overrides = o->layer_precisions,
                             .n_overrides = o->n_layer_precisions,
                             .weights = o->weights,
                             .calibration = o->calibration,
                             .isa = kn_model_build_isa(m),
                             .machine = &m->machine,
                             .threads = o->threads > 0 ? o->threads : kn_default_threads(),
                             .decisions = &m->timing.decisions,
                             .revocable = revocable};
  return kn_precision_assign(m->ir, &po, err);
}

kn_status kn_model_build(kn_model *m, const kn_build_options *o, kn_error *err) {
  kn_model_report_free(m); /* the graph changes: report shapes are set again after */
  kn_build_options dflt;
  if (!o) {
    kn_build_options_init(&dflt);
    o = &dflt;
  }
  if (m->from_engine) {
    if (o->n_shapes || o->n_disabled_passes || o->workspace || o->machine || o->precision ||
        o->n_layer_precisions || o->weights || o->n_fixed)
      return kn_fail(err, KN_ERR_INVALID_ARG,
                     "%s is an engine: it was built already; build options apply to a model",
                     m->ir->label);
    return KN_OK;
  }
  for (int32_t i = 0; i < o->n_shapes; i++) {
    kn_status st = apply_shape(m, o->shapes[i], err);
    if (st) return st;
  }
  for (int32_t i = 0; i < o->n_profiles; i++) {
    kn_status st = kn_model_apply_profile(m, o->profiles[i], err);
    if (st) return st;
  }
  for (int32_t i = 0; i < o->n_fixed; i++) {
    kn_status st = kn_model_apply_fix(m, o->fixed[i], true, err);
    if (st) return st;
  }
  if (m->n_inputs > 64 && o->n_profiles)
    return kn_fail(err, KN_ERR_LIMIT, "%s: --profile supports models of up to 64 inputs",
                   m->ir->label);
  kn_status st =
      o->n_shapes || o->n_profiles || o->n_fixed ? kn_ops_prepare(m->ir, err) : KN_OK;
  if (st) return st;
  /* The machine to build for: the IO model weighs fusions for it, its
   * features choose the kernels' ISA, its capacities their blocking.
   * Reference builds pack nothing: no probe. */
  if (o->machine) m->machine = *o->machine;
  else if (o->reference_kernels) kn_machine_fallback(&m->machine);
  else if ((st = kn_machine_default(&m->machine, err))) return st;
  m->has_machine = true;
  kn_timing_report_free(&m->timing);
  memset(&m->timing, 0, sizeof m->timing);
  if (!o->no_optimize) {
    m->optimized = true;
    kn_optimize_options oo = {.disabled = o->disabled_passes,
                              .n_disabled = o->n_disabled_passes,
                              .fold_max_bytes = (int64_t)o->fold_max_bytes,
                              .machine = &m->machine,
                              .decisions = &m->timing.decisions};
    st = kn_optimize(m->ir, &oo, err);
    if (st) return st;
  }
  kn_mem_plan_free(&m->plan);
  st = plan_for_max(m, o->workspace, err);
  if (st) return st;
  /* which steps' reduced precision is the default's (timed against fp32) */
  uint8_t *revocable = kn_calloc((size_t)m->ir->graph->n_nodes + 1, 1);
  if (!revocable) return kn_fail(err, KN_ERR_OOM, "out of memory");
  if ((st = assign_precisions(m, o, revocable, err))) {
    free(revocable);
    return st;
  }
  kn_tactics_select(m->ir, kn_model_build_isa(m), o->reference_kernels != 0);
  if (!o->reference_kernels) {
    const char *te = getenv("KILN_TACTICS");
    bool heuristic = o->tactics == KN_TACTICS_HEURISTIC ||
                     (o->tactics == KN_TACTICS_DEFAULT && te && !strcmp(te, "heuristic"));
    kn_timing_options to = {.heuristic = heuristic,
                            .candidates = o->tactic_candidates > 0 ? o->tactic_candidates : 3,
                            .cache_path = o->timing_cache,
                            .threads = o->threads > 0 ? o->threads : kn_default_threads(),
                            .isa = kn_model_build_isa(m),
                            .machine = &m->machine};
    if (!(st = kn_tactics_time(m->ir, &to, &m->timing, err)))
      st = kn_precisions_time(m->ir, &to, revocable, &m->timing, err);
  }
  free(revocable);
  if (st) return st;
  st = kn_model_pack(m, err);
  if (st) return st;
  /* the fusions, each recorded with what the IO model says it saves */
  if (!o->no_optimize)
    for (int32_t i = 0; i < m->ir->graph->n_nodes; i++) {
      double bytes, secs;
      int32_t n_ops, far;
      if (!kn_io_fusion_saving(m->ir, i, &m->machine, kn_default_threads(), &bytes, &secs,
                               &n_ops, &far))
        continue;
      char line[512];
      snprintf(line, sizeof line, "%s: fuses %d ONNX ops, saving %.1f KiB at each of %d "
               "boundaries (registers to %s) and %.1f us predicted",
               m->ir->graph->nodes[i].name, n_ops, bytes / 1024.0, far + 1,
               m->machine.levels[far].name, secs * 1e6);
      if (!kn_lines_add(&m->timing.decisions, line))
        return kn_fail(err, KN_ERR_OOM, "out of memory");
    }
  kn_strings_free(m->shapes, m->n_shapes);
  kn_strings_free(m->profiles, m->n_profiles);
  m->profiles = kn_strings_dup(o->profiles, o->n_profiles);
  m->n_profiles = m->profiles ? o->n_profiles : 0;
  kn_strings_free(m->disabled, m->n_disabled);
  m->shapes = kn_strings_dup(o->shapes, o->n_shapes);
  kn_strings_free(m->fixed, m->n_fixed);
  m->fixed = kn_strings_dup(o->fixed, o->n_fixed);
  m->n_fixed = m->fixed ? o->n_fixed : 0;
  m->disabled = kn_strings_dup(o->disabled_passes, o->n_disabled_passes);
  m->n_shapes = m->shapes ? o->n_shapes : 0;
  m->n_disabled = m->disabled ? o->n_disabled_passes : 0;
  m->workspace = o->workspace;
  m->built = true;
  return KN_OK;
}

