/* kiln quantize MODEL --calibration CALIB -o OUT.qdq.onnx: a Q/DQ ONNX
 * model (ONNX Runtime's QDQ format) from an ONNX model and its calibration
 * cache; kn_quantize_onnx_file does the work (src/onnx/qdq_write.c). */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

void kn_cmd_quantize_usage(FILE *f) {
  fprintf(f,
          "usage: kiln quantize MODEL --calibration CALIB -o OUT.qdq.onnx\n\n"
          "Writes MODEL as a Q/DQ ONNX model, the \"QDQ format\" ONNX Runtime's\n"
          "quantize_static produces, with the activation ranges of CALIB (a cache from\n"
          "'kiln calibrate' on this model).  For every Conv, ConvTranspose, Gemm and\n"
          "MatMul whose weight is an initializer:\n"
          "  - its data input gets QuantizeLinear -> DequantizeLinear: uint8, per\n"
          "    tensor, asymmetric, scale and zero point from CALIB as kiln's int8\n"
          "    engines compute them (one pair per tensor, shared by its consumers);\n"
          "  - its weight is stored as int8, symmetric, one scale per output channel\n"
          "    (per tensor when the model's opset is below 13), read through a\n"
          "    DequantizeLinear.  Biases stay float.\n"
          "An op whose input CALIB does not have stays fp32, with a note on stderr.\n"
          "Everything else in the model is written as it was.  Run the result with\n"
          "ONNX Runtime, or with 'kiln run'.\n\n"
          "  -c, --calibration CALIB  the calibration cache (docs/CALIBRATION.md)\n"
          "  -o, --output OUT         the Q/DQ model to write (through OUT.tmp and a\n"
          "                           rename)\n\n"
          "Prints what was quantized.\n"
          "Exit status: 0 written, 1 bad model or calibration, or nothing to\n"
          "quantize, 2 usage error.\n");
}

enum { O_CALIB = 1, O_OUT };

/* Notes are printed only once the model is written: a failure stays one line. */
typedef struct notes {
  char **s;
  int n, cap;
  bool oom;
} notes;

static void keep_note(const char *line, void *arg) {
  notes *ns = arg;
  if (ns->n == ns->cap) {
    int cap = ns->cap ? ns->cap * 2 : 16;
    char **s = realloc(ns->s, (size_t)cap * sizeof *s);
    if (!s) {
      ns->oom = true;
      return;
    }
    ns->s = s;
    ns->cap = cap;
  }
  char *c = malloc(strlen(line) + 1);
  if (!c) {
    ns->oom = true;
    return;
  }
  strcpy(c, line);
  ns->s[ns->n++] = c;
}

/* A model's names may hold any bytes: control characters as \xNN. */
static void put_note(const char *s) {
  fputs("kiln quantize: note: ", stderr);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p < 0x20 || *p == 0x7f) fprintf(stderr, "\\x%02x", *p);
    else fputc(*p, stderr);
  }
  fputc('\n', stderr);
}

int kn_cmd_quantize(int argc, char **argv) {
  static const kn_cli_opt opts[] = {
      {"calibration", 'c', true, O_CALIB}, {"output", 'o', true, O_OUT}, {NULL, 0, false, 0}};
  const kn_cli_cmd *cmd = kn_cli_find("quantize");
  const char *model_path = NULL, *calib = NULL, *out = NULL;
  kn_cli_args args;
  kn_cli_args_init(&args, cmd, opts, argc, argv);
  for (int id; (id = kn_cli_next(&args)) != KN_CLI_END;) {
    switch (id) {
    case KN_CLI_BAD: return KN_EXIT_USAGE;
    case O_CALIB: calib = args.arg; break;
    case O_OUT: out = args.arg; break;
    case KN_CLI_POSITIONAL:
      if (model_path) return kn_cli_usage(cmd, "unexpected argument '%s'", args.arg);
      model_path = args.arg;
      break;
    }
  }
  if (!model_path) return kn_cli_usage(cmd, "MODEL is required");
  if (!calib)
    return kn_cli_usage(cmd, "--calibration CALIB is required (make it with 'kiln calibrate "
                             "MODEL --data DIR -o CALIB')");
  if (!out) return kn_cli_usage(cmd, "-o OUT is required (the Q/DQ model to write)");

  kn_error err = {0};
  kn_calibration *cal = NULL;
  notes ns = {0};
  kn_quantize_report rep;
  int rc = KN_EXIT_ERROR;
  double t0 = kn_cli_now_s();
  if (kn_calibration_load(calib, &cal, &err) ||
      kn_quantize_onnx_file(model_path, cal, out, keep_note, &ns, &rep, &err)) {
    rc = kn_cli_error(&err);
    goto done;
  }
  for (int i = 0; i < ns.n; i++) put_note(ns.s[i]);
  if (ns.oom) put_note("(out of memory: some notes were lost)");
  printf("quantized %s with %s: %d of %d Conv/ConvTranspose/Gemm/MatMul ops, %d activation "
         "Q/DQ pair%s (uint8 per tensor), %d int8 weight%s (%s), opset %lld, %.2f s\n",
         model_path, calib, (int)rep.ops_quantized, (int)rep.candidates,
         (int)rep.activation_pairs, rep.activation_pairs == 1 ? "" : "s",
         (int)rep.weights_quantized, rep.weights_quantized == 1 ? "" : "s",
         rep.per_channel ? "per output channel" : "per tensor", (long long)rep.opset,
         kn_cli_now_s() - t0);
  printf("wrote %s (%llu bytes)\n", out, (unsigned long long)rep.bytes);
  rc = KN_EXIT_OK;
done:
  for (int i = 0; i < ns.n; i++) free(ns.s[i]);
  free(ns.s);
  kn_calibration_free(cal);
  return rc;
}
