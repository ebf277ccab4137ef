/* The fast convolution and pooling tactics (src/kernels/conv,
 * src/kernels/pool) against the reference kernels, through the ops
 * (Conv, ConvTranspose, FusedConv, MaxPool, AveragePool, the global
 * pools): each case builds a one-node graph, runs the op's run hook once
 * without a runtime (the reference) and then, for every ISA this machine
 * has, with the tactic its select hook picks, with and without prepacked
 * weights, on 1 and 2 threads.  The fast runs start from an output full of
 * NaNs (the executor does not zero it for them) and must agree with the
 * reference up to float rounding, and with each other bit for bit. */
#include <math.h>

#include "core/cpu.h"
#include "core/threadpool.h"
#include "kernels/conv/conv.h"
#include "kernels/kernels.h"
#include "ops/op.h"
#include "ops/tactic.h"
#include "testkit.h"

typedef struct conv_case {
  const char *op; /* Conv, ConvTranspose, FusedConv */
  int64_t n, c, h, w, m, group;
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t pads[4]; /* top, left, bottom, right */
  int64_t opad;    /* ConvTranspose output_padding (both dims) */
  bool bias;
  const char *act; /* FusedConv activation ("" none) */
  int res;         /* FusedConv residual: 0 none, 1 after act, 2 before */
  int32_t want;    /* expected tactic */
  bool selected;   /* Winograd: select must pick it (else it is forced) */
  /* spatial dims: 0 or 2 as above; 1: rank 3, the w-side fields (w, kw,
   * sw, dw, pads[1] and pads[3]); 3: rank 5, these depth fields before
   * the h and w ones */
  int nd;
  int64_t d, kd, sd, dd, pf, pk; /* depth, its kernel, stride, dilation, pads */
} conv_case;

typedef struct one_node {
  kn_ir_model *m;
  kn_node *node;
  int32_t out;
  int32_t n_in;
  kn_slot in[4];
  kn_slot *pin[4];
} one_node;

static void fill(kn_tensor *t, uint32_t seed) {
  float *d = t->data;
  for (int64_t i = 0; i < kn_tensor_numel(t); i++) d[i] = tk_pseudo(&seed);
}

/* Inputs: graph inputs get fresh data, constants are borrowed. */
static void bind_inputs(one_node *o) {
  kn_graph *g = o->m->graph;
  o->n_in = o->node->n_inputs;
  for (int32_t i = 0; i < o->n_in; i++) {
    memset(&o->in[i], 0, sizeof o->in[i]);
    o->pin[i] = NULL;
    if (o->node->inputs[i] < 0) continue; /* omitted */
    const kn_value *v = &g->values[o->node->inputs[i]];
    o->in[i].kind = KN_KIND_TENSOR;
    if (v->constant) {
      o->in[i].t = *v->constant;
      o->in[i].t.owned = 0;
    } else {
      assert_int_equal(kn_tensor_alloc(&o->in[i].t, KN_DTYPE_F32, v->type.rank, v->type.dims,
                                       NULL),
                       KN_OK);
      fill(&o->in[i].t, 100u + (uint32_t)i);
    }
    o->pin[i] = &o->in[i];
  }
}

static void free_node(one_node *o) {
  for (int32_t i = 0; i < o->n_in; i++)
    if (o->node->inputs[i] >= 0 && !o->m->graph->values[o->node->inputs[i]].constant)
      kn_slot_release(&o->in[i]);
  kn_ir_model_free(o->m);
}

/* Runs the node once: rt NULL is the reference (output zeroed first, as
 * the executor does); otherwise the fast path on an output full of NaNs. */
static void run_node(one_node *o, kn_rt *rt, const void *packed, kn_slot *out) {
  const kn_value *yv = &o->m->graph->values[o->out];
  memset(out, 0, sizeof *out);
  out->kind = KN_KIND_TENSOR;
  assert_int_equal(kn_tensor_alloc(&out->t, KN_DTYPE_F32, yv->type.rank, yv->type.dims, NULL),
                   KN_OK);
  float *y = out->t.data;
  for (int64_t i = 0; i < kn_tensor_numel(&out->t); i++) y[i] = rt ? NAN : 0.0f;
  kn_slot *outs[1] = {out};
  kn_error err;
  kn_op_ctx ctx = {.node = o->node, .opset = o->node->opset, .n_in = o->n_in, .in = o->pin,
                   .n_out = 1, .out = outs, .err = &err, .label = "test", .rt = rt,
                   .packed = packed};
  if (kn_tactics_run(&ctx)) fail_msg("%s", err.msg);
}

static void check_close(const kn_tensor *a, const kn_tensor *ref, double tol, const char *what) {
  const float *x = a->data, *r = ref->data;
  for (int64_t i = 0; i < kn_tensor_numel(ref); i++) {
    double d = fabs((double)x[i] - (double)r[i]);
    if (!(d <= tol * (1.0 + fabs((double)r[i]))))
      fail_msg("%s: element %lld is %.9g, reference %.9g", what, (long long)i, (double)x[i],
               (double)r[i]);
  }
}

