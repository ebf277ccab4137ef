/* RNN / GRU / LSTM on the packed GEMM (see rnn.h).  Portable: the products
 * are kn_sgemm (per-ISA micro-kernels) and the activations kn_f32_act
 * (per-ISA); what is left here are short elementwise loops over one batch
 * row, which the compiler vectorises at -O3. */
#include "rnn-kernels.h"

#include <string.h>

#include "kernels/gemm/gemm.h"

/* Every buffer starts on a 64-byte line. */
static size_t al16(size_t floats) { return (floats + 15) & ~(size_t)15; }

static int64_t gates_of(int kind) {
  return kind == KN_RNN_RNN ? 1 : kind == KN_RNN_GRU ? 3 : 4;
}

size_t kn_rnn_weights_floats(kn_isa isa, int kind, int dirs, int64_t input, int64_t hidden,
                             bool gru_split) {
  int64_t H = hidden, GH = gates_of(kind) * H;
  size_t per = al16(kn_sgemm_pack_b_size(isa, input, GH)) +
               al16(kn_sgemm_pack_b_size(isa, H, gru_split ? 2 * H : GH)) +
               (gru_split ? al16(kn_sgemm_pack_b_size(isa, H, H)) : 0) + al16((size_t)GH) +
               al16((size_t)H) + al16((size_t)(3 * H));
  return per * (size_t)dirs;
}

void kn_rnn_weights_map(kn_isa isa, int kind, int dirs, int64_t input, int64_t hidden,
                        bool gru_split, bool peep, const float *mem, kn_rnn_weights *out) {
  int64_t H = hidden, I = input, GH = gates_of(kind) * H;
  memset(out, 0, sizeof *out);
  out->isa = isa;
  out->kind = kind;
  out->dirs = dirs;
  out->input = I;
  out->hidden = H;
  out->gru_split = gru_split;
  const float *p = mem;
  for (int d = 0; d < dirs; d++) {
    out->d[d].w = p;
    p += al16(kn_sgemm_pack_b_size(isa, I, GH));
    out->d[d].r = p;
    p += al16(kn_sgemm_pack_b_size(isa, H, gru_split ? 2 * H : GH));
    if (gru_split) {
      out->d[d].r_h = p;
      p += al16(kn_sgemm_pack_b_size(isa, H, H));
    }
    out->d[d].bias = p;
    p += al16((size_t)GH);
    out->d[d].rbh = p;
    p += al16((size_t)H);
    out->d[d].peep = peep ? p : NULL;
    p += al16((size_t)(3 * H));
  }
}

void kn_rnn_weights_pack(kn_isa isa, int kind, int dirs, int64_t input, int64_t hidden,
                         bool gru_split, const float *W, const float *R, const float *B,
                         const float *P, float *mem, kn_rnn_weights *out) {
  int64_t H = hidden, I = input, GH = gates_of(kind) * H;
  kn_rnn_weights_map(isa, kind, dirs, input, hidden, gru_split, true, mem, out);
  for (int d = 0; d < dirs; d++) {
    const float *Wd = W + (size_t)d * (size_t)(GH * I), *Rd = R + (size_t)d * (size_t)(GH * H);
    kn_sgemm_pack_b(isa, I, GH, Wd, I, true, (float *)out->d[d].w);
    kn_sgemm_pack_b(isa, H, gru_split ? 2 * H : GH, Rd, H, true, (float *)out->d[d].r);
    if (gru_split) kn_sgemm_pack_b(isa, H, H, Rd + (size_t)(2 * H * H), H, true, (float *)out->d[d].r_h);
    /* biases as the reference adds them to X W^T: Wb + Rb, except the GRU
     * h gate whose Rb enters inside the step */
    float *bias = (float *)out->d[d].bias, *rbh = (float *)out->d[d].rbh;
    float *peep = (float *)out->d[d].peep;
    const float *wb = B ? B + (size_t)d * (size_t)(2 * GH) : NULL, *rb = wb ? wb + GH : NULL;
    for (int64_t j = 0; j < GH; j++) {
      bool gru_h = kind == KN_RNN_GRU && j >= 2 * H;
      bias[j] = wb ? wb[j] + (gru_h ? 0 : rb[j]) : 0.0f;
    }
    for (int64_t j = 0; j < H; j++) rbh[j] = rb && kind == KN_RNN_GRU ? rb[2 * H + j] : 0.0f;
    for (int64_t j = 0; j < 3 * H; j++)
      peep[j] = P ? P[(size_t)d * (size_t)(3 * H) + (size_t)j] : 0.0f;
    if (!P) out->d[d].peep = NULL;
  }
}

