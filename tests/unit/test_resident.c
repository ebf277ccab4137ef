/* What a loaded engine and a build keep resident (docs/MEMORY.md,
 * "Resident memory"):
 * after a load and runs, none of the engine file's pages are mapped in the
 * process (the packed blocks and the small originals read as they are are
 * copies, everything else was dropped), also when the load repacks for
 * another ISA; a step whose original was dropped still reads it correctly
 * when it needs it (it comes back from the file); kn_model_originals tells
 * packed weights from originals read as they are; a build moves the
 * originals its blocks stand in for out of its heap. */
#include "testkit.h"

#include "core/cpu.h"
#include "tactics/tactics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR "."
#endif

/* KiB of `path`'s mappings resident in this process (/proc/self/smaps);
 * -1 where there is no /proc. */
static long mapped_rss_kib(const char *path) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[4608];
  bool in = false;
  long kib = 0, v;
  size_t plen = strlen(path);
  while (fgets(line, sizeof line, f)) {
    size_t len = strcspn(line, "\n");
    line[len] = 0;
    unsigned long lo, hi;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && strchr(line, ' ')) {
      in = len >= plen && !strcmp(line + len - plen, path);
      continue;
    }
    if (in && sscanf(line, "Rss: %ld kB", &v) == 1) kib += v;
  }
  fclose(f);
  return kib;
}

static void fill(float *x, int64_t n, uint32_t seed) {
  for (int64_t i = 0; i < n; i++) x[i] = 2.0f * tk_pseudo(&seed);
}

/* Logits of 2 seeded images (owned by the caller). */
static float *run2(kn_context *ctx) {
  int64_t dims[4] = {2, 3, 32, 32};
  kn_tensor t;
  kn_error err;
  assert_int_equal(kn_tensor_alloc(&t, KN_DTYPE_F32, 4, dims, NULL), KN_OK);
  fill(t.data, kn_tensor_numel(&t), 7);
  assert_int_equal(kn_context_set_input(ctx, 0, &t, &err), KN_OK);
  for (int r = 0; r < 3; r++)
    if (kn_context_run(ctx, &err)) fail_msg("%s", err.msg);
  const kn_tensor *y = kn_context_output(ctx, 0);
  assert_non_null(y);
  float *out = malloc(y->nbytes);
  memcpy(out, y->data, y->nbytes);
  kn_tensor_release(&t);
  return out;
}

/* m's runs on 1 thread give the same bits with its packed blocks and
 * without them (the steps then read their originals: from the file, the
 * small-constant block or the spill). */
static void same_without_blocks(kn_model *m) {
  kn_error err;
  kn_context *c;
  assert_int_equal(kn_context_create(m, &c, &err), KN_OK);
  assert_int_equal(kn_context_set_threads(c, 1, &err), KN_OK);
  float *with = run2(c);
  kn_context_free(c);
  void **keep = calloc((size_t)m->n_packed + 1, sizeof *keep);
  assert_non_null(keep);
  for (int32_t i = 0; i < m->n_packed; i++) {
    keep[i] = m->packed[i];
    m->packed[i] = NULL;
  }
  assert_int_equal(kn_context_create(m, &c, &err), KN_OK);
  assert_int_equal(kn_context_set_threads(c, 1, &err), KN_OK);
  float *without = run2(c);
  kn_context_free(c);
  for (int32_t i = 0; i < m->n_packed; i++) m->packed[i] = keep[i];
  free(keep);
  assert_memory_equal(with, without, 20 * sizeof(float));
  free(with);
  free(without);
}

static char engine_path[64];

static int make_engine(void **state) {
  (void)state;
  kn_error err;
  kn_model *m;
  if (kn_model_load(KILN_SOURCE_DIR "/models/tinycnn/model.onnx", &m, &err)) return -1;
  kn_build_options o;
  kn_build_options_init(&o);
  const char *shape[] = {"input=2x3x32x32"};
  o.shapes = shape;
  o.n_shapes = 1;
  snprintf(engine_path, sizeof engine_path, "/tmp/kiln_test_resident_XXXXXX");
  int fd = mkstemp(engine_path);
  if (fd < 0) return -1;
  close(fd);
  kn_status st = kn_model_build(m, &o, &err);
  if (!st) st = kn_model_save(m, engine_path, &err);
  kn_model_free(m);
  return st ? -1 : 0;
}

static int remove_engine(void **state) {
  (void)state;
  unlink(engine_path);
  return 0;
}

/* Loads the engine (under KILN_ISA=isa when not NULL), runs it and checks
 * that no page of the file stays mapped; returns the logits. */
