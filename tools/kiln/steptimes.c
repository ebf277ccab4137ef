/* Measured step times: `kiln bench --per-step` takes them, keeps them
 * beside an engine (ENGINE.steps.json) and `kiln inspect` shows them next
 * to the IO model's predictions (cli.h). */
#include "cli.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct step_timer {
  const char **first_output; /* per step: the name of its first output, or NULL */
  int32_t steps, next;
  double last, *cur;
} step_timer;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

/* After each step with every tensor it made: the time since the previous
 * step's goes to the step whose first output this is (steps run in order;
 * a step's other outputs, and steps that make nothing, fall through). */
static void observe(const char *name, const kn_tensor *t, void *arg) {
  (void)t;
  step_timer *tm = arg;
  double x = now_us();
  for (int32_t i = tm->next; i < tm->steps; i++)
    if (tm->first_output[i] && !strcmp(tm->first_output[i], name)) {
      tm->cur[i] = x - tm->last;
      tm->last = x;
      tm->next = i + 1;
      return;
    }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

kn_status kn_cli_step_times(kn_context *ctx, const kn_model *m, int32_t runs, double *median_us,
                            kn_error *err) {
  int32_t n = kn_model_step_count(m);
  step_timer tm = {.steps = n};
  tm.first_output = calloc((size_t)n + 1, sizeof *tm.first_output);
  tm.cur = calloc((size_t)n + 1, sizeof *tm.cur);
  double *all = calloc((size_t)n * (size_t)runs + 1, sizeof *all);
  kn_status st = KN_OK;
  if (!tm.first_output || !tm.cur || !all) {
    st = KN_ERR_OOM;
    snprintf(err->msg, sizeof err->msg, "out of memory timing steps");
    goto out;
  }
  for (int32_t i = 0; i < n; i++) {
    kn_step_info si;
    if (kn_model_step_info(m, i, &si) == KN_OK && si.n_outputs > 0)
      tm.first_output[i] = si.outputs[0].name;
  }
  kn_context_set_observer(ctx, observe, &tm);
  for (int32_t r = 0; r < runs && !st; r++) {
    memset(tm.cur, 0, (size_t)n * sizeof *tm.cur);
    tm.next = 0;
    tm.last = now_us();
    st = kn_context_run(ctx, err);
    for (int32_t i = 0; i < n; i++) all[(size_t)i * (size_t)runs + (size_t)r] = tm.cur[i];
  }
  kn_context_set_observer(ctx, NULL, NULL);
  for (int32_t i = 0; i < n && !st; i++) {
    double *v = all + (size_t)i * (size_t)runs;
    qsort(v, (size_t)runs, sizeof *v, cmp_double);
    median_us[i] = v[runs / 2];
  }
out:
  free(tm.first_output);
  free(tm.cur);
  free(all);
  return st;
}

/* ENGINE.steps.json into buf. */
static void sidecar(const char *engine, char *buf, size_t len) {
  snprintf(buf, len, "%s.steps.json", engine);
}

bool kn_cli_step_times_save(const char *engine, const kn_model *m, int32_t threads,
                            const double *median_us) {
  cJSON *root = cJSON_CreateObject(), *steps = NULL;
  if (!root) return false;
  cJSON_AddStringToObject(root, "format", "kiln-step-times");
  cJSON_AddNumberToObject(root, "version", 1);
  cJSON_AddNumberToObject(root, "threads", threads);
  steps = cJSON_AddArrayToObject(root, "steps");
  int32_t n = kn_model_step_count(m);
  for (int32_t i = 0; steps && i < n; i++) {
    kn_step_info si;
    cJSON *o = cJSON_CreateObject();
    if (!o || kn_model_step_info(m, i, &si)) {
      cJSON_Delete(o);
      break;
    }
    cJSON_AddStringToObject(o, "name", si.name);
    cJSON_AddNumberToObject(o, "median_us", round(median_us[i] * 1000) / 1000);
    cJSON_AddItemToArray(steps, o);
  }
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) return false;
  char path[4096];
  sidecar(engine, path, sizeof path);
  FILE *f = fopen(path, "w");
  bool ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
  if (f) ok = fclose(f) == 0 && ok;
  cJSON_free(text);
  return ok;
}

