/* Every truncation and every single-bit flip of the CLI's small fixtures
 * (tests/bad: ONNX models, an engine built from good.onnx, a TensorProto and
 * a .npy input), each run the way `kiln run` runs it: load from a file,
 * build, bind the inputs of tests/bad/good_data, run, write the outputs.
 * Every mutant must either run or fail with a one-line message; ASan and
 * UBSan (the second suite run) catch what would crash.  This is the
 * exhaustive sweep that tests/cli_test.sh used to do with one process per
 * mutant; starting tens of thousands of ASan processes took most of the
 * suite's time, so the CLI test now keeps a sample (and the whole sweep
 * under KILN_LONG_TESTS=1) and the sweep lives here, in one process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kiln.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR "."
#endif
#define BAD KILN_SOURCE_DIR "/tests/bad/"

typedef struct fixture {
  char dir[64];
} fixture;

static void *read_all(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *size = (size_t)n;
  return buf;
}

static void write_all(const char *path, const void *buf, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) fail_msg("cannot create %s", path);
  if (size) assert_int_equal(fwrite(buf, 1, size, f), size);
  assert_int_equal(fclose(f), 0);
}

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  snprintf(f->dir, sizeof f->dir, "/tmp/kn_cli_sweep_XXXXXX");
  if (!mkdtemp(f->dir)) return -1;
  /* ext.onnx's external data resolves next to the mutant */
  size_t n;
  void *w = read_all(BAD "weights.bin", &n);
  char p[128];
  snprintf(p, sizeof p, "%s/weights.bin", f->dir);
  write_all(p, w, n);
  free(w);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
  if (system(cmd) != 0) return -1;
  free(f);
  return 0;
}

/* A failure must carry one line of text. */
static void check_message(kn_status st, const kn_error *err, const char *what) {
  if (st == KN_OK) return;
  if (!err->msg[0]) fail_msg("%s: status %d with an empty message", what, st);
  if (strchr(err->msg, '\n')) fail_msg("%s: message has a newline: %s", what, err->msg);
}

/* What `kiln run MODEL --input-dir bad/good_data --output-dir OUT` does,
 * with input 0 read from `input0` when not NULL.  Returns the status. */
static kn_status run_like_cli(const fixture *f, const char *model_path, const char *input0,
                              kn_error *err) {
  kn_model *m = NULL;
  kn_context *ctx = NULL;
  kn_tensor ins[8];
  memset(ins, 0, sizeof ins);
  int32_t nin = 0;
  kn_build_options bo;
  kn_build_options_init(&bo);
  kn_status st = kn_model_load(model_path, &m, err);
  if (!st) st = kn_model_build(m, &bo, err);
  if (!st) st = kn_context_create(m, &ctx, err);
  /* one thread: no worker started and stopped per mutant */
  if (!st) st = kn_context_set_threads(ctx, 1, err);
  if (!st) nin = kn_model_input_count(m);
  for (int32_t i = 0; !st && i < nin; i++) {
    char p[512];
    snprintf(p, sizeof p, BAD "good_data/input_%d.pb", i);
    const char *file = i == 0 && input0 ? input0 : p;
    if (i >= 8 || access(file, F_OK) != 0) {
      snprintf(err->msg, sizeof err->msg, "input %d was not given", i);
      st = err->status = KN_ERR_MISSING;
      break;
    }
    st = kn_tensor_read_file(file, &ins[i], NULL, err);
    if (!st) st = kn_context_set_input(ctx, i, &ins[i], err);
  }
  if (!st) st = kn_context_run(ctx, err);
  for (int32_t o = 0; !st && o < kn_model_output_count(m); o++) {
    const kn_tensor *t = kn_context_output(ctx, o);
    kn_value_info vi;
    char p[128];
    snprintf(p, sizeof p, "%s/output_%d.pb", f->dir, o);
    if (t && kn_model_output_info(m, o, &vi) == KN_OK) st = kn_tensor_write_pb(p, t, vi.name, err);
  }
  for (int32_t i = 0; i < 8; i++) kn_tensor_release(&ins[i]);
  kn_context_free(ctx);
  kn_model_free(m);
  return st;
}

