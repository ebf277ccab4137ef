/* TensorProto <-> kn_tensor, external data, sparse tensors, test-data
 * containers (SequenceProto, OptionalProto). */
#include "onnx_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

kn_status kn_read_whole_file(const char *path, void **buf, size_t *size,
                             kn_error *err) {
  *buf = NULL;
  *size = 0;
  /* O_NONBLOCK: a FIFO must be refused below, not waited on here */
  int fd = open(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0)
    return kn_fail(err, KN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return kn_fail(err, KN_ERR_IO, "%s: not a regular file", path);
  }
  if ((uint64_t)sb.st_size > ((uint64_t)4 << 30)) {
    close(fd);
    return kn_fail(err, KN_ERR_LIMIT, "%s: file of %lld bytes exceeds 4 GiB", path,
                   (long long)sb.st_size);
  }
  size_t n = (size_t)sb.st_size;
  char *p = kn_malloc(n + 1);
  if (!p) {
    close(fd);
    return kn_fail(err, KN_ERR_OOM, "%s: out of memory reading %zu bytes", path, n);
  }
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      free(p);
      close(fd);
      return kn_fail(err, KN_ERR_IO, "%s: read failed after %zu of %zu bytes", path,
                     got, n);
    }
    got += (size_t)r;
  }
  close(fd);
  p[n] = 0;
  *buf = p;
  *size = n;
  return KN_OK;
}

/* Open `location` under base_dir, refusing paths that leave it. */
static kn_status open_external(const char *base_dir, const char *location,
                               const char *what, int *fd_out, kn_error *err) {
  if (!base_dir)
    return kn_fail(err, KN_ERR_IO,
                   "%s: uses external data '%s' but the model was not loaded "
                   "from a file",
                   what, location);
  if (!*location || location[0] == '/')
    return kn_fail(err, KN_ERR_PARSE,
                   "%s: external data location '%s' must be a relative path "
                   "inside the model's folder",
                   what, location);
  /* ".." is refused before the file system is asked, so that a model cannot
     probe for files outside its folder through the "not found" message */
  for (const char *c = location; *c;) {
    size_t len = strcspn(c, "/");
    if (len == 2 && c[0] == '.' && c[1] == '.')
      return kn_fail(err, KN_ERR_PARSE,
                     "%s: external data location '%s' contains '..'; it must stay "
                     "inside the model's folder",
                     what, location);
    c += len + (c[len] == '/');
  }
  char path[PATH_MAX], real_base[PATH_MAX], real_file[PATH_MAX];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", base_dir, location) >= sizeof path)
    return kn_fail(err, KN_ERR_PARSE, "%s: external data path too long", what);
  if (!realpath(base_dir, real_base))
    return kn_fail(err, KN_ERR_IO, "%s: cannot resolve model folder '%s'", what,
                   base_dir);
  if (!realpath(path, real_file))
    return kn_fail(err, KN_ERR_IO, "%s: external data file '%s' not found: %s",
                   what, path, strerror(errno));
  size_t bl = strlen(real_base);
  if (strncmp(real_file, real_base, bl) != 0 ||
      (real_file[bl] != '/' && !(bl == 1 && real_base[0] == '/')))
    return kn_fail(err, KN_ERR_PARSE,
                   "%s: external data '%s' resolves outside the model's folder "
                   "(%s); refused",
                   what, location, real_base);
  int fd = open(real_file, O_RDONLY | O_NONBLOCK);
  if (fd < 0)
    return kn_fail(err, KN_ERR_IO, "%s: cannot open external data '%s': %s", what,
                   path, strerror(errno));
  *fd_out = fd;
  return KN_OK;
}

/* Resolve, open and size-check a tensor's external data before anything is
 * allocated for it.  On success *fd_out is open at a range of `nbytes`
 * bytes starting at *offset_out. */
