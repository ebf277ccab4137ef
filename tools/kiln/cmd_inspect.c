/* kiln inspect MODEL|ENGINE [--json] [--shape NAME=DIMS]...: inputs,
 * outputs, the ONNX op histogram, parameters, FLOPs, and the steps of the
 * optimized engine with their memory plan. */
#include "cli.h"
#include "engine/engine.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OPTS 256

void kn_cmd_inspect_usage(FILE *f) {
  fprintf(f,
          "usage: kiln inspect MODEL|ENGINE [--json] [--html FILE] [--shape NAME=DIMS]...\n"
          "                    [--no-optimize] [--threads N]\n\n"
          "Prints the model's inputs and outputs (shapes, dtypes, symbolic dims), the ONNX\n"
          "op histogram, parameter count and bytes, an estimate of the FLOPs of one run\n"
          "(a multiply-add counts 2; dynamic dimensions count as 1 unless --shape fixes\n"
          "them), and the steps of the optimized engine (an ONNX model is built in\n"
          "memory with the default options, or --no-optimize) with the ONNX nodes each\n"
          "covers, its kernel, output shapes, FLOPs and bytes, and the memory plan:\n"
          "arena, lower bound (most bytes live at one step) and unplanned total.\n"
          "Each step also shows its cache tiling, and the IO model's prediction for the\n"
          "machine it was built for (docs/MACHINE.md) on --threads N threads (default\n"
          "1): the time and what bounds it (compute, or the bandwidth of L1, L2, L3 or\n"
          "DRAM, or the fixed per-step overhead); --json adds the bytes moved across each\n"
          "boundary (registers-L1, L1-L2, L2-L3, L3-DRAM).  Last, the weights: packed\n"
          "bytes for this CPU, and the originals kept (which, and the step that reads\n"
          "them) and dropped.\n"
          "--json prints one JSON object instead (keys: onnx_nodes, steps, weights_bytes,\n"
          "arena_bytes, naive_activation_bytes, lower_bound_bytes, packed_bytes,\n"
          "originals_kept_bytes, originals_dropped_bytes, originals_kept, format_version,\n"
          "flops, inputs, outputs, step_list, machine).  --html FILE writes a\n"
          "self-contained dashboard page of the same data (docs/CLI.md).\n"
          "Options also take the --name=VALUE\n"
          "form.\n");
}

/* ---- JSON helpers ------------------------------------------------------- */

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

static void json_value(FILE *f, const kn_value_info *vi) {
  fprintf(f, "{\"name\": ");
  json_str(f, vi->name);
  fprintf(f, ", \"dtype\": ");
  json_str(f, vi->dtype ? kn_dtype_name(vi->dtype) : "unknown");
  fprintf(f, ", \"shape\": ");
  if (vi->rank < 0) {
    fprintf(f, "null}");
    return;
  }
  fprintf(f, "[");
  for (int32_t d = 0; d < vi->rank; d++) {
    if (d) fprintf(f, ", ");
    if (vi->dims[d] >= 0) fprintf(f, "%lld", (long long)vi->dims[d]);
    else json_str(f, vi->dim_params[d] ? vi->dim_params[d] : "?");
  }
  fprintf(f, "]}");
}

static void json_covers(FILE *f, const char *covers) {
  fprintf(f, "[");
  const char *p = covers;
  for (bool first = true; p && *p; first = false) {
    const char *c = strchr(p, ',');
    size_t n = c ? (size_t)(c - p) : strlen(p);
    char *one = strndup(p, n);
    if (!first) fprintf(f, ", ");
    json_str(f, one);
    free(one);
    p = c ? c + 1 : NULL;
  }
  fprintf(f, "]");
}

/* ---- text helpers ------------------------------------------------------- */

/* "1x3x224x224" (sep "x") or "1, 3, 224, 224" (sep ", "). */
static void shape_text_sep(const kn_value_info *vi, char *buf, size_t n, const char *sep) {
  size_t o = 0;
  buf[0] = 0;
  if (vi->rank < 0) {
    snprintf(buf, n, "?");
    return;
  }
  for (int32_t d = 0; d < vi->rank && o < n; d++) {
    int w = vi->dims[d] >= 0
                ? snprintf(buf + o, n - o, "%s%lld", d ? sep : "", (long long)vi->dims[d])
                : snprintf(buf + o, n - o, "%s%s", d ? sep : "",
                           vi->dim_params[d] ? vi->dim_params[d] : "?");
    if (w < 0) break;
    o += (size_t)w;
  }
  if (vi->rank == 0) snprintf(buf, n, "scalar");
}

