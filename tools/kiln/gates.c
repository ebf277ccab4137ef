/* Validation gates (cli.h): an engine against the reference path of its
 * ONNX model, on the same inputs, with limits on accuracy, p99 latency and
 * peak RSS.  `kiln validate` reports them; `kiln build` refuses to write an
 * engine that fails one.  The measuring is the library's (kn_validate,
 * src/builder/validate.c); here the options, the sample folders and the
 * report's text and JSON. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void kn_cli_gates_init(kn_cli_gates *g) {
  memset(g, 0, sizeof *g);
  g->runs = KN_CLI_GATE_RUNS;
  g->warmup = KN_CLI_GATE_WARMUP;
  g->seed = 1;
}

int kn_cli_gate_option(const kn_cli_args *a, int id, kn_cli_gates *g) {
  int64_t v;
  switch (id) {
  case KN_CLI_O_MAX_P99:
    if (!kn_cli_double(a, 0, 1e9, &g->max_p99_ms)) return KN_EXIT_USAGE;
    g->has_p99 = true;
    return KN_EXIT_OK;
  case KN_CLI_O_MAX_RSS:
    if (!kn_cli_parse_bytes(a->arg, &g->max_rss))
      return kn_cli_usage(a->cmd, "--max-rss takes a byte count such as 536870912 or 512M, got "
                                  "'%s'", a->arg);
    g->has_rss = true;
    return KN_EXIT_OK;
  case KN_CLI_O_MAX_ABS:
    if (!kn_cli_double(a, 0, 1e300, &g->max_abs_error)) return KN_EXIT_USAGE;
    g->has_abs = true;
    return KN_EXIT_OK;
  case KN_CLI_O_MIN_COS:
    if (!kn_cli_double(a, -1, 1, &g->min_cosine)) return KN_EXIT_USAGE;
    g->has_cos = true;
    return KN_EXIT_OK;
  case KN_CLI_O_MAX_DROP:
    if (!kn_cli_double(a, 0, 100, &g->max_drop)) return KN_EXIT_USAGE;
    g->has_drop = true;
    return KN_EXIT_OK;
  case KN_CLI_O_LABELS:
    g->labels = a->arg;
    g->run_opts_given = true;
    return KN_EXIT_OK;
  case KN_CLI_O_DATA:
    g->data = a->arg;
    g->run_opts_given = true;
    return KN_EXIT_OK;
  case KN_CLI_O_RUNS:
    if (!kn_cli_int(a, 1, 100000000, &g->runs)) return KN_EXIT_USAGE;
    g->run_opts_given = true;
    return KN_EXIT_OK;
  case KN_CLI_O_WARMUP:
    if (!kn_cli_int(a, 0, 100000000, &g->warmup)) return KN_EXIT_USAGE;
    g->run_opts_given = true;
    return KN_EXIT_OK;
  case KN_CLI_O_GATE_SEED:
    if (!kn_cli_int(a, 0, INT64_MAX, &v)) return KN_EXIT_USAGE;
    g->seed = (uint64_t)v;
    g->run_opts_given = true;
    return KN_EXIT_OK;
  default: return -1;
  }
}

bool kn_cli_shape_spec_ok(const char *spec) {
  const char *eq = strrchr(spec, '=');
  int64_t dims[KN_MAX_RANK];
  int32_t rank;
  return eq && eq != spec && kn_cli_parse_dims(eq + 1, dims, &rank);
}

static const char *dt_name(kn_dtype dt) {
  const char *n = kn_dtype_name(dt);
  return n ? n : "unknown dtype";
}

/* JSON has no infinity or NaN: null stands for them. */
static void json_num(FILE *f, double v) {
  if (isfinite(v)) fprintf(f, "%.9g", v);
  else fputs("null", f);
}

/* kn_cli_dims_text for messages: "?" for a dynamic dim, "scalar" for rank 0. */
static void dims_text(const int64_t *dims, int32_t rank, char *buf, size_t n) {
  size_t o = 0;
  buf[0] = 0;
  if (rank == 0) snprintf(buf, n, "scalar");
  for (int32_t d = 0; d < rank && o < n; d++) {
    if (dims[d] < 0) o += (size_t)snprintf(buf + o, n - o, "%s?", d ? "x" : "");
    else o += (size_t)snprintf(buf + o, n - o, "%s%lld", d ? "x" : "", (long long)dims[d]);
  }
}

