/* Core: dtypes, half-precision conversion, tensor allocation limits,
 * TensorProto and .npy round trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <unistd.h>

#include "onnx/onnx.h"

static void test_dtype_table(void **state) {
  (void)state;
  assert_string_equal(kn_dtype_name(KN_DTYPE_F32), "float32");
  assert_int_equal(kn_dtype_size(KN_DTYPE_BF16), 2);
  assert_int_equal(kn_dtype_size(KN_DTYPE_I64), 8);
  assert_null(kn_dtype_name((kn_dtype)14)); /* complex64: not supported */
  assert_true(kn_dtype_is_float(KN_DTYPE_F16));
  assert_false(kn_dtype_is_float(KN_DTYPE_I8));
  assert_true(kn_dtype_is_int(KN_DTYPE_U64));
}

static void test_f16_round_trip(void **state) {
  (void)state;
  /* every finite half converts to float and back unchanged */
  for (uint32_t h = 0; h < 0x10000; h++) {
    if ((h & 0x7c00) == 0x7c00) continue;
    float f = kn_f16_to_f32((uint16_t)h);
    assert_int_equal(kn_f32_to_f16(f), h);
  }
  assert_int_equal(kn_f32_to_f16(65520.0f), 0x7c00);        /* rounds to inf */
  assert_int_equal(kn_f32_to_f16(1.0f + 1.0f / 4096), 0x3c00); /* tie to even */
  assert_true(isnan(kn_f16_to_f32(kn_f32_to_f16(NAN))));
  assert_true(kn_f16_to_f32(0x0001) > 0 && kn_f16_to_f32(0x0001) < 1e-7f);
}

static void test_bf16(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 0x10000; h += 7) {
    if ((h & 0x7f80) == 0x7f80) continue;
    assert_int_equal(kn_f32_to_bf16(kn_bf16_to_f32((uint16_t)h)), h);
  }
  assert_true(isnan(kn_bf16_to_f32(kn_f32_to_bf16(NAN))));
}

static void test_alloc_limits(void **state) {
  (void)state;
  kn_tensor t;
  kn_error err;
  int64_t huge[] = {1 << 20, 1 << 20, 1 << 20};
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_F32, 3, huge, &err), KN_ERR_LIMIT);
  assert_non_null(strstr(err.msg, "limit"));
  int64_t neg[] = {-1};
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_F32, 1, neg, &err), KN_ERR_LIMIT);
  int64_t ovf[] = {INT64_MAX / 2, 4};
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_F32, 2, ovf, &err), KN_ERR_LIMIT);
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_F32, KN_MAX_RANK + 1, huge, &err),
                   KN_ERR_LIMIT);
  int64_t ok[] = {2, 0, 3};
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_F32, 3, ok, &err), KN_OK);
  assert_int_equal(kn_tensor_numel(&t), 0);
  kn_tensor_release(&t);
}

static void test_tensorproto_round_trip(void **state) {
  (void)state;
  kn_error err;
  kn_tensor t, back;
  int64_t dims[] = {2, 3};
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_I64, 2, dims, &err), KN_OK);
  for (int i = 0; i < 6; i++) ((int64_t *)t.data)[i] = (int64_t)i * -1234567890123LL;
  void *buf;
  size_t n;
  assert_int_equal(kn_onnx_tensor_encode(&t, "x", &buf, &n, &err), KN_OK);
  char *name = NULL;
  assert_int_equal(kn_onnx_tensor_decode(buf, n, "mem", &back, &name, &err), KN_OK);
  assert_string_equal(name, "x");
  assert_int_equal(back.dtype, KN_DTYPE_I64);
  assert_int_equal(back.rank, 2);
  assert_memory_equal(back.data, t.data, t.nbytes);
  /* every truncation is refused cleanly */
  for (size_t cut = 0; cut < n; cut++) {
    kn_tensor bad;
    kn_status st = kn_onnx_tensor_decode(buf, cut, "mem", &bad, NULL, &err);
    if (st == KN_OK) kn_tensor_release(&bad); /* a prefix may be a valid message */
  }
  free(buf);
  free(name);
  kn_tensor_release(&back);
  kn_tensor_release(&t);

  /* strings */
  int64_t two[] = {2};
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_STRING, 1, two, &err), KN_OK);
  ((char **)t.data)[0] = kn_strdup("hello");
  ((char **)t.data)[1] = kn_strdup("");
  assert_int_equal(kn_onnx_tensor_encode(&t, NULL, &buf, &n, &err), KN_OK);
  assert_int_equal(kn_onnx_tensor_decode(buf, n, "mem", &back, NULL, &err), KN_OK);
  assert_string_equal(((char **)back.data)[0], "hello");
  assert_string_equal(((char **)back.data)[1], "");
  free(buf);
  kn_tensor_release(&back);
  kn_tensor_release(&t);
}

static void test_npy_round_trip(void **state) {
  (void)state;
  kn_error err;
  kn_tensor t, back;
  int64_t dims[] = {3, 1, 2};
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_F32, 3, dims, &err), KN_OK);
  for (int i = 0; i < 6; i++) ((float *)t.data)[i] = (float)i / 3;
  char path[] = "/tmp/kiln_test_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(kn_tensor_write_npy(path, &t, &err), KN_OK);
  assert_int_equal(kn_tensor_read_file(path, &back, NULL, &err), KN_OK);
  assert_int_equal(back.rank, 3);
  assert_int_equal(back.dims[0], 3);
  assert_int_equal(back.dims[2], 2);
  assert_memory_equal(back.data, t.data, t.nbytes);
  kn_tensor_release(&back);
  /* 1-D shape "(6,)" and a scalar "()" */
  kn_tensor s = t;
  s.rank = 0;
  s.nbytes = 4;
  assert_int_equal(kn_tensor_write_npy(path, &s, &err), KN_OK);
  assert_int_equal(kn_tensor_read_file(path, &back, NULL, &err), KN_OK);
  assert_int_equal(back.rank, 0);
  kn_tensor_release(&back);
  unlink(path);
  kn_tensor_release(&t);
  /* a header that lies about its length */
  const char bad[] = "\x93NUMPY\x01\x00\xff\x7f{'descr': '<f4'";
  assert_int_equal(kn_npy_decode(bad, sizeof bad - 1, "bad.npy", &back, &err),
                   KN_ERR_PARSE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dtype_table),   cmocka_unit_test(test_f16_round_trip),
      cmocka_unit_test(test_bf16),          cmocka_unit_test(test_alloc_limits),
      cmocka_unit_test(test_tensorproto_round_trip),
      cmocka_unit_test(test_npy_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