static float *load_run_check(const char *isa) {
  char *old = getenv("KILN_ISA") ? strdup(getenv("KILN_ISA")) : NULL;
  if (isa) setenv("KILN_ISA", isa, 1);
  kn_error err;
  kn_model *m;
  kn_status st = kn_model_load(engine_path, &m, &err);
  kn_context *c = NULL;
  if (!st) st = kn_context_create(m, &c, &err);
  if (!st) st = kn_context_set_threads(c, 1, &err);
  if (old) setenv("KILN_ISA", old, 1);
  else unsetenv("KILN_ISA");
  free(old);
  if (st) fail_msg("%s", err.msg);
  int32_t blocks = 0;
  assert_true(kn_model_packed_bytes(m, &blocks) > 0);
  assert_true(blocks > 0);
  float *y = run2(c);
  long kib = mapped_rss_kib(engine_path);
  if (kib > 0) fail_msg("KILN_ISA=%s: %ld KiB of the engine file resident after runs", isa ? isa : "-", kib);
  kn_context_free(c);
  kn_model_free(m);
  return y;
}

static void test_engine_file_not_resident(void **state) {
  (void)state;
  float *native = load_run_check(NULL);
  /* the load repacks from the originals, and drops them again */
  float *repacked = load_run_check(kn_isa_detect(kn_cpu_features()) == KN_ISA_AVX2 ? "portable" : "avx2");
  for (int i = 0; i < 20; i++)
    if (fabsf(native[i] - repacked[i]) > 1e-4f + 1e-4f * fabsf(native[i]))
      fail_msg("logit %d: %g native, %g repacked", i, native[i], repacked[i]);
  free(native);
  free(repacked);
}

/* Without their blocks the fast runs pack per run from the originals the
 * load dropped: the pages come back from the file, the bits are the same. */
static void test_dropped_original_still_read(void **state) {
  (void)state;
  kn_error err;
  kn_model *m;
  assert_int_equal(kn_model_load(engine_path, &m, &err), KN_OK);
  same_without_blocks(m);
  kn_model_free(m);
}

/* tinycnn: its convolutions' and its Gemm's weights are packed, their
 * biases read beside the blocks, the Flatten's shape by a reference step;
 * a model built in memory has no block for a reference build. */
static void test_originals_fates(void **state) {
  (void)state;
  kn_error err;
  kn_model *m;
  assert_int_equal(kn_model_load(engine_path, &m, &err), KN_OK);
  const kn_graph *g = m->ir->graph;
  int32_t n = kn_model_originals(m, NULL, 0);
  assert_true(n > 0);
  kn_original *o = calloc((size_t)n, sizeof *o);
  assert_non_null(o);
  assert_int_equal(kn_model_originals(m, o, n), n);
  int32_t packed = 0, beside = 0, reference = 0;
  for (int32_t k = 0; k < n; k++) {
    assert_true(g->values[o[k].value].constant != NULL);
    assert_int_equal(o[k].bytes, g->values[o[k].value].constant->nbytes);
    if (o[k].fate == KN_ORIG_PACKED) {
      packed++;
      const kn_node *s = &g->nodes[o[k].step];
      assert_non_null(m->packed[o[k].step]);
      assert_int_equal(s->inputs[1], o[k].value); /* the weight operand */
    } else if (o[k].fate == KN_ORIG_BESIDE) {
      beside++;
      assert_non_null(m->packed[o[k].step]);
    } else if (o[k].fate == KN_ORIG_REFERENCE) {
      reference++;
      assert_int_equal(g->nodes[o[k].step].tactic, 0);
    }
  }
  assert_int_equal(packed, 5); /* four convolutions and the Gemm */
  assert_int_equal(beside, 5);
  assert_true(reference >= 1);
  free(o);
  kn_model_free(m);
}

/* A build moves the originals its blocks stand in for (64 KiB and up:
 * tinycnn's c4.weight) out of the heap into its spill file as it packs;
 * runs give the engine's bits, also without the blocks (the fast runs
 * then pack from the spilled originals). */
static void test_build_spills_packed_originals(void **state) {
  (void)state;
  kn_error err;
  kn_model *m;
  assert_int_equal(kn_model_load(KILN_SOURCE_DIR "/models/tinycnn/model.onnx", &m, &err), KN_OK);
  kn_build_options o;
  kn_build_options_init(&o);
  const char *shape[] = {"input=2x3x32x32"};
  o.shapes = shape;
  o.n_shapes = 1;
  o.tactics = KN_TACTICS_HEURISTIC;
  assert_int_equal(kn_model_build(m, &o, &err), KN_OK);
  const kn_graph *g = m->ir->graph;
  int32_t moved = 0, big = 0;
  for (int32_t v = 0; v < g->n_values; v++) {
    const kn_tensor *t = g->values[v].constant;
    if (!t || t->nbytes < ((size_t)64 << 10)) continue;
    big++;
    moved += !t->owned;
  }
  assert_true(big > 0);
  if (!m->spill) skip(); /* no disk-backed temporary folder here */
  assert_int_equal(moved, big);
  assert_int_equal(kn_spill_count(m->spill), moved);
  same_without_blocks(m);
  kn_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_engine_file_not_resident),
      cmocka_unit_test(test_dropped_original_still_read),
      cmocka_unit_test(test_originals_fates),
      cmocka_unit_test(test_build_spills_packed_originals),
  };
  return cmocka_run_group_tests(tests, make_engine, remove_engine);
}