/* ---- the report ---------------------------------------------------------------- */

enum { LIM_COS = KN_GATE_MIN_COSINE, N_LIMITS = KN_GATE_COUNT };

typedef struct report_ctx {
  const kn_cli_gates *g;
  const char *label;
  const kn_cli_data *d;
  const kn_validate_report *r;
} report_ctx;

/* "0.1398 ms", "9.2 MiB", "0.00031", as the limit's unit reads. */
static void value_text(int which, double v, bool sign, char *buf, size_t n) {
  const char *plus = sign && v >= 0 ? "+" : "";
  switch (which) {
  case KN_GATE_MAX_P99_MS: snprintf(buf, n, "%s%.4g ms", plus, v); break;
  case KN_GATE_MAX_RSS: snprintf(buf, n, "%s%.1f MiB", plus, v / 1048576.0); break;
  case KN_GATE_MIN_COSINE: snprintf(buf, n, sign ? "%s%.3g" : "%s%.9f", plus, v); break;
  case KN_GATE_MAX_ACCURACY_DROP: snprintf(buf, n, "%s%.3g points", plus, v); break;
  default: snprintf(buf, n, "%s%.4g", plus, v); break;
  }
}

static void where_text(const report_ctx *c, const kn_gate *l, char *buf, size_t n) {
  buf[0] = 0;
  if (l->output < 0) return;
  if (c->d->s.count)
    snprintf(buf, n, "output '%s', sample %s", c->r->outputs[l->output].name,
             c->d->dirs.dirs[l->sample]);
  else snprintf(buf, n, "output '%s'", c->r->outputs[l->output].name);
}

static void print_text(const report_ctx *c) {
  const kn_cli_gates *g = c->g;
  const kn_validate_report *r = c->r;
  char src[4200];
  if (c->d->s.count) snprintf(src, sizeof src, "from %s", g->data);
  else snprintf(src, sizeof src, "generated, seed %llu", (unsigned long long)g->seed);
  printf("%s against %s: %d sample%s (%s), %s; %d thread%s, %lld runs after %lld warm-up%s\n",
         c->label, g->model, r->samples, r->samples == 1 ? "" : "s", src, r->inputs, r->threads,
         r->threads == 1 ? "" : "s", (long long)g->runs, (long long)g->warmup,
         g->warmup == 1 ? "" : "s");
  for (int32_t o = 0; o < r->n_outputs; o++) {
    const kn_output_accuracy *a = &r->outputs[o];
    if (!a->compared) {
      printf("output '%s': not compared (not a numeric tensor)\n", a->name);
      continue;
    }
    char d[128];
    dims_text(a->dims, a->rank, d, sizeof d);
    printf("output '%s' %s %s: max_abs %.3g  max_rel %.3g  cosine %.9f\n", a->name,
           dt_name(a->dtype), d, a->max_abs_error, a->max_rel_error, a->cosine);
  }
  printf("latency (ms): min %.4f  mean %.4f  p50 %.4f  p90 %.4f  p99 %.4f  max %.4f\n",
         r->latency_min_ms, r->latency_mean_ms, r->latency_p50_ms, r->latency_p90_ms,
         r->latency_p99_ms, r->latency_max_ms);
  printf("peak RSS: %.1f MiB (%llu bytes)\n", (double)r->peak_rss / 1048576.0,
         (unsigned long long)r->peak_rss);
  if (r->top1_rows)
    printf("top-1 accuracy of output '%s': engine %.2f%%, reference %.2f%% (%lld labels from "
           "%s)\n", r->n_outputs ? r->outputs[0].name : "?", r->top1, r->reference_top1,
           (long long)c->d->s.n_labels, c->d->labels_path);
  int given = 0, failed = 0;
  for (int i = 0; i < N_LIMITS; i++) {
    const kn_gate *l = &r->gates[i];
    if (!l->given) continue;
    given++;
    failed += !l->pass;
    char m[64], lv[64], mg[64], w[512];
    value_text(i, l->measured, false, m, sizeof m);
    value_text(i, l->limit, false, lv, sizeof lv);
    if (i == LIM_COS) snprintf(lv, sizeof lv, "%.9g", l->limit);
    value_text(i, l->margin, true, mg, sizeof mg);
    where_text(c, l, w, sizeof w);
    if (w[0])
      printf("%s %-14s %-16s limit %-12s margin %-12s (%s)\n", l->pass ? "PASS" : "FAIL",
             l->name, m, lv, mg, w);
    else
      printf("%s %-14s %-16s limit %-12s margin %s\n", l->pass ? "PASS" : "FAIL", l->name, m,
             lv, mg);
  }
  if (!given) {
    printf("PASS: no limits given (--max-p99-ms, --max-rss, --max-abs-error, --min-cosine): "
           "measurements only\n");
  } else if (!failed) {
    printf("PASS: %d limit%s met\n", given, given == 1 ? "" : "s");
  } else {
    printf("FAIL: %d of %d limit%s failed (", failed, given, given == 1 ? "" : "s");
    for (int i = 0, k = 0; i < N_LIMITS; i++)
      if (r->gates[i].given && !r->gates[i].pass) printf("%s%s", k++ ? ", " : "", r->gates[i].name);
    printf(")\n");
  }
}

