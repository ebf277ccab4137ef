/* IR: value lookup, outer-scope resolution, topological sort and its errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ir/ir.h"

static kn_node *add_node(kn_graph *g, const char *name, int32_t in0, int32_t in1,
                         int32_t out) {
  kn_node *n = kn_graph_add_node(g);
  n->name = kn_strdup(name);
  n->op_type = kn_strdup("Add");
  n->domain = kn_strdup("");
  n->inputs = kn_calloc(2, sizeof(int32_t));
  n->outputs = kn_calloc(1, sizeof(int32_t));
  n->inputs[0] = in0;
  n->inputs[1] = in1;
  n->n_inputs = 2;
  n->outputs[0] = out;
  n->n_outputs = 1;
  return n;
}

static void test_lookup_many(void **state) {
  (void)state;
  kn_graph *g = kn_graph_new(NULL);
  char name[32];
  for (int i = 0; i < 5000; i++) {
    snprintf(name, sizeof name, "v%d", i);
    assert_int_equal(kn_graph_add_value(g, name), i);
  }
  for (int i = 0; i < 5000; i += 37) {
    snprintf(name, sizeof name, "v%d", i);
    assert_int_equal(kn_graph_find(g, name), i);
  }
  assert_int_equal(kn_graph_find(g, "nope"), -1);
  kn_graph_free(g);
}

static void test_sort_reorders(void **state) {
  (void)state;
  kn_error err;
  kn_graph *g = kn_graph_new(NULL);
  int32_t x = kn_graph_add_value(g, "x"), a = kn_graph_add_value(g, "a"),
          b = kn_graph_add_value(g, "b");
  g->values[x].is_input = true;
  add_node(g, "second", a, a, b); /* listed before its producer */
  add_node(g, "first", x, x, a);
  assert_int_equal(kn_graph_finish(g, "t", &err), KN_OK);
  assert_string_equal(g->nodes[0].name, "first");
  assert_string_equal(g->nodes[1].name, "second");
  assert_int_equal(g->values[b].producer, 1);
  kn_graph_free(g);
}

static void test_cycle_and_dangling(void **state) {
  (void)state;
  kn_error err;
  kn_graph *g = kn_graph_new(NULL);
  int32_t a = kn_graph_add_value(g, "a"), b = kn_graph_add_value(g, "b");
  add_node(g, "n1", a, a, b);
  add_node(g, "n2", b, b, a);
  assert_int_equal(kn_graph_finish(g, "t", &err), KN_ERR_PARSE);
  assert_non_null(strstr(err.msg, "cycle"));
  kn_graph_free(g);

  g = kn_graph_new(NULL);
  a = kn_graph_add_value(g, "a");
  b = kn_graph_add_value(g, "b");
  add_node(g, "n1", a, a, b); /* a has no producer */
  assert_int_equal(kn_graph_finish(g, "t", &err), KN_ERR_PARSE);
  assert_non_null(strstr(err.msg, "'a'"));
  kn_graph_free(g);
}

static void test_outer_scope(void **state) {
  (void)state;
  kn_graph *g = kn_graph_new(NULL);
  int32_t x = kn_graph_add_value(g, "x");
  kn_graph *sub = kn_graph_new(g);
  kn_graph *subsub = kn_graph_new(sub);
  int32_t r = kn_graph_resolve(subsub, "x");
  assert_true(r >= 0);
  int32_t mid = subsub->values[r].outer;
  assert_true(mid >= 0);
  assert_int_equal(sub->values[mid].outer, x); /* chained through the middle graph */
  assert_int_equal(kn_graph_resolve(subsub, "missing"), -1);
  kn_graph_free(subsub);
  kn_graph_free(sub);
  kn_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lookup_many),
      cmocka_unit_test(test_sort_reorders),
      cmocka_unit_test(test_cycle_and_dangling),
      cmocka_unit_test(test_outer_scope),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
