/* Loop nests for the IO model (loops.h). */
#include "loops.h"

int32_t kn_loop_dim(kn_loopnest *l, const char *name, int64_t extent) {
  KN_ASSERT(l->n_dims < KN_LOOP_MAX_DIMS);
  int32_t d = l->n_dims++;
  l->extent[d] = extent > 0 ? extent : 1;
  snprintf(l->dim_name[d], sizeof l->dim_name[d], "%s", name);
  return d;
}

int32_t kn_loop_tensor_add(kn_loopnest *l, const char *name, uint32_t dims,
                           uint32_t elem_bytes, bool output, bool constant) {
  KN_ASSERT(l->n_tensors < KN_LOOP_MAX_TENSORS);
  int32_t i = l->n_tensors++;
  l->t[i] = (kn_loop_tensor){.name = name, .dims = dims, .elem_bytes = elem_bytes,
                             .output = output, .constant = constant};
  return i;
}
