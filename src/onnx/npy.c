/* NumPy .npy files (format versions 1, 2 and 3; little-endian, C order). */
#include "onnx_internal.h"

static const struct {
  const char *descr;
  kn_dtype dtype;
} npy_types[] = {
    {"<f4", KN_DTYPE_F32}, {"<f8", KN_DTYPE_F64}, {"<f2", KN_DTYPE_F16},
    {"|i1", KN_DTYPE_I8},  {"<i2", KN_DTYPE_I16}, {"<i4", KN_DTYPE_I32},
    {"<i8", KN_DTYPE_I64}, {"|u1", KN_DTYPE_U8},  {"<u2", KN_DTYPE_U16},
    {"<u4", KN_DTYPE_U32}, {"<u8", KN_DTYPE_U64}, {"|b1", KN_DTYPE_BOOL},
    {"<b1", KN_DTYPE_BOOL}, {"<i1", KN_DTYPE_I8}, {"<u1", KN_DTYPE_U8},
};

/* Find 'key': in the header dict and return a pointer after the colon. */
static const char *dict_value(const char *h, size_t hl, const char *key) {
  size_t kl = strlen(key);
  for (size_t i = 0; i + kl + 2 < hl; i++) {
    if ((h[i] == '\'' || h[i] == '"') && strncmp(h + i + 1, key, kl) == 0 &&
        h[i + 1 + kl] == h[i]) {
      const char *p = h + i + kl + 2;
      while (p < h + hl && (*p == ' ' || *p == ':')) p++;
      return p;
    }
  }
  return NULL;
}

