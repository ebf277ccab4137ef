/* libFuzzer target: the engine loader on arbitrary bytes.  Each input is
 * read twice: as given (header, bounds and checksum checks), and with its
 * checksums recomputed (kn_engine_reseal) so that mutations reach the
 * decoder's structural checks.  Whatever loads is prepared (op resolution
 * and static inference), as every loaded engine is.  Running models is
 * fuzz_model's job: a decoded Loop may ask for 2^60 iterations. */
#include "engine/format.h"
#include "ops/op.h"

static void load(const uint8_t *data, size_t size) {
  kn_error err;
  kn_ir_model *m = NULL;
  kn_mem_plan plan;
  kn_engine_info info;
  if (kn_engine_read_buffer(data, size, "fuzz.kiln", &m, &plan, &info, &err) != KN_OK)
    return;
  free(plan.tensors);
  kn_engine_info_free(&info);
  (void)kn_ops_prepare(m, &err);
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
