#include "op.h"

#define KN_FAMILY(f) extern const kn_op_def kn_ops_##f[];
#include "families.inc"
#undef KN_FAMILY

static const kn_op_def *const families[] = {
#define KN_FAMILY(f) kn_ops_##f,
#include "families.inc"
#undef KN_FAMILY
};

static bool domain_eq(const char *a, const char *b) {
  bool da = !a || !*a || strcmp(a, "ai.onnx") == 0;
  bool db = !b || !*b || strcmp(b, "ai.onnx") == 0;
  if (da || db) return da && db;
  return strcmp(a, b) == 0;
}

const kn_op_def *kn_op_find(const char *domain, const char *name) {
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (const kn_op_def *op = families[f]; op->name; op++)
      if (strcmp(op->name, name) == 0 && domain_eq(op->domain, domain)) return op;
  return NULL;
}

void kn_op_foreach(void (*fn)(const kn_op_def *op, void *arg), void *arg) {
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (const kn_op_def *op = families[f]; op->name; op++) fn(op, arg);
}