static kn_status open_external_data(const KnOnnx__TensorProto *tp, const char *base_dir,
                                    const char *what, kn_dtype dtype, size_t nbytes,
                                    int *fd_out, int64_t *offset_out, kn_error *err) {
  const char *location = NULL;
  int64_t offset = 0, length = -1;
  for (size_t i = 0; i < tp->n_external_data; i++) {
    const KnOnnx__StringStringEntryProto *e = tp->external_data[i];
    if (!e->key || !e->value) continue;
    char *end = NULL;
    if (strcmp(e->key, "location") == 0) {
      location = e->value;
    } else if (strcmp(e->key, "offset") == 0) {
      errno = 0;
      long long v = strtoll(e->value, &end, 10);
      if (errno || *end || v < 0)
        return kn_fail(err, KN_ERR_PARSE, "%s: bad external data offset '%s'", what,
                       e->value);
      offset = v;
    } else if (strcmp(e->key, "length") == 0) {
      errno = 0;
      long long v = strtoll(e->value, &end, 10);
      if (errno || *end || v < 0)
        return kn_fail(err, KN_ERR_PARSE, "%s: bad external data length '%s'", what,
                       e->value);
      length = v;
    }
  }
  if (!location)
    return kn_fail(err, KN_ERR_PARSE, "%s: external data has no 'location'", what);
  if (dtype == KN_DTYPE_STRING)
    return kn_fail(err, KN_ERR_PARSE, "%s: string tensors cannot use external data",
                   what);
  if (length >= 0 && (uint64_t)length != nbytes)
    return kn_fail(err, KN_ERR_PARSE,
                   "%s: external data length %lld does not match the %zu bytes "
                   "its shape needs",
                   what, (long long)length, nbytes);
  int fd;
  kn_status st = open_external(base_dir, location, what, &fd, err);
  if (st) return st;
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return kn_fail(err, KN_ERR_IO, "%s: external data '%s' is not a regular file", what,
                   location);
  }
  if ((uint64_t)offset > (uint64_t)sb.st_size ||
      (uint64_t)sb.st_size - (uint64_t)offset < nbytes) {
    close(fd);
    return kn_fail(err, KN_ERR_PARSE,
                   "%s: external data file '%s' is too short: needs %zu bytes at "
                   "offset %lld",
                   what, location, nbytes, (long long)offset);
  }
  *fd_out = fd;
  *offset_out = offset;
  return KN_OK;
}

