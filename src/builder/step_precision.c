/* Step precisions (precision.h). */
#include "step_precision.h"

#include "core/cpu.h"
#include "kernels/kernels.h"
#include "cost/iomodel.h"
#include "tactics/gemm/gemm_tactic.h"
#include "ops/op.h"
#include "tactics/tactics.h"

#include <fnmatch.h>

typedef struct override {
  const char *pattern; /* points into the option string */
  size_t len;
  int32_t precision;
  bool used;
} override;

/* Whether pattern p (len bytes) matches `name` or one of the comma-
 * separated names in `covers`. */
static bool matches(const char *p, size_t len, const kn_node *n) {
  char pat[256];
  if (len >= sizeof pat) len = sizeof pat - 1;
  memcpy(pat, p, len);
  pat[len] = 0;
  if (!fnmatch(pat, n->name, 0)) return true;
  const char *c = n->covers;
  while (c && *c) {
    const char *e = strchr(c, ',');
    size_t l = e ? (size_t)(e - c) : strlen(c);
    char one[256];
    if (l < sizeof one) {
      memcpy(one, c, l);
      one[l] = 0;
      if (!fnmatch(pat, one, 0)) return true;
    }
    c = e ? e + 1 : NULL;
  }
  return false;
}

static bool is_value_copy(const kn_node *n) {
  static const char *const ops[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity",
                                    "Transpose", "NhwcReorder", "NchwReorder", NULL};
  for (int32_t i = 0; ops[i]; i++)
    if (!strcmp(n->op_type, ops[i])) return true;
  return false;
}

/* The range calibrated for `name`, or for the NCHW value it is the
 * channels-last copy of: the channels_last pass names a value it makes
 * channels-last "<name>_nhwc" (calibrate runs the model as imported, and
 * a layout changes no minimum or maximum). */
static bool range_of(const kn_calibration *cal, const char *name, kn_calib_range *r) {
  if (kn_calibration_get(cal, name, r)) return true;
  size_t len = strlen(name), sl = strlen("_nhwc");
  char base[512];
  if (len <= sl || len - sl >= sizeof base || strcmp(name + len - sl, "_nhwc")) return false;
  memcpy(base, name, len - sl);
  base[len - sl] = 0;
  return kn_calibration_get(cal, base, r);
}

/* The calibrated range of value v: its own name, else that of the value a
 * chain of copies (reshapes, transposes) took it from. */
static bool find_range(const kn_graph *g, int32_t v, const kn_calibration *cal,
                       kn_calib_range *r, const char **found) {
  for (int32_t hop = 0; v >= 0 && hop < 16; hop++) {
    const kn_value *val = &g->values[v];
    if (range_of(cal, val->name, r)) {
      *found = val->name;
      return true;
    }
    if (val->producer < 0) return false;
    const kn_node *p = &g->nodes[val->producer];
    if (!is_value_copy(p) || p->n_inputs < 1) return false;
    v = p->inputs[0];
  }
  return false;
}

static bool machine_has(const kn_precision_options *o, int32_t p) {
  uint64_t f = o->machine ? o->machine->features : 0;
  switch (p) {
  case KN_PRECISION_BF16: return o->isa >= KN_ISA_AVX512 && (f & KN_CPU_BIT(AVX512BF16));
  case KN_PRECISION_INT8:
    return o->isa >= KN_ISA_AVX512 ? (f & KN_CPU_BIT(AVX512VNNI)) != 0 : o->isa >= KN_ISA_AVX2;
  default: return true;
  }
}

static kn_status fail_oom(kn_error *err) { return kn_fail(err, KN_ERR_OOM, "out of memory"); }

