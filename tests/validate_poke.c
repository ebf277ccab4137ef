/* validate_poke: a copy of an ONNX model with ONE weight changed, for
 * tests/validate_test.sh (an engine built from it must fail kiln
 * validate's accuracy limits against the original).
 *
 *   validate_poke MODEL.onnx --list
 *       one line per float initializer: NAME ELEMENTS
 *   validate_poke MODEL.onnx OUT.onnx NAME INDEX DELTA
 *       writes OUT.onnx, MODEL with element INDEX of initializer NAME
 *       increased by DELTA; prints "NAME[INDEX]: OLD -> NEW"
 *
 * It walks the protobuf wire format itself (ModelProto.graph = 7,
 * GraphProto.initializer = 5, TensorProto dims = 1, data_type = 2,
 * float_data = 4 (packed), name = 8, raw_data = 9) and patches the four
 * bytes in place, so every length stays as it was and nothing else in the
 * file changes: no ONNX library needed.  Floats are read and written as
 * the host stores them: little-endian, as ONNX does, on x86 and arm64. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct span {
  const uint8_t *p, *end;
} span;

static bool varint(span *s, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 64 && s->p < s->end; shift += 7) {
    uint8_t b = *s->p++;
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

/* The next field: its number, wire type, and for length-delimited ones
 * the bytes; false at the end or on malformed input. */
static bool field(span *s, uint32_t *num, uint32_t *wt, span *val) {
  uint64_t key, len;
  if (s->p >= s->end || !varint(s, &key)) return false;
  *num = (uint32_t)(key >> 3);
  *wt = (uint32_t)(key & 7);
  val->p = s->p;
  switch (*wt) {
  case 0:
    if (!varint(s, &len)) return false;
    break;
  case 1:
    if (s->end - s->p < 8) return false;
    s->p += 8;
    break;
  case 5:
    if (s->end - s->p < 4) return false;
    s->p += 4;
    break;
  case 2:
    if (!varint(s, &len) || len > (uint64_t)(s->end - s->p)) return false;
    val->p = s->p;
    s->p += len;
    break;
  default: return false;
  }
  val->end = s->p;
  return true;
}

typedef struct init {
  char name[256];
  int64_t numel;
  uint8_t *data; /* the float32 elements, little-endian, inside the file buffer */
} init;

/* A FLOAT initializer's name, element count and data; false for others. */
static bool parse_tensor(span t, uint8_t *buf, init *out) {
  uint32_t num, wt;
  span v;
  int64_t data_type = 0, numel = 1;
  span data = {NULL, NULL};
  out->name[0] = 0;
  while (field(&t, &num, &wt, &v)) {
    if (num == 1 && wt == 0) {
      span d = {v.p, v.end};
      uint64_t x;
      varint(&d, &x);
      numel *= (int64_t)x;
    } else if (num == 1 && wt == 2) { /* packed dims */
      span d = v;
      uint64_t x;
      while (d.p < d.end && varint(&d, &x)) numel *= (int64_t)x;
    } else if (num == 2 && wt == 0) {
      span d = v;
      uint64_t x;
      varint(&d, &x);
      data_type = (int64_t)x;
    } else if ((num == 4 || num == 9) && wt == 2) {
      data = v;
    } else if (num == 8 && wt == 2) {
      size_t n = (size_t)(v.end - v.p);
      if (n >= sizeof out->name) n = sizeof out->name - 1;
      memcpy(out->name, v.p, n);
      out->name[n] = 0;
    }
  }
  if (data_type != 1 || !data.p || data.end - data.p != numel * 4) return false;
  out->numel = numel;
  out->data = buf + (data.p - buf); /* the same bytes, writable */
  return true;
}

int main(int argc, char **argv) {
  bool list = argc == 3 && !strcmp(argv[2], "--list");
  if (!list && argc != 6) {
    fprintf(stderr, "usage: %s MODEL.onnx --list | MODEL.onnx OUT.onnx NAME INDEX DELTA\n",
            argv[0]);
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(size > 0 ? (size_t)size : 1);
  if (!buf || size <= 0 || fread(buf, 1, (size_t)size, f) != (size_t)size) {
    fprintf(stderr, "%s: cannot read\n", argv[1]);
    return 1;
  }
  fclose(f);
  span model = {buf, buf + size}, v, g, t;
  uint32_t num, wt;
  bool have_graph = false;
  while (field(&model, &num, &wt, &v))
    if (num == 7 && wt == 2) g = v, have_graph = true;
  if (!have_graph) {
    fprintf(stderr, "%s: no graph\n", argv[1]);
    return 1;
  }
  const char *want = list ? NULL : argv[3];
  long index = list ? 0 : strtol(argv[4], NULL, 10);
  float delta = list ? 0 : strtof(argv[5], NULL);
  int rc = 1;
  while (field(&g, &num, &wt, &t)) {
    init in;
    if (num != 5 || wt != 2 || !parse_tensor(t, buf, &in)) continue;
    if (list) {
      printf("%s %lld\n", in.name, (long long)in.numel);
      rc = 0;
      continue;
    }
    if (strcmp(in.name, want)) continue;
    if (index < 0 || index >= in.numel) {
      fprintf(stderr, "%s: %s has %lld elements, no element %ld\n", argv[1], want,
              (long long)in.numel, index);
      return 1;
    }
    float old, now;
    memcpy(&old, in.data + 4 * index, 4);
    now = old + delta;
    memcpy(in.data + 4 * index, &now, 4);
    FILE *o = fopen(argv[2], "wb");
    if (!o || fwrite(buf, 1, (size_t)size, o) != (size_t)size || fclose(o) != 0) {
      perror(argv[2]);
      return 1;
    }
    printf("%s[%ld]: %g -> %g\n", want, index, old, now);
    free(buf);
    return 0;
  }
  if (!list) fprintf(stderr, "%s: no float initializer named '%s'\n", argv[1], want);
  free(buf);
  return rc;
}
