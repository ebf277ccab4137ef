/* kiln serve's repository (serve/repo.c) without HTTP: loading
 * at start, a bad model and a bad config reported not ready while the rest
 * serve, a new version that fails validation never served, a good one
 * switched in, references keeping a replaced version alive, unload, and
 * the specific and all version policies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "serve.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR "."
#endif

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  fclose(f);
}

static void copy_file(const char *from, const char *to) {
  FILE *f = fopen(from, "rb");
  assert_non_null(f);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  write_file(to, buf, n);
}

static void add_version(const char *repo, const char *model, int v, const char *src) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", repo, model);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/%s/%d", repo, model, v);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/%s/%d/model.onnx", repo, model, v);
  if (src) {
    char from[1024];
    snprintf(from, sizeof from, "%s/%s", KILN_SOURCE_DIR, src);
    copy_file(from, p);
  } else write_file(p, "not onnx", 8);
}

static void set_config(const char *repo, const char *model, const char *text) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s/config.json", repo, model);
  write_file(p, text, strlen(text));
}

/* The version serving requests for model (version -1: the default), or -1
 * with the status in *code. */
static int64_t serving(sv_server *s, const char *model, int64_t version, int *code, char *err) {
  sv_version *v = sv_repo_acquire(s, model, version, code, err, 1024);
  if (!v) return -1;
  int64_t ver = v->version;
  sv_version_release(v);
  return ver;
}

static void rm_rf(const char *dir) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