static void print_json(const report_ctx *c) {
  const kn_cli_gates *g = c->g;
  const kn_validate_report *r = c->r;
  printf("{\"format\": \"kiln-validate\", \"version\": 1, \"engine\": ");
  kn_cli_json_str(stdout, c->label);
  printf(", \"model\": ");
  kn_cli_json_str(stdout, g->model);
  printf(", \"pass\": %s, \"samples\": %d, \"data\": ", r->pass ? "true" : "false", r->samples);
  if (g->data) kn_cli_json_str(stdout, g->data);
  else printf("null");
  printf(", \"seed\": %llu, \"inputs\": ", (unsigned long long)g->seed);
  kn_cli_json_str(stdout, r->inputs);
  printf(", \"threads\": %d, \"runs\": %lld, \"warmup\": %lld,\n \"limits\": [", r->threads,
         (long long)g->runs, (long long)g->warmup);
  for (int i = 0, k = 0; i < N_LIMITS; i++) {
    const kn_gate *l = &r->gates[i];
    if (!l->given) continue;
    printf("%s\n  {\"name\": \"%s\", \"measured\": ", k++ ? "," : "", l->name);
    json_num(stdout, l->measured);
    printf(", \"limit\": ");
    json_num(stdout, l->limit);
    printf(", \"margin\": ");
    json_num(stdout, l->margin);
    printf(", \"pass\": %s", l->pass ? "true" : "false");
    if (l->output >= 0) {
      printf(", \"output\": ");
      kn_cli_json_str(stdout, r->outputs[l->output].name);
      printf(", \"sample\": %d", l->sample);
    }
    printf("}");
  }
  printf("],\n \"accuracy\": {\"max_abs_error\": ");
  json_num(stdout, r->max_abs_error);
  printf(", \"min_cosine\": ");
  json_num(stdout, r->min_cosine);
  if (r->top1_rows)
    printf(", \"top1\": %.6f, \"reference_top1\": %.6f", r->top1, r->reference_top1);
  printf(", \"outputs\": [");
  for (int32_t o = 0; o < r->n_outputs; o++) {
    const kn_output_accuracy *a = &r->outputs[o];
    printf("%s\n  {\"name\": ", o ? "," : "");
    kn_cli_json_str(stdout, a->name);
    printf(", \"compared\": %s", a->compared ? "true" : "false");
    if (a->compared) {
      printf(", \"dtype\": \"%s\", \"shape\": [", dt_name(a->dtype));
      for (int32_t d = 0; d < a->rank; d++) printf("%s%lld", d ? ", " : "", (long long)a->dims[d]);
      printf("], \"max_abs_error\": ");
      json_num(stdout, a->max_abs_error);
      printf(", \"max_rel_error\": ");
      json_num(stdout, a->max_rel_error);
      printf(", \"cosine\": ");
      json_num(stdout, a->cosine);
      printf(", \"worst_abs_sample\": %d, \"worst_cosine_sample\": %d", a->worst_abs_sample,
             a->worst_cosine_sample);
    }
    printf("}");
  }
  printf("]},\n \"latency_ms\": {\"min\": %.6f, \"mean\": %.6f, \"p50\": %.6f, \"p90\": %.6f, "
         "\"p99\": %.6f, \"max\": %.6f},\n \"peak_rss_bytes\": %llu}\n",
         r->latency_min_ms, r->latency_mean_ms, r->latency_p50_ms, r->latency_p90_ms,
         r->latency_p99_ms, r->latency_max_ms, (unsigned long long)r->peak_rss);
}