/* The three products of a step and the input projection, pointers left
 * out (kn_sgemm_scratch_size does not read them); bl: their blocking. */
static void gemm_shapes(const kn_rnn_args *a, const kn_rnn_weights *w,
                        const kn_sgemm_blocking *bl, kn_sgemm_args g[3]) {
  int64_t H = w->hidden, GH = gates_of(w->kind) * H;
  memset(g, 0, 3 * sizeof *g);
  g[0] = (kn_sgemm_args){.m = a->seq * a->batch, .n = GH, .k = w->input, .alpha = 1.0f,
                         .lda = w->input, .b_packed = w->d[0].w, .ldc = GH};
  g[1] = (kn_sgemm_args){.m = a->batch, .n = w->gru_split ? 2 * H : GH, .k = H, .alpha = 1.0f,
                         .lda = H, .b_packed = w->d[0].r, .ldc = GH};
  g[2] = (kn_sgemm_args){.m = a->batch, .n = H, .k = H, .alpha = 1.0f, .lda = H,
                         .b_packed = w->d[0].r_h ? w->d[0].r_h : w->d[0].r, .ldc = GH};
  for (int i = 0; i < 3; i++) g[i].blocking = bl;
}

size_t kn_rnn_scratch_size(kn_isa isa, const kn_rnn_args *a, const kn_rnn_weights *w,
                           int32_t threads, const kn_caches *caches) {
  int64_t H = w->hidden, GH = gates_of(w->kind) * H, S = a->seq, B = a->batch;
  kn_sgemm_args g[3];
  kn_sgemm_blocking bl = kn_sgemm_blocking_of(isa, caches);
  gemm_shapes(a, w, &bl, g);
  size_t gs = 0;
  for (int i = 0; i < 3; i++) {
    size_t s = kn_sgemm_scratch_size(isa, &g[i], threads);
    if (s > gs) gs = s;
  }
  size_t floats = al16((size_t)(S * B * GH)) + al16((size_t)(B * GH)) + 3 * al16((size_t)(B * H));
  return floats * sizeof(float) + ((gs + 63) & ~(size_t)63);
}

