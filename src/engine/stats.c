/* Model summaries for `kiln inspect` (kiln.h). */
#include "engine.h"
#include "core/cpu.h"
#include "core/machine.h"
#include "kernels/kernels.h"
#include "cost/iomodel.h"
#include "ops/tactic.h"
#include "tactics/tactics.h"

kn_status kn_model_stats_get(const kn_model *model, kn_model_stats *out, kn_error *err) {
  const kn_ir_model *m = model->ir;
  const kn_graph *g = m->graph;
  memset(out, 0, sizeof *out);
  out->nodes = g->n_nodes;
  out->tactic_choices = model->timing.steps_with_choice;
  out->tactic_timed = model->timing.timed;
  out->tactic_cached = model->timing.cached;
  out->tactic_changed = model->timing.changed;
  out->tactic_seconds = model->timing.seconds;
  out->onnx_nodes = model->onnx_nodes;
  out->arena_bytes = model->plan.arena_bytes;
  out->lower_bound_bytes = model->plan.lower_bound_bytes;
  out->naive_activation_bytes = model->plan.naive_bytes;
  out->ir_version = m->ir_version;
  out->opset = kn_ir_model_opset(m, "");
  for (int32_t v = 0; v < g->n_values; v++)
    if (g->values[v].constant) {
      out->params += kn_tensor_numel(g->values[v].constant);
      out->param_bytes += (int64_t)g->values[v].constant->nbytes;
    }
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (strcmp(n->op_type, "Constant") != 0) continue;
    for (int32_t a = 0; a < n->n_attrs; a++)
      if (n->attrs[a].type == KN_ATTR_TENSOR) {
        out->params += kn_tensor_numel(&n->attrs[a].t);
        out->param_bytes += (int64_t)n->attrs[a].t.nbytes;
      }
  }
  return kn_ops_estimate_flops(m, 1, &out->flops, err);
}

typedef struct hist_entry {
  const char *op;
  int64_t count;
} hist_entry;

static int by_count(const void *a, const void *b) {
  const hist_entry *x = a, *y = b;
  if (x->count != y->count) return x->count < y->count ? 1 : -1;
  return strcmp(x->op, y->op);
}

void kn_model_op_histogram(const kn_model *model,
                           void (*fn)(const char *op, int64_t count, void *arg), void *arg) {
  const kn_graph *g = model->ir->graph;
  hist_entry *h = kn_calloc((size_t)g->n_nodes + 1, sizeof *h);
  if (!h) return;
  int32_t n = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    int32_t k = 0;
    while (k < n && strcmp(h[k].op, g->nodes[i].op_type) != 0) k++;
    if (k == n) h[n++].op = g->nodes[i].op_type;
    h[k].count++;
  }
  qsort(h, (size_t)n, sizeof *h, by_count);
  for (int32_t k = 0; k < n; k++) fn(h[k].op, h[k].count, arg);
  free(h);
}

int32_t kn_model_step_count(const kn_model *model) { return model->ir->graph->n_nodes; }

/* The machine a model's steps are predicted for: the one it was built
 * for, else the fallback (in *fb). */
static const kn_machine *io_machine(const kn_model *model, kn_machine *fb) {
  if (model->has_machine) return &model->machine;
  kn_machine_fallback(fb);
  return fb;
}

/* Arena bytes in use at step i: tensors live across it; one planned in
 * place over its input shares that input's bytes, counted once (the input
 * is live at the step making it, which reads it). */
static uint64_t arena_live(const kn_mem_plan *plan, int32_t i) {
  uint64_t b = 0;
  for (int32_t t = 0; t < plan->n_tensors; t++) {
    const kn_plan_tensor *p = &plan->tensors[t];
    if (p->offset < 0 || p->first > i || i > p->last) continue;
    bool shared = false;
    for (int32_t u = 0; p->inplace_of >= 0 && u < plan->n_tensors && !shared; u++) {
      const kn_plan_tensor *q = &plan->tensors[u];
      shared = q->value == p->inplace_of && q->offset == p->offset && q->first <= i &&
               i <= q->last;
    }
    if (!shared) b += p->bytes;
  }
  return b;
}

void kn_model_machine(const kn_model *model, kn_machine *out) {
  kn_machine fb;
  *out = *io_machine(model, &fb);
}

/* The model whose value types step costs are reported from: the one
 * kn_model_set_report_shapes inferred, else the static one. */
static const kn_ir_model *report_ir(const kn_model *model) {
  return model->report_ir ? model->report_ir : model->ir;
}

