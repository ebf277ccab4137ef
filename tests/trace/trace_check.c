/* Checks a Chrome trace written by libkiln-trace or `kiln trace merge`
 * (tests/trace_test.sh): valid JSON, the conventions of docs/TRACE.md, and
 * the assertions given as arguments.  Prints one line and exits 0 when all
 * hold, else one line naming the first that fails and exits 1.
 *
 * usage: trace_check FILE [--merged] [checks...]
 *   --min-x N / --max-x N   number of X events
 *   --min-tids N            distinct (pid, tid) among X events
 *   --pids N                distinct pids among X events
 *   --name S / --no-name S  an X event named S exists / none does
 *   --thread-name S         a thread_name metadata event names S
 *   --min-dur US            every X event lasts at least US
 *   --other KEY=MIN         otherData.KEY is a number >= MIN
 *   --later A B US          X events of the process whose process_name
 *                           contains A start at least US after B's */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *file;

__attribute__((format(printf, 1, 2))) static int fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "trace_check: %s: ", file);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return 1;
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap);
  for (size_t r; b && (r = fread(b + n, 1, cap - n, f)) > 0;) {
    n += r;
    if (n == cap) b = realloc(b, cap *= 2);
  }
  fclose(f);
  *len = n;
  return b;
}

static const char *str_of(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int num_of(const cJSON *o, const char *key, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsNumber(v)) return 0;
  *out = v->valuedouble;
  return 1;
}

