/*
 * ONNX backend conformance: runs every case of the ONNX test data
 * (model.onnx + test_data_set_N/{input,output}_K.pb) through kiln and checks
 * the outputs: same dtype and shape, values within rtol 1e-3 / atol 1e-5
 * (exact for integers, bools and strings).
 *
 *   kiln_conformance [--data DIR | --cases DIR] [--filter SUBSTR]...
 *                    [--expect FILE] [--write-pass FILE] [--timeout SEC]
 *                    [--rtol R] [--atol A] [--optimize] [--engine] [--no-fork]
 *
 * --data names the test-data root (suites node/, pytorch-converted/, ...);
 * --cases names one folder whose subfolders are cases in the same layout
 * (the exported real models with ONNX Runtime's outputs).
 *
 * The cases run in a worker process, one after another, each reported to
 * the parent as it ends: a crash or a hang (--timeout seconds without a
 * report) is that case's failure, and a new worker goes on with the next
 * case.  (A process per case cost 20 ms each under ASan, where forking
 * copies the shadow memory's page tables: 21 s of a 23 s run.)  The worker
 * exits normally after its last case, so LeakSanitizer checks everything
 * the cases left; a worker that ends badly fails the run.  --no-fork runs
 * the cases in this process.  With --expect, exits 1 when any case listed
 * in FILE fails.
 */
#include "engine/engine.h"
#include "onnx/onnx.h"
#include "passes/pass.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static double RTOL = 1e-3, ATOL = 1e-5;
/* --optimize: run the optimization passes on each model first, so every
 * case checks that the passes keep the results. */
static bool OPTIMIZE = false;
/* --engine: build each model (passes + memory plan), write it as an engine
 * file, load that and run it: the whole `kiln build` + `kiln run` path. */
static bool ENGINE = false;

static const char *const default_suites[] = {"node", "pytorch-converted",
                                             "pytorch-operator", "simple"};

