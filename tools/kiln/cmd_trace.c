/* kiln trace merge: Chrome traces from several processes or hosts (the
 * libkiln-trace agent's, `kiln profile --trace`'s) in one file, each source
 * its own process row, clocks aligned on wall time, and one summary table of
 * where each source spent its time.  docs/TRACE.md describes the
 * conventions the inputs follow; docs/CLI.md the command. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void kn_cmd_trace_usage(FILE *f) {
  fprintf(f,
          "usage: kiln trace merge TRACE.json... [-o ALL.json] [--top N] [--json]\n\n"
          "Merges Chrome traces (libkiln-trace's, kiln profile --trace's) into one:\n"
          "each source becomes its own process row, named \"host: process (file)\",\n"
          "and its timestamps are shifted by its otherData.wall_clock_start_us minus\n"
          "the earliest one, so that traces of several processes or hosts line up.\n"
          "A kiln profile --json summary (format kiln-profile) is accepted too and\n"
          "adds its steps to the summary only.\n\n"
          "Prints, per source, the event names taking the most time: calls, total\n"
          "(outermost call of a name only, so recursion is not counted twice), self\n"
          "(total less the time in nested events), mean duration and share of the\n"
          "source's traced time.\n\n"
          "options:\n"
          "  -o, --output FILE  write the merged trace to FILE (else only the summary)\n"
          "  --top N            names per source in the summary (default 10, 0: all)\n"
          "  --json             the summary as JSON on stdout instead of a table\n");
}

/* Time spent under one event name in one source. */
typedef struct name_stat {
  const char *name;
  int64_t count;
  double total_us, self_us, dur_sum_us;
  int32_t active; /* open on the current thread's stack (recursion) */
} name_stat;

typedef struct source {
  const char *path, *file; /* as given, and its last component */
  cJSON *root;
  cJSON *events; /* traceEvents, NULL for a kiln-profile summary */
  const char *host, *process;
  double own_pid; /* otherData.pid, or NAN */
  bool has_wall;
  double wall_us, offset_us;
  /* the source's pids and the pid each gets in the output */
  double *pids;
  int32_t n_pids, first_out_pid;
  /* summary */
  name_stat *stats;
  int32_t n_stats, cap_stats;
  int64_t n_x;
  int32_t n_threads;
  double busy_us;
} source;

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap);
  for (size_t r; b && (r = fread(b + n, 1, cap - n, f)) > 0;) {
    n += r;
    if (n == cap) {
      char *nb = realloc(b, cap *= 2);
      if (!nb) free(b);
      b = nb;
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (bad || !b) {
    free(b);
    if (!bad) errno = ENOMEM;
    return NULL;
  }
  *len = n;
  return b;
}

static const char *str_item(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool num_item(const cJSON *o, const char *key, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return false;
  *out = v->valuedouble;
  return true;
}

static name_stat *stat_of(source *s, const char *name) {
  for (int32_t i = 0; i < s->n_stats; i++)
    if (!strcmp(s->stats[i].name, name)) return &s->stats[i];
  if (s->n_stats == s->cap_stats) {
    int32_t cap = s->cap_stats ? s->cap_stats * 2 : 64;
    name_stat *n = realloc(s->stats, (size_t)cap * sizeof *n);
    if (!n) return NULL;
    s->stats = n;
    s->cap_stats = cap;
  }
  name_stat *st = &s->stats[s->n_stats++];
  memset(st, 0, sizeof *st);
  st->name = name;
  return st;
}

/* Loads one input: a Chrome trace (object with traceEvents, or a bare
 * array of events) or a kiln profile summary.  false after a one-line
 * error naming the file. */
static bool load_source(source *s, const char *path) {
  s->path = path;
  const char *slash = strrchr(path, '/');
  s->file = slash ? slash + 1 : path;
  s->own_pid = NAN;
  size_t len = 0;
  char *text = read_file(path, &len);
  if (!text) {
    kn_cli_fail("%s: cannot read: %s", path, strerror(errno));
    return false;
  }
  s->root = cJSON_ParseWithLength(text, len);
  if (!s->root) {
    const char *at = cJSON_GetErrorPtr();
    size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : 0;
    free(text);
    kn_cli_fail("%s: not JSON (syntax error near byte %zu)", path, off);
    return false;
  }
  free(text);
  const cJSON *info = s->root;
  if (cJSON_IsArray(s->root)) {
    s->events = s->root;
  } else if (cJSON_IsObject(s->root)) {
    const char *fmt = str_item(s->root, "format");
    cJSON *ev = cJSON_GetObjectItemCaseSensitive(s->root, "traceEvents");
    if (cJSON_IsArray(ev)) {
      s->events = ev;
      info = cJSON_GetObjectItemCaseSensitive(s->root, "otherData");
    } else if (!(fmt && !strcmp(fmt, "kiln-profile") &&
                 cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(s->root, "steps")))) {
      kn_cli_fail("%s: no traceEvents array: not a Chrome trace or a kiln profile summary",
                  path);
      return false;
    }
  } else {
    kn_cli_fail("%s: not a Chrome trace: the top level is neither an object nor an array",
                path);
    return false;
  }
  if (cJSON_IsObject(info)) {
    s->host = str_item(info, "host");
    s->process = str_item(info, "process");
    num_item(info, "pid", &s->own_pid);
    s->has_wall = num_item(info, "wall_clock_start_us", &s->wall_us);
  }
  if (!s->events) return true;
  int64_t i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, s->events) {
    if (!cJSON_IsObject(e) || !str_item(e, "ph")) {
      kn_cli_fail("%s: traceEvents[%lld] is not an event (an object with \"ph\")", path,
                  (long long)i);
      return false;
    }
    i++;
  }
  return true;
}

