/* Option parsing shared by every subcommand (the getopt_long conventions,
 * without getopt's global state), value parsers, and --threads. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void kn_cli_args_init(kn_cli_args *a, const kn_cli_cmd *cmd, const kn_cli_opt *opts, int argc,
                      char **argv) {
  memset(a, 0, sizeof *a);
  a->cmd = cmd;
  a->opts = opts;
  a->argc = argc;
  a->argv = argv;
  a->i = 1;
}

static const kn_cli_opt *find_long(const kn_cli_opt *opts, const char *name, size_t len) {
  for (const kn_cli_opt *o = opts; o->name; o++)
    if (strlen(o->name) == len && !strncmp(o->name, name, len)) return o;
  return NULL;
}

static const kn_cli_opt *find_short(const kn_cli_opt *opts, char c) {
  for (const kn_cli_opt *o = opts; o->name; o++)
    if (o->short_name && o->short_name == c) return o;
  return NULL;
}

int kn_cli_next(kn_cli_args *a) {
  if (a->i >= a->argc) return KN_CLI_END;
  char *s = a->argv[a->i++];
  a->arg = NULL;
  a->flag = s;
  /* "-" alone is a file name (stdin by convention), "--" ends the options */
  if (a->no_more_opts || s[0] != '-' || s[1] == '\0') {
    a->arg = s;
    return KN_CLI_POSITIONAL;
  }
  if (!strcmp(s, "--")) {
    a->no_more_opts = true;
    return kn_cli_next(a);
  }
  const kn_cli_opt *o;
  const char *inline_val = NULL;
  if (s[1] == '-') {
    const char *name = s + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    o = find_long(a->opts, name, len);
    if (!o) {
      kn_cli_usage(a->cmd, "unknown option '--%.*s'", (int)len, name);
      return KN_CLI_BAD;
    }
    if (eq) inline_val = eq + 1;
  } else {
    o = find_short(a->opts, s[1]);
    if (!o) {
      kn_cli_usage(a->cmd, "unknown option '%s'", s);
      return KN_CLI_BAD;
    }
    if (s[2]) {
      if (!o->has_arg) {
        kn_cli_usage(a->cmd, "unknown option '%s' (-%c takes no value)", s, s[1]);
        return KN_CLI_BAD;
      }
      inline_val = s + 2; /* -oFILE */
    }
  }
  if (!o->has_arg) {
    if (inline_val) {
      kn_cli_usage(a->cmd, "option '--%s' takes no value, got '%s'", o->name, s);
      return KN_CLI_BAD;
    }
    return o->id;
  }
  if (inline_val) {
    a->arg = inline_val;
  } else if (a->i < a->argc) {
    a->arg = a->argv[a->i++];
  } else {
    kn_cli_usage(a->cmd, "option '%s' needs a value", s);
    return KN_CLI_BAD;
  }
  return o->id;
}

/* The option as the user would type it, for messages. */
static void opt_name(const kn_cli_args *a, char *buf, size_t n) {
  const char *eq = strchr(a->flag, '=');
  if (a->flag[0] == '-' && a->flag[1] == '-')
    snprintf(buf, n, "%.*s", eq ? (int)(eq - a->flag) : (int)strlen(a->flag), a->flag);
  else
    snprintf(buf, n, "%.2s", a->flag);
}

bool kn_cli_int(const kn_cli_args *a, int64_t min, int64_t max, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(a->arg, &end, 10);
  if (end != a->arg && !*end && errno == 0 && v >= min && v <= max) {
    *out = v;
    return true;
  }
  char name[64];
  opt_name(a, name, sizeof name);
  if (max == INT64_MAX)
    kn_cli_usage(a->cmd, "%s takes an integer >= %lld, got '%s'", name, (long long)min, a->arg);
  else
    kn_cli_usage(a->cmd, "%s takes an integer from %lld to %lld, got '%s'", name,
                 (long long)min, (long long)max, a->arg);
  return false;
}

bool kn_cli_precision(const kn_cli_args *a, bool allow_fp32, int32_t *out) {
  int32_t p = kn_precision_from_name(a->arg);
  if (p < 0 || (p == KN_PRECISION_FP32 && !allow_fp32) ||
      (p > KN_PRECISION_INT8 && p != KN_PRECISION_BEST)) {
    kn_cli_usage(a->cmd, "--precision takes %sbf16, fp16, int8 or best, got '%s'",
                 allow_fp32 ? "fp32, " : "", a->arg);
    return false;
  }
  *out = p;
  return true;
}

bool kn_cli_weights(const kn_cli_args *a, int32_t *out) {
  if (!strcmp(a->arg, "fp16")) *out = KN_WEIGHTS_FP16;
  else if (!strcmp(a->arg, "int8")) *out = KN_WEIGHTS_INT8;
  else if (!strcmp(a->arg, "fp32")) *out = KN_WEIGHTS_FP32;
  else {
    kn_cli_usage(a->cmd, "--weights takes fp16 or int8, got '%s'", a->arg);
    return false;
  }
  return true;
}

bool kn_cli_double(const kn_cli_args *a, double min, double max, double *out) {
  char *end;
  errno = 0;
  double v = strtod(a->arg, &end);
  if (end != a->arg && !*end && errno == 0 && isfinite(v) && v >= min && v <= max) {
    *out = v;
    return true;
  }
  char name[64];
  opt_name(a, name, sizeof name);
  kn_cli_usage(a->cmd, "%s takes a number from %g to %g, got '%s'", name, min, max, a->arg);
  return false;
}

bool kn_cli_parse_bytes(const char *s, uint64_t *out) {
  char *end;
  if (*s < '0' || *s > '9') return false; /* strtoull takes "-1" */
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || errno) return false;
  uint64_t mul = 1;
  if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
  else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
  else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
  if (*end || v > UINT64_MAX / mul) return false;
  *out = v * mul;
  return true;
}

bool kn_cli_check_thread_env(const kn_cli_cmd *cmd) {
  const char *e = getenv("KILN_NUM_THREADS");
  if (!e || !*e) return true;
  char *end;
  errno = 0;
  long v = strtol(e, &end, 10);
  if (end != e && !*end && errno == 0 && v >= 1 && v <= KN_CLI_MAX_THREADS) return true;
  kn_cli_usage(cmd, "KILN_NUM_THREADS must be an integer from 1 to %d, got '%s'",
               KN_CLI_MAX_THREADS, e);
  return false;
}

kn_status kn_cli_set_threads(kn_context *ctx, int64_t threads, kn_error *err) {
  if (threads <= 0) return KN_OK;
  return kn_context_set_threads(ctx, (int32_t)threads, err);
}

void kn_cli_note_probe(const kn_model *m, const kn_build_options *bo) {
  if ((m && kn_model_format_version(m) != 0) || bo->machine || bo->reference_kernels) return;
  const char *env = getenv("KILN_MACHINE"), *probe = getenv("KILN_PROBE");
  if ((env && *env) || (probe && !strcmp(probe, "0"))) return;
  char path[4096];
  kn_machine_cache_path(path, sizeof path);
  kn_machine mach;
  kn_error err;
  if (path[0] && kn_machine_load(path, &mach, &err) == KN_OK && kn_machine_is_this_cpu(&mach) &&
      !strcmp(mach.source, "probe"))
    return;
  fprintf(stderr, "kiln: measuring this machine once for the IO model (a few seconds; kept in %s,"
                  " see kiln probe)\n", path[0] ? path : "no cache: no home directory");
}
