#include "slot.h"

void kn_slot_release(kn_slot *s) {
  if (!s) return;
  kn_tensor_release(&s->t);
  for (int32_t i = 0; i < s->seq.count; i++) kn_tensor_release(&s->seq.items[i]);
  free(s->seq.items);
  memset(s, 0, sizeof *s);
}

kn_status kn_slot_copy(kn_slot *dst, const kn_slot *src, kn_error *err) {
  memset(dst, 0, sizeof *dst);
  dst->kind = src->kind;
  if (src->kind == KN_KIND_TENSOR) return kn_tensor_copy(&dst->t, &src->t, err);
  if (src->kind == KN_KIND_SEQUENCE) {
    dst->seq.elem_dtype = src->seq.elem_dtype;
    for (int32_t i = 0; i < src->seq.count; i++) {
      kn_status st = kn_seq_insert(&dst->seq, -1, &src->seq.items[i], err);
      if (st) {
        kn_slot_release(dst);
        return st;
      }
    }
  }
  return KN_OK;
}

kn_status kn_seq_insert(kn_seq *s, int64_t pos, const kn_tensor *t,
                        kn_error *err) {
  if (pos < 0) pos = s->count;
  KN_ASSERT(pos <= s->count);
  if (!KN_GROW(s->items, s->cap, (int64_t)s->count + 1))
    return kn_fail(err, KN_ERR_OOM, "out of memory growing a sequence");
  kn_tensor copy;
  kn_status st = kn_tensor_copy(&copy, t, err);
  if (st) return st;
  memmove(&s->items[pos + 1], &s->items[pos],
          (size_t)(s->count - pos) * sizeof *s->items);
  s->items[pos] = copy;
  s->count++;
  if (s->elem_dtype == KN_DTYPE_UNDEFINED) s->elem_dtype = t->dtype;
  return KN_OK;
}
