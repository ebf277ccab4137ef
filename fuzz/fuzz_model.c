/* libFuzzer target: the model loader (protobuf parse, IR conversion, op
 * resolution, static inference) on arbitrary bytes, then the optimizer and
 * memory planner (kn_model_build with default options), and a run of
 * whatever builds, on zero-filled inputs of its declared shapes (dynamic
 * dims = 1). */
#include "kiln.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kn_error err;
  kn_model *m = NULL;
  if (kn_model_load_buffer(data, size, NULL, "fuzz.onnx", &m, &err) != KN_OK) return 0;
  if (kn_model_build(m, NULL, &err) != KN_OK) {
    kn_model_free(m);
    return 0;
  }
  kn_context *c = NULL;
  int32_t n = kn_model_input_count(m);
  kn_tensor *ins = calloc((size_t)n + 1, sizeof *ins);
  bool ok = ins && kn_context_create(m, &c, &err) == KN_OK;
  if (ok) kn_context_set_memory_limit(c, (uint64_t)256 << 20);
  for (int32_t i = 0; ok && i < n; i++) {
    kn_value_info vi;
    if (kn_model_input_info(m, i, &vi) != KN_OK || vi.rank < 0 || !vi.dtype) {
      ok = false;
      break;
    }
    int64_t dims[KN_MAX_RANK], total = 1;
    for (int32_t d = 0; d < vi.rank; d++) {
      dims[d] = vi.dims[d] < 0 ? 1 : vi.dims[d];
      if (dims[d] > (1 << 16) || (dims[d] > 0 && total > (1 << 16) / dims[d])) {
        ok = false; /* keep runs small (and the product from overflowing) */
        break;
      }
      total *= dims[d] > 0 ? dims[d] : 1;
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
  for (int32_t i = 0; ins && i < n; i++) kn_tensor_release(&ins[i]);
  free(ins);
  kn_model_free(m);
  return 0;
}