static void check_same(const kn_tensor *a, const kn_tensor *b, const char *what) {
  if (memcmp(a->data, b->data, (size_t)kn_tensor_numel(a) * sizeof(float)))
    fail_msg("%s: results differ between runs that must be bit-identical", what);
}

/* conv_gemm and conv_gemm_positions: the same product, its operands'
 * roles chosen by the output's size against the ISA's tile (few positions:
 * positions as rows), so a case may get either depending on the ISA. */
static bool gemm_family(int32_t t) {
  return t == KN_TACTIC_conv_gemm || t == KN_TACTIC_conv_gemm_positions;
}

/* Reference vs every ISA x {1, 2 threads} x {packed, packed per run}. */
static void compare_fast(one_node *o, int32_t want, bool force, double tol, const char *what) {
  kn_slot ref;
  run_node(o, NULL, NULL, &ref);
  const kn_op_tactics *op = o->node->impl = kn_tactics_of(o->node);
  uint64_t feat = kn_cpu_features();
  kn_pool *pool2;
  kn_error err;
  assert_int_equal(kn_pool_create(2, &pool2, &err), KN_OK);
  for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
    if (!kn_isa_available((kn_isa)isa, feat)) continue;
    o->node->tactic = op->select(o->m->graph, o->node, isa);
    /* Winograd is selected only where it is measured faster: force it on
     * the other shapes */
    if (force) o->node->tactic = want;
    if (o->node->tactic != want && !(gemm_family(want) && gemm_family(o->node->tactic)))
      fail_msg("%s: select gave tactic %d, expected %d", what, (int)o->node->tactic, (int)want);
    void *packed = NULL;
    if (op->pack && op->pack(o->m->graph, o->node, &(kn_target){isa, NULL}, &packed, &err))
      fail_msg("%s", err.msg);
    kn_slot first;
    bool have_first = false;
    for (int threads = 1; threads <= 2; threads++)
      for (int use_pack = 0; use_pack <= 1; use_pack++) {
        kn_rt rt = {.isa = (kn_isa)isa, .pool = threads == 2 ? pool2 : NULL};
        kn_slot out;
        run_node(o, &rt, use_pack ? packed : NULL, &out);
        free(rt.scratch);
        char msg[256];
        snprintf(msg, sizeof msg, "%s [%s, %d threads%s]", what, kn_isa_name((kn_isa)isa),
                 threads, use_pack ? ", prepacked" : "");
        check_close(&out.t, &ref.t, tol, msg);
        if (!have_first) {
          first = out;
          have_first = true;
        } else {
          check_same(&out.t, &first.t, msg);
          kn_slot_release(&out);
        }
      }
    kn_slot_release(&first);
    kn_packed_free(packed);
  }
  kn_pool_free(pool2);
  kn_slot_release(&ref);
}

/* ---- convolutions --------------------------------------------------------- */

static void set_ints(kn_node *n, const char *name, int32_t cnt, const int64_t *v) {
  assert_true(kn_node_set_ints(n, name, v, cnt));
}

/* Output size of one spatial dim. */
static int64_t out_dim(bool tr, int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb,
                       int64_t pe, int64_t opad) {
  int64_t ek = (k - 1) * d + 1;
  return tr ? s * (in - 1) + opad + ek - pb - pe : (in + pb + pe - ek) / s + 1;
}