static double pid_of(const cJSON *e) {
  double p = 0;
  num_item(e, "pid", &p);
  return p;
}

static bool add_pid(source *s, double pid) {
  for (int32_t i = 0; i < s->n_pids; i++)
    if (s->pids[i] == pid) return true;
  double *n = realloc(s->pids, (size_t)(s->n_pids + 1) * sizeof *n);
  if (!n) return false;
  s->pids = n;
  s->pids[s->n_pids++] = pid;
  return true;
}

static int32_t out_pid(const source *s, double pid) {
  for (int32_t i = 0; i < s->n_pids; i++)
    if (s->pids[i] == pid) return s->first_out_pid + i;
  return s->first_out_pid;
}

typedef struct xev {
  double pid, tid, ts, end, dur;
  name_stat *st;
} xev;

static int xev_cmp(const void *a, const void *b) {
  const xev *x = a, *y = b;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return (x->dur < y->dur) - (x->dur > y->dur); /* the enclosing one first */
}

static int stat_cmp(const void *a, const void *b) {
  const name_stat *x = a, *y = b;
  if (x->total_us != y->total_us) return x->total_us < y->total_us ? 1 : -1;
  return strcmp(x->name, y->name);
}

/* The source's X events, nested per thread: a name's total counts only its
 * outermost open event (recursion once), self subtracts direct children,
 * busy sums each thread's top-level events. */
static bool summarize_trace(source *s) {
  int64_t n = 0, cap = 0;
  xev *ev = NULL;
  const cJSON *e;
  cJSON_ArrayForEach(e, s->events) {
    const char *ph = str_item(e, "ph"), *name = str_item(e, "name");
    double ts, dur, tid = 0;
    if (strcmp(ph, "X") || !name || !num_item(e, "ts", &ts) || !num_item(e, "dur", &dur) ||
        dur < 0)
      continue;
    num_item(e, "tid", &tid);
    if (n == cap) {
      cap = cap ? cap * 2 : 1024;
      xev *nv = realloc(ev, (size_t)cap * sizeof *nv);
      if (!nv) goto oom;
      ev = nv;
    }
    name_stat *st = stat_of(s, name);
    if (!st) goto oom;
    ev[n++] = (xev){pid_of(e), tid, ts, ts + dur, dur, st};
  }
  qsort(ev, (size_t)n, sizeof *ev, xev_cmp);
  xev **stack = malloc((size_t)(n ? n : 1) * sizeof *stack);
  if (!stack) goto oom;
  int64_t depth = 0;
  for (int64_t i = 0; i < n; i++) {
    xev *x = &ev[i];
    bool same_thread = i > 0 && ev[i - 1].pid == x->pid && ev[i - 1].tid == x->tid;
    if (!same_thread) {
      while (depth) stack[--depth]->st->active--;
      s->n_threads++;
    }
    while (depth && stack[depth - 1]->end <= x->ts) stack[--depth]->st->active--;
    if (depth) stack[depth - 1]->st->self_us -= x->dur;
    else s->busy_us += x->dur;
    name_stat *st = x->st;
    if (!st->active) st->total_us += x->dur;
    st->active++;
    st->count++;
    st->dur_sum_us += x->dur;
    st->self_us += x->dur;
    stack[depth++] = x;
  }
  while (depth) stack[--depth]->st->active--;
  for (int32_t i = 0; i < s->n_stats; i++)
    if (s->stats[i].self_us < 0) s->stats[i].self_us = 0;
  s->n_x = n;
  free(stack);
  free(ev);
  qsort(s->stats, (size_t)s->n_stats, sizeof *s->stats, stat_cmp);
  return true;
oom:
  free(ev);
  kn_cli_fail("%s: out of memory summarizing the trace", s->path);
  return false;
}

