/* libFuzzer target: the TensorProto and .npy readers on arbitrary bytes,
 * and the encoder on whatever decodes. */
#include "onnx/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kn_error err;
  kn_tensor t;
  char *name = NULL;
  if (kn_onnx_tensor_decode(data, size, "fuzz.pb", &t, &name, &err) == KN_OK) {
    void *buf;
    size_t n;
    if (kn_onnx_tensor_encode(&t, name, &buf, &n, &err) == KN_OK) free(buf);
    kn_tensor_release(&t);
  }
  free(name);
  if (kn_npy_decode(data, size, "fuzz.npy", &t, &err) == KN_OK) kn_tensor_release(&t);
  return 0;
}
