#include "op.h"

static const kn_op_def *const families[] = {
#define KN_FAMILY(f) kn_ops_##f,
#include "families.inc"
#undef KN_FAMILY
};

const kn_op_def *kn_op_find(const char *domain, const char *name) {
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
    const kn_op_def *op = kn_op_in(families[f], domain, name);
    if (op) return op;
  }
  return NULL;
}

void kn_op_foreach(void (*fn)(const kn_op_def *op, void *arg), void *arg) {
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (const kn_op_def *op = families[f]; op->name; op++) fn(op, arg);
}