/* A kiln profile summary: each step's runs and mean (else median) time. */
static bool summarize_profile(source *s) {
  double runs_all = 1;
  num_item(s->root, "runs", &runs_all);
  const cJSON *step;
  cJSON_ArrayForEach(step, cJSON_GetObjectItemCaseSensitive(s->root, "steps")) {
    const char *name = str_item(step, "name");
    double mean, runs = runs_all;
    if (!name || !(num_item(step, "mean_us", &mean) || num_item(step, "median_us", &mean)))
      continue;
    num_item(step, "runs", &runs);
    name_stat *st = stat_of(s, name);
    if (!st) {
      kn_cli_fail("%s: out of memory summarizing the profile", s->path);
      return false;
    }
    st->count += (int64_t)runs;
    st->total_us += mean * runs;
    st->self_us += mean * runs;
    st->dur_sum_us += mean * runs;
    s->busy_us += mean * runs;
    s->n_x += (int64_t)runs;
  }
  qsort(s->stats, (size_t)s->n_stats, sizeof *s->stats, stat_cmp);
  return true;
}

/* "host: process (file)" for one of the source's pids. */
static void row_name(const source *s, double pid, char *buf, size_t n) {
  const char *proc = NULL;
  char pidname[48];
  if (s->process && (s->n_pids == 1 || isnan(s->own_pid) || pid == s->own_pid))
    proc = s->process;
  if (!proc) {
    const cJSON *e;
    cJSON_ArrayForEach(e, s->events) {
      const char *name = str_item(e, "name");
      const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
      if (!strcmp(str_item(e, "ph"), "M") && name && !strcmp(name, "process_name") &&
          pid_of(e) == pid && args && str_item(args, "name")) {
        proc = str_item(args, "name");
        break;
      }
    }
  }
  if (!proc && !s->events) proc = "kiln profile";
  if (!proc) {
    snprintf(pidname, sizeof pidname, "pid %.0f", pid);
    proc = pidname;
  }
  if (s->host)
    snprintf(buf, n, "%s: %s (%s)", s->host, proc, s->file);
  else
    snprintf(buf, n, "%s (%s)", proc, s->file);
}

static bool put_json(FILE *f, const cJSON *item) {
  char *t = cJSON_PrintUnformatted(item);
  if (!t) return false;
  fputs(t, f);
  cJSON_free(t);
  return true;
}

static bool put_meta(FILE *f, bool *first, int32_t pid, const char *what, cJSON *arg) {
  cJSON *m = cJSON_CreateObject(), *args = cJSON_CreateObject();
  if (!m || !args) {
    cJSON_Delete(m);
    cJSON_Delete(args);
    cJSON_Delete(arg);
    return false;
  }
  cJSON_AddStringToObject(m, "name", what);
  cJSON_AddStringToObject(m, "ph", "M");
  cJSON_AddNumberToObject(m, "pid", pid);
  cJSON_AddNumberToObject(m, "tid", 0);
  cJSON_AddItemToObject(args, !strcmp(what, "process_name") ? "name" : "sort_index", arg);
  cJSON_AddItemToObject(m, "args", args);
  fputs(*first ? "\n" : ",\n", f);
  *first = false;
  bool ok = put_json(f, m);
  cJSON_Delete(m);
  return ok;
}