static bool file_exists(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The ONNX 1.12 test data stores bfloat16 tensors as uint16 bit patterns
 * (numpy has no bfloat16): read them back as what the model declares. */
static void bf16_from_u16(kn_tensor *t, kn_dtype declared) {
  if (t->dtype == KN_DTYPE_U16 && declared == KN_DTYPE_BF16) t->dtype = KN_DTYPE_BF16;
}

static kn_status compare_tensor(const kn_tensor *got, kn_tensor *want,
                                char *why, size_t wl) {
  char a[128], b[128];
  bf16_from_u16(want, got->dtype);
  if (got->dtype != want->dtype) {
    snprintf(why, wl, "dtype %s, expected %s", kn_dtype_name(got->dtype),
             kn_dtype_name(want->dtype));
    return KN_ERR_DTYPE;
  }
  bool same = got->rank == want->rank;
  for (int32_t d = 0; same && d < got->rank; d++) same = got->dims[d] == want->dims[d];
  if (!same) {
    snprintf(why, wl, "shape %s, expected %s", kn_shape_str(got->rank, got->dims, a, sizeof a),
             kn_shape_str(want->rank, want->dims, b, sizeof b));
    return KN_ERR_SHAPE;
  }
  int64_t n = kn_tensor_numel(want);
  for (int64_t i = 0; i < n; i++) {
    if (want->dtype == KN_DTYPE_STRING) {
      const char *x = ((char **)got->data)[i], *y = ((char **)want->data)[i];
      if (strcmp(x ? x : "", y ? y : "") != 0) {
        snprintf(why, wl, "element %lld: '%s', expected '%s'", (long long)i, x, y);
        return KN_ERR_INTERNAL;
      }
    } else if (kn_dtype_is_float(want->dtype)) {
      double x = kn_load_f64(got->data, got->dtype, i);
      double y = kn_load_f64(want->data, want->dtype, i);
      if (isnan(y) && isnan(x)) continue;
      if (isinf(y) && x == y) continue;
      if (!(fabs(x - y) <= ATOL + RTOL * fabs(y))) {
        snprintf(why, wl, "element %lld: %.9g, expected %.9g", (long long)i, x, y);
        return KN_ERR_INTERNAL;
      }
    } else {
      int64_t x = kn_load_i64(got->data, got->dtype, i);
      int64_t y = kn_load_i64(want->data, want->dtype, i);
      if (x != y) {
        snprintf(why, wl, "element %lld: %lld, expected %lld", (long long)i, (long long)x,
                 (long long)y);
        return KN_ERR_INTERNAL;
      }
    }
  }
  return KN_OK;
}

static kn_status compare_slot(const kn_slot *got, kn_slot *want, char *why,
                              size_t wl) {
  if (got->kind != want->kind) {
    static const char *const k[] = {"none", "tensor", "sequence"};
    snprintf(why, wl, "got a %s, expected a %s", k[got->kind], k[want->kind]);
    return KN_ERR_DTYPE;
  }
  if (want->kind == KN_KIND_TENSOR) return compare_tensor(&got->t, &want->t, why, wl);
  if (want->kind == KN_KIND_SEQUENCE) {
    if (got->seq.count != want->seq.count) {
      snprintf(why, wl, "sequence of %d, expected %d", got->seq.count, want->seq.count);
      return KN_ERR_SHAPE;
    }
    for (int32_t i = 0; i < want->seq.count; i++) {
      char sub[400];
      if (compare_tensor(&got->seq.items[i], &want->seq.items[i], sub, sizeof sub)) {
        snprintf(why, wl, "sequence item %d: %.300s", i, sub);
        return KN_ERR_INTERNAL;
      }
    }
  }
  return KN_OK;
}

/* Runs one case; 0 on pass, else writes the reason. */
static int run_case(const char *dir, char *why, size_t wl) {
  char path[8448];
  kn_error err = {0};
  kn_model *m = NULL;
  kn_context *c = NULL;
  int rc = 1;
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  if (kn_model_load(path, &m, &err)) {
    snprintf(why, wl, "load: %s", err.msg);
    return 1;
  }
  if (OPTIMIZE && kn_optimize((kn_ir_model *)kn_model_ir(m), NULL, &err)) {
    snprintf(why, wl, "optimize: %s", err.msg);
    goto out;
  }
  if (ENGINE) {
    char tmp[] = "/tmp/kiln_conformance_XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0) {
      snprintf(why, wl, "cannot create a temporary engine file");
      goto out;
    }
    close(fd);
    kn_status st = kn_model_build(m, NULL, &err);
    if (!st) st = kn_model_save(m, tmp, &err);
    kn_model_free(m);
    m = NULL;
    if (!st) st = kn_model_load(tmp, &m, &err);
    unlink(tmp);
    if (st) {
      snprintf(why, wl, "engine: %s", err.msg);
      goto out;
    }
  }
  if (kn_context_create(m, &c, &err)) {
    snprintf(why, wl, "%s", err.msg);
    goto out;
  }
  const kn_graph *g = kn_model_ir(m)->graph;
  int32_t nin = kn_model_input_count(m), nout = kn_model_output_count(m);
  for (int set = 0;; set++) {
    char sdir[4200];
    snprintf(sdir, sizeof sdir, "%s/test_data_set_%d", dir, set);
    if (!file_exists(sdir)) {
      rc = set == 0 ? (snprintf(why, wl, "no test data"), 1) : 0;
      break;
    }
    kn_slot *ins = kn_calloc((size_t)nin + 1, sizeof *ins);
    bool ok = true;
    for (int32_t i = 0; i < nin && ok; i++) {
      snprintf(path, sizeof path, "%s/input_%d.pb", sdir, i);
      const kn_value *v = &g->values[g->inputs[m->inputs[i]]];
      if (!file_exists(path)) {
        if (v->type.optional) continue;
        snprintf(why, wl, "missing input_%d.pb", i);
        ok = false;
        break;
      }
      if (kn_onnx_read_slot_file(path, v->type.kind == KN_KIND_SEQUENCE ? KN_KIND_SEQUENCE : KN_KIND_TENSOR,
                                 v->type.optional, &ins[i], &err) ||
          (bf16_from_u16(&ins[i].t, v->type.dtype), false) ||
          kn_context_set_input_slot(c, i, &ins[i], &err)) {
        snprintf(why, wl, "input %d: %s", i, err.msg);
        ok = false;
      }
    }
    if (ok && kn_context_run(c, &err)) {
      snprintf(why, wl, "run: %s", err.msg);
      ok = false;
    }
    for (int32_t o = 0; o < nout && ok; o++) {
      snprintf(path, sizeof path, "%s/output_%d.pb", sdir, o);
      const kn_value *v = &g->values[g->outputs[o]];
      kn_slot want;
      const kn_slot *got = kn_context_output_slot(c, o);
      kn_kind kind = v->type.kind == KN_KIND_SEQUENCE ? KN_KIND_SEQUENCE : KN_KIND_TENSOR;
      if (!v->type.optional && got && got->kind == KN_KIND_SEQUENCE) kind = KN_KIND_SEQUENCE;
      if (kn_onnx_read_slot_file(path, kind, v->type.optional, &want, &err)) {
        snprintf(why, wl, "expected output %d: %s", o, err.msg);
        ok = false;
        break;
      }
      char sub[400];
      if (compare_slot(got, &want, sub, sizeof sub)) {
        snprintf(why, wl, "output %d %.200s: %.380s", o, v->name, sub);
        ok = false;
      }
      kn_slot_release(&want);
    }
    for (int32_t i = 0; i < nin; i++) kn_slot_release(&ins[i]);
    free(ins);
    if (!ok) break;
  }
out:
  kn_context_free(c);
  kn_model_free(m);
  return rc;
}

