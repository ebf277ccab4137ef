#include "tactic.h"

#include <stddef.h>

static const char *const names[] = {
#define KN_TACTIC(id, name, summary) [id] = #name,
#include "tactics.inc"
#undef KN_TACTIC
};

const char *kn_tactic_name(int32_t id) {
  if (id < 0 || (size_t)id >= sizeof names / sizeof names[0]) return NULL;
  return names[id];
}