bool kn_cli_step_times_load(const char *engine, const kn_model *m, int32_t *threads,
                            double *median_us) {
  char path[4096];
  sidecar(engine, path, sizeof path);
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  char *text = malloc((size_t)4 << 20);
  size_t len = text ? fread(text, 1, ((size_t)4 << 20) - 1, f) : 0;
  fclose(f);
  if (!text) return false;
  cJSON *root = cJSON_ParseWithLength(text, len);
  free(text);
  bool ok = false;
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format"),
              *th = cJSON_GetObjectItemCaseSensitive(root, "threads"),
              *steps = cJSON_GetObjectItemCaseSensitive(root, "steps");
  int32_t n = kn_model_step_count(m);
  /* the times are this engine's only when every step is there by name */
  if (cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "kiln-step-times") &&
      cJSON_IsNumber(th) && th->valuedouble >= 1 && th->valuedouble <= KN_CLI_MAX_THREADS &&
      cJSON_IsArray(steps) && cJSON_GetArraySize(steps) == n) {
    ok = true;
    for (int32_t i = 0; i < n && ok; i++) {
      const cJSON *o = cJSON_GetArrayItem(steps, i);
      const cJSON *nm = cJSON_GetObjectItemCaseSensitive(o, "name"),
                  *us = cJSON_GetObjectItemCaseSensitive(o, "median_us");
      kn_step_info si;
      ok = cJSON_IsString(nm) && cJSON_IsNumber(us) && us->valuedouble >= 0 &&
           kn_model_step_info(m, i, &si) == KN_OK && !strcmp(si.name, nm->valuestring);
      if (ok) median_us[i] = us->valuedouble;
    }
    if (ok) *threads = (int32_t)th->valuedouble;
  }
  cJSON_Delete(root);
  return ok;
}

/* Containers: their steps' time is their bodies', which have kernels of
 * their own. */
static bool control_flow(const char *op) {
  return !strcmp(op, "If") || !strcmp(op, "Loop") || !strcmp(op, "Scan") ||
         !strcmp(op, "SequenceMap");
}

double kn_cli_reference_share(const kn_model *m, const double *step_us, int32_t *n_ref,
                              int32_t *worst) {
  double total = 0, ref = 0;
  *n_ref = 0;
  *worst = -1;
  int32_t n = kn_model_step_count(m);
  for (int32_t i = 0; i < n; i++) {
    kn_step_info si;
    if (kn_model_step_info(m, i, &si)) continue;
    total += step_us[i];
    if ((si.tactic && strcmp(si.tactic, "reference")) || control_flow(si.op)) continue;
    ref += step_us[i];
    (*n_ref)++;
    if (*worst < 0 || step_us[i] > step_us[*worst]) *worst = i;
  }
  return total > 0 ? ref / total : 0;
}

void kn_cli_reference_line(const kn_model *m, const double *step_us, char *buf, size_t len) {
  int32_t n_ref, worst;
  double share = kn_cli_reference_share(m, step_us, &n_ref, &worst);
  int k = snprintf(buf, len, "reference kernels: %.1f%% of the run (%d of %d steps)",
                   100 * share, n_ref, kn_model_step_count(m));
  kn_step_info si;
  if (worst >= 0 && k > 0 && (size_t)k < len && !kn_model_step_info(m, worst, &si)) {
    double total = 0;
    for (int32_t i = 0; i < kn_model_step_count(m); i++) total += step_us[i];
    snprintf(buf + k, len - (size_t)k, "; the most: step %d '%s' (%s) %.1f%%", worst, si.name,
             si.op, total > 0 ? 100 * step_us[worst] / total : 0);
  }
}
