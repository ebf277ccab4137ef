/* The tactics registry (src/tactics/tactics_registry.c): every family's entries
 * name an op kiln has, once, with a fast run to go with a select; lookups
 * find them across the domain spellings; binding and selection point nodes
 * at their entry. */
#include "testkit.h"

typedef struct seen {
  int32_t n;
  const kn_op_tactics *t[256];
} seen;

static void check_entry(const kn_op_tactics *t, void *arg) {
  seen *s = arg;
  if (!kn_op_find(t->domain, t->op_type))
    fail_msg("tactics for %s:%s, an op kiln does not have", t->domain ? t->domain : "",
             t->op_type);
  if (t->select && !t->run)
    fail_msg("%s selects a tactic but has no run to go with it", t->op_type);
  if (kn_tactics_for(t->domain, t->op_type) != t)
    fail_msg("%s:%s has more than one entry", t->domain ? t->domain : "", t->op_type);
  assert_true(s->n < 256);
  s->t[s->n++] = t;
}

static void test_entries(void **state) {
  (void)state;
  seen s = {0};
  kn_tactics_foreach(check_entry, &s);
  assert_true(s.n > 40);
  /* the default domain's spellings are one; kiln's ops are in theirs */
  const kn_op_tactics *mm = kn_tactics_for("", "MatMul");
  assert_non_null(mm);
  assert_ptr_equal(kn_tactics_for(NULL, "MatMul"), mm);
  assert_ptr_equal(kn_tactics_for("ai.onnx", "MatMul"), mm);
  assert_null(kn_tactics_for(KN_DOMAIN, "MatMul"));
  assert_non_null(kn_tactics_for(KN_DOMAIN, "FusedConv"));
  assert_null(kn_tactics_for("", "FusedConv"));
  assert_null(kn_tactics_for("", "Hardmax")); /* reference only */
}

static void test_bind_and_select(void **state) {
  (void)state;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = tk_input(g, "x", 2, (int64_t[]){4, 8});
  int32_t s = tk_node(g, "Softmax", 1, &x);
  tk_output(g, tk_node(g, "Hardmax", 1, &s));
  tk_prepare(m); /* binds */
  assert_ptr_equal(g->nodes[0].impl, kn_tactics_for("", "Softmax"));
  assert_null(g->nodes[1].impl);
  g->nodes[0].impl = NULL;
  kn_tactics_select(m, KN_ISA_PORTABLE, false);
  assert_ptr_equal(g->nodes[0].impl, kn_tactics_for("", "Softmax"));
  assert_int_equal(g->nodes[0].tactic, KN_TACTIC_softmax);
  assert_int_equal(g->nodes[1].tactic, 0);
  kn_tactics_select(m, KN_ISA_PORTABLE, true);
  assert_int_equal(g->nodes[0].tactic, 0);
  assert_non_null(g->nodes[0].impl);
  kn_ir_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_entries),
      cmocka_unit_test(test_bind_and_select),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
