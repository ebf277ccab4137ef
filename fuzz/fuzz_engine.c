/* libFuzzer target: the engine loader on arbitrary bytes.  Each input is
 * read twice: as given (header, bounds and checksum checks), and with its
 * checksums recomputed (kn_engine_reseal) so that mutations reach the
 * decoder's structural checks.  Whatever loads is prepared (op resolution,
 * static inference) and run on zero-filled inputs, as fuzz_model does. */
#include "engine/engine.h"
#include "engine/format.h"

static void run_loaded(kn_ir_model *ir) {
  kn_error err;
  if (kn_ops_prepare(ir, &err) != KN_OK) return;
  const kn_graph *g = ir->graph;
  kn_model m = {.ir = ir};
  m.inputs = calloc((size_t)g->n_inputs + 1, sizeof *m.inputs);
  kn_tensor *ins = calloc((size_t)g->n_inputs + 1, sizeof *ins);
  kn_context *c = NULL;
  bool ok = m.inputs && ins;
  for (int32_t i = 0; ok && i < g->n_inputs; i++)
    if (!g->values[g->inputs[i]].constant) m.inputs[m.n_inputs++] = i;
  ok = ok && kn_context_create(&m, &c, &err) == KN_OK;
  if (ok) kn_context_set_memory_limit(c, (uint64_t)256 << 20);
  for (int32_t i = 0; ok && i < m.n_inputs; i++) {
    kn_value_info vi;
    if (kn_model_input_info(&m, i, &vi) != KN_OK || vi.rank < 0 || !vi.dtype) {
      ok = false;
      break;
    }
    int64_t dims[KN_MAX_RANK], total = 1;
    for (int32_t d = 0; d < vi.rank; d++) {
      dims[d] = vi.dims[d] < 0 ? 1 : vi.dims[d];
      if (dims[d] > (1 << 16)) ok = false; /* keep runs small */
      total *= ok && dims[d] > 0 ? dims[d] : 1;
      if (total > (1 << 16)) ok = false;
    }
    if (!ok || kn_tensor_alloc(&ins[i], vi.dtype, vi.rank, dims, &err) != KN_OK) {
      ok = false;
      break;
    }
    if (vi.dtype == KN_DTYPE_STRING) { /* strings must point somewhere */
      char **s = ins[i].data;
      for (int64_t k = 0; k < kn_tensor_numel(&ins[i]); k++) s[k] = strdup("");
    }
    ok = kn_context_set_input(c, i, &ins[i], &err) == KN_OK;
  }
  if (ok) (void)kn_context_run(c, &err);
  kn_context_free(c);
  for (int32_t i = 0; ins && i < m.n_inputs; i++) kn_tensor_release(&ins[i]);
  free(ins);
  free(m.inputs);
}

static void load(const uint8_t *data, size_t size) {
  kn_error err;
  kn_ir_model *m = NULL;
  kn_mem_plan plan;
  kn_engine_info info;
  if (kn_engine_read_buffer(data, size, "fuzz.kiln", &m, &plan, &info, &err) != KN_OK)
    return;
  free(plan.tensors);
  kn_engine_info_free(&info);
  run_loaded(m);
  kn_ir_model_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  load(data, size);
  uint8_t *copy = malloc(size + 1);
  if (!copy) return 0;
  memcpy(copy, data, size);
  if (kn_engine_reseal(copy, size)) load(copy, size);
  free(copy);
  return 0;
}