kn_status kn_npy_decode(const void *buf, size_t size, const char *label,
                        kn_tensor *out, kn_error *err) {
  memset(out, 0, sizeof *out);
  const unsigned char *b = buf;
  if (size < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
    return kn_fail(err, KN_ERR_PARSE, "%s: not a .npy file", label);
  size_t hl, off;
  if (b[6] == 1) {
    hl = (size_t)b[8] | ((size_t)b[9] << 8);
    off = 10;
  } else if (b[6] == 2 || b[6] == 3) {
    if (size < 12) return kn_fail(err, KN_ERR_PARSE, "%s: truncated .npy header", label);
    hl = (size_t)b[8] | ((size_t)b[9] << 8) | ((size_t)b[10] << 16) | ((size_t)b[11] << 24);
    off = 12;
  } else {
    return kn_fail(err, KN_ERR_UNSUPPORTED, "%s: .npy format version %d not supported",
                   label, b[6]);
  }
  if (hl > size - off)
    return kn_fail(err, KN_ERR_PARSE, "%s: truncated .npy header", label);
  /* The header is not NUL-terminated: every read below stays before `end`. */
  const char *h = (const char *)b + off, *end = h + hl;
  const char *d = dict_value(h, hl, "descr");
  const char *fo = dict_value(h, hl, "fortran_order");
  const char *sh = dict_value(h, hl, "shape");
  if (!d || !fo || !sh || d >= end || fo >= end || sh >= end ||
      (*d != '\'' && *d != '"'))
    return kn_fail(err, KN_ERR_PARSE, "%s: .npy header lacks descr/fortran_order/shape",
                   label);
  if (end - fo >= 4 && memcmp(fo, "True", 4) == 0)
    return kn_fail(err, KN_ERR_UNSUPPORTED,
                   "%s: Fortran-ordered .npy arrays are not supported (save with C order)",
                   label);
  if (end - fo < 5 || memcmp(fo, "False", 5) != 0)
    return kn_fail(err, KN_ERR_PARSE, "%s: .npy fortran_order is neither True nor False",
                   label);
  kn_dtype dt = KN_DTYPE_UNDEFINED;
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
    if (end - d >= 5 && strncmp(d + 1, npy_types[i].descr, 3) == 0 && d[4] == d[0])
      dt = npy_types[i].dtype;
  if (!dt) {
    char descr[16] = {0};
    for (int i = 0; i < 15 && d + 1 + i < h + hl && d[1 + i] != d[0]; i++) descr[i] = d[1 + i];
    return kn_fail(err, KN_ERR_UNSUPPORTED, "%s: .npy dtype '%s' is not supported", label,
                   descr);
  }
  if (*sh != '(')
    return kn_fail(err, KN_ERR_PARSE, "%s: bad .npy shape", label);
  int64_t dims[KN_MAX_RANK];
  int32_t rank = 0;
  const char *p = sh + 1;
  while (p < end && *p != ')') {
    while (p < end && (*p == ' ' || *p == ',')) p++;
    if (p < end && *p == ')') break;
    if (p >= end || *p < '0' || *p > '9')
      return kn_fail(err, KN_ERR_PARSE, "%s: bad .npy shape", label);
    int64_t v = 0;
    while (p < end && *p >= '0' && *p <= '9') {
      if (v > (INT64_MAX - 9) / 10)
        return kn_fail(err, KN_ERR_PARSE, "%s: .npy dim too large", label);
      v = v * 10 + (*p++ - '0');
    }
    if (rank == KN_MAX_RANK)
      return kn_fail(err, KN_ERR_LIMIT, "%s: .npy array has more than %d dims", label,
                     KN_MAX_RANK);
    dims[rank++] = v;
  }
  if (p >= end) return kn_fail(err, KN_ERR_PARSE, "%s: bad .npy shape", label);
  /* the data must be there before anything is allocated for it */
  int64_t n = kn_shape_numel(rank, dims);
  size_t es = kn_dtype_size(dt);
  if (n >= 0 && (uint64_t)n <= KN_MAX_TENSOR_BYTES / es &&
      size - off - hl < (size_t)n * es)
    return kn_fail(err, KN_ERR_PARSE, "%s: .npy data is truncated: %zu of %zu bytes",
                   label, size - off - hl, (size_t)n * es);
  kn_status st = kn_tensor_alloc(out, dt, rank, dims, err);
  if (st) {
    kn_error_prefix(err, "%s", label);
    return st;
  }
  if (out->nbytes) memcpy(out->data, b + off + hl, out->nbytes);
  return KN_OK;
}

kn_status kn_tensor_write_npy(const char *path, const kn_tensor *t, kn_error *err) {
  const char *descr = NULL;
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
    if (npy_types[i].dtype == t->dtype) {
      descr = npy_types[i].descr;
      break;
    }
  if (!descr)
    return kn_fail(err, KN_ERR_UNSUPPORTED, "%s: dtype %s cannot be written as .npy",
                   path, kn_dtype_name(t->dtype));
  char shape[256];
  size_t o = 0;
  shape[0] = 0;
  for (int32_t i = 0; i < t->rank; i++)
    o += (size_t)snprintf(shape + o, sizeof shape - o, "%lld,%s", (long long)t->dims[i],
                          i + 1 < t->rank ? " " : "");
  if (t->rank > 1) shape[o - 1] = 0; /* numpy writes (2, 3) but (3,) */
  char header[512];
  int hl = snprintf(header, sizeof header,
                    "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr,
                    shape);
  int total = 10 + hl + 1;
  int pad = (64 - total % 64) % 64;
  FILE *f = fopen(path, "wb");
  if (!f) return kn_fail(err, KN_ERR_IO, "%s: cannot create file", path);
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
  int hlen = hl + pad + 1;
  pre[8] = (unsigned char)(hlen & 0xff);
  pre[9] = (unsigned char)(hlen >> 8);
  bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, (size_t)hl, f) == (size_t)hl;
  for (int i = 0; i < pad && ok; i++) ok = fputc(' ', f) != EOF;
  ok = ok && fputc('\n', f) != EOF;
  ok = ok && (t->nbytes == 0 || fwrite(t->data, 1, t->nbytes, f) == t->nbytes);
  ok = (fclose(f) == 0) && ok;
  if (!ok) return kn_fail(err, KN_ERR_IO, "%s: write failed", path);
  return KN_OK;
}