static void conv_case_run(const conv_case *cc) {
  bool tr = !strcmp(cc->op, "ConvTranspose"), fused = !strcmp(cc->op, "FusedConv");
  int nd = cc->nd ? cc->nd : 2;
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  /* per spatial dim (outermost first): input, kernel, stride, dilation,
   * pads before and after */
  int64_t sp[3], k[3], s[3], d[3], pb[3], pe[3], o[3];
  int32_t q = 0;
  if (nd == 3) sp[q] = cc->d, k[q] = cc->kd, s[q] = cc->sd, d[q] = cc->dd, pb[q] = cc->pf,
               pe[q++] = cc->pk;
  if (nd >= 2) sp[q] = cc->h, k[q] = cc->kh, s[q] = cc->sh, d[q] = cc->dh, pb[q] = cc->pads[0],
               pe[q++] = cc->pads[2];
  sp[q] = cc->w, k[q] = cc->kw, s[q] = cc->sw, d[q] = cc->dw, pb[q] = cc->pads[1],
  pe[q++] = cc->pads[3];
  int64_t xd[5] = {cc->n, cc->c}, wd[5] = {tr ? cc->c : cc->m, (tr ? cc->m : cc->c) / cc->group},
          zd[5] = {cc->n, cc->m}, pads[6], op2[3];
  for (int32_t i = 0; i < nd; i++) {
    o[i] = out_dim(tr, sp[i], k[i], s[i], d[i], pb[i], pe[i], cc->opad);
    xd[2 + i] = sp[i], wd[2 + i] = k[i], zd[2 + i] = o[i];
    pads[i] = pb[i], pads[nd + i] = pe[i], op2[i] = cc->opad;
  }
  int32_t in[4], nin = 0;
  in[nin++] = tk_input(g, "x", nd + 2, xd);
  in[nin++] = tk_const_rand(g, nd + 2, wd, 11u + (uint32_t)cc->kh, 0.0f);
  if (cc->bias || cc->res) {
    int64_t bd = cc->m;
    in[nin++] = cc->bias ? tk_const_rand(g, 1, &bd, 5, 0.0f) : -1;
  }
  if (cc->res) in[nin++] = tk_input(g, "z", nd + 2, zd);
  int32_t y = kn_graph_add_fresh_value(g, "y");
  assert_true(kn_graph_new_node(g, cc->op, fused ? KN_DOMAIN : "", "node", nin, in, 1, &y) >= 0);
  kn_node *n = tk_last(g);
  set_ints(n, "kernel_shape", nd, k);
  set_ints(n, "strides", nd, s);
  set_ints(n, "dilations", nd, d);
  set_ints(n, "pads", 2 * nd, pads);
  if (tr && cc->opad) set_ints(n, "output_padding", nd, op2);
  assert_true(kn_node_set_int(n, "group", cc->group));
  if (fused) {
    assert_true(kn_node_set_string(n, "activation", cc->act ? cc->act : ""));
    if (cc->act && !strcmp(cc->act, "Clip")) {
      assert_true(kn_node_set_float(n, "activation_min", -0.5f));
      assert_true(kn_node_set_float(n, "activation_max", 0.75f));
    }
    if (cc->res == 2) assert_true(kn_node_set_int(n, "residual_before_activation", 1));
  }
  tk_output(g, y);
  tk_prepare(m);
  one_node on = {.m = m, .node = &g->nodes[0], .out = y};
  for (int32_t i = 0; i < nd; i++) assert_int_equal(g->values[y].type.dims[2 + i], o[i]);
  bind_inputs(&on);
  char what[320];
  int len = snprintf(what, sizeof what, "%s %dd n%lld c%lld -> m%lld g%lld", cc->op, nd,
                     (long long)cc->n, (long long)cc->c, (long long)cc->m, (long long)cc->group);
  for (int32_t i = 0; i < nd && len > 0 && (size_t)len < sizeof what; i++)
    len += snprintf(what + len, sizeof what - (size_t)len, " [in %lld k %lld s %lld d %lld pads %lld,%lld]",
                    (long long)sp[i], (long long)k[i], (long long)s[i], (long long)d[i],
                    (long long)pb[i], (long long)pe[i]);
  if (len > 0 && (size_t)len < sizeof what && cc->act)
    snprintf(what + len, sizeof what - (size_t)len, " act %s", cc->act);
  double kdim = (double)(cc->c / cc->group);
  for (int32_t i = 0; i < nd; i++) kdim *= (double)k[i];
  /* Winograd mixes values with weights up to 8 and 1/24: about 10x the
   * rounding of a direct sum */
  double tol = 2e-6 * (4.0 + sqrt(kdim)) * (cc->want == KN_TACTIC_conv_winograd ? 10 : 1);
  compare_fast(&on, cc->want, cc->want == KN_TACTIC_conv_winograd && !cc->selected, tol, what);
  free_node(&on);
}