/* Writes the merged trace through path.tmp and a rename. */
static int write_merged(const char *path, source *src, int32_t n, double base_us, bool any_wall) {
  size_t len = strlen(path) + 5;
  char *tmp = malloc(len);
  if (!tmp) return kn_cli_fail("%s: out of memory", path);
  snprintf(tmp, len, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) {
    int r = kn_cli_fail("%s: cannot write: %s", tmp, strerror(errno));
    free(tmp);
    return r;
  }
  bool ok = true, first = true;
  fputs("{\"traceEvents\":[", f);
  for (int32_t i = 0; i < n && ok; i++) {
    source *s = &src[i];
    if (!s->events) continue;
    for (int32_t p = 0; p < s->n_pids && ok; p++) {
      char name[1024];
      row_name(s, s->pids[p], name, sizeof name);
      ok = put_meta(f, &first, s->first_out_pid + p, "process_name", cJSON_CreateString(name)) &&
           put_meta(f, &first, s->first_out_pid + p, "process_sort_index",
                    cJSON_CreateNumber(s->first_out_pid + p));
    }
    cJSON *e;
    cJSON_ArrayForEach(e, s->events) {
      if (!ok) break;
      const char *ph = str_item(e, "ph"), *name = str_item(e, "name");
      if (!strcmp(ph, "M") && name &&
          (!strcmp(name, "process_name") || !strcmp(name, "process_sort_index")))
        continue; /* replaced above */
      cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid");
      int32_t np = out_pid(s, pid_of(e));
      if (pid) cJSON_SetNumberValue(pid, np);
      else cJSON_AddNumberToObject(e, "pid", np);
      cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts");
      if (cJSON_IsNumber(ts) && s->offset_us != 0)
        cJSON_SetNumberValue(ts, round((ts->valuedouble + s->offset_us) * 1000) / 1000);
      fputs(first ? "\n" : ",\n", f);
      first = false;
      ok = put_json(f, e);
    }
  }
  cJSON *other = cJSON_CreateObject(), *list = NULL;
  ok = ok && other;
  if (ok) {
    cJSON_AddStringToObject(other, "format", "kiln-trace-merge");
    cJSON_AddNumberToObject(other, "version", 1);
    if (any_wall) cJSON_AddNumberToObject(other, "wall_clock_start_us", base_us);
    ok = (list = cJSON_AddArrayToObject(other, "sources")) != NULL;
  }
  for (int32_t i = 0; i < n && ok; i++) {
    const source *s = &src[i];
    cJSON *o = cJSON_CreateObject();
    if (!o) {
      ok = false;
      break;
    }
    cJSON_AddItemToArray(list, o);
    cJSON_AddStringToObject(o, "file", s->path);
    if (s->host) cJSON_AddStringToObject(o, "host", s->host);
    if (s->process) cJSON_AddStringToObject(o, "process", s->process);
    if (!isnan(s->own_pid)) cJSON_AddNumberToObject(o, "pid", s->own_pid);
    if (s->has_wall) cJSON_AddNumberToObject(o, "wall_clock_start_us", s->wall_us);
    cJSON_AddNumberToObject(o, "offset_us", s->offset_us);
    cJSON_AddBoolToObject(o, "summary_only", !s->events);
    cJSON *pids = cJSON_AddArrayToObject(o, "output_pids");
    for (int32_t p = 0; pids && p < s->n_pids; p++)
      cJSON_AddItemToArray(pids, cJSON_CreateNumber(s->first_out_pid + p));
  }
  fputs("\n],\"displayTimeUnit\":\"ms\",\"otherData\":", f);
  ok = ok && put_json(f, other);
  cJSON_Delete(other);
  fputs("}\n", f);
  int r = KN_EXIT_OK;
  if (!ok) {
    fclose(f);
    r = kn_cli_fail("%s: out of memory writing the merged trace", path);
  } else if (ferror(f) | fclose(f) || rename(tmp, path)) {
    r = kn_cli_fail("%s: cannot write: %s", path, strerror(errno));
  }
  if (r) remove(tmp);
  free(tmp);
  return r;
}