static void shape_text(const kn_value_info *vi, char *buf, size_t n) {
  shape_text_sep(vi, buf, n, "x");
}

static void print_value(const kn_value_info *vi) {
  char s[256];
  shape_text_sep(vi, s, sizeof s, ", ");
  printf("  %-24s %-8s [%s]\n", vi->name, vi->dtype ? kn_dtype_name(vi->dtype) : "?", s);
}

typedef struct hist {
  const char *op[512];
  int64_t count[512];
  int n;
} hist;

static void collect_op(const char *op, int64_t count, void *arg) {
  hist *h = arg;
  if (h->n == 512) return;
  h->op[h->n] = strdup(op);
  h->count[h->n++] = count;
}

static const char *human(double v, char *buf, size_t n, const char *unit) {
  const char *pre[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (v >= 1000 && i < 4) {
    v /= 1000;
    i++;
  }
  snprintf(buf, n, "%.3g %s%s", v, pre[i], unit);
  return buf;
}

static void json_machine(FILE *f, const kn_model *m) {
  kn_machine mc;
  kn_model_machine(m, &mc);
  fprintf(f, ", \"machine\": {\"cpu\": ");
  json_str(f, mc.cpu);
  fprintf(f, ", \"cores\": %d, \"source\": ", mc.cores);
  json_str(f, mc.source);
  fprintf(f, ", \"fp32_gflops\": [%.1f, %.1f], \"levels\": [", mc.fp32_gflops[0],
          mc.fp32_gflops[1]);
  for (int32_t l = 0; l < mc.n_levels && l < KN_MACHINE_MAX_LEVELS; l++) {
    const kn_mem_level *lv = &mc.levels[l];
    fprintf(f, "%s{\"name\": ", l ? ", " : "");
    json_str(f, lv->name);
    fprintf(f, ", \"bytes\": %llu, \"read_gbs\": [%.1f, %.1f], \"write_gbs\": [%.1f, %.1f]}",
            (unsigned long long)lv->bytes, lv->read_gbs[0], lv->read_gbs[1], lv->write_gbs[0],
            lv->write_gbs[1]);
  }
  fprintf(f, "]}");
}


/* ---- weights in original and packed form -------------------------------- */

typedef struct orig_summary {
  uint64_t packed, kept, dropped;
  int32_t blocks, n_kept, n_dropped, n;
  kn_original *o; /* kept ones first, largest first */
} orig_summary;

static int by_kept_bytes(const void *a, const void *b) {
  const kn_original *x = a, *y = b;
  bool kx = x->fate != KN_ORIG_PACKED, ky = y->fate != KN_ORIG_PACKED;
  if (kx != ky) return kx ? -1 : 1;
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
  return x->value - y->value;
}

/* Unread constants count as dropped: nothing makes them resident. */
static bool orig_summary_get(const kn_model *m, orig_summary *s) {
  memset(s, 0, sizeof *s);
  s->packed = kn_model_packed_bytes(m, &s->blocks);
  int32_t n = kn_model_originals(m, NULL, 0);
  s->o = calloc((size_t)n + 1, sizeof *s->o);
  if (!s->o) return false;
  s->n = kn_model_originals(m, s->o, n);
  for (int32_t k = 0; k < s->n; k++)
    if (s->o[k].fate == KN_ORIG_UNREAD) s->o[k].fate = KN_ORIG_PACKED;
  qsort(s->o, (size_t)s->n, sizeof *s->o, by_kept_bytes);
  for (int32_t k = 0; k < s->n; k++)
    if (s->o[k].fate == KN_ORIG_PACKED) {
      s->dropped += s->o[k].bytes;
      s->n_dropped++;
    } else {
      s->kept += s->o[k].bytes;
      s->n_kept++;
    }
  return true;
}

static const kn_spill *model_spill(const kn_model *m) { return m->spill; }

static const char *value_name(const kn_model *m, int32_t v) {
  return kn_model_ir(m)->graph->values[v].name;
}

static const char *step_name(const kn_model *m, int32_t i) {
  return i >= 0 ? kn_model_ir(m)->graph->nodes[i].name : "-";
}

static void json_originals(FILE *f, const kn_model *m, bool engine) {
  orig_summary s;
  if (!orig_summary_get(m, &s)) return;
  fprintf(f, ", \"packed_bytes\": %llu, \"packed_steps\": %d, \"originals_in_memory\": %s, "
             "\"originals_kept_bytes\": %llu, \"originals_dropped_bytes\": %llu, "
             "\"originals_kept\": [",
          (unsigned long long)s.packed, s.blocks, engine ? "false" : "true",
          (unsigned long long)s.kept, (unsigned long long)s.dropped);
  for (int32_t k = 0; k < s.n_kept; k++) {
    fprintf(f, "%s{\"name\": ", k ? ", " : "");
    json_str(f, value_name(m, s.o[k].value));
    fprintf(f, ", \"bytes\": %llu, \"why\": ", (unsigned long long)s.o[k].bytes);
    json_str(f, kn_orig_fate_name(s.o[k].fate));
    fprintf(f, ", \"step\": %d}", s.o[k].step);
  }
  fprintf(f, "]");
  free(s.o);
}

static const char *mib(uint64_t v, char *buf, size_t n) {
  if (v < 1048576) snprintf(buf, n, "%.1f KiB", (double)v / 1024.0);
  else snprintf(buf, n, "%.2f MiB", (double)v / 1048576.0);
  return buf;
}

/* The summary line and the largest originals kept. */
static void print_originals(const kn_model *m, bool engine) {
  orig_summary s;
  if (!orig_summary_get(m, &s)) return;
  char a[32], b[32], c[32];
  printf("weights: packed %s for this CPU (%d steps); originals kept %s (%d tensors), "
         "not kept %s (%d tensors: every step reading them runs from its packed block)\n",
         mib(s.packed, a, sizeof a), s.blocks, mib(s.kept, b, sizeof b), s.n_kept,
         mib(s.dropped, c, sizeof c), s.n_dropped);
  if (!s.n_dropped)
    ;
  else if (engine)
    printf("  (an engine drops the pages of those not kept; kept ones of 64 KiB and less are "
           "copied together at load, larger ones stay file pages, resident as far as steps "
           "read them)\n");
  else
    printf("  (built in memory: those not kept, of 64 KiB and up, were moved to a spill "
           "file as they were packed%s)\n",
           kn_spill_count(model_spill(m)) ? "" : "; none were: no spill file, or all smaller");
  int32_t shown = s.n_kept < 8 ? s.n_kept : 8;
  for (int32_t k = 0; k < shown; k++)
    printf("  kept %-40.40s %10s  step %d %s: %s\n", value_name(m, s.o[k].value),
           mib(s.o[k].bytes, a, sizeof a), s.o[k].step, step_name(m, s.o[k].step),
           kn_orig_fate_name(s.o[k].fate));
  if (shown < s.n_kept) printf("  ... %d more kept (--json lists them)\n", s.n_kept - shown);
  free(s.o);
}

char *kn_cli_inspect_json(const kn_model *m, const char *path, int64_t threads,
                          const double *measured, const char *const *ops,
                          const int64_t *op_counts, int n_ops) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return NULL;
  kn_model_stats st;
  kn_error err = {0};
  if (kn_model_stats_get(m, &st, &err)) {
    fclose(f);
    free(text);
    return NULL;
  }
  bool engine = kn_model_format_version(m) != 0;
  uint32_t fmt = engine ? kn_model_format_version(m) : kn_engine_format_version();
  int32_t nin = kn_model_input_count(m), nout = kn_model_output_count(m);
  int32_t nsteps = kn_model_step_count(m);
  fprintf(f, "{\"model\": ");
  json_str(f, path);
  fprintf(f, ", \"format_version\": %u, \"ir_version\": %lld, \"opset\": %lld", fmt,
         (long long)st.ir_version, (long long)st.opset);
  if (st.onnx_nodes >= 0) fprintf(f, ", \"onnx_nodes\": %lld", (long long)st.onnx_nodes);
  else fprintf(f, ", \"onnx_nodes\": null");
  fprintf(f, ", \"steps\": %d, \"params\": %lld, \"weights_bytes\": %lld, \"flops\": %.0f",
         nsteps, (long long)st.params, (long long)st.param_bytes, st.flops);
  fprintf(f, ", \"arena_bytes\": %llu, \"lower_bound_bytes\": %llu, "
         "\"naive_activation_bytes\": %llu",
         (unsigned long long)st.arena_bytes, (unsigned long long)st.lower_bound_bytes,
         (unsigned long long)st.naive_activation_bytes);
  json_originals(f, m, engine);
  fprintf(f, ", \"fixed_inputs\": {");
  for (int32_t i = 0, k = 0; i < nin; i++) {
    kn_value_info vi;
    const char *fx = kn_model_input_fixed(m, i);
    if (!fx || kn_model_input_info(m, i, &vi)) continue;
    fprintf(f, k++ ? ", " : "");
    json_str(f, vi.name);
    fprintf(f, ": ");
    json_str(f, fx);
  }
  fprintf(f, "}, \"inputs\": [");
  for (int32_t i = 0; i < nin; i++) {
    kn_value_info vi;
    if (kn_model_input_info(m, i, &vi)) continue;
    fprintf(f, i ? ", " : "");
    json_value(f, &vi);
  }
  fprintf(f, "], \"outputs\": [");
  for (int32_t i = 0; i < nout; i++) {
    kn_value_info vi;
    if (kn_model_output_info(m, i, &vi)) continue;
    fprintf(f, i ? ", " : "");
    json_value(f, &vi);
  }
  fprintf(f, "], \"onnx_ops\": {");
  for (int k = 0; k < n_ops; k++) {
    fprintf(f, k ? ", " : "");
    json_str(f, ops[k]);
    fprintf(f, ": %lld", (long long)op_counts[k]);
  }
  fprintf(f, "}, \"step_list\": [");
  for (int32_t i = 0; i < nsteps; i++) {
    kn_step_info si;
    if (kn_model_step_info(m, i, &si)) continue;
    fprintf(f, "%s\n  {\"name\": ", i ? "," : "");
    json_str(f, si.name);
    fprintf(f, ", \"op\": ");
    json_str(f, si.op);
    fprintf(f, ", \"domain\": ");
    json_str(f, si.domain);
    fprintf(f, ", \"onnx_nodes\": ");
    json_covers(f, si.covers);
    fprintf(f, ", \"tactic\": ");
    json_str(f, si.tactic);
    fprintf(f, ", \"precision\": ");
    json_str(f, kn_precision_name(si.precision));
    if (si.precision == KN_PRECISION_INT8)
      fprintf(f, ", \"input_scale\": %.9g, \"input_zero\": %d", (double)si.input_scale,
              si.input_zero);
    fprintf(f, ", \"tiling\": ");
    json_str(f, si.tiling);
    fprintf(f, ", \"inputs\": [");
    for (int32_t k = 0; k < si.n_inputs; k++) {
      fprintf(f, k ? ", " : "");
      json_str(f, si.inputs[k]);
    }
    fprintf(f, "], \"outputs\": [");
    for (int32_t o = 0; o < si.n_outputs; o++) {
      fprintf(f, o ? ", " : "");
      json_value(f, &si.outputs[o]);
    }
    fprintf(f, "], \"flops\": %.0f, \"bytes_read\": %llu, \"bytes_written\": %llu", si.flops,
           (unsigned long long)si.bytes_read, (unsigned long long)si.bytes_written);
    kn_step_io io;
    if (kn_model_step_io(m, i, (int32_t)threads, &io) == KN_OK)
      fprintf(f, ", \"layout\": \"%s\", \"io\": {\"threads\": %lld, \"predicted_us\": %.3f, "
             "\"bound\": \"%s\", \"modelled\": %s, \"intensity\": %.3f, \"bytes\": "
             "{\"L1\": %.0f, \"L2\": %.0f, \"L3\": %.0f, \"DRAM\": %.0f}}",
             io.layout, (long long)threads, io.predicted_us, io.bound,
             io.modelled ? "true" : "false", io.intensity, io.bytes[0], io.bytes[1],
             io.bytes[2], io.bytes[3]);
    if (measured) fprintf(f, ", \"measured_us\": %.3f", measured[i]);
    char *dj = NULL;
    if (kn_model_step_diagram(m, i, (int32_t)threads, &dj) == KN_OK && dj)
      fprintf(f, ", \"diagram\": %s", dj);
    free(dj);
    fprintf(f, "}");
  }
  fprintf(f, "\n], \"decisions\": [");
  for (int32_t i = 0; i < kn_model_decision_count(m); i++) {
    fprintf(f, i ? ", " : "");
    json_str(f, kn_model_decision(m, i));
  }
  fprintf(f, "]");
  json_machine(f, m);
  fprintf(f, "}\n");
  if (fclose(f)) {
    free(text);
    return NULL;
  }
  return text;
}