/* Hand-picked cases: every tactic, the model shapes' kinds, the edges. */
static void test_conv_cases(void **state) {
  (void)state;
  const int32_t G = KN_TACTIC_conv_gemm, D = KN_TACTIC_conv_depthwise,
                T = KN_TACTIC_conv_transpose_gemm, W = KN_TACTIC_conv_winograd;
  const conv_case cases[] = {
      /* 1x1 pointwise (raw B), with bias; batch 2 */
      {"Conv", 1, 16, 7, 7, 33, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, true, NULL, 0, G},
      {"Conv", 2, 17, 5, 5, 16, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, false, NULL, 0, G},
      /* 1x1 strided (im2col panels) */
      {"Conv", 1, 7, 15, 15, 17, 1, 1, 1, 2, 2, 1, 1, {0, 0, 0, 0}, 0, true, NULL, 0, G},
      /* 3x3 padded, odd sizes, batch 2 */
      {"Conv", 2, 3, 14, 14, 16, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, NULL, 0, G},
      {"Conv", 1, 33, 15, 15, 17, 1, 3, 3, 2, 2, 1, 1, {1, 1, 0, 0}, 0, true, NULL, 0, G},
      /* 7x7 stride 2 stem-like, asymmetric pads */
      {"Conv", 1, 3, 15, 14, 16, 1, 7, 7, 2, 2, 1, 1, {3, 2, 1, 3}, 0, true, NULL, 0, G},
      /* 5x5 dilated */
      {"Conv", 1, 7, 14, 15, 7, 1, 5, 5, 1, 1, 2, 2, {4, 4, 4, 4}, 0, false, NULL, 0, G},
      /* grouped 2 */
      {"Conv", 2, 16, 7, 7, 16, 2, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, NULL, 0, G},
      {"Conv", 1, 34, 5, 5, 18, 2, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, false, NULL, 0, G},
      /* spatial 1 */
      {"Conv", 1, 17, 1, 1, 33, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, true, NULL, 0, G},
      {"Conv", 1, 7, 1, 1, 5, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, NULL, 0, G},
      /* non-square kernel, stride */
      {"Conv", 1, 5, 14, 15, 9, 1, 1, 5, 1, 2, 1, 1, {0, 2, 0, 2}, 0, true, NULL, 0, G},
      /* depthwise: 3x3 and 5x5, stride 1 and 2, dilation, wide rows (vector tails) */
      {"Conv", 1, 16, 14, 14, 16, 16, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, NULL, 0, D},
      {"Conv", 2, 17, 15, 15, 17, 17, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, true, NULL, 0, D},
      {"Conv", 1, 7, 14, 15, 7, 7, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, 0, false, NULL, 0, D},
      {"Conv", 1, 3, 15, 14, 3, 3, 5, 5, 2, 2, 1, 1, {2, 1, 2, 3}, 0, true, NULL, 0, D},
      {"Conv", 1, 5, 7, 7, 5, 5, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, 0, true, NULL, 0, D},
      {"Conv", 1, 4, 9, 81, 4, 4, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, NULL, 0, D},
      {"Conv", 1, 2, 5, 133, 2, 2, 7, 7, 2, 3, 1, 2, {3, 3, 3, 3}, 0, true, NULL, 0, D},
      {"Conv", 1, 33, 1, 1, 33, 33, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, NULL, 0, D},
      /* stride 2 over wide rows: the vector split into even/odd columns */
      {"Conv", 1, 3, 6, 70, 3, 3, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, true, NULL, 0, D},
      {"Conv", 1, 2, 5, 101, 2, 2, 5, 5, 2, 2, 1, 1, {2, 2, 2, 1}, 0, true, NULL, 0, D},
      /* ConvTranspose: stride 2, pads, output_padding, groups */
      {"ConvTranspose", 1, 16, 7, 7, 8, 1, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 1, true, NULL, 0, T},
      {"ConvTranspose", 2, 6, 5, 5, 4, 2, 4, 4, 2, 2, 1, 1, {1, 1, 1, 1}, 0, true, NULL, 0, T},
      {"ConvTranspose", 1, 3, 7, 5, 5, 1, 2, 3, 1, 2, 2, 1, {0, 1, 0, 0}, 0, false, NULL, 0, T},
      {"ConvTranspose", 1, 17, 1, 1, 7, 1, 5, 5, 1, 1, 1, 1, {0, 0, 0, 0}, 0, true, NULL, 0, T},
      /* Winograd F(4,3): tiles cut by the edges, padding, batch 2, epilogues */
      {"Conv", 1, 16, 14, 14, 16, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, NULL, 0, W},
      {"Conv", 2, 17, 15, 13, 33, 1, 3, 3, 1, 1, 1, 1, {1, 0, 2, 1}, 0, true, NULL, 0, W},
      {"Conv", 1, 3, 5, 7, 7, 1, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}, 0, false, NULL, 0, W},
      {"Conv", 1, 33, 1, 1, 5, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, NULL, 0, W},
      {"Conv", 1, 64, 29, 30, 70, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, NULL, 0, W},
      {"FusedConv", 1, 16, 14, 14, 16, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, "Relu", 1,
       W},
      {"FusedConv", 2, 8, 7, 7, 24, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, "Clip", 2, W},
      /* FusedConv epilogues on each tactic; the first is deep and wide enough
       * (k 576, n 3136) for the GEMM to block both k and n (12 output
       * channels: too few for select to pick Winograd) */
      {"FusedConv", 1, 64, 56, 56, 12, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, "Relu", 0,
       G},
      /* ResNet-50's 28x28 layer shape, cut to 32 channels: select's own pick */
      {"FusedConv", 1, 32, 28, 28, 32, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, "Relu", 2,
       W, true},
      {"FusedConv", 1, 16, 7, 7, 16, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, "Relu", 1, G},
      {"FusedConv", 2, 17, 5, 5, 16, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, true, "Clip", 2, G},
      {"FusedConv", 1, 8, 14, 14, 24, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, true, "HardSwish",
       0, G},
      {"FusedConv", 1, 16, 14, 14, 16, 16, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, true, "Clip", 0,
       D},
      {"FusedConv", 1, 16, 7, 7, 16, 16, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, "Sigmoid", 1,
       D},
      {"FusedConv", 1, 7, 5, 5, 7, 7, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, 0, false, "Silu", 2, D},
      {"FusedConv", 2, 4, 7, 7, 6, 2, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, true, "LeakyRelu", 0,
       G},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) conv_case_run(&cases[i]);
}

/* 1-D convolutions (rank 3: audio front ends, an STFT as a strided Conv1d,
 * depthwise and grouped 1-D convs) and 3-D ones (rank 5: video), and
 * their transposes, on the same tactics as 2-D (1-D as height 1, 3-D on
 * conv_gemm and conv_transpose_gemm with the depth fields). */
