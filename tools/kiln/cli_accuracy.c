/* What kiln compare, validate, build and debug share: the seeded inputs
 * they generate and the comparison of an output with its reference (the
 * library's definitions, src/builder/builder.h, so that the CLI and
 * kn_validate measure alike), and the text of accuracy budgets
 * (cli.h). */
#include "cli.h"
#include "builder/builder.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

kn_status kn_cli_random_input(const kn_value_info *vi, const char *const *shapes, int n_shapes,
                              kn_cli_rng *r, kn_tensor *t, kn_error *err) {
  return kn_random_input(vi, shapes, (int32_t)n_shapes, &r->s, t, err);
}

double kn_cli_elem_f64(const kn_tensor *t, int64_t i) { return kn_elem_f64(t, i); }

bool kn_cli_diff_tensors(const kn_tensor *ref, const kn_tensor *opt, double atol, double rtol,
                         kn_cli_diff *out) {
  kn_diff d;
  bool ok = kn_diff_tensors(ref, opt, atol, rtol, &d);
  *out = (kn_cli_diff){.n = d.n, .bad = d.bad, .worst = d.worst, .max_abs = d.max_abs,
                       .max_rel = d.max_rel, .cosine = d.cosine};
  return ok;
}

int64_t kn_cli_argmax_rows(const kn_tensor *t, int64_t *pred, int64_t cap) {
  return kn_argmax_rows(t, pred, cap);
}

/* ---- accuracy budgets -------------------------------------------------------- */

void kn_cli_shell_quote(const char *s, char *buf, size_t n) {
  size_t o = 0;
  if (n < 3) {
    if (n) buf[0] = 0;
    return;
  }
  buf[o++] = '\'';
  for (; *s && o + 6 < n; s++) {
    if (*s == '\'') {
      memcpy(buf + o, "'\\''", 4);
      o += 4;
    } else {
      buf[o++] = *s;
    }
  }
  buf[o++] = '\'';
  buf[o] = 0;
}

void kn_cli_budget_text(const kn_accuracy_budget *b, char *buf, size_t n) {
  size_t o = 0;
  buf[0] = 0;
  if (b->has_min_cosine && o < n)
    o += (size_t)snprintf(buf + o, n - o, "--min-cosine %.9g", b->min_cosine);
  if (b->has_max_abs_error && o < n)
    o += (size_t)snprintf(buf + o, n - o, "%s--max-abs-error %.6g", o ? " " : "",
                          b->max_abs_error);
  if (b->has_max_accuracy_drop && o < n)
    snprintf(buf + o, n - o, "%s--max-accuracy-drop %.6g", o ? " " : "", b->max_accuracy_drop);
}

void kn_cli_trial_text(const kn_budget_trial *r, bool labels, char *buf, size_t n) {
  int k = snprintf(buf, n, "cosine %.9f max_abs %.4g", r->cosine, r->max_abs_error);
  if (labels && k >= 0 && (size_t)k < n)
    snprintf(buf + k, n - (size_t)k, " top-1 %.2f%% (%+.2f)", r->top1, 0.0 - r->top1_drop + 0.0);
}