kn_status kn_precision_assign(kn_ir_model *m, const kn_precision_options *o, kn_error *err) {
  kn_graph *g = m->graph;
  const char *label = m->label ? m->label : "model";
  override *ov = kn_calloc((size_t)o->n_overrides + 1, sizeof *ov);
  if (!ov) return fail_oom(err);
  kn_status st = KN_OK;
  for (int32_t k = 0; k < o->n_overrides; k++) {
    const char *s = o->overrides[k], *eq = s ? strrchr(s, '=') : NULL;
    int32_t p = eq ? kn_precision_from_name(eq + 1) : -1;
    if (!eq || eq == s || p < 0 || p == KN_PRECISION_BEST || p > KN_PRECISION_INT8) {
      st = kn_fail(err, KN_ERR_INVALID_ARG,
                   "--layer-precision '%s': expected PATTERN=PRECISION with PRECISION one of "
                   "fp32, bf16, fp16, int8",
                   s ? s : "");
      goto done;
    }
    ov[k] = (override){s, (size_t)(eq - s), p, false};
  }
  bool want_int8 = o->precision == KN_PRECISION_INT8;
  for (int32_t k = 0; k < o->n_overrides; k++) want_int8 |= ov[k].precision == KN_PRECISION_INT8;
  if (want_int8 && !o->calibration) {
    st = kn_fail(err, KN_ERR_INVALID_ARG,
                 "%s: int8 needs activation ranges: pass --calibration CALIB (made by "
                 "`kiln calibrate MODEL --data DIR -o CALIB`)",
                 label);
    goto done;
  }
  int32_t counts[KN_PRECISION_COUNT] = {0};
  for (int32_t i = 0; i < g->n_nodes; i++) {
    kn_node *n = &g->nodes[i];
    n->precision = KN_PRECISION_FP32;
    const kn_op_tactics *tt = kn_tactics_of(n);
    uint32_t can = tt && tt->precisions ? tt->precisions(g, n, o->isa) : 0;
    can |= 1u << KN_PRECISION_FP32;
    int32_t forced = -1;
    for (int32_t k = 0; k < o->n_overrides; k++)
      if (matches(ov[k].pattern, ov[k].len, n)) {
        forced = ov[k].precision;
        ov[k].used = true;
      }
    /* a Q/DQ model's quantization (the qdq pass) wins over the default:
     * nothing is re-calibrated */
    bool qdq = n->quant.from_qdq;
    int32_t want = forced >= 0 ? forced : qdq ? KN_PRECISION_INT8 : o->precision;
    char why[160] = "";
    if (qdq && forced < 0) snprintf(why, sizeof why, " (Q/DQ)");
    if (want == KN_PRECISION_BEST) {
      /* the fastest the IO model predicts among what the machine has */
      int32_t best = KN_PRECISION_FP32;
      double best_s = 0;
      for (int32_t p = KN_PRECISION_FP32; p <= KN_PRECISION_INT8; p++) {
        if (!(can & (1u << p)) || !machine_has(o, p)) continue;
        kn_calib_range r;
        const char *nm;
        if (p == KN_PRECISION_INT8 &&
            (!o->calibration || n->n_inputs < 1 ||
             !find_range(g, n->inputs[0], o->calibration, &r, &nm)))
          continue;
        /* predicted with the tactic it would get in p (fp32 3x3
         * convolutions: Winograd, a reduced precision: the implicit GEMM) */
        n->precision = p;
        int32_t tactic = n->tactic;
        if (tt && tt->select) n->tactic = tt->select(g, n, o->isa);
        kn_io_step io;
        kn_io_predict(m, i, o->machine, o->threads, &io);
        n->tactic = tactic;
        if (p == KN_PRECISION_FP32 || io.predicted_s < best_s * 0.97) {
          best = p;
          best_s = io.predicted_s;
        }
      }
      n->precision = KN_PRECISION_FP32;
      want = best;
      snprintf(why, sizeof why, " (best: predicted %.1f us)", best_s * 1e6);
    }
    if (want != KN_PRECISION_FP32 && !(can & (1u << want))) {
      if (qdq && forced < 0 && o->decisions) {
        char line[512];
        snprintf(line, sizeof line, "%s: precision fp32 (its Q/DQ int8 quantization has no "
                 "int8 kernel for this step; it reads the unrounded input)", n->name);
        if (!kn_lines_add(o->decisions, line)) {
          st = fail_oom(err);
          goto done;
        }
      }
      if (forced >= 0) {
        st = kn_fail(err, KN_ERR_UNSUPPORTED,
                     "%s: --layer-precision asks step '%s' (%s) for %s, which it cannot run "
                     "in (steps with constant weights: Conv, Gemm, MatMul and their "
                     "fusions; Attention in bf16)",
                     label, n->name, n->op_type, kn_precision_name(want));
        goto done;
      }
      want = KN_PRECISION_FP32;
    }
    float qs;
    int32_t qz;
    if (want == KN_PRECISION_INT8 && qdq && kn_node_input_quant(n, &qs, &qz)) {
      snprintf(why + strlen(why), sizeof why - strlen(why), " input scale %.6g zero %d",
               (double)qs, qz);
    } else if (want == KN_PRECISION_INT8) {
      kn_calib_range r;
      const char *nm = NULL;
      if (n->n_inputs < 1 || !find_range(g, n->inputs[0], o->calibration, &r, &nm)) {
        const char *in = n->n_inputs > 0 && n->inputs[0] >= 0 ? g->values[n->inputs[0]].name
                                                                : "?";
        if (forced >= 0) {
          st = kn_fail(err, KN_ERR_INVALID_ARG,
                       "%s: step '%s' was asked for int8, but the calibration has no range for "
                       "its input '%s'; recalibrate this model",
                       label, n->name, in);
          goto done;
        }
        char line[512];
        snprintf(line, sizeof line, "%s: precision fp32 (no calibrated range for input '%s')",
                 n->name, in);
        if (o->decisions && !kn_lines_add(o->decisions, line)) {
          st = fail_oom(err);
          goto done;
        }
        want = KN_PRECISION_FP32;
      } else {
        float scale;
        int32_t zero;
        kn_calib_u8_params(&r, &scale, &zero);
        /* a degenerate range (scale 0 after rounding) runs with scale 1,
         * zero 0, as a step without a quantization does */
        if (!kn_node_set_input_quant(n, scale, zero)) n->quant.has_input = false;
        snprintf(why + strlen(why), sizeof why - strlen(why),
                 "%s input '%s' scale %.6g zero %d", *why ? "," : "", nm, (double)scale, zero);
      }
    }
    if (want == KN_PRECISION_FP32 && o->weights != KN_WEIGHTS_FP32) {
      int32_t w = o->weights == KN_WEIGHTS_FP16 ? KN_PRECISION_FP16_WEIGHTS
                                                : KN_PRECISION_INT8_WEIGHTS;
      if (can & (1u << w)) want = w;
    }
    n->precision = want;
    counts[want]++;
    if (o->revocable)
      o->revocable[i] = want != KN_PRECISION_FP32 && forced < 0 && !qdq &&
                        want != KN_PRECISION_FP16_WEIGHTS && want != KN_PRECISION_INT8_WEIGHTS;
    if (want != KN_PRECISION_FP32 && o->decisions) {
      char line[512];
      snprintf(line, sizeof line, "%s: precision %s%s%s", n->name, kn_precision_name(want),
               forced >= 0 ? " (--layer-precision)" : "", why);
      if (!kn_lines_add(o->decisions, line)) {
        st = fail_oom(err);
        goto done;
      }
    }
  }
  for (int32_t k = 0; k < o->n_overrides; k++)
    if (!ov[k].used) {
      st = kn_fail(err, KN_ERR_INVALID_ARG,
                   "--layer-precision '%s': the pattern matches no step of %s (names are ONNX "
                   "node names; `kiln inspect` lists the steps and what they cover)",
                   o->overrides[k], label);
      goto done;
    }
  (void)counts;
done:
  free(ov);
  return st;
}
