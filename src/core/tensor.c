#include "core.h"

int64_t kn_shape_numel(int32_t rank, const int64_t *dims) {
  int64_t n = 1;
  for (int32_t i = 0; i < rank; i++) {
    if (dims[i] < 0) return -1;
    if (dims[i] != 0 && n > INT64_MAX / dims[i]) return -1;
    n *= dims[i];
  }
  return n;
}

int64_t kn_tensor_numel(const kn_tensor *t) {
  return kn_shape_numel(t->rank, t->dims);
}

const char *kn_shape_str(int32_t rank, const int64_t *dims, char *buf,
                         size_t len) {
  if (rank < 0) {
    snprintf(buf, len, "unknown");
    return buf;
  }
  if (rank == 0) {
    snprintf(buf, len, "scalar");
    return buf;
  }
  size_t o = 0;
  buf[0] = 0;
  for (int32_t i = 0; i < rank && o < len; i++) {
    int n = dims[i] < 0 ? snprintf(buf + o, len - o, "%s?", i ? "x" : "")
                        : snprintf(buf + o, len - o, "%s%lld", i ? "x" : "",
                                   (long long)dims[i]);
    if (n < 0) break;
    o += (size_t)n;
  }
  return buf;
}

kn_status kn_tensor_alloc(kn_tensor *t, kn_dtype dtype, int32_t rank,
                          const int64_t *dims, kn_error *err) {
  memset(t, 0, sizeof *t);
  if (!kn_dtype_is_valid(dtype))
    return kn_fail(err, KN_ERR_DTYPE, "cannot allocate a tensor of dtype %d",
                   (int)dtype);
  if (rank < 0 || rank > KN_MAX_RANK)
    return kn_fail(err, KN_ERR_LIMIT,
                   "tensor rank %d is outside 0..%d", (int)rank, KN_MAX_RANK);
  int64_t n = kn_shape_numel(rank, dims);
  size_t es = kn_dtype_size(dtype);
  char sb[128];
  if (n < 0 || (uint64_t)n > KN_MAX_TENSOR_BYTES / es)
    return kn_fail(err, KN_ERR_LIMIT,
                   "tensor of shape %s and dtype %s exceeds kiln's %zu GiB "
                   "per-tensor limit",
                   kn_shape_str(rank, dims, sb, sizeof sb), kn_dtype_name(dtype),
                   KN_MAX_TENSOR_BYTES >> 30);
  t->data = kn_calloc((size_t)n, es);
  if (!t->data)
    return kn_fail(err, KN_ERR_OOM, "out of memory allocating %lld bytes",
                   (long long)((size_t)n * es));
  t->dtype = dtype;
  t->rank = rank;
  for (int32_t i = 0; i < rank; i++) t->dims[i] = dims[i];
  t->nbytes = (size_t)n * es;
  t->owned = 1;
  return KN_OK;
}

void kn_tensor_release(kn_tensor *t) {
  if (!t) return;
  if (t->owned && t->data) {
    if (t->dtype == KN_DTYPE_STRING) {
      char **s = t->data;
      int64_t n = (int64_t)(t->nbytes / sizeof(char *));
      for (int64_t i = 0; i < n; i++) free(s[i]);
    }
    free(t->data);
  }
  memset(t, 0, sizeof *t);
}

kn_status kn_tensor_copy(kn_tensor *dst, const kn_tensor *src, kn_error *err) {
  kn_status st = kn_tensor_alloc(dst, src->dtype, src->rank, src->dims, err);
  if (st) return st;
  if (src->dtype == KN_DTYPE_STRING) {
    char *const *s = src->data;
    char **d = dst->data;
    int64_t n = kn_tensor_numel(src);
    for (int64_t i = 0; i < n; i++) {
      d[i] = kn_strdup(s[i] ? s[i] : "");
      if (!d[i]) {
        kn_tensor_release(dst);
        return kn_fail(err, KN_ERR_OOM, "out of memory copying strings");
      }
    }
  } else if (dst->nbytes) {
    memcpy(dst->data, src->data, dst->nbytes);
  }
  return KN_OK;
}

kn_tensor kn_tensor_view(const kn_tensor *src) {
  kn_tensor v = *src;
  v.owned = 0;
  return v;
}