/* The smallest X ts of the pid whose process_name contains s (NAN if none). */
static double first_ts_of(const cJSON *events, const char *s) {
  double pid = NAN, best = INFINITY;
  const cJSON *e;
  cJSON_ArrayForEach(e, events) {
    const char *ph = str_of(e, "ph"), *name = str_of(e, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    const char *pname = args ? str_of(args, "name") : NULL;
    if (ph && !strcmp(ph, "M") && name && !strcmp(name, "process_name") && pname &&
        strstr(pname, s))
      num_of(e, "pid", &pid);
  }
  cJSON_ArrayForEach(e, events) {
    const char *ph = str_of(e, "ph");
    double p, ts;
    if (ph && !strcmp(ph, "X") && num_of(e, "pid", &p) && p == pid && num_of(e, "ts", &ts) &&
        ts < best)
      best = ts;
  }
  return isinf(best) ? NAN : best;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: trace_check FILE [checks...]\n");
    return 2;
  }
  file = argv[1];
  size_t len;
  char *text = slurp(file, &len);
  if (!text) return fail("cannot read");
  cJSON *root = cJSON_ParseWithLength(text, len);
  free(text);
  if (!root) return fail("not valid JSON");
  const cJSON *events = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
  const cJSON *other = cJSON_GetObjectItemCaseSensitive(root, "otherData");
  if (!cJSON_IsArray(events)) return fail("no traceEvents array");
  int merged = 0;
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--merged")) merged = 1;
  const char *unit = str_of(root, "displayTimeUnit");
  if (!unit || strcmp(unit, "ms")) return fail("displayTimeUnit is not \"ms\"");
  double v;
  if (!cJSON_IsObject(other)) return fail("no otherData object");
  if (!num_of(other, "wall_clock_start_us", &v) || v < 1e15)
    return fail("otherData.wall_clock_start_us is not Unix epoch microseconds");
  if (!merged) {
    const char *fmt = str_of(other, "format");
    if (!fmt || strcmp(fmt, "kiln-trace") || !num_of(other, "version", &v) || v != 1)
      return fail("otherData.format is not kiln-trace version 1");
    if (!str_of(other, "host") || !str_of(other, "process") || !num_of(other, "pid", &v))
      return fail("otherData lacks host, process or pid");
  }

  /* every event well formed; counts */
  int n_x = 0, n_keys = 0, n_pids = 0;
  double keys[4096][2], pids[64], min_dur = INFINITY;
  const cJSON *e;
  cJSON_ArrayForEach(e, events) {
    const char *ph = str_of(e, "ph"), *name = str_of(e, "name");
    double pid, tid, ts, dur;
    if (!ph || !name || !num_of(e, "pid", &pid)) return fail("an event lacks ph, name or pid");
    if (strcmp(ph, "X")) continue;
    if (!num_of(e, "tid", &tid) || !num_of(e, "ts", &ts) || !num_of(e, "dur", &dur) ||
        ts < 0 || dur < 0)
      return fail("X event '%s' lacks tid, ts or dur", name);
    n_x++;
    if (dur < min_dur) min_dur = dur;
    int k = 0;
    while (k < n_keys && (keys[k][0] != pid || keys[k][1] != tid)) k++;
    if (k == n_keys && n_keys < 4096) keys[n_keys][0] = pid, keys[n_keys++][1] = tid;
    k = 0;
    while (k < n_pids && pids[k] != pid) k++;
    if (k == n_pids && n_pids < 64) pids[n_pids++] = pid;
  }

  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *b = i + 1 < argc ? argv[i + 1] : "";
    if (!strcmp(a, "--merged")) continue;
    if (i + 1 >= argc) return fail("check %s needs a value", a);
    i++;
    if (!strcmp(a, "--min-x")) {
      if (n_x < atof(b)) return fail("%d X events, expected at least %s", n_x, b);
    } else if (!strcmp(a, "--max-x")) {
      if (n_x > atof(b)) return fail("%d X events, expected at most %s", n_x, b);
    } else if (!strcmp(a, "--min-tids")) {
      if (n_keys < atof(b)) return fail("X events on %d threads, expected at least %s", n_keys, b);
    } else if (!strcmp(a, "--pids")) {
      if (n_pids != atof(b)) return fail("X events of %d pids, expected %s", n_pids, b);
    } else if (!strcmp(a, "--name") || !strcmp(a, "--no-name")) {
      int found = 0;
      cJSON_ArrayForEach(e, events) {
        const char *ph = str_of(e, "ph"), *name = str_of(e, "name");
        if (ph && !strcmp(ph, "X") && name && !strcmp(name, b)) found = 1;
      }
      if (found != !strcmp(a, "--name"))
        return fail(found ? "an X event is named '%s'" : "no X event is named '%s'", b);
    } else if (!strcmp(a, "--thread-name")) {
      int found = 0;
      cJSON_ArrayForEach(e, events) {
        const char *ph = str_of(e, "ph"), *name = str_of(e, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        const char *tname = args ? str_of(args, "name") : NULL;
        if (ph && !strcmp(ph, "M") && name && !strcmp(name, "thread_name") && tname &&
            !strcmp(tname, b))
          found = 1;
      }
      if (!found) return fail("no thread_name metadata names '%s'", b);
    } else if (!strcmp(a, "--min-dur")) {
      if (n_x && min_dur < atof(b)) return fail("an X event lasts %g us, under %s", min_dur, b);
    } else if (!strcmp(a, "--other")) {
      const char *eq = strchr(b, '=');
      char key[128];
      snprintf(key, sizeof key, "%.*s", eq ? (int)(eq - b) : (int)strlen(b), b);
      if (!eq || !num_of(other, key, &v) || v < atof(eq + 1))
        return fail("otherData.%s is missing or under %s", key, eq ? eq + 1 : "?");
    } else if (!strcmp(a, "--later")) {
      if (i + 2 >= argc) return fail("--later needs A B US");
      double ta = first_ts_of(events, b), tb = first_ts_of(events, argv[i + 1]);
      double us = atof(argv[i + 2]);
      i += 2;
      if (isnan(ta) || isnan(tb)) return fail("no X events of process '%s'", isnan(ta) ? b : argv[i - 1]);
      if (ta - tb < us) return fail("process '%s' starts %g us after the other, expected at least %g", b, ta - tb, us);
    } else {
      return fail("unknown check '%s'", a);
    }
  }
  printf("trace_check: %s: %d X events on %d threads of %d processes\n", file, n_x, n_keys,
         n_pids);
  cJSON_Delete(root);
  return 0;
}