int kn_cmd_inspect(int argc, char **argv) {
  const kn_cli_cmd *cmd = kn_cli_find("inspect");
  const char *path = NULL, *shapes[MAX_OPTS];
  int n_shapes = 0;
  bool json = false;
  const char *html = NULL;
  kn_build_options bo;
  kn_build_options_init(&bo);
  enum { O_JSON = 1, O_NO_OPTIMIZE, O_SHAPE, O_THREADS, O_HTML };
  int64_t threads = 0;
  static const kn_cli_opt opts[] = {{"json", 0, false, O_JSON},
                                    {"threads", 0, true, O_THREADS},
                                    {"html", 0, true, O_HTML},
                                    {"no-optimize", 0, false, O_NO_OPTIMIZE},
                                    {"shape", 0, true, O_SHAPE},
                                    {NULL, 0, false, 0}};
  kn_cli_args args;
  kn_cli_args_init(&args, cmd, opts, argc, argv);
  for (int id; (id = kn_cli_next(&args)) != KN_CLI_END;) {
    switch (id) {
    case KN_CLI_BAD: return KN_EXIT_USAGE;
    case O_JSON: json = true; break;
    case O_HTML: html = args.arg; break;
    case O_NO_OPTIMIZE: bo.no_optimize = 1; break;
    case O_THREADS:
      if (!kn_cli_int(&args, 1, KN_CLI_MAX_THREADS, &threads)) return KN_EXIT_USAGE;
      break;
    case O_SHAPE:
      if (n_shapes == MAX_OPTS) return kn_cli_usage(cmd, "too many --shape options");
      shapes[n_shapes++] = args.arg;
      break;
    case KN_CLI_POSITIONAL:
      if (path) return kn_cli_usage(cmd, "unexpected argument '%s'", args.arg);
      path = args.arg;
    }
  }
  if (!path) return kn_cli_usage(cmd, "MODEL is required");
  bo.shapes = shapes;
  bo.n_shapes = n_shapes;
  kn_error err = {0};
  kn_model *m = NULL;
  if (kn_model_load(path, &m, &err)) return kn_cli_error(&err);
  hist h = {.n = 0};
  bool engine = kn_model_format_version(m) != 0;
  if (!engine) kn_model_op_histogram(m, collect_op, &h); /* before optimizing */
  kn_model_stats st;
  int rc = KN_EXIT_OK;
  double *measured = NULL;
  kn_cli_note_probe(m, &bo);
  if (kn_model_build(m, &bo, &err) || kn_model_stats_get(m, &st, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  int32_t nin = kn_model_input_count(m), nout = kn_model_output_count(m);
  int32_t nsteps = kn_model_step_count(m);
  /* step times `kiln bench --per-step` kept beside the engine */
  measured = engine ? calloc((size_t)nsteps + 1, sizeof *measured) : NULL;
  int32_t measured_threads = 0;
  if (measured && !kn_cli_step_times_load(path, m, &measured_threads, measured)) {
    free(measured);
    measured = NULL;
  }
  if (!threads) threads = measured ? measured_threads : 1;
  bool measured_match = measured && measured_threads == threads;
  uint32_t fmt = engine ? kn_model_format_version(m) : kn_engine_format_version();
  if (json || html) {
    char *text = kn_cli_inspect_json(m, path, threads, measured_match ? measured : NULL, h.op,
                                     h.count, h.n);
    if (!text) {
      rc = kn_cli_fail("inspect '%s': out of memory writing the JSON", path);
      goto done;
    }
    if (html && kn_cli_dashboard_write(html, path, text, NULL, &err)) rc = kn_cli_error(&err);
    else if (json) fputs(text, stdout);
    free(text);
    goto done;
  }
  char b1[32], b2[32], b3[32];
  printf("%s: %s (IR version %lld, opset %lld)\n", engine ? "engine" : "model", path,
         (long long)st.ir_version, (long long)st.opset);
  if (engine) printf("engine format version %u\n", fmt);
  printf("inputs:\n");
  for (int32_t i = 0; i < nin; i++) {
    kn_value_info vi;
    if (kn_model_input_info(m, i, &vi) == KN_OK) print_value(&vi);
    const char *fx = kn_model_input_fixed(m, i);
    if (fx) printf("    pinned to %s (kiln build --fix): other values are refused\n", fx);
  }
  printf("outputs:\n");
  for (int32_t i = 0; i < nout; i++) {
    kn_value_info vi;
    if (kn_model_output_info(m, i, &vi) == KN_OK) print_value(&vi);
  }
  if (!engine) {
    printf("ONNX ops (%lld nodes):\n", (long long)st.onnx_nodes);
    for (int k = 0; k < h.n; k++) printf("  %-24s %lld\n", h.op[k], (long long)h.count[k]);
  }
  printf("parameters: %s (%lld), %s\n", human((double)st.params, b1, sizeof b1, ""),
         (long long)st.params, human((double)st.param_bytes, b2, sizeof b2, "B"));
  bool dynamic = false;
  for (int32_t i = 0; i < nin; i++) {
    kn_value_info vi;
    if (kn_model_input_info(m, i, &vi) != KN_OK) continue;
    for (int32_t d = 0; d < vi.rank; d++) dynamic |= vi.dims[d] < 0;
  }
  printf("FLOPs per run: %s%s\n", human(st.flops, b3, sizeof b3, "FLOP"),
         dynamic ? " (dynamic dimensions taken as 1)" : "");
  printf("steps (%d; predicted for %lld thread%s%s):\n  %-4s %-28s %-20s %-22s %-12s %-20s %10s "
         "%10s %9s %9s %-8s %7s %-4s  %-24s %s\n",
         nsteps, (long long)threads, threads == 1 ? "" : "s",
         measured_match ? ", measured by kiln bench --per-step" : "", "#", "name", "op", "kernel",
         "prec", "output", "MFLOP", "KiB r+w", "pred us", "meas us", "bound", "FLOP/B", "lay",
         "tiling", "covers");
  for (int32_t i = 0; i < nsteps; i++) {
    kn_step_info si;
    if (kn_model_step_info(m, i, &si)) continue;
    char shape[96] = "";
    if (si.n_outputs) shape_text(&si.outputs[0], shape, sizeof shape);
    kn_step_io io;
    if (kn_model_step_io(m, i, (int32_t)threads, &io)) memset(&io, 0, sizeof io);
    char meas[32] = "-";
    if (measured_match) snprintf(meas, sizeof meas, "%.1f", measured[i]);
    /* a step of a patch-based run (--workspace) leads with its band:
     * "band2/6 /layer1/..." ("bands": the join) */
    char name[288];
    const char *band = strstr(si.name, "#band");
    if (band)
      snprintf(name, sizeof name, "%s %.*s", band + 1, (int)(band - si.name) & 0xff, si.name);
    else snprintf(name, sizeof name, "%s", si.name);
    printf("  %-4d %-28.28s %-20.20s %-22.22s %-12s %-20.20s %10.3f %10.1f %9.1f %9s %-8s %7.1f "
           "%-4s  %-24.24s %.80s\n",
           i, name, si.op, si.tactic ? si.tactic : "reference",
           kn_precision_name(si.precision) ? kn_precision_name(si.precision) : "?",
           shape, si.flops / 1e6,
           (double)(si.bytes_read + si.bytes_written) / 1024.0, io.predicted_us, meas,
           io.bound ? io.bound : "-", io.intensity, io.layout && io.layout[0] ? io.layout : "-",
           si.tiling[0] ? si.tiling : "-", si.covers);
  }
  if (kn_model_decision_count(m)) {
    printf("build decisions (tactics timed, fusions with the IO model's predicted saving):\n");
    for (int32_t i = 0; i < kn_model_decision_count(m); i++)
      printf("  %s\n", kn_model_decision(m, i));
  }
  printf("memory: arena %.2f MiB, lower bound %.2f MiB, unplanned %.2f MiB\n",
         (double)st.arena_bytes / 1048576.0, (double)st.lower_bound_bytes / 1048576.0,
         (double)st.naive_activation_bytes / 1048576.0);
  print_originals(m, engine);
done:
  free(measured);
  for (int k = 0; k < h.n; k++) free((char *)h.op[k]);
  kn_model_free(m);
  return rc;
}
