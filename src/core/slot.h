/* A runtime value: a tensor, a sequence of tensors, or nothing (an omitted
 * optional input or an empty Optional).  Used by ops and the executor. */
#ifndef KN_SLOT_H
#define KN_SLOT_H

#include "core.h"

typedef enum kn_kind {
  KN_KIND_NONE = 0,
  KN_KIND_TENSOR,
  KN_KIND_SEQUENCE,
} kn_kind;

typedef struct kn_seq {
  kn_dtype elem_dtype;
  int32_t count, cap;
  kn_tensor *items; /* each owned */
} kn_seq;

typedef struct kn_slot {
  kn_kind kind;
  kn_tensor t;  /* KN_KIND_TENSOR */
  kn_seq seq;   /* KN_KIND_SEQUENCE */
} kn_slot;

void kn_slot_release(kn_slot *s);
/* Deep copy; dst must be empty. */
kn_status kn_slot_copy(kn_slot *dst, const kn_slot *src, kn_error *err) KN_WUR;
/* Append a deep copy of t at position pos (-1: the end). */
kn_status kn_seq_insert(kn_seq *s, int64_t pos, const kn_tensor *t,
                        kn_error *err) KN_WUR;

#endif
