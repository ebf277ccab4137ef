/* The machine a pack hook packs for (kn_target, tactics.h). */
#include "tactics.h"

#include "core/machine.h"

void kn_target_caches(const kn_target *t, size_t *l1d, size_t *l2, size_t *l3) {
  kn_machine os;
  const kn_machine *m = t->machine;
  if (!m) {
    kn_machine_from_os(&os);
    m = &os;
  }
  kn_machine_caches(m, 1, l1d, l2, l3);
}
