/* Tactics: the kernel implementations a step can run (tactics.inc). */
#ifndef KN_TACTIC_H
#define KN_TACTIC_H

#include <stdbool.h>
#include <stdint.h>

enum {
#define KN_TACTIC(id, name, summary) KN_TACTIC_##name = id,
#include "tactics.inc"
#undef KN_TACTIC
};

/* Name of a tactic id, or NULL when this kiln has no such tactic. */
const char *kn_tactic_name(int32_t id);

#endif
