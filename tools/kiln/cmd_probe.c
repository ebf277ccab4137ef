/* kiln probe: measure this machine and save its description (kn_machine). */
#include "cli.h"
#include "builder/builder.h"
#include "core/machine.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

void kn_cmd_probe_usage(FILE *f) {
  fprintf(f,
          "usage: kiln probe [--output FILE] [--threads N] [--json] [--fallback] [--no-factors]\n"
          "       kiln probe --show FILE [--json]\n\n"
          "Measures this machine once (a few seconds; run it on a quiet machine): cores\n"
          "and SMT; fp32, bf16 and int8 peaks on 1 thread and on all; each memory\n"
          "level's capacity, line size and sustained read and write bandwidth on 1\n"
          "thread and on all; then fits the IO model's factor for each kernel family\n"
          "(measured over predicted step time) from calibration runs on 1 thread and\n"
          "on all. Prints a table and saves the description as JSON\n"
          "(docs/MACHINE.md), by default to the cache that `kiln build` reads:\n"
          "$XDG_CACHE_HOME/kiln/machine.json or ~/.cache/kiln/machine.json.\n\n"
          "  -o, --output FILE  write the description here instead\n"
          "  --threads N        the 'all threads' count (default: every CPU this\n"
          "                     process may use)\n"
          "  --json             print the JSON instead of the table\n"
          "  --fallback         the shipped description builds use with probing off\n"
          "                     (KILN_PROBE=0), instead of measuring; printed, and\n"
          "                     written only with --output\n"
          "  --no-factors       measure the rates only, not the IO model's factors (as a\n"
          "                     probe a build makes on its own; the model then uses 1)\n"
          "  --show FILE        print a saved description; measures and writes nothing\n\n"
          "kiln build --machine FILE builds for a described machine.\n");
}

static void fmt_bytes(uint64_t b, char *buf, size_t len) {
  if (b >= ((uint64_t)1 << 30) && b % ((uint64_t)1 << 30) == 0)
    snprintf(buf, len, "%llu GiB", (unsigned long long)(b >> 30));
  else if (b >= ((uint64_t)1 << 30)) snprintf(buf, len, "%.1f GiB", (double)b / 1073741824.0);
  else if (b >= ((uint64_t)1 << 20) && b % ((uint64_t)1 << 20) == 0)
    snprintf(buf, len, "%llu MiB", (unsigned long long)(b >> 20));
  else if (b >= ((uint64_t)1 << 20)) snprintf(buf, len, "%.1f MiB", (double)b / 1048576.0);
  else if (b >= 1024) snprintf(buf, len, "%llu KiB", (unsigned long long)(b >> 10));
  else snprintf(buf, len, "%llu B", (unsigned long long)b);
}

static void rate(double v, const char *unit, char *buf, size_t len) {
  if (v <= 0) snprintf(buf, len, "-");
  else snprintf(buf, len, "%.1f %s", v, unit);
}

static void print_table(const kn_machine *m) {
  int32_t all = m->cores * m->threads_per_core;
  char a[32], b[32], c[32], d[32], e[32];
  printf("machine   %s (%s, family %d, model %d)\n", m->cpu, m->vendor[0] ? m->vendor : "?",
         m->family, m->model);
  printf("cores     %d, %d thread%s each; numbers from %s%s\n", m->cores, m->threads_per_core,
         m->threads_per_core == 1 ? "" : "s", m->source,
         m->probe_seconds > 0 ? "" : " (not measured)");
  printf("\n%-18s %16s %16s\n", "peak", "1 thread", "all threads");
  rate(m->fp32_gflops[0], "GFLOP/s", a, sizeof a);
  rate(m->fp32_gflops[1], "GFLOP/s", b, sizeof b);
  printf("%-18s %16s %16s\n", "fp32 FMA", a, b);
  rate(m->bf16_gflops[0], "GFLOP/s", a, sizeof a);
  rate(m->bf16_gflops[1], "GFLOP/s", b, sizeof b);
  printf("%-18s %16s %16s\n", "bf16 dot", a, b);
  rate(m->int8_gops[0], "GOP/s", a, sizeof a);
  rate(m->int8_gops[1], "GOP/s", b, sizeof b);
  printf("%-18s %16s %16s\n", "int8 dot", a, b);
  printf("\n%-6s %10s %6s %7s %12s %12s %12s %12s\n", "level", "capacity", "line", "shared",
         "read 1t", "read all", "write 1t", "write all");
  for (int32_t i = 0; i < m->n_levels; i++) {
    const kn_mem_level *l = &m->levels[i];
    fmt_bytes(l->bytes, a, sizeof a);
    rate(l->read_gbs[0], "GB/s", b, sizeof b);
    rate(l->read_gbs[1], "GB/s", c, sizeof c);
    rate(l->write_gbs[0], "GB/s", d, sizeof d);
    rate(l->write_gbs[1], "GB/s", e, sizeof e);
    printf("%-6s %10s %4u B %7d %12s %12s %12s %12s\n", l->name, a, l->line_bytes, l->shared_by,
           b, c, d, e);
  }
  rate(m->dram_copy_gbs[0], "GB/s", a, sizeof a);
  rate(m->dram_copy_gbs[1], "GB/s", b, sizeof b);
  printf("\nDRAM memcpy (read + write bytes): %s on 1 thread, %s on %d\n", a, b, all);
  if (m->factors_cpu[0]) {
    printf("\nIO model factors (measured / roofline time), fitted on %s (%s) at %s in %.1f s\n",
           m->factors_cpu, m->factors_isa, m->factors_when, m->factors_seconds);
    printf("%-12s %9s %12s\n", "family", "1 thread", "all threads");
    for (int32_t f = 0; f < KN_MACHINE_FAMILIES; f++) {
      char *cell[2] = {b, c};
      for (int t = 0; t < 2; t++) {
        if (m->factors[f][t] > 0) snprintf(cell[t], sizeof b, "%.2f", m->factors[f][t]);
        else snprintf(cell[t], sizeof b, "-");
      }
      printf("%-12s %9s %12s\n", kn_machine_family_name(f), b, c);
    }
  }
  if (m->probe_seconds > 0) printf("probed in %.1f s\n", m->probe_seconds);
}

