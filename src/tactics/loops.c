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

void kn_loops_add_row_norm(kn_loopnest *l) {
  uint32_t rows = 0;
  for (int32_t x = 0; x < l->n_tensors; x++)
    if (l->t[x].output) rows = l->t[x].dims;
  int32_t nd = -1;
  for (int32_t d = 0; d < l->n_dims; d++)
    if (!strcmp(l->dim_name[d], "n")) nd = d;
  KN_ASSERT(nd >= 0 && (rows >> nd & 1));
  uint32_t N = 1u << nd;
  double per = 1; /* output elements */
  for (int32_t d = 0; d < l->n_dims; d++)
    if (rows >> d & 1) per *= (double)l->extent[d];
  l->whole |= N;
  kn_loop_tensor_add(l, "scale", N, 4, false, true);
  kn_loop_tensor_add(l, "bias", N, 4, false, true);
  l->flops += 8.0 * per; /* sum, squares, scale and shift: about 8 a value */
}
