/* Sample folders (cli.h "samples"): what kiln validate --data and kiln
 * calibrate --data read.  Moved here from gates.c so that both share it. */
#include "cli.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* test_data_set_2 before test_data_set_10: digit runs compare as numbers. */
static int natural_cmp(const void *pa, const void *pb) {
  const char *a = *(const char *const *)pa, *b = *(const char *const *)pb;
  while (*a && *b) {
    if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
      while (*a == '0') a++;
      while (*b == '0') b++;
      size_t la = 0, lb = 0;
      while (isdigit((unsigned char)a[la])) la++;
      while (isdigit((unsigned char)b[lb])) lb++;
      if (la != lb) return la < lb ? -1 : 1;
      int c = strncmp(a, b, la);
      if (c) return c;
      a += la, b += lb;
    } else {
      if (*a != *b) return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
      a++, b++;
    }
  }
  return (unsigned char)*a - (unsigned char)*b;
}

void kn_cli_samples_free(kn_cli_samples *s) {
  for (int32_t i = 0; i < s->n; i++) free(s->dirs[i]);
  free(s->dirs);
  memset(s, 0, sizeof *s);
}

static bool has_input0(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/input_0.pb", dir);
  if (is_file(path)) return true;
  snprintf(path, sizeof path, "%s/input_0.npy", dir);
  return is_file(path);
}

int kn_cli_samples_find(const char *dir, int32_t nin, kn_cli_samples *s) {
  struct stat st;
  memset(s, 0, sizeof *s);
  if (stat(dir, &st) != 0) return kn_cli_fail("--data %s: %s", dir, strerror(errno));
  if (!S_ISDIR(st.st_mode)) return kn_cli_fail("--data %s: not a directory", dir);
  if (nin == 0 || has_input0(dir)) {
    s->dirs = malloc(sizeof *s->dirs);
    if (!s->dirs || !(s->dirs[0] = strdup(dir))) return kn_cli_fail("out of memory");
    s->n = 1;
    return KN_EXIT_OK;
  }
  DIR *d = opendir(dir);
  if (!d) return kn_cli_fail("--data %s: %s", dir, strerror(errno));
  int32_t cap = 0;
  int rc = KN_EXIT_OK;
  for (struct dirent *e; rc == KN_EXIT_OK && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    size_t len = strlen(dir) + strlen(e->d_name) + 2;
    char *sub = malloc(len);
    if (!sub) {
      rc = kn_cli_fail("out of memory");
      break;
    }
    snprintf(sub, len, "%s/%s", dir, e->d_name);
    if (!is_dir(sub) || !has_input0(sub)) {
      free(sub);
      continue;
    }
    if (s->n == cap) {
      cap = cap ? cap * 2 : 8;
      char **nd = realloc(s->dirs, (size_t)cap * sizeof *nd);
      if (!nd) {
        free(sub);
        rc = kn_cli_fail("out of memory");
        break;
      }
      s->dirs = nd;
    }
    s->dirs[s->n++] = sub;
  }
  closedir(d);
  if (rc) return rc;
  if (s->n == 0)
    return kn_cli_fail("--data %s: no input_0.pb (or .npy) in it nor in a sub-folder of it "
                       "(one per sample, as test_data_set_0/)", dir);
  qsort(s->dirs, (size_t)s->n, sizeof *s->dirs, natural_cmp);
  return KN_EXIT_OK;
}

/* err filled as kn_cli_fail would print it */
__attribute__((format(printf, 3, 4))) static kn_status fail_into(kn_error *err, kn_status st,
                                                                const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->status = st;
  }
  return st;
}

kn_status kn_cli_sample_load(const char *dir, const char *label, const char *const *names,
                             int32_t nin, kn_tensor *ins, kn_error *err) {
  char path[4096];
  for (int32_t i = 0; i < nin; i++) {
    snprintf(path, sizeof path, "%s/input_%d.pb", dir, i);
    if (!is_file(path)) snprintf(path, sizeof path, "%s/input_%d.npy", dir, i);
    if (!is_file(path))
      return fail_into(err, KN_ERR_MISSING,
                       "%s: no input_%d.pb or input_%d.npy for input %d '%s' of %s", dir, i, i,
                       i, names[i], label);
    kn_status st = kn_tensor_read_file(path, &ins[i], NULL, err);
    if (st) return st;
  }
  snprintf(path, sizeof path, "%s/input_%d.pb", dir, nin);
  if (!is_file(path)) snprintf(path, sizeof path, "%s/input_%d.npy", dir, nin);
  if (is_file(path))
    return fail_into(err, KN_ERR_INVALID_ARG, "%s: one input file more than %s takes: it has %d "
                     "input%s", path, label, nin, nin == 1 ? "" : "s");
  return KN_OK;
}

