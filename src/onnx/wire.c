/* A pre-pass over protobuf wire data that bounds message nesting before
 * protobuf-c (which recurses without a limit) parses it.  It walks only the
 * fields the schema says are messages. */
#include "onnx_internal.h"

#define KN_MAX_NESTING 64

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*p >= end) return false;
    uint8_t b = *(*p)++;
    r |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      return true;
    }
  }
  return false;
}

static const ProtobufCFieldDescriptor *find_field(const ProtobufCMessageDescriptor *d,
                                                  uint32_t id) {
  for (unsigned i = 0; i < d->n_fields; i++)
    if (d->fields[i].id == id) return &d->fields[i];
  return NULL;
}

/* 0 ok, 1 too deep, 2 malformed (left for protobuf-c to report). */
static int walk(const uint8_t *p, const uint8_t *end,
                const ProtobufCMessageDescriptor *d, int depth) {
  if (depth > KN_MAX_NESTING) return 1;
  while (p < end) {
    uint64_t key, v;
    if (!read_varint(&p, end, &key)) return 2;
    uint32_t wt = (uint32_t)(key & 7), id = (uint32_t)(key >> 3);
    switch (wt) {
    case 0:
      if (!read_varint(&p, end, &v)) return 2;
      break;
    case 1:
      if (end - p < 8) return 2;
      p += 8;
      break;
    case 5:
      if (end - p < 4) return 2;
      p += 4;
      break;
    case 2: {
      if (!read_varint(&p, end, &v) || v > (uint64_t)(end - p)) return 2;
      const ProtobufCFieldDescriptor *f = find_field(d, id);
      if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
        int r = walk(p, p + v, f->descriptor, depth + 1);
        if (r) return r;
      }
      p += v;
      break;
    }
    default:
      return 2;
    }
  }
  return 0;
}

kn_status kn_onnx_check_nesting(const void *buf, size_t size,
                                const ProtobufCMessageDescriptor *desc,
                                const char *label, kn_error *err) {
  if (walk(buf, (const uint8_t *)buf + size, desc, 0) == 1)
    return kn_fail(err, KN_ERR_PARSE,
                   "%s: messages are nested more than %d deep; refused", label,
                   KN_MAX_NESTING);
  return KN_OK;
}