typedef enum { AS_MODEL, AS_INPUT } sweep_kind;

/* Every prefix and every bit of every byte flipped (one at a time). */
static void sweep(const fixture *f, const char *src, const char *ext, sweep_kind kind) {
  size_t size;
  uint8_t *good = read_all(src, &size);
  uint8_t *buf = malloc(size + 1);
  assert_non_null(buf);
  char mutant[128];
  snprintf(mutant, sizeof mutant, "%s/mutant.%s", f->dir, ext);
  int64_t ran = 0, refused = 0;
  char what[256];
  for (size_t cut = 0; cut <= size; cut++) {
    write_all(mutant, good, cut);
    kn_error err;
    memset(&err, 0, sizeof err);
    kn_status st = kind == AS_MODEL ? run_like_cli(f, mutant, NULL, &err)
                                    : run_like_cli(f, BAD "good.onnx", mutant, &err);
    snprintf(what, sizeof what, "%s truncated to %zu bytes", src, cut);
    check_message(st, &err, what);
    if (cut == size && st != KN_OK) fail_msg("%s: the intact file fails: %s", src, err.msg);
    st ? refused++ : ran++;
  }
  for (size_t pos = 0; pos < size; pos++)
    for (int bit = 0; bit < 8; bit++) {
      memcpy(buf, good, size);
      buf[pos] ^= (uint8_t)(1u << bit);
      write_all(mutant, buf, size);
      kn_error err;
      memset(&err, 0, sizeof err);
      kn_status st = kind == AS_MODEL ? run_like_cli(f, mutant, NULL, &err)
                                      : run_like_cli(f, BAD "good.onnx", mutant, &err);
      snprintf(what, sizeof what, "%s with bit %d of byte %zu flipped", src, bit, pos);
      check_message(st, &err, what);
      st ? refused++ : ran++;
    }
  print_message("%s: %zu prefixes and %zu bit flips: %lld ran, %lld refused\n", src, size + 1,
                8 * size, (long long)ran, (long long)refused);
  assert_true(refused > 0);
  free(buf);
  free(good);
}

static void test_good_onnx(void **state) { sweep(*state, BAD "good.onnx", "onnx", AS_MODEL); }
static void test_ext_onnx(void **state) { sweep(*state, BAD "ext.onnx", "onnx", AS_MODEL); }
static void test_sparse_onnx(void **state) { sweep(*state, BAD "sparse.onnx", "onnx", AS_MODEL); }
static void test_nested_if2_onnx(void **state) {
  sweep(*state, BAD "nested_if2.onnx", "onnx", AS_MODEL);
}
static void test_input_pb(void **state) {
  sweep(*state, BAD "good_data/input_0.pb", "pb", AS_INPUT);
}
static void test_input_npy(void **state) { sweep(*state, BAD "good_data/x.npy", "npy", AS_INPUT); }

/* An engine built from good.onnx.  The header and section checksums refuse
 * most flips; those in the zero padding between 64-byte aligned sections
 * (covered by no checksum, read by nothing) load and run unchanged. */
static void test_good_engine(void **state) {
  fixture *f = *state;
  char engine[128];
  snprintf(engine, sizeof engine, "%s/good.kiln", f->dir);
  kn_error err;
  kn_model *m = NULL;
  kn_build_options bo;
  kn_build_options_init(&bo);
  if (kn_model_load(BAD "good.onnx", &m, &err) || kn_model_build(m, &bo, &err) ||
      kn_model_save(m, engine, &err))
    fail_msg("%s", err.msg);
  kn_model_free(m);
  sweep(f, engine, "kiln", AS_MODEL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good_onnx),       cmocka_unit_test(test_ext_onnx),
      cmocka_unit_test(test_sparse_onnx),     cmocka_unit_test(test_nested_if2_onnx),
      cmocka_unit_test(test_input_pb),        cmocka_unit_test(test_input_npy),
      cmocka_unit_test(test_good_engine),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
