/* The copy and resize tactics (src/kernels/copy, src/kernels/resize) against
 * the ops' reference kernels: Transpose, Concat, Slice, Split, Gather and
 * Resize/Upsample on tiny graphs of one node, every ISA the machine has,
 * on 1 and 2 threads.  Data movement is exact, and the resize fast paths
 * compute what the reference computes in the same order, so every result
 * must match the reference bit for bit. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fastkit.h"
#include "kernels/copy/copy.h"
#include "ops/tactic.h"

/* ---- running one node every way ------------------------------------------ */

static kn_pool *pool2;

/* Runs the last node of m with the reference kernel and with `tactic` on
 * every ISA and 1 and 2 threads; asserts bit-identical outputs. */
static void check_node(kn_ir_model *m, int32_t tactic, uint32_t seed) {
  kn_graph *g = m->graph;
  kn_node *n = &g->nodes[g->n_nodes - 1];
  fk_inputs in = fk_make_inputs(g, seed);
  kn_slot ref[8], got[8];
  n->tactic = 0;
  fk_run(m, g, n, &in, NULL, NULL, ref);
  kn_isa isas[KN_ISA_COUNT];
  int32_t ni = fk_isas(isas);
  for (int32_t i = 0; i < ni; i++) {
    assert_int_equal(kn_tactics_of(n)->select(g, n, isas[i]), tactic);
    n->tactic = tactic;
    for (int32_t th = 1; th <= 2; th++) {
      kn_rt rt = {.isa = isas[i], .pool = th == 2 ? pool2 : NULL};
      fk_run(m, g, n, &in, &rt, NULL, got);
      for (int32_t o = 0; o < n->n_outputs; o++) {
        const kn_tensor *a = &ref[o].t, *b = &got[o].t;
        assert_int_equal(a->rank, b->rank);
        assert_int_equal(a->nbytes, b->nbytes);
        if (a->nbytes && memcmp(a->data, b->data, a->nbytes)) {
          char sa[128];
          fail_msg("%s %s isa %s threads %d output %d differs from the reference",
                   n->op_type, kn_shape_str(a->rank, a->dims, sa, sizeof sa),
                   kn_isa_name(isas[i]), (int)th, (int)o);
        }
        kn_slot_release(&got[o]);
      }
      free(rt.scratch);
    }
  }
  for (int32_t o = 0; o < n->n_outputs; o++) kn_slot_release(&ref[o]);
  fk_inputs_free(&in);
  kn_ir_model_free(m);
}

static int32_t input_dt(kn_graph *g, const char *name, int32_t rank, const int64_t *dims,
                        kn_dtype dt) {
  int32_t v = tk_input(g, name, rank, dims);
  g->values[v].type.dtype = dt;
  return v;
}

static const kn_dtype dtypes[] = {KN_DTYPE_F32, KN_DTYPE_U8, KN_DTYPE_F16, KN_DTYPE_I64};

/* deterministic small pseudo-random integers */
static uint32_t rnd(uint32_t *s, uint32_t n) {
  *s = *s * 1664525u + 1013904223u;
  return (*s >> 8) % n;
}

static const int64_t sizes[] = {1, 2, 3, 5, 7, 8, 16, 17, 31, 33};

/* ---- the register transposes directly ------------------------------------- */

static void test_x32_transpose(void **state) {
  (void)state;
  kn_isa isas[KN_ISA_COUNT];
  int32_t ni = fk_isas(isas);
  static const int64_t dim[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40};
  uint32_t *src = malloc(64 * 64 * 4), *a = malloc(64 * 70 * 4), *b = malloc(64 * 70 * 4);
  assert_non_null(src);
  assert_non_null(a);
  assert_non_null(b);
  for (uint32_t i = 0; i < 64 * 64; i++) src[i] = i * 2654435761u;
  /* ldd = rows + 3, and ldd = rows (dense rows: the interleave paths) */
  for (int dense = 0; dense < 2; dense++)
  for (size_t r = 0; r < sizeof dim / sizeof *dim; r++)
    for (size_t c = 0; c < sizeof dim / sizeof *dim; c++) {
      int64_t rows = dim[r], cols = dim[c], lds = 64, ldd = dense ? rows : rows + 3;
      memset(a, 0xee, 64 * 70 * 4);
      for (int64_t y = 0; y < cols; y++)
        for (int64_t x = 0; x < rows; x++) a[y * ldd + x] = src[x * lds + y];
      for (int32_t i = 0; i < ni; i++) {
        memset(b, 0xee, 64 * 70 * 4);
        kn_x32_transpose(isas[i], src, lds, b, ldd, rows, cols);
        if (memcmp(a, b, 64 * 70 * 4))
          fail_msg("transpose %lldx%lld isa %s", (long long)rows, (long long)cols,
                   kn_isa_name(isas[i]));
      }
    }
  free(src);
  free(a);
  free(b);
}