static int print_json(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return kn_cli_fail("%s: cannot open: %s", path, strerror(errno));
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, stdout);
  fclose(f);
  return KN_EXIT_OK;
}

enum { OPT_OUTPUT = 1, OPT_THREADS, OPT_JSON, OPT_FALLBACK, OPT_SHOW, OPT_NO_FACTORS };

int kn_cmd_probe(int argc, char **argv) {
  const kn_cli_cmd *cmd = kn_cli_find("probe");
  static const kn_cli_opt opts[] = {{"output", 'o', true, OPT_OUTPUT},
                                    {"threads", 0, true, OPT_THREADS},
                                    {"json", 0, false, OPT_JSON},
                                    {"fallback", 0, false, OPT_FALLBACK},
                                    {"show", 0, true, OPT_SHOW},
                                    {"no-factors", 0, false, OPT_NO_FACTORS},
                                    {NULL, 0, false, 0}};
  kn_cli_args args;
  kn_cli_args_init(&args, cmd, opts, argc, argv);
  const char *output = NULL, *show = NULL;
  int64_t threads = 0;
  bool json = false, fallback = false, no_factors = false;
  for (int id; (id = kn_cli_next(&args)) != KN_CLI_END;) {
    switch (id) {
    case KN_CLI_BAD: return KN_EXIT_USAGE;
    case KN_CLI_POSITIONAL: return kn_cli_usage(cmd, "takes no file arguments, got '%s'", args.arg);
    case OPT_OUTPUT: output = args.arg; break;
    case OPT_THREADS:
      if (!kn_cli_int(&args, 1, KN_CLI_MAX_THREADS, &threads)) return KN_EXIT_USAGE;
      break;
    case OPT_JSON: json = true; break;
    case OPT_FALLBACK: fallback = true; break;
    case OPT_SHOW: show = args.arg; break;
    case OPT_NO_FACTORS: no_factors = true; break;
    }
  }
  kn_error err = {0};
  kn_machine m;
  if (show) {
    if (output || fallback || threads)
      return kn_cli_usage(cmd, "--show prints a saved description: it takes only --json");
    if (kn_machine_load(show, &m, &err)) return kn_cli_error(&err);
    if (json) return print_json(show);
    print_table(&m);
    return KN_EXIT_OK;
  }
  char cache[4096];
  if (fallback && !output) { /* never into the cache builds read: it holds probes */
    kn_machine_fallback(&m);
    if (json) {
      char *text = kn_machine_to_json(&m);
      if (!text) return kn_cli_fail("out of memory");
      fputs(text, stdout);
      free(text);
    } else {
      print_table(&m);
    }
    return KN_EXIT_OK;
  }
  if (!output) {
    output = kn_machine_cache_path(cache, sizeof cache);
    if (!output[0])
      return kn_cli_fail("no home directory to keep the description in: pass --output FILE");
    /* the cache's folder, as kiln build would make it */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", output);
    for (char *s = dir + 1; *s; s++)
      if (*s == '/') {
        *s = 0;
        mkdir(dir, 0755);
        *s = '/';
      }
  }
  if (fallback) kn_machine_fallback(&m);
  else {
    if (!json) fprintf(stderr, "probing this machine (a few seconds) ...\n");
    if (kn_machine_probe((int32_t)threads, &m, &err)) return kn_cli_error(&err);
    /* the IO model's factors, fitted on the rates just measured */
    if (!no_factors && kn_machine_calibrate(&m, threads > 0 ? (int32_t)threads : m.cores * m.threads_per_core,
                             &err))
      return kn_cli_error(&err);
    if (!no_factors) m.probe_seconds += m.factors_seconds;
  }
  if (kn_machine_save(&m, output, &err)) return kn_cli_error(&err);
  if (json) return print_json(output);
  print_table(&m);
  printf("saved to %s\n", output);
  return KN_EXIT_OK;
}