int kn_cli_sample_read(const char *dir, const char *label, const char *const *names,
                       int32_t nin, kn_tensor *ins) {
  kn_error err = {0};
  if (kn_cli_sample_load(dir, label, names, nin, ins, &err)) return kn_cli_error(&err);
  return KN_EXIT_OK;
}

/* ---- the library's samples ------------------------------------------------- */

static kn_status read_sample(void *arg, int32_t index, kn_tensor *inputs, int32_t n_inputs,
                             kn_error *err) {
  const kn_cli_data *d = arg;
  return kn_cli_sample_load(d->dirs.dirs[index], d->label, (const char *const *)d->names,
                            n_inputs, inputs, err);
}

void kn_cli_data_close(kn_cli_data *d) {
  kn_cli_samples_free(&d->dirs);
  for (int32_t i = 0; d->names && i < d->nin; i++) free(d->names[i]);
  free(d->names);
  free(d->labels);
  memset(d, 0, sizeof *d);
}

int kn_cli_data_open(kn_cli_data *d, const kn_model *m, const char *label, const char *data,
                     const char *labels, bool need_labels, uint64_t seed, const char *who) {
  memset(d, 0, sizeof *d);
  kn_samples_init(&d->s);
  d->s.seed = seed;
  d->label = label;
  if (data) {
    int rc;
    d->nin = kn_model_input_count(m);
    d->names = calloc((size_t)d->nin + 1, sizeof *d->names);
    if (!d->names) return kn_cli_fail("out of memory");
    for (int32_t i = 0; i < d->nin; i++) {
      kn_value_info vi;
      if (kn_model_input_info(m, i, &vi) || !(d->names[i] = strdup(vi.name)))
        return kn_cli_fail("%s: cannot read input %d", label, i);
    }
    if ((rc = kn_cli_samples_find(data, d->nin, &d->dirs))) return rc;
    d->s.count = d->dirs.n;
    d->s.n_inputs = d->nin;
    d->s.read = read_sample;
    d->s.read_arg = d;
    d->s.names = (const char *const *)d->dirs.dirs;
    d->s.source = data;
  }
  if (need_labels) {
    if (labels) snprintf(d->labels_path, sizeof d->labels_path, "%s", labels);
    else if (data) snprintf(d->labels_path, sizeof d->labels_path, "%s/labels.txt", data);
    else
      return kn_cli_fail("%s: --max-accuracy-drop needs labelled samples: give --data DIR "
                         "(with DIR/labels.txt, or --labels FILE)", who);
    int rc = kn_cli_labels_read(d->labels_path, &d->labels, &d->s.n_labels);
    if (rc) return rc;
    d->s.labels = d->labels;
    d->s.labels_name = d->labels_path;
  }
  return KN_EXIT_OK;
}

/* ---- labels ----------------------------------------------------------------- */

int kn_cli_labels_read(const char *path, int64_t **labels, int64_t *n) {
  *labels = NULL;
  *n = 0;
  FILE *f = fopen(path, "r");
  if (!f) return kn_cli_fail("--labels %s: %s", path, strerror(errno));
  int64_t cap = 0, line_no = 0;
  char line[256];
  int rc = KN_EXIT_OK;
  while (fgets(line, sizeof line, f)) {
    line_no++;
    char *p = line;
    while (isspace((unsigned char)*p)) p++;
    if (!*p || *p == '#') continue;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    while (isspace((unsigned char)*end)) end++;
    if (end == p || *end || errno || v < 0) {
      p[strcspn(p, "\r\n")] = 0;
      rc = kn_cli_fail("%s:%lld: '%.40s' is not a class label; expected one integer >= 0 "
                       "per line", path, (long long)line_no, p);
      break;
    }
    if (*n == cap) {
      cap = cap ? cap * 2 : 256;
      int64_t *nl = realloc(*labels, (size_t)cap * sizeof *nl);
      if (!nl) {
        rc = kn_cli_fail("out of memory reading %s", path);
        break;
      }
      *labels = nl;
    }
    (*labels)[(*n)++] = v;
  }
  if (!rc && ferror(f)) rc = kn_cli_fail("--labels %s: read error", path);
  if (!rc && *n == 0) rc = kn_cli_fail("--labels %s: no labels in it", path);
  fclose(f);
  if (rc) {
    free(*labels);
    *labels = NULL;
    *n = 0;
  }
  return rc;
}
