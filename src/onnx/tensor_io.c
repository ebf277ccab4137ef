/* Public tensor file functions (kiln.h). */
#include "onnx_internal.h"

kn_status kn_tensor_read_file(const char *path, kn_tensor *out, char **name_out,
                              kn_error *err) {
  memset(out, 0, sizeof *out);
  if (name_out) *name_out = NULL;
  void *buf;
  size_t size;
  kn_status st = kn_read_whole_file(path, &buf, &size, err);
  if (st) return st;
  if (size >= 6 && memcmp(buf, "\x93NUMPY", 6) == 0)
    st = kn_npy_decode(buf, size, path, out, err);
  else
    st = kn_onnx_tensor_decode(buf, size, path, out, name_out, err);
  free(buf);
  return st;
}

kn_status kn_tensor_write_pb(const char *path, const kn_tensor *t, const char *name,
                             kn_error *err) {
  void *buf;
  size_t size;
  kn_status st = kn_onnx_tensor_encode(t, name, &buf, &size, err);
  if (st) return st;
  FILE *f = fopen(path, "wb");
  if (!f) {
    free(buf);
    return kn_fail(err, KN_ERR_IO, "%s: cannot create file", path);
  }
  bool ok = fwrite(buf, 1, size, f) == size;
  ok = (fclose(f) == 0) && ok;
  free(buf);
  if (!ok) return kn_fail(err, KN_ERR_IO, "%s: write failed", path);
  return KN_OK;
}