/* ---- Transpose ---------------------------------------------------------- */

static void transpose_case(int32_t r, const int64_t *dims, const int64_t *perm, kn_dtype dt,
                           uint32_t seed) {
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t x = input_dt(g, "x", r, dims, dt);
  int32_t y = tk_node(g, "Transpose", 1, &x);
  if (perm) assert_true(kn_node_set_ints(tk_last(g), "perm", perm, r));
  tk_output(g, y);
  tk_prepare(m);
  check_node(m, KN_TACTIC_copy, seed);
}

static void test_transpose(void **state) {
  (void)state;
  uint32_t s = 1;
  for (int32_t r = 1; r <= 6; r++)
    for (int32_t rep = 0; rep < 24; rep++) {
      int64_t dims[6], perm[6];
      int64_t numel = 1;
      for (int32_t i = 0; i < r; i++) {
        dims[i] = sizes[rnd(&s, r >= 5 ? 5 : 10)];
        numel *= dims[i];
        perm[i] = i;
      }
      for (int32_t i = r - 1; i > 0; i--) { /* Fisher-Yates */
        int32_t j = (int32_t)rnd(&s, (uint32_t)i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
      }
      if (numel > 200000) continue;
      transpose_case(r, dims, rep == 0 ? NULL : perm, dtypes[rep % 4], s);
    }
  /* the cases models have, large enough to run on two threads */
  transpose_case(4, (int64_t[]){1, 3, 224, 224}, (int64_t[]){0, 2, 3, 1}, KN_DTYPE_F32, 3);
  transpose_case(4, (int64_t[]){1, 224, 224, 3}, (int64_t[]){0, 3, 1, 2}, KN_DTYPE_F32, 4);
  transpose_case(4, (int64_t[]){2, 128, 12, 67}, (int64_t[]){0, 2, 1, 3}, KN_DTYPE_F32, 5);
  transpose_case(4, (int64_t[]){2, 12, 129, 64}, (int64_t[]){0, 1, 3, 2}, KN_DTYPE_F32, 6);
  transpose_case(2, (int64_t[]){517, 259}, NULL, KN_DTYPE_F32, 7);
  transpose_case(3, (int64_t[]){3, 200, 301}, (int64_t[]){2, 0, 1}, KN_DTYPE_I64, 8);
  transpose_case(3, (int64_t[]){3, 200, 301}, (int64_t[]){0, 2, 1}, KN_DTYPE_F16, 9);
}

/* ---- Concat ----------------------------------------------------------------- */

static void test_concat(void **state) {
  (void)state;
  uint32_t s = 2;
  for (int32_t r = 1; r <= 5; r++)
    for (int32_t axis = -r; axis < r; axis++)
      for (int32_t n_in = 1; n_in <= 3; n_in++) {
        kn_ir_model *m = tk_model_new(13);
        kn_graph *g = m->graph;
        int64_t dims[6];
        for (int32_t i = 0; i < r; i++) dims[i] = sizes[rnd(&s, r >= 4 ? 5 : 8)];
        int32_t in[3];
        int32_t a = axis < 0 ? axis + r : axis;
        kn_dtype dt = dtypes[rnd(&s, 4)];
        for (int32_t k = 0; k < n_in; k++) {
          int64_t d[6];
          memcpy(d, dims, sizeof d);
          d[a] = k == 1 ? 0 : sizes[rnd(&s, 10)]; /* one empty part */
          char name[8] = "x0";
          name[1] = (char)('0' + k);
          in[k] = input_dt(g, name, r, d, dt);
        }
        int32_t y = tk_node(g, "Concat", n_in, in);
        assert_true(kn_node_set_int(tk_last(g), "axis", axis));
        tk_output(g, y);
        tk_prepare(m);
        check_node(m, KN_TACTIC_copy, s);
      }
  /* large: on two threads, axis 0 (whole blocks) and axis 1 */
  for (int32_t axis = 0; axis < 2; axis++) {
    kn_ir_model *m = tk_model_new(13);
    kn_graph *g = m->graph;
    int32_t in[2] = {tk_input(g, "a", 3, (int64_t[]){4, 96, 300}),
                     tk_input(g, "b", 3, (int64_t[]){4, 96, 300})};
    int32_t y = tk_node(g, "Concat", 2, in);
    assert_true(kn_node_set_int(tk_last(g), "axis", axis));
    tk_output(g, y);
    tk_prepare(m);
    check_node(m, KN_TACTIC_copy, 11);
  }
}

/* ---- Slice ------------------------------------------------------------------ */

static void test_slice(void **state) {
  (void)state;
  uint32_t s = 3;
  for (int32_t r = 1; r <= 6; r++)
    for (int32_t rep = 0; rep < 30; rep++) {
      kn_ir_model *m = tk_model_new(13);
      kn_graph *g = m->graph;
      int64_t dims[6];
      for (int32_t i = 0; i < r; i++) dims[i] = sizes[rnd(&s, r >= 5 ? 6 : 10)];
      int32_t na = 1 + (int32_t)rnd(&s, (uint32_t)r);
      int64_t starts[6], ends[6], axes[6], steps[6];
      bool used[6] = {false};
      for (int32_t k = 0; k < na; k++) {
        int32_t a;
        do a = (int32_t)rnd(&s, (uint32_t)r);
        while (used[a]);
        used[a] = true;
        axes[k] = rnd(&s, 2) ? a - r : a; /* negative axes too */
        int64_t d = dims[a];
        starts[k] = (int64_t)rnd(&s, (uint32_t)(2 * d + 3)) - d - 1;
        ends[k] = (int64_t)rnd(&s, (uint32_t)(2 * d + 3)) - d - 1;
        if (rnd(&s, 6) == 0) ends[k] = rnd(&s, 2) ? INT64_MAX : INT64_MIN;
        steps[k] = (int64_t)rnd(&s, 7) - 3;
        if (steps[k] == 0) steps[k] = 1;
      }
      int32_t in[5] = {input_dt(g, "x", r, dims, dtypes[rep % 4]), tk_const_i64(g, na, starts),
                       tk_const_i64(g, na, ends), tk_const_i64(g, na, axes),
                       tk_const_i64(g, na, steps)};
      tk_output(g, tk_node(g, "Slice", 5, in));
      tk_prepare(m);
      check_node(m, KN_TACTIC_copy, s);
    }
  /* large, an inner crop on two threads */
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t in[4] = {tk_input(g, "x", 3, (int64_t[]){8, 200, 300}),
                   tk_const_i64(g, 2, (int64_t[]){3, 1}), tk_const_i64(g, 2, (int64_t[]){-3, 299}),
                   tk_const_i64(g, 2, (int64_t[]){2, 1})};
  tk_output(g, tk_node(g, "Slice", 4, in));
  tk_prepare(m);
  check_node(m, KN_TACTIC_copy, 12);
}

/* ---- Pad ---------------------------------------------------------------------- */

/* Every mode, ranks 1 to 5, positive, zero and negative (cropping) pads,
 * pads wider than the axis (reflect and wrap fold more than once), the
 * fixed-size dtypes, a constant value, opset 18's axes input. */
static void test_pad(void **state) {
  (void)state;
  static const char *modes[] = {"constant", "reflect", "edge", "wrap"};
  uint32_t s = 5;
  for (int32_t r = 1; r <= 5; r++)
    for (int32_t rep = 0; rep < 24; rep++) {
      const char *mode = modes[rep % 4];
      kn_ir_model *m = tk_model_new(19);
      kn_graph *g = m->graph;
      int64_t dims[5], pads[10];
      for (int32_t i = 0; i < r; i++) dims[i] = sizes[rnd(&s, r >= 4 ? 6 : 10)];
      for (int32_t i = 0; i < r; i++)
        for (int32_t e = 0; e < 2; e++) {
          int64_t p = (int64_t)rnd(&s, 6) - 1; /* -1 .. 4: wider than small axes */
          if (p < 0 && dims[i] < 3) p = 0;   /* keep the cropped window non-empty */
          if (strcmp(mode, "constant") && dims[i] == 1 && p < 0) p = 0;
          pads[e * r + i] = p;
        }
      kn_dtype dt = dtypes[rep % 4];
      int32_t in[3] = {input_dt(g, "x", r, dims, dt), tk_const_i64(g, 2 * r, pads), -1};
      int32_t nin = 2;
      if (!strcmp(mode, "constant") && dt == KN_DTYPE_F32 && rep % 8 == 0) {
        in[2] = tk_const_scalar(g, 1.5f);
        nin = 3;
      }
      tk_output(g, tk_node(g, "Pad", nin, in));
      assert_true(kn_node_set_string(tk_last(g), "mode", mode));
      tk_prepare(m);
      check_node(m, KN_TACTIC_copy, s);
    }
  /* an STFT's reflect pad of a long signal, and a rank-4 image pad */
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t in[2] = {tk_input(g, "x", 3, (int64_t[]){2, 1, 16000}),
                   tk_const_i64(g, 6, (int64_t[]){0, 0, 128, 0, 0, 128})};
  tk_output(g, tk_node(g, "Pad", 2, in));
  assert_true(kn_node_set_string(tk_last(g), "mode", "reflect"));
  tk_prepare(m);
  check_node(m, KN_TACTIC_copy, 21);
}

/* ---- Split -------------------------------------------------------------------- */

static void test_split(void **state) {
  (void)state;
  uint32_t s = 4;
  for (int32_t r = 1; r <= 5; r++)
    for (int32_t axis = -r; axis < r; axis++)
      for (int32_t n_out = 1; n_out <= 3; n_out++) {
        kn_ir_model *m = tk_model_new(13);
        kn_graph *g = m->graph;
        int64_t dims[6], parts[3], total = 0;
        for (int32_t i = 0; i < r; i++) dims[i] = sizes[rnd(&s, r >= 4 ? 5 : 8)];
        for (int32_t k = 0; k < n_out; k++) total += parts[k] = (int64_t)rnd(&s, 9);
        dims[axis < 0 ? axis + r : axis] = total;
        int32_t in[2] = {input_dt(g, "x", r, dims, dtypes[rnd(&s, 4)]),
                         tk_const_i64(g, n_out, parts)};
        tk_node_n(g, "Split", 2, in, n_out, NULL);
        assert_true(kn_node_set_int(tk_last(g), "axis", axis));
        for (int32_t k = 0; k < n_out; k++) tk_output(g, tk_last(g)->outputs[k]);
        tk_prepare(m);
        check_node(m, KN_TACTIC_copy, s);
      }
}

/* ---- Gather ----------------------------------------------------------------- */

static int32_t const_idx(kn_graph *g, int32_t rank, const int64_t *dims, const int64_t *v,
                         kn_dtype dt) {
  kn_tensor t;
  memset(&t, 0, sizeof t);
  assert_int_equal(kn_tensor_alloc(&t, dt, rank, dims, NULL), KN_OK);
  for (int64_t i = 0; i < kn_tensor_numel(&t); i++) kn_store_i64(t.data, dt, i, v[i]);
  int32_t c = kn_graph_add_constant(g, "idx", &t);
  assert_true(c >= 0);
  return c;
}

static void test_gather(void **state) {
  (void)state;
  uint32_t s = 5;
  for (int32_t r = 1; r <= 5; r++)
    for (int32_t axis = -r; axis < r; axis++)
      for (int32_t ir = 0; ir <= 2; ir++) {
        kn_ir_model *m = tk_model_new(13);
        kn_graph *g = m->graph;
        int64_t dims[6];
        for (int32_t i = 0; i < r; i++) dims[i] = sizes[rnd(&s, r >= 4 ? 5 : 9)];
        int64_t n = dims[axis < 0 ? axis + r : axis];
        int64_t idims[2] = {1 + rnd(&s, 5), 1 + rnd(&s, 4)}, v[32];
        for (int32_t k = 0; k < 32; k++) v[k] = (int64_t)rnd(&s, (uint32_t)(2 * n)) - n;
        int32_t in[2] = {input_dt(g, "x", r, dims, dtypes[rnd(&s, 4)]),
                         const_idx(g, ir, idims, v, ir == 1 ? KN_DTYPE_I32 : KN_DTYPE_I64)};
        tk_output(g, tk_node(g, "Gather", 2, in));
        assert_true(kn_node_set_int(tk_last(g), "axis", axis));
        tk_prepare(m);
        check_node(m, KN_TACTIC_copy, s);
      }
  /* an embedding lookup on two threads */
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int64_t ids[128];
  for (int32_t k = 0; k < 128; k++) ids[k] = (k * 7919) % 3000 - (k % 3 ? 0 : 3000);
  int32_t in[2] = {tk_input(g, "emb", 2, (int64_t[]){3000, 768}),
                   const_idx(g, 2, (int64_t[]){1, 128}, ids, KN_DTYPE_I64)};
  tk_output(g, tk_node(g, "Gather", 2, in));
  tk_prepare(m);
  check_node(m, KN_TACTIC_copy, 13);
}

/* ---- Resize / Upsample ------------------------------------------------------ */

static const char *const ctms[] = {"half_pixel",    "half_pixel_symmetric", "pytorch_half_pixel",
                                   "align_corners", "asymmetric",           "tf_half_pixel_for_nn",
                                   "tf_crop_and_resize"};
static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

static void set_str(kn_node *n, const char *name, const char *v) {
  assert_true(kn_node_set_string(n, name, v));
}

/* Resize-13 of x [dims] by scales (sizes NULL) or to sizes. */
static void resize_case(int32_t r, const int64_t *dims, const float *scales,
                        const int64_t *to, const char *mode, const char *ctm,
                        const char *nm, bool exclude, uint32_t seed) {
  kn_ir_model *m = tk_model_new(13);
  kn_graph *g = m->graph;
  int32_t in[4] = {tk_input(g, "x", r, dims), -1, -1, -1};
  if (!strcmp(ctm, "tf_crop_and_resize")) {
    float roi[12];
    for (int32_t i = 0; i < r; i++) {
      roi[i] = i < r - 2 ? 0.0f : 0.1f * (float)i - 0.15f; /* partly outside */
      roi[r + i] = i < r - 2 ? 1.0f : 0.8f + 0.2f * (float)i;
    }
    in[1] = tk_const_f32(g, 1, (int64_t[]){2 * r}, roi);
  }
  if (scales) in[2] = tk_const_f32(g, 1, (int64_t[]){r}, scales);
  else in[3] = tk_const_i64(g, r, to);
  int32_t y = tk_node(g, "Resize", 4, in);
  kn_node *n = tk_last(g);
  set_str(n, "mode", mode);
  set_str(n, "coordinate_transformation_mode", ctm);
  set_str(n, "nearest_mode", nm);
  if (exclude) assert_true(kn_node_set_int(n, "exclude_outside", 1));
  if (!strcmp(ctm, "tf_crop_and_resize")) assert_true(kn_node_set_float(n, "extrapolation_value", -7.5f));
  tk_output(g, y);
  tk_prepare(m);
  check_node(m, KN_TACTIC_resize, seed);
}

static void test_resize(void **state) {
  (void)state;
  static const float sc[][2] = {{2, 2}, {0.5f, 0.5f}, {3, 1}, {1, 0.6f}, {1.7f, 0.37f}, {0.8f, 2.5f}};
  static const int64_t hw[][2] = {{1, 1}, {5, 7}, {8, 16}, {17, 3}};
  uint32_t seed = 20;
  for (size_t c = 0; c < sizeof ctms / sizeof *ctms; c++)
    for (int32_t mode = 0; mode < 2; mode++)
      for (size_t k = 0; k < sizeof sc / sizeof *sc; k++) {
        const int64_t *d2 = hw[(k + c) % 4];
        int64_t dims[4] = {2, 3, d2[0], d2[1]};
        float scales[4] = {1, 1, sc[k][0], sc[k][1]};
        resize_case(4, dims, scales, NULL, mode ? "linear" : "nearest", ctms[c],
                    nms[(k + c) % 4], mode && k % 3 == 2, seed++);
      }
  /* by sizes, other ranks, every nearest mode */
  for (size_t k = 0; k < 4; k++) {
    resize_case(3, (int64_t[]){3, 6, 9}, NULL, (int64_t[]){3, 13, 4}, "nearest", "asymmetric",
                nms[k], false, seed++);
    resize_case(2, (int64_t[]){6, 9}, NULL, (int64_t[]){11, 23}, "linear", ctms[k], nms[k],
                false, seed++);
    resize_case(5, (int64_t[]){2, 1, 2, 7, 5}, NULL, (int64_t[]){2, 1, 2, 3, 10}, "nearest",
                ctms[k], nms[k], false, seed++);
  }
  /* a leading axis resized: the fast path declines, the reference runs */
  resize_case(4, (int64_t[]){1, 2, 3, 4}, (float[]){1, 2, 2, 2}, NULL, "linear", "half_pixel",
              nms[0], false, seed++);
  resize_case(4, (int64_t[]){1, 2, 3, 4}, (float[]){1, 2, 2, 2}, NULL, "nearest", "half_pixel",
              nms[0], false, seed++);
  /* large enough for two threads */
  resize_case(4, (int64_t[]){1, 16, 56, 56}, (float[]){1, 1, 2, 2}, NULL, "linear",
              "half_pixel", nms[0], false, seed++);
  resize_case(4, (int64_t[]){1, 16, 56, 56}, (float[]){1, 1, 2, 2}, NULL, "nearest",
              "asymmetric", nms[2], false, seed++);
  resize_case(4, (int64_t[]){1, 16, 112, 112}, (float[]){1, 1, 0.5f, 0.5f}, NULL, "linear",
              "align_corners", nms[0], false, seed++);
}

/* Upsample-9 (scales input) and Resize-10: the legacy asymmetric modes. */
static void test_upsample(void **state) {
  (void)state;
  for (int32_t op = 0; op < 2; op++)
    for (int32_t mode = 0; mode < 2; mode++)
      for (int32_t k = 0; k < 3; k++) {
        kn_ir_model *m = tk_model_new(op ? 10 : 9);
        kn_graph *g = m->graph;
        static const float sc[3][4] = {{1, 1, 2, 3}, {1, 1, 0.5f, 0.7f}, {1, 1, 1.5f, 1}};
        int32_t in[2] = {tk_input(g, "x", 4, (int64_t[]){2, 2, 7, 6}),
                         tk_const_f32(g, 1, (int64_t[]){4}, sc[k])};
        tk_output(g, tk_node(g, op ? "Resize" : "Upsample", 2, in));
        set_str(tk_last(g), "mode", mode ? "linear" : "nearest");
        tk_prepare(m);
        check_node(m, KN_TACTIC_resize, 40 + (uint32_t)k);
      }
}

int main(void) {
  kn_error err;
  if (kn_pool_create(2, &pool2, &err)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_x32_transpose), cmocka_unit_test(test_transpose),
      cmocka_unit_test(test_concat),        cmocka_unit_test(test_slice),
      cmocka_unit_test(test_pad),
      cmocka_unit_test(test_split),         cmocka_unit_test(test_gather),
      cmocka_unit_test(test_resize),        cmocka_unit_test(test_upsample),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  kn_pool_free(pool2);
  return rc;
}