static kn_status read_external(int fd, int64_t offset, const char *what, kn_tensor *t,
                               kn_error *err) {
  size_t got = 0;
  while (got < t->nbytes) {
    ssize_t r = pread(fd, (char *)t->data + got, t->nbytes - got,
                      (off_t)offset + (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return kn_fail(err, KN_ERR_IO, "%s: reading external data failed", what);
    got += (size_t)r;
  }
  return KN_OK;
}

/* Number of values the proto's inline payload holds for dtype t (raw_data
 * in elements; -1 when raw_data's byte count is not a whole number). */
static int64_t inline_count(const KnOnnx__TensorProto *tp, kn_dtype t, const char **field) {
  size_t es = kn_dtype_size(t);
  if (tp->has_raw_data) {
    *field = "raw_data";
    if (t == KN_DTYPE_STRING || tp->raw_data.len % es) return -1;
    return (int64_t)(tp->raw_data.len / es);
  }
  switch (t) {
  case KN_DTYPE_F32: *field = "float_data"; return (int64_t)tp->n_float_data;
  case KN_DTYPE_F64: *field = "double_data"; return (int64_t)tp->n_double_data;
  case KN_DTYPE_I64: *field = "int64_data"; return (int64_t)tp->n_int64_data;
  case KN_DTYPE_U32:
  case KN_DTYPE_U64: *field = "uint64_data"; return (int64_t)tp->n_uint64_data;
  case KN_DTYPE_STRING: *field = "string_data"; return (int64_t)tp->n_string_data;
  default: *field = "int32_data"; return (int64_t)tp->n_int32_data;
  }
}

kn_status kn_onnx_tensor_from_proto(const KnOnnx__TensorProto *tp,
                                    const char *base_dir, const char *what,
                                    kn_tensor *out, kn_error *err) {
  memset(out, 0, sizeof *out);
  int32_t dt = tp->has_data_type ? tp->data_type : 0;
  if (!kn_dtype_is_valid(dt))
    return kn_fail(err, KN_ERR_UNSUPPORTED,
                   "%s: tensor data type %d is not supported (kiln handles "
                   "float16/32/64, bfloat16, int8-64, uint8-64, bool, string)",
                   what, (int)dt);
  if (tp->n_dims > KN_MAX_RANK)
    return kn_fail(err, KN_ERR_LIMIT, "%s: tensor has %zu dims, kiln allows at most %d",
                   what, tp->n_dims, KN_MAX_RANK);
  if (tp->segment)
    return kn_fail(err, KN_ERR_UNSUPPORTED,
                   "%s: segmented tensors (TensorProto.segment) are not supported",
                   what);
  int64_t dims[KN_MAX_RANK];
  for (size_t i = 0; i < tp->n_dims; i++) {
    if (tp->dims[i] < 0)
      return kn_fail(err, KN_ERR_PARSE, "%s: dim %zu is negative (%lld)", what, i,
                     (long long)tp->dims[i]);
    dims[i] = tp->dims[i];
  }
  /* Check the payload against the shape before allocating anything, so a
   * small file cannot make kiln allocate what its dims claim. */
  kn_dtype t = (kn_dtype)dt;
  int64_t n = kn_shape_numel((int32_t)tp->n_dims, dims);
  size_t es = kn_dtype_size(t);
  char shape[128];
  if (n < 0 || (uint64_t)n > KN_MAX_TENSOR_BYTES / es)
    return kn_fail(err, KN_ERR_LIMIT, "%s: tensor of shape %s and dtype %s exceeds "
                   "kiln's %zu GiB per-tensor limit", what,
                   kn_shape_str((int32_t)tp->n_dims, dims, shape, sizeof shape),
                   kn_dtype_name(t), KN_MAX_TENSOR_BYTES >> 30);
  bool external = tp->has_data_location &&
                  tp->data_location == KN_ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  int fd = -1;
  int64_t ext_offset = 0;
  if (external) {
    kn_status est = open_external_data(tp, base_dir, what, t, (size_t)n * es, &fd,
                                       &ext_offset, err);
    if (est) return est;
  } else {
    const char *field;
    int64_t have = inline_count(tp, t, &field);
    if (have != n) {
      if (have < 0 && t == KN_DTYPE_STRING)
        return kn_fail(err, KN_ERR_PARSE, "%s: string tensors cannot use raw_data", what);
      if (have < 0)
        return kn_fail(err, KN_ERR_PARSE,
                       "%s: raw_data has %zu bytes, not a whole number of %s values "
                       "(shape %s needs %lld)", what, tp->raw_data.len, kn_dtype_name(t),
                       kn_shape_str((int32_t)tp->n_dims, dims, shape, sizeof shape),
                       (long long)n);
      return kn_fail(err, KN_ERR_PARSE, "%s: %s holds %lld values but shape %s needs %lld",
                     what, field, (long long)have,
                     kn_shape_str((int32_t)tp->n_dims, dims, shape, sizeof shape),
                     (long long)n);
    }
  }
  kn_status st = kn_tensor_alloc(out, t, (int32_t)tp->n_dims, dims, err);
  if (st) {
    if (fd >= 0) close(fd);
    kn_error_prefix(err, "%s", what);
    return st;
  }
  if (external) {
    st = read_external(fd, ext_offset, what, out, err);
    close(fd);
    goto done;
  }
  if (tp->has_raw_data) {
    if (t == KN_DTYPE_STRING) {
      st = kn_fail(err, KN_ERR_PARSE, "%s: string tensors cannot use raw_data", what);
      goto done;
    }
    if (out->nbytes) memcpy(out->data, tp->raw_data.data, out->nbytes);
    if (t == KN_DTYPE_BOOL) /* normalise to 0/1 */
      for (int64_t i = 0; i < n; i++) ((uint8_t *)out->data)[i] = ((uint8_t *)out->data)[i] != 0;
    goto done;
  }
  switch (t) {
  case KN_DTYPE_F32:
    if (n) memcpy(out->data, tp->float_data, (size_t)n * 4);
    break;
  case KN_DTYPE_F64:
    if (n) memcpy(out->data, tp->double_data, (size_t)n * 8);
    break;
  case KN_DTYPE_I64:
    if (n) memcpy(out->data, tp->int64_data, (size_t)n * 8);
    break;
  case KN_DTYPE_U32:
  case KN_DTYPE_U64:
    for (int64_t i = 0; i < n; i++)
      kn_store_i64(out->data, t, i, (int64_t)tp->uint64_data[i]);
    break;
  case KN_DTYPE_STRING:
    for (int64_t i = 0; i < n; i++) {
      char *s = kn_strndup((const char *)tp->string_data[i].data, tp->string_data[i].len);
      if (!s) {
        st = kn_fail(err, KN_ERR_OOM, "%s: out of memory", what);
        break;
      }
      ((char **)out->data)[i] = s;
    }
    break;
  default: /* int32, int16, int8, uint16, uint8, bool, float16, bfloat16 */
    for (int64_t i = 0; i < n; i++) {
      int32_t v = tp->int32_data[i];
      if (t == KN_DTYPE_F16 || t == KN_DTYPE_BF16)
        ((uint16_t *)out->data)[i] = (uint16_t)v;
      else
        kn_store_i64(out->data, t, i, v);
    }
    break;
  }
done:
  if (st) kn_tensor_release(out);
  return st;
}

kn_status kn_onnx_sparse_to_dense(const KnOnnx__SparseTensorProto *sp,
                                  const char *base_dir, const char *what,
                                  kn_tensor *out, kn_error *err) {
  memset(out, 0, sizeof *out);
  if (!sp->values || !sp->indices)
    return kn_fail(err, KN_ERR_PARSE, "%s: sparse tensor lacks values or indices", what);
  if (sp->n_dims > KN_MAX_RANK)
    return kn_fail(err, KN_ERR_LIMIT, "%s: sparse tensor has %zu dims, max %d", what,
                   sp->n_dims, KN_MAX_RANK);
  kn_tensor vals, idx;
  kn_status st = kn_onnx_tensor_from_proto(sp->values, base_dir, what, &vals, err);
  if (st) return st;
  st = kn_onnx_tensor_from_proto(sp->indices, base_dir, what, &idx, err);
  if (st) {
    kn_tensor_release(&vals);
    return st;
  }
  int64_t dims[KN_MAX_RANK];
  int32_t rank = (int32_t)sp->n_dims;
  for (int32_t i = 0; i < rank; i++) dims[i] = sp->dims[i];
  int64_t nnz = kn_tensor_numel(&vals);
  int64_t total = kn_shape_numel(rank, dims);
  if (vals.rank != 1 || idx.dtype != KN_DTYPE_I64 ||
      !((idx.rank == 1 && idx.dims[0] == nnz) ||
        (idx.rank == 2 && idx.dims[0] == nnz && idx.dims[1] == rank)) || total < 0) {
    st = kn_fail(err, KN_ERR_PARSE,
                 "%s: sparse tensor indices must be int64 [NNZ] or [NNZ, rank] "
                 "matching 1-D values",
                 what);
    goto done;
  }
  st = kn_tensor_alloc(out, vals.dtype, rank, dims, err);
  if (st) {
    kn_error_prefix(err, "%s", what);
    goto done;
  }
  size_t es = kn_dtype_size(vals.dtype);
  const int64_t *ix = idx.data;
  for (int64_t k = 0; k < nnz; k++) {
    int64_t lin = 0;
    if (idx.rank == 1) {
      lin = ix[k];
    } else {
      for (int32_t d = 0; d < rank; d++) {
        int64_t v = ix[k * rank + d];
        if (v < 0 || v >= dims[d]) {
          lin = -1;
          break;
        }
        lin = lin * dims[d] + v;
      }
    }
    if (lin < 0 || lin >= total) {
      char sb[128];
      st = kn_fail(err, KN_ERR_PARSE,
                   "%s: sparse index entry %lld is out of range for shape %s", what,
                   (long long)k, kn_shape_str(rank, dims, sb, sizeof sb));
      kn_tensor_release(out);
      goto done;
    }
    if (vals.dtype == KN_DTYPE_STRING)
      ((char **)out->data)[lin] = kn_strdup(((char **)vals.data)[k]);
    else
      memcpy((char *)out->data + (size_t)lin * es, (char *)vals.data + (size_t)k * es, es);
  }
done:
  kn_tensor_release(&vals);
  kn_tensor_release(&idx);
  return st;
}

kn_status kn_onnx_tensor_decode(const void *buf, size_t size, const char *label,
                                kn_tensor *out, char **name_out, kn_error *err) {
  memset(out, 0, sizeof *out);
  if (name_out) *name_out = NULL;
  KnOnnx__TensorProto *tp = kn_onnx__tensor_proto__unpack(NULL, size, buf);
  if (!tp)
    return kn_fail(err, KN_ERR_PARSE, "%s: not a valid TensorProto (truncated or corrupt)",
                   label);
  kn_status st = kn_onnx_tensor_from_proto(tp, NULL, label, out, err);
  if (!st && name_out && tp->name) *name_out = kn_strdup(tp->name);
  kn_onnx__tensor_proto__free_unpacked(tp, NULL);
  return st;
}

static kn_status sequence_from_proto(const KnOnnx__SequenceProto *sp,
                                     const char *label, kn_slot *out,
                                     kn_error *err) {
  out->kind = KN_KIND_SEQUENCE;
  if (sp->n_sequence_values || sp->n_optional_values || sp->n_sparse_tensor_values)
    return kn_fail(err, KN_ERR_UNSUPPORTED,
                   "%s: only sequences of dense tensors are supported", label);
  if (sp->has_elem_type && sp->elem_type != 1 && sp->elem_type != 0)
    return kn_fail(err, KN_ERR_UNSUPPORTED,
                   "%s: sequence element type %d is not supported", label,
                   (int)sp->elem_type);
  for (size_t i = 0; i < sp->n_tensor_values; i++) {
    kn_tensor t;
    kn_status st = kn_onnx_tensor_from_proto(sp->tensor_values[i], NULL, label, &t, err);
    if (st) return st;
    st = kn_seq_insert(&out->seq, -1, &t, err);
    kn_tensor_release(&t);
    if (st) return st;
  }
  return KN_OK;
}

kn_status kn_onnx_read_slot_file(const char *path, kn_kind kind, bool optional,
                                 kn_slot *out, kn_error *err) {
  memset(out, 0, sizeof *out);
  void *buf;
  size_t size;
  kn_status st = kn_read_whole_file(path, &buf, &size, err);
  if (st) return st;
  if (optional) {
    KnOnnx__OptionalProto *op = kn_onnx__optional_proto__unpack(NULL, size, buf);
    if (!op) {
      st = kn_fail(err, KN_ERR_PARSE, "%s: not a valid OptionalProto", path);
    } else {
      if (op->tensor_value) {
        out->kind = KN_KIND_TENSOR;
        st = kn_onnx_tensor_from_proto(op->tensor_value, NULL, path, &out->t, err);
      } else if (op->sequence_value) {
        st = sequence_from_proto(op->sequence_value, path, out, err);
      } else {
        out->kind = KN_KIND_NONE;
      }
      kn_onnx__optional_proto__free_unpacked(op, NULL);
    }
  } else if (kind == KN_KIND_SEQUENCE) {
    KnOnnx__SequenceProto *sp = kn_onnx__sequence_proto__unpack(NULL, size, buf);
    if (!sp) {
      st = kn_fail(err, KN_ERR_PARSE, "%s: not a valid SequenceProto", path);
    } else {
      st = sequence_from_proto(sp, path, out, err);
      kn_onnx__sequence_proto__free_unpacked(sp, NULL);
    }
  } else {
    out->kind = KN_KIND_TENSOR;
    if (size >= 6 && memcmp(buf, "\x93NUMPY", 6) == 0)
      st = kn_npy_decode(buf, size, path, &out->t, err);
    else
      st = kn_onnx_tensor_decode(buf, size, path, &out->t, NULL, err);
  }
  free(buf);
  if (st) kn_slot_release(out);
  return st;
}

kn_status kn_onnx_tensor_encode(const kn_tensor *t, const char *name, void **out,
                                size_t *size, kn_error *err) {
  KnOnnx__TensorProto tp = KN_ONNX__TENSOR_PROTO__INIT;
  int64_t dims[KN_MAX_RANK];
  for (int32_t i = 0; i < t->rank; i++) dims[i] = t->dims[i];
  tp.n_dims = (size_t)t->rank;
  tp.dims = dims;
  tp.has_data_type = 1;
  tp.data_type = (int32_t)t->dtype;
  tp.name = (char *)name;
  ProtobufCBinaryData *strs = NULL;
  if (t->dtype == KN_DTYPE_STRING) {
    int64_t n = kn_tensor_numel(t);
    strs = kn_calloc((size_t)n, sizeof *strs);
    if (!strs) return kn_fail(err, KN_ERR_OOM, "out of memory encoding a tensor");
    for (int64_t i = 0; i < n; i++) {
      const char *s = ((char *const *)t->data)[i];
      strs[i].data = (uint8_t *)(s ? s : "");
      strs[i].len = s ? strlen(s) : 0;
    }
    tp.n_string_data = (size_t)n;
    tp.string_data = strs;
  } else {
    tp.has_raw_data = 1;
    tp.raw_data.data = t->data;
    tp.raw_data.len = t->nbytes;
  }
  size_t n = kn_onnx__tensor_proto__get_packed_size(&tp);
  uint8_t *buf = kn_malloc(n);
  if (!buf) {
    free(strs);
    return kn_fail(err, KN_ERR_OOM, "out of memory encoding a tensor");
  }
  kn_onnx__tensor_proto__pack(&tp, buf);
  free(strs);
  *out = buf;
  *size = n;
  return KN_OK;
}