static void test_conv_ranks(void **state) {
  (void)state;
  const int32_t G = KN_TACTIC_conv_gemm, D = KN_TACTIC_conv_depthwise,
                T = KN_TACTIC_conv_transpose_gemm, P = KN_TACTIC_conv_gemm_positions;
  const conv_case cases[] = {
      /* few output positions, many channels: conv_gemm_positions (a short
       * frame's STFT and encoder convs; a 2x2 map; grouped; batch 2; fused
       * epilogues) */
      {"Conv", 1, 1, 1, 512, 258, 1, 1, 256, 1, 128, 1, 1, {0, 128, 0, 128}, 0, true, NULL, 0, P,
       false, 1},
      {"Conv", 2, 129, 1, 5, 128, 1, 1, 3, 1, 1, 1, 1, {0, 1, 0, 1}, 0, true, NULL, 0, P, false, 1},
      {"FusedConv", 1, 64, 1, 3, 64, 1, 1, 3, 1, 2, 1, 1, {0, 1, 0, 1}, 0, true, "Relu", 1, P,
       false, 1},
      {"FusedConv", 1, 32, 3, 3, 40, 2, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, true, "Silu", 2, P},
      {"Conv", 1, 16, 2, 2, 24, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, false, NULL, 0, P},
      /* 1-D: a strided STFT-like conv (1 channel in, long kernel), k3 pad 1, dilated,
       * depthwise, grouped, pointwise, FusedConv */
      {"Conv", 1, 1, 1, 1000, 66, 1, 1, 128, 1, 32, 1, 1, {0, 0, 0, 0}, 0, true, NULL, 0, G, false, 1},
      {"Conv", 2, 17, 1, 61, 33, 1, 1, 3, 1, 1, 1, 1, {0, 1, 0, 1}, 0, true, NULL, 0, G, false, 1},
      {"Conv", 1, 8, 1, 50, 8, 1, 1, 5, 1, 2, 1, 3, {0, 4, 0, 2}, 0, false, NULL, 0, G, false, 1},
      {"Conv", 1, 16, 1, 77, 16, 16, 1, 5, 1, 1, 1, 1, {0, 2, 0, 2}, 0, true, NULL, 0, D, false, 1},
      {"Conv", 1, 12, 1, 40, 24, 4, 1, 3, 1, 2, 1, 1, {0, 1, 0, 1}, 0, true, NULL, 0, G, false, 1},
      {"Conv", 1, 33, 1, 19, 17, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, true, NULL, 0, G, false, 1},
      {"FusedConv", 1, 16, 1, 64, 32, 1, 1, 3, 1, 1, 1, 1, {0, 1, 0, 1}, 0, true, "Relu", 1, G,
       false, 1},
      {"ConvTranspose", 1, 16, 1, 30, 8, 1, 1, 4, 1, 2, 1, 1, {0, 1, 0, 1}, 1, true, NULL, 0, T,
       false, 1},
      /* 3-D: 3x3x3 padded, a (1,7,7) stride (1,2,2) stem, (3,1,1) temporal,
       * strided and dilated depth, grouped, depthwise (on conv_gemm),
       * FusedConv, batch 2 */
      {"Conv", 1, 8, 6, 7, 16, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, NULL, 0, G, false, 3,
       5, 3, 1, 1, 1, 1},
      {"Conv", 1, 3, 9, 9, 8, 1, 7, 7, 2, 2, 1, 1, {3, 3, 3, 3}, 0, true, NULL, 0, G, false, 3,
       4, 1, 1, 1, 0, 0},
      {"Conv", 2, 9, 5, 5, 7, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, false, NULL, 0, G, false, 3,
       6, 3, 1, 1, 1, 1},
      {"Conv", 1, 4, 7, 6, 6, 2, 3, 2, 2, 1, 1, 2, {1, 0, 0, 1}, 0, true, NULL, 0, G, false, 3,
       9, 3, 2, 2, 2, 1},
      {"Conv", 1, 6, 5, 5, 6, 6, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, NULL, 0, G, false, 3,
       4, 3, 1, 1, 1, 1},
      {"FusedConv", 1, 8, 4, 5, 8, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, "Relu", 2, G,
       false, 3, 3, 3, 1, 1, 1, 1},
      {"ConvTranspose", 1, 6, 3, 4, 4, 1, 2, 2, 2, 2, 1, 1, {0, 0, 0, 0}, 0, true, NULL, 0, T,
       false, 3, 3, 2, 2, 1, 0, 0},
      {"ConvTranspose", 1, 4, 3, 3, 6, 2, 3, 3, 2, 1, 1, 1, {1, 1, 1, 0}, 1, true, NULL, 0, T,
       false, 3, 2, 3, 2, 1, 1, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) conv_case_run(&cases[i]);
  /* the positions product is picked where its tile fits: 5 positions
   * against 16 (AVX2) or 32 (AVX-512) columns */
  kn_conv2d sg = {.n = 1, .c = 129, .h = 1, .w = 5, .m = 128, .oh = 1, .ow = 5, .group = 1,
                  .kh = 1, .kw = 3, .sh = 1, .sw = 1, .dh = 1, .dw = 1, .pl = 1};
  uint64_t feat = kn_cpu_features();
  for (int isa = 0; isa < KN_ISA_COUNT; isa++)
    if (isa != KN_ISA_PORTABLE && kn_isa_available((kn_isa)isa, feat))
      assert_true(kn_f32_conv_gemm_positions_fits((kn_isa)isa, &sg));
}

/* A seeded sample of the cross product of the shape parameters. */
static void test_conv_sweep(void **state) {
  (void)state;
  static const int64_t ks[] = {1, 3, 5, 7}, chans[] = {1, 3, 7, 16, 17, 33},
                       sps[] = {1, 5, 7, 14, 15};
  uint32_t seed = 12345;
  int done = 0;
  for (int it = 0; it < 400 && done < 60; it++) {
    seed = seed * 1664525u + 1013904223u;
    uint32_t r = seed >> 4;
    conv_case cc;
    memset(&cc, 0, sizeof cc);
    cc.op = "Conv";
    cc.kh = cc.kw = ks[r % 4];
    r /= 4;
    if (r % 5 == 0) cc.kw = ks[(r / 5) % 4];
    r /= 20;
    cc.sh = cc.sw = 1 + r % 2;
    r /= 2;
    cc.dh = cc.dw = 1 + (r % 3 == 0);
    r /= 3;
    cc.c = chans[r % 6];
    r /= 6;
    cc.h = sps[r % 5];
    r /= 5;
    cc.w = sps[r % 5];
    r /= 5;
    cc.n = 1 + r % 2;
    r /= 2;
    int gsel = (int)(r % 3);
    r /= 3;
    cc.group = gsel == 0 ? 1 : gsel == 1 ? 2 : cc.c;
    if (cc.c % cc.group) cc.group = 1;
    cc.m = gsel == 2 ? cc.c : chans[r % 6] * cc.group / (cc.group > 1 ? cc.group : 1);
    if (gsel == 1) cc.m = cc.group * (1 + (int64_t)(r % 9));
    r /= 6;
    for (int i = 0; i < 4; i++) {
      cc.pads[i] = (int64_t)(r % 3);
      r /= 3;
    }
    cc.bias = r % 2;
    int64_t ekh = (cc.kh - 1) * cc.dh + 1, ekw = (cc.kw - 1) * cc.dw + 1;
    if (cc.h + cc.pads[0] + cc.pads[2] < ekh || cc.w + cc.pads[1] + cc.pads[3] < ekw) continue;
    cc.want = cc.group > 1 && cc.group == cc.c && cc.m == cc.c ? KN_TACTIC_conv_depthwise
                                                                : KN_TACTIC_conv_gemm;
    conv_case_run(&cc);
    done++;
  }
  assert_true(done >= 40);
}

/* Winograd F(4,3) on every ISA: output sizes that cut the 4x4 tiles (1,
 * 3, 5, 7, 13), channel counts around the vector and panel widths (1, 3,
 * 17, 64 in; 1 .. 70 out), batch 2, every epilogue form (bias, Relu and
 * Clip in the output kernel, other activations after it, a residual
 * before or after the activation), pads of 0 .. 2, several blocks of
 * tiles; forced, since select picks it only where it is faster. */
static void test_winograd(void **state) {
  (void)state;
  static const int64_t sps[] = {1, 3, 5, 7, 13}, cins[] = {1, 3, 17, 64},
                       couts[] = {1, 5, 17, 33, 64};
  static const char *acts[] = {NULL, "Relu", "Clip", "Sigmoid", "LeakyRelu"};
  int i = 0;
  for (int a = 0; a < 5; a++)
    for (int b = 0; b < 5; b++, i++) {
      conv_case cc;
      memset(&cc, 0, sizeof cc);
      cc.op = "FusedConv";
      cc.n = 1 + i % 2;
      cc.c = cins[i % 4];
      cc.m = couts[(i / 2) % 5];
      cc.group = 1;
      cc.kh = cc.kw = 3;
      cc.sh = cc.sw = cc.dh = cc.dw = 1;
      /* pads 1 keep the size; 0 / 2 shrink / grow it by 2 */
      int64_t p = i % 7 == 3 ? 2 : i % 7 == 5 ? 0 : 1;
      cc.pads[0] = cc.pads[2] = p;
      cc.pads[1] = i % 3 == 0 ? 0 : 1;
      cc.pads[3] = 2 - cc.pads[1];
      cc.h = sps[a] + 2 - 2 * p;
      cc.w = sps[b];
      if (cc.h < 1) cc.h = sps[a];
      cc.bias = i % 4 != 1;
      cc.act = acts[i % 5];
      cc.res = i % 3;
      cc.want = KN_TACTIC_conv_winograd;
      conv_case_run(&cc);
    }
  /* several blocks of tiles and panels of output channels, plain Conv */
  const conv_case big[] = {
      {"Conv", 1, 17, 61, 47, 33, 1, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, true, NULL, 0,
       KN_TACTIC_conv_winograd, false},
      {"FusedConv", 2, 64, 30, 29, 70, 1, 3, 3, 1, 1, 1, 1, {1, 2, 1, 0}, 0, true, "Relu", 2,
       KN_TACTIC_conv_winograd, false},
  };
  for (size_t k = 0; k < sizeof big / sizeof big[0]; k++) conv_case_run(&big[k]);
}

/* The select rule on ResNet-50's 3x3 layers and around its edges: a graph
 * per shape, select only (the runs above cover the kernels). */
static void test_winograd_select(void **state) {
  (void)state;
  struct {
    int64_t c, m, h, s;
    int32_t want;
  } cases[] = {
      {64, 64, 56, 1, KN_TACTIC_conv_winograd},   {128, 128, 28, 1, KN_TACTIC_conv_winograd},
      {256, 256, 14, 1, KN_TACTIC_conv_winograd}, {512, 512, 7, 1, KN_TACTIC_conv_gemm},
      {128, 128, 56, 2, KN_TACTIC_conv_gemm},     {3, 64, 56, 1, KN_TACTIC_conv_gemm},
      {64, 64, 4, 1, KN_TACTIC_conv_gemm},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int64_t xd[4] = {1, cases[i].c, cases[i].h, cases[i].h};
    int64_t wd[4] = {cases[i].m, cases[i].c, 3, 3};
    int32_t in[2] = {tk_input(g, "x", 4, xd), tk_const_rand(g, 4, wd, 3, 0.0f)};
    int32_t y = kn_graph_add_fresh_value(g, "y");
    assert_true(kn_graph_new_node(g, "Conv", "", "node", 2, in, 1, &y) >= 0);
    kn_node *n = tk_last(g);
    int64_t k[2] = {3, 3}, s[2] = {cases[i].s, cases[i].s}, pads[4] = {1, 1, 1, 1};
    set_ints(n, "kernel_shape", 2, k);
    set_ints(n, "strides", 2, s);
    set_ints(n, "pads", 4, pads);
    tk_output(g, y);
    tk_prepare(m);
    for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
      int32_t t = kn_tactics_of(n)->select(g, n, isa);
      if (t != cases[i].want && !(gemm_family(t) && gemm_family(cases[i].want)))
        fail_msg("select on %lld->%lld @%lld stride %lld (%s): tactic %d, expected %d",
                 (long long)cases[i].c, (long long)cases[i].m, (long long)cases[i].h,
                 (long long)cases[i].s, kn_isa_name((kn_isa)isa), (int)t, (int)cases[i].want);
    }
    kn_ir_model_free(m);
  }
}