static void test_repository(void **state) {
  (void)state;
  char repo[] = "/tmp/kiln_test_serve_repo.XXXXXX";
  assert_non_null(mkdtemp(repo));
  static const char *cfg = "{\"max_batch_size\":4,\"dynamic_batching\":{},"
                           "\"validation\":{\"min_cosine\":0.999,\"timeout_ms\":300}}";
  add_version(repo, "m", 1, "serve/tests/data/affine.onnx");
  set_config(repo, "m", cfg);
  add_version(repo, "bad", 1, NULL);
  add_version(repo, "cfgerr", 1, "serve/tests/data/affine.onnx");
  set_config(repo, "cfgerr", "{\"max_batch_size\":4,\"dynamic_batching\":{\"delay\":1}}");

  sv_options o;
  sv_options_defaults(&o);
  o.repository = repo;
  o.port = -1; /* no HTTP */
  o.threads = 1;
  o.control = SV_CONTROL_EXPLICIT;
  sv_server *s = calloc(1, sizeof *s);
  assert_non_null(s);
  char err[1024];
  if (!sv_server_start(s, &o, err, sizeof err)) fail_msg("%s", err);
  int code;
  assert_int_equal(serving(s, "m", -1, &code, err), 1);
  assert_int_equal(serving(s, "bad", -1, &code, err), -1);
  assert_int_equal(code, 503);
  assert_int_equal(serving(s, "cfgerr", -1, &code, err), -1);
  assert_int_equal(code, 503);
  assert_non_null(strstr(err, "config.json: dynamic_batching.delay: unknown field"));
  assert_int_equal(serving(s, "nope", -1, &code, err), -1);
  assert_int_equal(code, 404);
  sv_buf b = {0};
  sv_repo_index(s, &b);
  assert_non_null(strstr(b.p, "{\"name\":\"bad\",\"version\":\"1\",\"state\":\"FAILED\",\"reason\":"));
  assert_non_null(strstr(b.p, "not a valid ONNX model"));
  assert_non_null(strstr(b.p, "{\"name\":\"m\",\"version\":\"1\",\"state\":\"READY\""));
  sv_buf_free(&b);

  /* version 2 computes other values (cosine < 0.999): rejected, 1 serves
   * on; version 4 has a fixed batch dim: fails to load */
  add_version(repo, "m", 2, "serve/tests/data/affine_neg.onnx");
  assert_false(sv_repo_sync(s, "m", err, sizeof err));
  if (!strstr(err, "validation: output 'y' cosine")) fail_msg("%s", err);
  assert_int_equal(serving(s, "m", -1, &code, err), 1);
  assert_int_equal(serving(s, "m", 2, &code, err), -1);
  assert_int_equal(code, 503);
  assert_non_null(strstr(err, "FAILED: validation"));
  add_version(repo, "m", 4, "tests/data/control/loop_endless.onnx");
  assert_false(sv_repo_sync(s, "m", err, sizeof err));
  if (!strstr(err, "needs input 'x' to have a dynamic batch dim 0")) fail_msg("%s", err);
  assert_int_equal(serving(s, "m", -1, &code, err), 1);
  char p4[1100];
  snprintf(p4, sizeof p4, "%s/m/4/model.onnx", repo);
  assert_int_equal(unlink(p4), 0);

  /* version 3: switched in; a reference held on 1 keeps it usable */
  sv_version *old = sv_repo_acquire(s, "m", 1, &code, err, sizeof err);
  assert_non_null(old);
  add_version(repo, "m", 3, "serve/tests/data/affine.onnx");
  assert_true(sv_repo_sync(s, "m", err, sizeof err));
  assert_int_equal(serving(s, "m", -1, &code, err), 3);
  assert_int_equal(serving(s, "m", 1, &code, err), -1);
  assert_int_equal(old->version, 1);
  assert_int_equal(atomic_load(&old->refs), 1); /* only ours */
  assert_non_null(old->batcher);
  sv_version_release(old); /* freed by the control thread */
  /* a poll-style sync leaves the failed version 2 alone (it reports
   * cfgerr's config) */
  assert_false(sv_repo_sync(s, NULL, err, sizeof err));
  if (!strstr(err, "cfgerr/config.json")) fail_msg("%s", err);
  assert_int_equal(serving(s, "m", -1, &code, err), 3);

  /* policies: specific [1], then all (an explicit load retries 2, which
   * passes now that the config has no accuracy gate) */
  set_config(repo, "m", "{\"max_batch_size\":4,\"dynamic_batching\":{},"
                        "\"version_policy\":{\"specific\":{\"versions\":[1]}}}");
  assert_true(sv_repo_sync(s, "m", err, sizeof err));
  assert_int_equal(serving(s, "m", -1, &code, err), 1);
  assert_int_equal(serving(s, "m", 3, &code, err), -1);
  set_config(repo, "m", "{\"max_batch_size\":4,\"dynamic_batching\":{},"
                        "\"version_policy\":{\"all\":{}},\"validation\":{\"timeout_ms\":300}}");
  if (!sv_repo_sync(s, "m", err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(serving(s, "m", 1, &code, err), 1);
  assert_int_equal(serving(s, "m", 2, &code, err), 2);
  assert_int_equal(serving(s, "m", 3, &code, err), 3);
  assert_int_equal(serving(s, "m", -1, &code, err), 3);

  /* unload: nothing serves; load brings the policy's versions back */
  assert_true(sv_repo_unload(s, "m", err, sizeof err));
  assert_int_equal(serving(s, "m", -1, &code, err), -1);
  assert_int_equal(code, 503);
  assert_false(sv_repo_unload(s, "nope", err, sizeof err));
  sv_repo_sync(s, "m", err, sizeof err);
  assert_int_equal(serving(s, "m", -1, &code, err), 3);

  /* metrics: loads, rejections and unloads counted */
  sv_metrics_render(s, &b);
  assert_non_null(strstr(b.p, "kiln_model_loads_total{model=\"m\",version=\"2\",outcome=\"rejected\"} 1"));
  assert_non_null(strstr(b.p, "kiln_model_loads_total{model=\"bad\",version=\"1\",outcome=\"failed\"} 1"));
  assert_non_null(strstr(b.p, "kiln_model_ready{model=\"m\",version=\"3\"} 1"));
  sv_buf_free(&b);
  sv_server_stop(s);
  free(s);
  rm_rf(repo);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_repository),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
