/*
 * The builder module: what sits above the runtime (src/engine) and
 * measures engines against their models.  Accuracy against the reference
 * path, seeded inputs, samples, and the precision trials behind the
 * validation gates (validate.c, kn_validate) and the accuracy-budget
 * builds (search.c, kn_model_build_budgeted); include/kiln.h documents
 * the public side.  The kiln CLI's compare, validate, build and debug
 * commands share the helpers declared here, so that every path measures
 * with one definition.
 */
#ifndef KN_BUILDER_H
#define KN_BUILDER_H

#include "core/core.h"

#include <stdbool.h>

/* ---- seeded inputs (accuracy.c) --------------------------------------------
 * xorshift64*, as the CLI's inputs have always been made (kiln compare,
 * bench, validate): the same seed gives the same inputs everywhere.  The
 * state of a seed N starts at N * 0x9E3779B97F4A7C15 + 1. */
static inline uint64_t kn_rng_next(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}
static inline uint64_t kn_rng_seed(uint64_t seed) { return seed * 0x9E3779B97F4A7C15ull + 1; }

/* An input for vi: dims from vi (a dynamic one from a NAME=DIMS among
 * shapes, else 1), floats uniform in [-1, 1), integers and bools 0 or 1.
 * KN_ERR_UNSUPPORTED for other dtypes ("give it with --input NAME=FILE"). */
kn_status kn_random_input(const kn_value_info *vi, const char *const *shapes, int32_t n_shapes,
                          uint64_t *rng, kn_tensor *t, kn_error *err) KN_WUR;

/* ---- the IO model's factors (machine_calib.c) ------------------------------
 * Fit m's per-family factors (kn_machine.factors) from calibration runs on
 * this machine, on 1 and `threads` threads, and record where and when.
 * The rest of m must describe this machine: `kiln probe` calls it after
 * kn_machine_probe (which cannot: the runs are builds, and a build may
 * probe).  About half a second. */
kn_status kn_machine_calibrate(kn_machine *m, int32_t threads, kn_error *err) KN_WUR;

/* ---- comparing an output with its reference (accuracy.c) ------------------ */

double kn_elem_f64(const kn_tensor *t, int64_t i); /* NAN for non-numeric dtypes */

typedef struct kn_diff {
  int64_t n;      /* elements */
  int64_t bad;    /* differing by more than atol + rtol * |reference| */
  int64_t worst;  /* the worst of those, -1 when none */
  double max_abs; /* INFINITY when one side is NaN */
  double max_rel; /* |a - b| / max(|b|, atol) */
  double cosine;  /* 1 when both are all zeros */
} kn_diff;
/* opt against its reference ref (elements NaN in both are equal); false
 * when their dtypes or shapes differ. */
bool kn_diff_tensors(const kn_tensor *ref, const kn_tensor *opt, double atol, double rtol,
                     kn_diff *out);
/* atol of the relative error's denominator in the gates' and trials'
 * comparisons (kiln compare's default) */
#define KN_ACC_ATOL 1e-4

/* Predictions of t: numel / last dim rows, the argmax of each into pred
 * (at most cap).  Returns the rows (0 for a non-numeric or empty one). */
int64_t kn_argmax_rows(const kn_tensor *t, int64_t *pred, int64_t cap);

/* Linear interpolation between order statistics of sorted[0 .. n-1]
 * (numpy's default), as every kiln latency percentile. */
double kn_percentile(const double *sorted, int64_t n, double p);
int kn_cmp_double(const void *a, const void *b);
double kn_now_s(void);      /* CLOCK_MONOTONIC seconds */
uint64_t kn_peak_rss(void); /* this process's peak RSS in bytes (getrusage) */

/* ---- samples (accuracy.c) ------------------------------------------------- */

/* Sample k of s (count > 0) into ins[0 .. nin): borrowed views of s's
 * tensors, or read (then owned: kn_samples_put releases them).  where:
 * the sample's name for messages, or NULL. */
kn_status kn_samples_get(const kn_samples *s, int32_t k, int32_t nin, kn_tensor *ins,
                         kn_error *err) KN_WUR;
void kn_samples_put(int32_t nin, kn_tensor *ins);
const char *kn_samples_name(const kn_samples *s, int32_t k); /* NULL: none */
/* Checks what every user of s checks: counts that agree with the model's
 * nin, a reader or tensors when count > 0, labels with a count. */
kn_status kn_samples_check(const kn_samples *s, int32_t nin, const char *label,
                           kn_error *err) KN_WUR;
/* "542 samples from DIR", "3 samples", "1 generated sample (seed 1)" */
void kn_samples_text(const kn_samples *s, char *buf, size_t n);

#endif