typedef struct conf_case {
  char *id, *dir;
  int rc; /* 0 pass, 1 fail */
  char why[2048];
} conf_case;

/* What a worker writes after each case: one write of at most PIPE_BUF
 * bytes, so that a record arrives whole or not at all. */
typedef struct conf_report {
  int32_t k, rc;
  char why[2048];
} conf_report;

static void worker(conf_case *cases, int from, int n, int fd) {
  for (int k = from; k < n; k++) {
    conf_report r = {.k = k};
    r.rc = run_case(cases[k].dir, r.why, sizeof r.why);
    if (write(fd, &r, sizeof r) != (ssize_t)sizeof r) _exit(3);
  }
  close(fd);
  exit(0); /* not _exit: LeakSanitizer checks at exit */
}

/* Runs cases[0..n) in workers; false when a worker ended badly after its
 * last case (a sanitizer's report at exit). */
static bool run_cases(conf_case *cases, int n, int timeout, bool fork_it) {
  if (!fork_it) {
    for (int k = 0; k < n; k++) cases[k].rc = run_case(cases[k].dir, cases[k].why, sizeof cases[k].why);
    return true;
  }
  bool clean = true;
  for (int next = 0; next < n;) {
    int fds[2];
    if (pipe(fds) != 0) {
      perror("kiln_conformance: pipe");
      exit(2);
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
      perror("kiln_conformance: fork");
      exit(2);
    }
    if (pid == 0) {
      close(fds[0]);
      worker(cases, next, n, fds[1]);
    }
    close(fds[1]);
    bool hung = false;
    for (;;) {
      struct pollfd p = {.fd = fds[0], .events = POLLIN};
      int pr = poll(&p, 1, timeout * 1000);
      if (pr < 0 && errno == EINTR) continue;
      if (pr == 0) {
        hung = true;
        kill(pid, SIGKILL);
        break;
      }
      conf_report r;
      size_t got = 0;
      ssize_t rd = 0;
      while (got < sizeof r && (rd = read(fds[0], (char *)&r + got, sizeof r - got)) > 0)
        got += (size_t)rd;
      if (got < sizeof r) break; /* the worker ended */
      if (r.k != next) {
        fprintf(stderr, "kiln_conformance: worker reported case %d, expected %d\n", r.k, next);
        exit(2);
      }
      cases[next].rc = r.rc ? 1 : 0;
      r.why[sizeof r.why - 1] = '\0';
      memcpy(cases[next].why, r.why, sizeof r.why);
      next++;
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (next < n) { /* the case in progress hung or crashed */
      cases[next].rc = 1;
      if (hung) snprintf(cases[next].why, sizeof cases[next].why, "timed out (%d s)", timeout);
      else if (WIFSIGNALED(status))
        snprintf(cases[next].why, sizeof cases[next].why, "crashed (signal %d)", WTERMSIG(status));
      else
        snprintf(cases[next].why, sizeof cases[next].why, "the worker exited (status %d)",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
      next++;
    } else if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      printf("FAIL the worker ended badly after its last case (%s %d): see its report above\n",
             WIFSIGNALED(status) ? "signal" : "status",
             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
      clean = false;
    }
  }
  return clean;
}

static char **read_list(const char *path, int *n) {
  *n = 0;
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char line[1024];
  char **list = NULL;
  int cap = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    if (!line[0] || line[0] == '#') continue;
    if (!KN_GROW(list, cap, *n + 1)) break;
    list[(*n)++] = kn_strdup(line);
  }
  fclose(f);
  return list;
}

int main(int argc, char **argv) {
  const char *data = "/usr/share/libonnx-testdata/data";
  const char *filters[64];
  int nfilters = 0, timeout = 60;
  const char *expect = NULL, *write_pass = NULL;
  bool fork_it = true, cases_mode = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
    else if (!strcmp(argv[i], "--cases") && i + 1 < argc) {
      data = argv[++i];
      cases_mode = true;
    } else if (!strcmp(argv[i], "--rtol") && i + 1 < argc) RTOL = atof(argv[++i]);
    else if (!strcmp(argv[i], "--atol") && i + 1 < argc) ATOL = atof(argv[++i]);
    else if (!strcmp(argv[i], "--filter") && i + 1 < argc) {
      if (nfilters == 64) {
        fprintf(stderr, "kiln_conformance: at most 64 --filter options\n");
        return 2;
      }
      filters[nfilters++] = argv[++i];
    }
    else if (!strcmp(argv[i], "--expect") && i + 1 < argc) expect = argv[++i];
    else if (!strcmp(argv[i], "--write-pass") && i + 1 < argc) write_pass = argv[++i];
    else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) timeout = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--no-fork")) fork_it = false;
    else if (!strcmp(argv[i], "--optimize")) OPTIMIZE = true;
    else if (!strcmp(argv[i], "--engine")) ENGINE = true;
    else {
      fprintf(stderr, "usage: %s [--data DIR | --cases DIR] [--filter S]... "
                      "[--expect FILE] [--write-pass FILE] [--timeout SEC] "
                      "[--rtol R] [--atol A] [--optimize] [--engine] [--no-fork]\n", argv[0]);
      return 2;
    }
  }
  int nexp = 0;
  char **expected = expect ? read_list(expect, &nexp) : NULL;
  if (expect && !expected) {
    fprintf(stderr, "kiln_conformance: cannot read %s\n", expect);
    return 2;
  }
  bool *seen = kn_calloc((size_t)nexp + 1, sizeof *seen);
  FILE *wp = write_pass ? fopen(write_pass, "w") : NULL;
  int passed = 0, failed = 0, regressions = 0;
  const char *const *suites = default_suites;
  size_t n_suites = sizeof default_suites / sizeof default_suites[0];
  static const char *const one_suite[] = {""};
  if (cases_mode) {
    suites = one_suite;
    n_suites = 1;
  }
  conf_case *cases = NULL;
  int n_cases = 0, cap_cases = 0;
  for (size_t s = 0; s < n_suites; s++) {
    char sdir[4096];
    snprintf(sdir, sizeof sdir, "%s%s%s", data, cases_mode ? "" : "/", suites[s]);
    DIR *d = opendir(sdir);
    if (!d) continue;
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      if (!KN_GROW(names, cap, n + 1)) break;
      names[n++] = kn_strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
      char id[1024], dir[8192];
      snprintf(id, sizeof id, "%s%s%s", suites[s], cases_mode ? "" : "/", names[i]);
      bool take = nfilters == 0;
      for (int f = 0; f < nfilters; f++)
        if (strstr(id, filters[f])) take = true;
      snprintf(dir, sizeof dir, "%s/%s", sdir, names[i]);
      free(names[i]);
      if (!take) continue;
      if (cases_mode) {
        char mp[8400];
        snprintf(mp, sizeof mp, "%s/model.onnx", dir);
        if (!file_exists(mp)) continue;
        /* exported but without reference outputs (export_models.py alone,
           as CI does for the models only the dashboards use) */
        snprintf(mp, sizeof mp, "%s/test_data_set_0/output_0.pb", dir);
        if (!file_exists(mp)) {
          printf("SKIP %s: no reference outputs (scripts/make_reference.sh makes them)\n", id);
          continue;
        }
      }
      if (!KN_GROW(cases, cap_cases, n_cases + 1)) {
        fprintf(stderr, "kiln_conformance: out of memory\n");
        return 2;
      }
      cases[n_cases++] = (conf_case){.id = kn_strdup(id), .dir = kn_strdup(dir)};
    }
    free(names);
  }
  bool clean = run_cases(cases, n_cases, timeout, fork_it);
  for (int c = 0; c < n_cases; c++) {
    const char *id = cases[c].id;
    bool listed = false;
    for (int k = 0; k < nexp; k++)
      if (!strcmp(expected[k], id)) listed = seen[k] = true;
    if (cases[c].rc == 0) {
      passed++;
      printf("PASS %s\n", id);
      if (wp) fprintf(wp, "%s\n", id);
    } else {
      failed++;
      printf("FAIL %s: %s%s\n", id, cases[c].why, listed ? "  [REGRESSION]" : "");
      if (listed) regressions++;
    }
    free(cases[c].id);
    free(cases[c].dir);
  }
  free(cases);
  if (wp) fclose(wp);
  /* a listed case that did not run at all (data missing) is a regression */
  for (int k = 0; k < nexp && nfilters == 0; k++)
    if (!seen[k]) {
      printf("MISSING %s: listed in %s but not found  [REGRESSION]\n", expected[k], expect);
      regressions++;
    }
  free(seen);
  printf("%d passed, %d failed\n", passed, failed);
  if (expect) printf("%d regressions against %s\n", regressions, expect);
  for (int k = 0; k < nexp; k++) free(expected[k]);
  free(expected);
  return regressions || !clean ? 1 : 0;
}
