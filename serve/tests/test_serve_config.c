/* kiln serve's config.json (serve/config.c): Triton's model
 * config names parsed into sv_config, defaults, and one-line errors naming
 * the file, the field and what was expected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "serve.h"

#include <string.h>

static bool parse(const char *text, sv_config *c, char *err) {
  return sv_config_parse(text, strlen(text), "repo/m/config.json", "m", c, err, 512);
}

static void test_defaults(void **state) {
  (void)state;
  sv_config c;
  char err[512];
  assert_true(parse("{}", &c, err));
  assert_int_equal(c.max_batch_size, 0);
  assert_false(c.dynamic_batching);
  assert_int_equal(c.priority_levels, 1);
  assert_int_equal(c.instance_count, 1);
  assert_int_equal(c.version_policy, SV_POLICY_LATEST);
  assert_int_equal(c.num_versions, 1);
  assert_int_equal(c.timeout_action, SV_TIMEOUT_REJECT);
  assert_true(c.min_cosine < -1 + 1e-9 && c.max_p99_ms < 0);
}

static void test_full(void **state) {
  (void)state;
  const char *text =
      "{\"name\":\"m\",\"platform\":\"onnxruntime_onnx\",\"max_batch_size\":16,"
      "\"input\":[{\"name\":\"ids\",\"data_type\":\"TYPE_INT64\",\"dims\":[128]}],"
      "\"output\":[{\"name\":\"y\"}],"
      "\"dynamic_batching\":{\"max_queue_delay_microseconds\":500,"
      "\"preferred_batch_size\":[4,8],\"priority_levels\":3,\"default_priority_level\":2,"
      "\"default_queue_policy\":{\"timeout_action\":\"DELAY\","
      "\"default_timeout_microseconds\":100000,\"allow_timeout_override\":false,"
      "\"max_queue_size\":64}},"
      "\"instance_group\":[{\"count\":2,\"kind\":\"KIND_CPU\",\"threads\":1}],"
      "\"version_policy\":{\"specific\":{\"versions\":[1,3]}},"
      "\"slo\":{\"p99_ms\":25.5},"
      "\"validation\":{\"min_cosine\":0.999,\"max_abs_error\":0.01,\"max_p99_ms\":40,\"runs\":5}}";
  sv_config c;
  char err[512];
  assert_true(parse(text, &c, err));
  assert_int_equal(c.max_batch_size, 16);
  assert_int_equal(c.n_inputs, 1);
  assert_string_equal(c.inputs[0].name, "ids");
  assert_int_equal(c.inputs[0].rank, 1);
  assert_int_equal(c.inputs[0].dims[0], 128);
  assert_true(c.dynamic_batching);
  assert_int_equal(c.max_queue_delay_us, 500);
  assert_int_equal(c.n_preferred, 2);
  assert_int_equal(c.preferred[1], 8);
  assert_int_equal(c.priority_levels, 3);
  assert_int_equal(c.default_priority_level, 2);
  assert_int_equal(c.timeout_action, SV_TIMEOUT_DELAY);
  assert_int_equal(c.default_timeout_us, 100000);
  assert_false(c.allow_timeout_override);
  assert_int_equal(c.max_queue_size, 64);
  assert_int_equal(c.instance_count, 2);
  assert_int_equal(c.instance_threads, 1);
  assert_int_equal(c.version_policy, SV_POLICY_SPECIFIC);
  assert_int_equal(c.n_versions, 2);
  assert_int_equal(c.versions[1], 3);
  assert_true(c.slo_p99_ms == 25.5);
  assert_true(c.min_cosine == 0.999 && c.max_abs_error == 0.01 && c.max_p99_ms == 40);
  assert_int_equal(c.validation_runs, 5);

  /* adaptive batching: on by default, off when preferred sizes are given
   * (as above) unless asked for, and off when asked */
  assert_false(c.adaptive);
  assert_true(parse("{\"max_batch_size\":8,\"dynamic_batching\":{}}", &c, err));
  assert_true(c.adaptive);
  assert_true(parse("{\"max_batch_size\":8,\"dynamic_batching\":{\"adaptive\":false}}", &c,
                    err));
  assert_false(c.adaptive);
  assert_true(parse("{\"max_batch_size\":8,\"dynamic_batching\":{\"preferred_batch_size\":[4],"
                    "\"adaptive\":true}}",
                    &c, err));
  assert_true(c.adaptive);

  assert_true(parse("{\"version_policy\":{\"latest\":{\"num_versions\":2}}}", &c, err));
  assert_int_equal(c.num_versions, 2);
  assert_true(parse("{\"version_policy\":{\"all\":{}}}", &c, err));
  assert_int_equal(c.version_policy, SV_POLICY_ALL);
}