int kn_cli_gates_check(const kn_cli_gates *g, char *failed, size_t failed_size) {
  if (failed_size) failed[0] = 0;
  const char *label = g->label ? g->label : g->engine;
  /* said before the engine's runs rather than after them */
  if (access(g->model, R_OK) != 0)
    return kn_cli_fail("%s: cannot open: %s", g->model, strerror(errno));
  kn_error err = {0};
  kn_model *m = NULL;
  if (kn_model_load(g->engine, &m, &err)) {
    if (g->label && strcmp(g->label, g->engine)) return kn_cli_fail("%s: %s", g->label, err.msg);
    return kn_cli_error(&err);
  }
  kn_cli_data d;
  kn_validate_report r;
  memset(&r, 0, sizeof r);
  int rc = KN_EXIT_ERROR;
  memset(&d, 0, sizeof d);
  if (kn_model_format_version(m) == 0) {
    rc = kn_cli_fail("%s is an ONNX model, not an engine: write one with kiln build MODEL -o "
                     "ENGINE (kiln compare compares a model with its optimized build)", label);
    goto done;
  }
  if ((rc = kn_cli_data_open(&d, m, label, g->data, g->labels, g->has_drop, g->seed, label)))
    goto done;
  kn_validate_options o;
  kn_validate_options_init(&o);
  o.label = label;
  o.shapes = g->shapes;
  o.n_shapes = g->n_shapes;
  o.runs = g->runs;
  o.warmup = g->warmup;
  o.threads = (int32_t)g->threads;
  o.has_max_p99_ms = g->has_p99;
  o.max_p99_ms = g->max_p99_ms;
  o.has_max_rss = g->has_rss;
  o.max_rss = g->max_rss;
  o.accuracy = (kn_accuracy_budget){g->has_cos, g->has_abs, g->has_drop, g->min_cosine,
                                    g->max_abs_error, g->max_drop};
  /* the reference build may probe this machine (one line, before the runs) */
  kn_build_options rb;
  kn_build_options_init(&rb);
  rb.no_optimize = 1;
  kn_cli_note_probe(NULL, &rb);
  if (kn_validate(m, g->model, &d.s, &o, &r, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  report_ctx c = {g, label, &d, &r};
  if (g->json) print_json(&c);
  else print_text(&c);
  fflush(stdout);
  size_t used = 0;
  for (int i = 0; i < N_LIMITS; i++) {
    const kn_gate *l = &r.gates[i];
    if (!l->given || l->pass) continue;
    char mv[64], lv[64];
    value_text(i, l->measured, false, mv, sizeof mv);
    value_text(i, l->limit, false, lv, sizeof lv);
    if (i == LIM_COS) snprintf(lv, sizeof lv, "%.9g", l->limit);
    if (used < failed_size)
      used += (size_t)snprintf(failed + used, failed_size - used, "%s--%s (measured %s, limit %s)",
                               used ? " and " : "", l->name, mv, lv);
    rc = KN_EXIT_ERROR;
  }
done:
  kn_validate_report_release(&r);
  kn_cli_data_close(&d);
  kn_model_free(m);
  return rc;
}