/* Names may hold any bytes: control characters become '?' so that a row
 * stays one row. */
static void put_name(const char *s, int width) {
  int n = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p && n < width; p++, n++) {
    if (n == width - 2 && strlen((const char *)p) > 2) {
      fputs("..", stdout);
      n += 2;
      break;
    }
    putchar(*p < 0x20 || *p == 0x7f ? '?' : *p);
  }
  for (; n < width; n++) putchar(' ');
}

static void print_table(const source *src, int32_t n, int64_t top) {
  for (int32_t i = 0; i < n; i++) {
    const source *s = &src[i];
    char name[1024];
    row_name(s, s->n_pids ? s->pids[0] : s->own_pid, name, sizeof name);
    printf("%s[%d] %s", i ? "\n" : "", (int)i + 1, name);
    if (!s->events)
      printf(": kiln profile summary, %.3f ms in %d steps\n", s->busy_us / 1000,
             (int)s->n_stats);
    else
      printf(": start +%.3f ms, %d thread%s, %lld events, %.3f ms traced\n",
             s->offset_us / 1000, (int)s->n_threads, s->n_threads == 1 ? "" : "s",
             (long long)s->n_x, s->busy_us / 1000);
    if (!s->n_stats) continue;
    printf("    %-40s %10s %12s %12s %12s %7s\n", "name", "count", "total ms", "self ms",
           "mean us", "share");
    for (int32_t k = 0; k < s->n_stats && (top == 0 || k < top); k++) {
      const name_stat *st = &s->stats[k];
      printf("    ");
      put_name(st->name, 40);
      printf(" %10lld %12.3f %12.3f %12.3f %6.1f%%\n", (long long)st->count,
             st->total_us / 1000, st->self_us / 1000,
             st->count ? st->dur_sum_us / (double)st->count : 0.0,
             s->busy_us > 0 ? 100 * st->total_us / s->busy_us : 0.0);
    }
  }
}

static int print_json(const source *src, int32_t n, int64_t top) {
  cJSON *root = cJSON_CreateObject(), *list = root ? cJSON_AddArrayToObject(root, "sources") : NULL;
  bool ok = list != NULL;
  for (int32_t i = 0; i < n && ok; i++) {
    const source *s = &src[i];
    cJSON *o = cJSON_CreateObject(), *names;
    ok = o && cJSON_AddItemToArray(list, o);
    if (!ok) break;
    char row[1024];
    row_name(s, s->n_pids ? s->pids[0] : s->own_pid, row, sizeof row);
    cJSON_AddStringToObject(o, "file", s->path);
    cJSON_AddStringToObject(o, "row", row);
    if (s->host) cJSON_AddStringToObject(o, "host", s->host);
    if (s->process) cJSON_AddStringToObject(o, "process", s->process);
    cJSON_AddStringToObject(o, "kind", s->events ? "trace" : "kiln-profile");
    cJSON_AddNumberToObject(o, "offset_us", s->offset_us);
    cJSON_AddNumberToObject(o, "threads", s->n_threads);
    cJSON_AddNumberToObject(o, "events", (double)s->n_x);
    cJSON_AddNumberToObject(o, "traced_us", s->busy_us);
    ok = (names = cJSON_AddArrayToObject(o, "top")) != NULL;
    for (int32_t k = 0; ok && k < s->n_stats && (top == 0 || k < top); k++) {
      const name_stat *st = &s->stats[k];
      cJSON *t = cJSON_CreateObject();
      ok = t && cJSON_AddItemToArray(names, t);
      if (!ok) break;
      cJSON_AddStringToObject(t, "name", st->name);
      cJSON_AddNumberToObject(t, "count", (double)st->count);
      cJSON_AddNumberToObject(t, "total_us", round(st->total_us * 1000) / 1000);
      cJSON_AddNumberToObject(t, "self_us", round(st->self_us * 1000) / 1000);
      cJSON_AddNumberToObject(t, "mean_us",
                              st->count ? round(st->dur_sum_us / (double)st->count * 1000) / 1000
                                        : 0);
      cJSON_AddNumberToObject(t, "share", s->busy_us > 0 ? st->total_us / s->busy_us : 0);
    }
  }
  char *text = ok ? cJSON_Print(root) : NULL;
  cJSON_Delete(root);
  if (!text) return kn_cli_fail("trace merge: out of memory");
  puts(text);
  cJSON_free(text);
  return KN_EXIT_OK;
}