/* ---- pooling -------------------------------------------------------------- */

typedef struct pool_case {
  const char *op;
  int64_t n, c, h, w, kh, kw, sh, sw, dh, dw;
  int64_t pads[4];
  int ceil_mode, cip;
  /* spatial dims: 0 or 2 as above; 1: rank 3 with the w-side fields; 3:
   * rank 5 with these depth fields before h and w */
  int nd;
  int64_t d, kd, sd, dd, pf, pk;
} pool_case;

static void pool_case_run(const pool_case *pc) {
  bool global = !strncmp(pc->op, "Global", 6);
  kn_ir_model *m = tk_model_new(19);
  kn_graph *g = m->graph;
  int nd = pc->nd ? pc->nd : 2;
  int64_t xd[5] = {pc->n, pc->c}, k[3], s[3], d[3], pads[6];
  int32_t q = 0;
  if (nd == 3) xd[2 + q] = pc->d, k[q] = pc->kd, s[q] = pc->sd, d[q] = pc->dd, pads[q] = pc->pf,
               pads[nd + q] = pc->pk, q++;
  if (nd >= 2) xd[2 + q] = pc->h, k[q] = pc->kh, s[q] = pc->sh, d[q] = pc->dh,
               pads[q] = pc->pads[0], pads[nd + q] = pc->pads[2], q++;
  xd[2 + q] = pc->w, k[q] = pc->kw, s[q] = pc->sw, d[q] = pc->dw, pads[q] = pc->pads[1],
  pads[nd + q] = pc->pads[3];
  int32_t x = tk_input(g, "x", nd + 2, xd);
  int32_t y = kn_graph_add_fresh_value(g, "y");
  assert_true(kn_graph_new_node(g, pc->op, "", "node", 1, &x, 1, &y) >= 0);
  kn_node *n = tk_last(g);
  if (!global) {
    set_ints(n, "kernel_shape", nd, k);
    set_ints(n, "strides", nd, s);
    set_ints(n, "dilations", nd, d);
    set_ints(n, "pads", 2 * nd, pads);
    assert_true(kn_node_set_int(n, "ceil_mode", pc->ceil_mode));
    if (!strcmp(pc->op, "AveragePool"))
      assert_true(kn_node_set_int(n, "count_include_pad", pc->cip));
  }
  tk_output(g, y);
  tk_prepare(m);
  one_node o = {.m = m, .node = &g->nodes[0], .out = y};
  bind_inputs(&o);
  char what[256];
  snprintf(what, sizeof what,
           "%s %dd n%lld c%lld %lldx%lld k%lldx%lld s%lldx%lld d%lldx%lld pads %lld,%lld,%lld,%lld "
           "ceil %d cip %d",
           pc->op, nd, (long long)pc->n, (long long)pc->c, (long long)pc->h, (long long)pc->w,
           (long long)pc->kh, (long long)pc->kw, (long long)pc->sh, (long long)pc->sw,
           (long long)pc->dh, (long long)pc->dw, (long long)pc->pads[0], (long long)pc->pads[1],
           (long long)pc->pads[2], (long long)pc->pads[3], pc->ceil_mode, pc->cip);
  compare_fast(&o, KN_TACTIC_pool, false, 1e-5, what);
  free_node(&o);
}