kn_status kn_model_set_report_shapes(kn_model *model, int32_t n, const kn_value_info *shapes,
                                     kn_error *err) {
  kn_model_report_free(model);
  if (n <= 0) return KN_OK;
  const kn_graph *g = model->ir->graph;
  kn_value *vals = kn_calloc((size_t)g->n_values + 1, sizeof *vals);
  kn_graph *rg = kn_calloc(1, sizeof *rg);
  kn_ir_model *rir = kn_calloc(1, sizeof *rir);
  kn_status st = KN_OK;
  if (!vals || !rg || !rir) {
    st = kn_fail(err, KN_ERR_OOM, "out of memory");
    goto fail;
  }
  memcpy(vals, g->values, (size_t)g->n_values * sizeof *vals);
  *rg = *g;
  rg->values = vals;
  *rir = *model->ir;
  rir->graph = rg;
  for (int32_t k = 0; k < n; k++) {
    int32_t v = -1;
    for (int32_t i = 0; i < model->n_inputs && v < 0; i++) {
      int32_t gv = g->inputs[model->inputs[i]];
      if (shapes[k].name && !strcmp(g->values[gv].name, shapes[k].name)) v = gv;
    }
    kn_type *t = &vals[v < 0 ? 0 : v].type;
    bool ok = v >= 0 && t->kind == KN_KIND_TENSOR && shapes[k].rank >= 0 &&
              shapes[k].rank <= KN_MAX_RANK && (t->rank < 0 || t->rank == shapes[k].rank);
    for (int32_t d = 0; ok && d < shapes[k].rank; d++)
      ok = shapes[k].dims[d] >= 0 && (t->rank < 0 || t->dims[d] < 0 || t->dims[d] == shapes[k].dims[d]);
    if (!ok) {
      st = kn_fail(err, KN_ERR_SHAPE, "%s: report shape for '%s' does not fit the model's input",
                   model->ir->label, shapes[k].name ? shapes[k].name : "(null)");
      goto fail;
    }
    t->rank = shapes[k].rank;
    memcpy(t->dims, shapes[k].dims, (size_t)shapes[k].rank * sizeof t->dims[0]);
  }
  if ((st = kn_ops_infer_values(rir, vals, err))) goto fail;
  model->report_ir = rir;
  return KN_OK;
fail:
  free(vals);
  free(rg);
  free(rir);
  return st;
}

kn_status kn_model_step_info(const kn_model *model, int32_t i, kn_step_info *out) {
  const kn_graph *g = report_ir(model)->graph;
  if (i < 0 || i >= g->n_nodes) return KN_ERR_INVALID_ARG;
  const kn_node *n = &g->nodes[i];
  memset(out, 0, sizeof *out);
  out->name = n->name;
  out->op = n->op_type;
  out->domain = n->domain;
  out->covers = n->covers ? n->covers : n->name;
  out->tactic = kn_tactic_name(n->tactic);
  out->precision = n->precision;
  if (n->precision == KN_PRECISION_INT8) {
    out->input_scale = n->quant.has_input ? n->quant.input_scale : 0.0f;
    out->input_zero = n->quant.has_input ? n->quant.input_zero : 0;
  }
  for (int32_t o = 0; o < n->n_outputs && out->n_outputs < 4; o++) {
    if (n->outputs[o] < 0) continue;
    const kn_value *v = &g->values[n->outputs[o]];
    kn_value_info *vi = &out->outputs[out->n_outputs++];
    vi->name = v->name;
    vi->dtype = v->type.dtype;
    vi->rank = v->type.kind == KN_KIND_TENSOR ? v->type.rank : -1;
    for (int32_t d = 0; d < vi->rank && d < KN_MAX_RANK; d++) vi->dims[d] = v->type.dims[d];
  }
  for (int32_t k = 0; k < n->n_inputs && out->n_inputs < 8; k++)
    if (n->inputs[k] >= 0) out->inputs[out->n_inputs++] = g->values[n->inputs[k]].name;
  kn_ops_node_cost(report_ir(model), i, &out->flops, &out->bytes_read, &out->bytes_written);
  out->arena_live_bytes = arena_live(&model->plan, i);
  const void *packed = model->packed && i < model->n_packed ? model->packed[i] : NULL;
  const kn_op_tactics *tt = kn_tactics_of(n);
  if (tt && tt->tiling && n->tactic) {
    kn_machine fb;
    const kn_machine *mach = io_machine(model, &fb);
    uint64_t feat = kn_cpu_features() & (model->has_machine ? mach->features : ~(uint64_t)0);
    kn_target target = {packed ? ((const kn_packed *)packed)->isa : (int32_t)kn_isa_detect(feat),
                        mach};
    tt->tiling(g, n, packed, &target, out->tiling, sizeof out->tiling);
  }
  return KN_OK;
}

kn_status kn_model_step_io(const kn_model *model, int32_t i, int32_t threads, kn_step_io *out) {
  const kn_graph *g = report_ir(model)->graph;
  memset(out, 0, sizeof *out);
  if (i < 0 || i >= g->n_nodes) return KN_ERR_INVALID_ARG;
  kn_machine fb;
  const kn_machine *mach = io_machine(model, &fb);
  kn_io_step s;
  kn_io_predict(report_ir(model), i, mach, threads, &s);
  out->flops = s.flops;
  for (int b = 0; b < 4; b++) out->bytes[b] = s.bytes[b];
  out->predicted_us = s.predicted_s * 1e6;
  for (int k = 0; k < 6; k++) out->time_us[k] = s.time_s[k] * 1e6;
  out->factor = s.factor;
  out->bound = kn_io_bound_name(s.bound);
  out->modelled = s.modelled;
  for (int b = 3; b >= 0; b--)
    if (s.bytes[b] > 0) {
      out->intensity = s.flops / s.bytes[b];
      break;
    }
  const kn_node *n = &g->nodes[i];
  bool image = strstr(n->op_type, "Conv") || strstr(n->op_type, "Pool");
  out->layout = !strncmp(n->op_type, "Nhwc", 4) ? "NHWC" : image ? "NCHW" : "";
  return KN_OK;
}

kn_status kn_model_step_diagram(const kn_model *model, int32_t i, int32_t threads, char **json) {
  *json = NULL;
  if (i < 0 || i >= model->ir->graph->n_nodes) return KN_ERR_INVALID_ARG;
  kn_machine fb;
  const kn_machine *mach = io_machine(model, &fb);
  *json = kn_io_diagram_json(report_ir(model), i, mach, threads);
  return KN_OK;
}

uint32_t kn_model_format_version(const kn_model *model) {
  return model->from_engine ? model->info.format_version : 0;
}

uint32_t kn_engine_format_version(void) { return KN_ENGINE_FORMAT_VERSION; }
