/* libFuzzer target: the machine description reader (docs/MACHINE.md) on
 * arbitrary bytes; whatever it accepts must write back and read again to
 * the same description. */
#include "core/machine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kn_error err;
  kn_machine m, again;
  if (kn_machine_from_json((const char *)data, size, "fuzz.json", &m, &err) != KN_OK) return 0;
  char *text = kn_machine_to_json(&m);
  if (!text) return 0;
  if (kn_machine_from_json(text, strlen(text), "again.json", &again, &err) != KN_OK) abort();
  if (again.n_levels != m.n_levels || again.features != m.features || again.cores != m.cores ||
      strcmp(again.cpu, m.cpu) != 0)
    abort();
  for (int32_t i = 0; i < m.n_levels; i++)
    if (again.levels[i].bytes != m.levels[i].bytes) abort();
  free(text);
  return 0;
}