static void test_errors(void **state) {
  (void)state;
  static const struct {
    const char *text, *expect;
  } cases[] = {
      {"{\"max_batch_size\":", "repo/m/config.json: (document): malformed JSON at byte"},
      {"[]", "(document): expected a JSON object"},
      {"{\"max_batch\":4}", "repo/m/config.json: max_batch: unknown field; expected one of name, "
                            "max_batch_size"},
      {"{\"name\":\"other\"}", "name: expected the model directory's name \"m\""},
      {"{\"max_batch_size\":-1}", "max_batch_size: expected an integer from 0 to 4096"},
      {"{\"max_batch_size\":2.5}", "max_batch_size: expected an integer"},
      {"{\"dynamic_batching\":{}}", "dynamic_batching: needs max_batch_size > 0"},
      {"{\"max_batch_size\":4,\"dynamic_batching\":{\"max_queue_delay_us\":5}}",
       "dynamic_batching.max_queue_delay_us: unknown field; expected one of "
       "max_queue_delay_microseconds"},
      {"{\"max_batch_size\":4,\"dynamic_batching\":{\"preferred_batch_size\":[8]}}",
       "dynamic_batching.preferred_batch_size: expected an integer from 1 to 4"},
      {"{\"max_batch_size\":4,\"dynamic_batching\":{\"default_queue_policy\":"
       "{\"timeout_action\":\"DROP\"}}}",
       "dynamic_batching.default_queue_policy.timeout_action: expected \"REJECT\" or \"DELAY\""},
      {"{\"max_batch_size\":4,\"dynamic_batching\":{\"priority_levels\":2,"
       "\"default_priority_level\":3}}",
       "dynamic_batching.default_priority_level: expected an integer from 0 to 2"},
      {"{\"instance_group\":[{\"count\":0}]}", "instance_group[0].count: expected an integer "
                                               "from 1 to 64"},
      {"{\"instance_group\":[{\"kind\":\"KIND_GPU\"}]}", "instance_group[0].kind: expected "
                                                         "\"KIND_CPU\" or \"KIND_AUTO\""},
      {"{\"instance_group\":[{},{}]}", "instance_group: expected an array of one group"},
      {"{\"input\":[{\"dims\":[3]}]}", "input[0]: expected a \"name\" string"},
      {"{\"input\":[{\"name\":\"x\",\"dims\":[3,\"a\"]}]}", "input[0].dims: expected an integer"},
      {"{\"version_policy\":{\"latest\":{},\"all\":{}}}", "version_policy: expected exactly one "
                                                          "of latest, specific, all"},
      {"{\"version_policy\":{\"specific\":{\"versions\":[]}}}",
       "version_policy.specific.versions: expected a non-empty array"},
      {"{\"version_policy\":{\"latest\":{\"num_versions\":0}}}",
       "version_policy.latest.num_versions: expected an integer from 1"},
      {"{\"max_batch_size\":4,\"dynamic_batching\":{},\"slo\":{}}",
       "slo.p99_ms: expected the target p99 latency in milliseconds"},
      {"{\"slo\":{\"p99_ms\":10}}", "slo: needs a dynamic_batching section"},
      {"{\"max_batch_size\":4,\"dynamic_batching\":{\"adaptive\":1}}",
       "dynamic_batching.adaptive: expected true or false"},
      {"{\"validation\":{\"min_cosine\":2}}", "validation.min_cosine: expected a number from -1 "
                                              "to 1"},
      {"{\"validation\":{\"max_rss\":2}}", "validation.max_rss: unknown field"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sv_config c;
    char err[512] = "";
    bool ok = parse(cases[i].text, &c, err);
    if (ok || !strstr(err, cases[i].expect) || strchr(err, '\n'))
      fail_msg("case %zu: ok %d: '%s' lacks '%s'", i, ok, err, cases[i].expect);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_full),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