void kn_f32_rnn(kn_isa isa, kn_pool *pool, const kn_rnn_args *a, const kn_rnn_weights *w,
                void *scratch, const kn_caches *caches) {
  const int kind = w->kind;
  const int64_t S = a->seq, B = a->batch, H = w->hidden, G = gates_of(kind), GH = G * H;
  const int D = w->dirs;
  KN_ASSERT(w->isa == isa);
  if (B <= 0 || H <= 0) return;
  float *xw = scratch;
  float *gt = xw + al16((size_t)(S * B * GH));
  float *hs = gt + al16((size_t)(B * GH));
  float *cs = hs + al16((size_t)(B * H));
  float *t1 = cs + al16((size_t)(B * H));
  void *gscr = t1 + al16((size_t)(B * H));
  const kn_act_params sig = {.act = KN_ACT_SIGMOID}, tnh = {.act = KN_ACT_TANH};
  kn_sgemm_args gp[3];
  kn_sgemm_blocking bl = kn_sgemm_blocking_of(isa, caches);
  gemm_shapes(a, w, &bl, gp);
  for (int d = 0; d < D; d++) {
    bool rev = a->reverse || d == 1;
    const float *bias = w->d[d].bias, *rbh = w->d[d].rbh, *peep = w->d[d].peep;
    /* XW for every step at once */
    kn_epilogue ep = {.act = {.act = KN_ACT_NONE}, .bias = bias};
    kn_sgemm_args g0 = gp[0];
    g0.a = a->x;
    g0.b_packed = w->d[d].w;
    g0.c = xw;
    g0.ep = &ep;
    if (S > 0) kn_sgemm(isa, pool, &g0, gscr);
    size_t bh = (size_t)(B * H);
    if (a->h0) memcpy(hs, a->h0 + (size_t)d * bh, bh * sizeof(float));
    else memset(hs, 0, bh * sizeof(float));
    if (kind == KN_RNN_LSTM) {
      if (a->c0) memcpy(cs, a->c0 + (size_t)d * bh, bh * sizeof(float));
      else memset(cs, 0, bh * sizeof(float));
    }
    kn_sgemm_args g1 = gp[1], g2 = gp[2];
    g1.a = hs;
    g1.b_packed = w->d[d].r;
    g1.c = gt;
    g2.a = t1;
    g2.b_packed = w->d[d].r_h;
    g2.c = gt + 2 * H;
    for (int64_t step = 0; step < S; step++) {
      int64_t t = rev ? S - 1 - step : step;
      const float *xt = xw + (size_t)(t * B * GH);
      kn_sgemm(isa, pool, &g1, gscr); /* gt = H_{t-1} R^T (GRU split: z, r only) */
      for (int64_t b = 0; b < B; b++) {
        float *g = gt + b * GH, *h = hs + b * H, *c = cs + b * H, *tmp = t1 + b * H;
        const float *x = xt + b * GH;
        if (kind == KN_RNN_RNN) {
          for (int64_t j = 0; j < H; j++) g[j] += x[j];
          kn_f32_act(isa, &tnh, g, h, H);
        } else if (kind == KN_RNN_LSTM) {
          /* gates i o f c */
          for (int64_t j = 0; j < GH; j++) g[j] += x[j];
          if (peep)
            for (int64_t j = 0; j < H; j++) {
              g[j] += peep[j] * c[j];
              g[2 * H + j] += peep[2 * H + j] * c[j];
            }
          kn_f32_act(isa, &sig, g, g, H);
          if (!a->input_forget) kn_f32_act(isa, &sig, g + 2 * H, g + 2 * H, H);
          kn_f32_act(isa, &tnh, g + 3 * H, g + 3 * H, H);
          for (int64_t j = 0; j < H; j++) {
            float f = a->input_forget ? 1.0f - g[j] : g[2 * H + j];
            c[j] = f * c[j] + g[j] * g[3 * H + j];
          }
          if (peep)
            for (int64_t j = 0; j < H; j++) g[H + j] += peep[H + j] * c[j];
          kn_f32_act(isa, &sig, g + H, g + H, H);
          kn_f32_act(isa, &tnh, c, tmp, H);
          for (int64_t j = 0; j < H; j++) h[j] = g[H + j] * tmp[j];
        } else {
          /* gates z r h */
          for (int64_t j = 0; j < 2 * H; j++) g[j] += x[j];
          kn_f32_act(isa, &sig, g, g, 2 * H);
          if (a->lbr) {
            for (int64_t j = 0; j < H; j++)
              g[2 * H + j] = x[2 * H + j] + g[H + j] * (g[2 * H + j] + rbh[j]);
          } else {
            for (int64_t j = 0; j < H; j++) tmp[j] = g[H + j] * h[j];
          }
        }
      }
      if (kind == KN_RNN_GRU) {
        if (!a->lbr) kn_sgemm(isa, pool, &g2, gscr); /* (r . H_{t-1}) R_h^T */
        for (int64_t b = 0; b < B; b++) {
          float *g = gt + b * GH, *h = hs + b * H;
          const float *x = xt + b * GH;
          if (!a->lbr)
            for (int64_t j = 0; j < H; j++) g[2 * H + j] = x[2 * H + j] + g[2 * H + j] + rbh[j];
          kn_f32_act(isa, &tnh, g + 2 * H, g + 2 * H, H);
          for (int64_t j = 0; j < H; j++) h[j] = (1.0f - g[j]) * g[2 * H + j] + g[j] * h[j];
        }
      }
      if (a->y) memcpy(a->y + (size_t)(t * D + d) * bh, hs, bh * sizeof(float));
    }
    if (a->yh) memcpy(a->yh + (size_t)d * bh, hs, bh * sizeof(float));
    if (a->yc && kind == KN_RNN_LSTM) memcpy(a->yc + (size_t)d * bh, cs, bh * sizeof(float));
  }
}