static void test_pool_cases(void **state) {
  (void)state;
  const pool_case cases[] = {
      {"MaxPool", 1, 16, 14, 14, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, 0},
      {"MaxPool", 2, 3, 15, 15, 3, 3, 2, 2, 1, 1, {0, 0, 0, 0}, 1, 0},
      {"MaxPool", 1, 5, 7, 33, 2, 2, 2, 2, 1, 1, {0, 0, 0, 0}, 0, 0},
      {"MaxPool", 1, 7, 14, 15, 3, 5, 1, 3, 2, 1, {2, 1, 0, 3}, 1, 0},
      {"MaxPool", 1, 3, 5, 5, 5, 5, 1, 1, 1, 1, {2, 2, 2, 2}, 0, 0},
      {"MaxPool", 1, 17, 1, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, 0},
      {"MaxPool", 1, 2, 9, 130, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, 0},
      {"MaxPool", 1, 2, 9, 131, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, 0},
      {"AveragePool", 1, 2, 8, 99, 3, 3, 2, 2, 1, 1, {0, 1, 1, 0}, 1, 0},
      {"AveragePool", 1, 16, 14, 14, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, 0},
      {"AveragePool", 1, 16, 14, 14, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, 1},
      {"AveragePool", 2, 5, 15, 15, 3, 3, 2, 2, 1, 1, {1, 0, 1, 2}, 1, 1},
      {"AveragePool", 2, 5, 15, 15, 3, 3, 2, 2, 1, 1, {1, 0, 1, 2}, 1, 0},
      {"AveragePool", 1, 7, 7, 7, 7, 7, 1, 1, 1, 1, {0, 0, 0, 0}, 0, 0},
      {"AveragePool", 1, 3, 14, 15, 2, 3, 2, 1, 2, 2, {0, 2, 1, 0}, 0, 1},
      {"AveragePool", 1, 3, 5, 70, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0, 0},
      {"GlobalAveragePool", 2, 17, 7, 7, 0, 0, 0, 0, 0, 0, {0, 0, 0, 0}, 0, 0},
      {"GlobalAveragePool", 1, 5, 15, 14, 0, 0, 0, 0, 0, 0, {0, 0, 0, 0}, 0, 0},
      {"GlobalAveragePool", 1, 3, 1, 1, 0, 0, 0, 0, 0, 0, {0, 0, 0, 0}, 0, 0},
      {"GlobalMaxPool", 2, 17, 7, 7, 0, 0, 0, 0, 0, 0, {0, 0, 0, 0}, 0, 0},
      {"GlobalMaxPool", 1, 5, 15, 14, 0, 0, 0, 0, 0, 0, {0, 0, 0, 0}, 0, 0},
      {"GlobalMaxPool", 1, 128, 56, 56, 0, 0, 0, 0, 0, 0, {0, 0, 0, 0}, 0, 0},
      /* 1-D (rank 3): the w-side fields */
      {"MaxPool", 2, 5, 1, 50, 1, 3, 1, 2, 1, 1, {0, 1, 0, 1}, 0, 0, 1},
      {"MaxPool", 1, 3, 1, 31, 1, 4, 1, 3, 1, 2, {0, 0, 0, 2}, 1, 0, 1},
      {"AveragePool", 1, 6, 1, 40, 1, 5, 1, 2, 1, 1, {0, 2, 0, 2}, 0, 0, 1},
      {"AveragePool", 1, 6, 1, 40, 1, 5, 1, 2, 1, 1, {0, 2, 0, 1}, 1, 1, 1},
      /* 3-D (rank 5): depth windows over the 2-D pools of the depth planes */
      {"MaxPool", 1, 4, 9, 9, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, 0, 3, 6, 3, 2, 1, 1, 1},
      {"MaxPool", 2, 3, 7, 8, 1, 3, 1, 2, 1, 1, {0, 1, 0, 1}, 1, 0, 3, 5, 2, 2, 1, 0, 0},
      {"AveragePool", 1, 4, 8, 8, 2, 2, 2, 2, 1, 1, {0, 0, 0, 0}, 0, 0, 3, 8, 2, 2, 1, 0, 0},
      {"AveragePool", 1, 3, 7, 7, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, 1, 3, 5, 3, 2, 1, 1, 1},
      {"AveragePool", 1, 3, 7, 7, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 1, 0, 3, 6, 3, 2, 2, 1, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) pool_case_run(&cases[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_cases),
      cmocka_unit_test(test_conv_sweep),
      cmocka_unit_test(test_conv_ranks),
      cmocka_unit_test(test_winograd),
      cmocka_unit_test(test_winograd_select),
      cmocka_unit_test(test_pool_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