static int trace_merge(const kn_cli_cmd *cmd, int argc, char **argv) {
  enum { OPT_OUT = 1, OPT_TOP, OPT_JSON };
  static const kn_cli_opt opts[] = {{"output", 'o', true, OPT_OUT},
                                    {"top", 0, true, OPT_TOP},
                                    {"json", 0, false, OPT_JSON},
                                    {NULL, 0, false, 0}};
  kn_cli_args args;
  kn_cli_args_init(&args, cmd, opts, argc, argv);
  const char *out = NULL;
  int64_t top = 10;
  bool json = false;
  char **inputs = calloc((size_t)argc, sizeof *inputs);
  int32_t n = 0;
  if (!inputs) return kn_cli_fail("trace merge: out of memory");
  for (int id; (id = kn_cli_next(&args)) != KN_CLI_END;) {
    switch (id) {
    case OPT_OUT: out = args.arg; break;
    case OPT_TOP:
      if (!kn_cli_int(&args, 0, INT32_MAX, &top)) goto usage;
      break;
    case OPT_JSON: json = true; break;
    case KN_CLI_POSITIONAL: inputs[n++] = (char *)args.arg; break;
    default: goto usage;
    }
  }
  if (!n) {
    free(inputs);
    return kn_cli_usage(cmd, "trace merge needs at least one TRACE.json");
  }
  source *src = calloc((size_t)n, sizeof *src);
  int r = KN_EXIT_ERROR;
  if (!src) {
    free(inputs);
    return kn_cli_fail("trace merge: out of memory");
  }
  int32_t loaded = 0;
  for (; loaded < n; loaded++)
    if (!load_source(&src[loaded], inputs[loaded])) {
      cJSON_Delete(src[loaded].root);
      goto done;
    }
  /* wall-clock alignment: the earliest start is 0 */
  double base = INFINITY;
  for (int32_t i = 0; i < n; i++)
    if (src[i].events && src[i].has_wall && src[i].wall_us < base) base = src[i].wall_us;
  bool any_wall = isfinite(base);
  int32_t next_pid = 1;
  for (int32_t i = 0; i < n; i++) {
    source *s = &src[i];
    if (!s->events) continue;
    if (s->has_wall) {
      s->offset_us = s->wall_us - base;
    } else {
      fprintf(stderr, "kiln trace merge: %s: no otherData.wall_clock_start_us, kept at offset 0\n",
              s->path);
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, s->events) {
      if (!add_pid(s, pid_of(e))) {
        r = kn_cli_fail("trace merge: out of memory");
        goto done;
      }
    }
    s->first_out_pid = next_pid;
    next_pid += s->n_pids;
  }
  for (int32_t i = 0; i < n; i++)
    if (!(src[i].events ? summarize_trace(&src[i]) : summarize_profile(&src[i]))) goto done;
  if (out && (r = write_merged(out, src, n, base, any_wall)) != KN_EXIT_OK) goto done;
  if (json) {
    r = print_json(src, n, top);
  } else {
    print_table(src, n, top);
    if (out) printf("\nmerged %d source%s into %s\n", (int)n, n == 1 ? "" : "s", out);
    r = KN_EXIT_OK;
  }
done:
  for (int32_t i = 0; i < loaded; i++) {
    cJSON_Delete(src[i].root);
    free(src[i].pids);
    free(src[i].stats);
  }
  free(src);
  free(inputs);
  return r;
usage:
  free(inputs);
  return KN_EXIT_USAGE;
}

int kn_cmd_trace(int argc, char **argv) {
  const kn_cli_cmd *cmd = kn_cli_find("trace");
  if (argc < 2) return kn_cli_usage(cmd, "needs a subcommand: merge");
  if (!strcmp(argv[1], "merge")) return trace_merge(cmd, argc - 1, argv + 1);
  return kn_cli_usage(cmd, "unknown subcommand '%s' (known: merge)", argv[1]);
}
