/*
 * Recurrent layers on the packed GEMM (tactic `rnn_gemm`): fp32 RNN, GRU
 * and LSTM, layout 0, default activations (Tanh; Sigmoid/Tanh; Sigmoid/
 * Tanh/Tanh), no clip; forward, reverse and bidirectional; optional
 * initial states, peepholes, LSTM input_forget, GRU linear_before_reset.
 *
 * Per direction:
 *   XW = X[S*B, I] W^T + (Wb + Rb)     one GEMM over every time step, the
 *                                       biases as its column epilogue
 *   per step: G = H_{t-1}[B, H] R^T     one GEMM (a GEMV at batch 1) on R
 *                                       packed once
 *   gates elementwise, activations through kn_f32_act (vectorised).
 * GRU without linear_before_reset needs r before its h-gate product, so R
 * is packed as two panels (z|r rows, then h rows) and the step runs two
 * products.
 *
 * Every product is kn_sgemm, whose results do not depend on the thread
 * count, and the gate loops run on one thread, so results are
 * bit-identical for any thread count.  They differ from the reference
 * kernel by rounding (other summation order, vectorised activations).
 */
#ifndef KN_RNN_H
#define KN_RNN_H

#include "kernels/kernels.h"

enum { KN_RNN_RNN = 0, KN_RNN_GRU = 1, KN_RNN_LSTM = 2 };

/* Weights packed for kn_f32_rnn (made by kn_rnn_weights_pack into memory
 * of kn_rnn_weights_floats floats). */
typedef struct kn_rnn_weights {
  kn_isa isa;
  int kind, dirs;
  int64_t input, hidden;
  bool gru_split; /* GRU without linear_before_reset: r_h holds R's h rows */
  struct {
    const float *w;    /* W^T packed (k = input, n = G*H) */
    const float *r;    /* R^T packed (k = H, n = G*H, or 2H when gru_split) */
    const float *r_h;  /* gru_split: R_h^T packed (k = H, n = H) */
    const float *bias; /* G*H: Wb + Rb (GRU h gate: Wb only) */
    const float *rbh;  /* GRU: Rb of the h gate (H) */
    const float *peep; /* LSTM: P (3H: i o f), zeros when absent */
  } d[2];
} kn_rnn_weights;

/* Floats of packed memory for these sizes (64-byte aligned start). */
size_t kn_rnn_weights_floats(kn_isa isa, int kind, int dirs, int64_t input, int64_t hidden,
                             bool gru_split);
/* Points `out` into packed memory `mem` (layout fixed by the sizes alone,
 * so a block packed once, saved and mapped again is found the same way);
 * peep: whether P was given. */
void kn_rnn_weights_map(kn_isa isa, int kind, int dirs, int64_t input, int64_t hidden,
                        bool gru_split, bool peep, const float *mem, kn_rnn_weights *out);
/* Packs W [dirs, G*H, input], R [dirs, G*H, H], B [dirs, 2*G*H] or NULL,
 * P [dirs, 3H] or NULL (fp32, ONNX layouts) into mem and maps `out`. */
void kn_rnn_weights_pack(kn_isa isa, int kind, int dirs, int64_t input, int64_t hidden,
                         bool gru_split, const float *W, const float *R, const float *B,
                         const float *P, float *mem, kn_rnn_weights *out);

typedef struct kn_rnn_args {
  int64_t seq, batch;
  bool reverse;      /* one direction, run backwards */
  bool input_forget; /* LSTM: f = 1 - i */
  bool lbr;          /* GRU: linear_before_reset */
  const float *x;    /* [seq, batch, input] */
  const float *h0;   /* [dirs, batch, H] or NULL (zeros) */
  const float *c0;   /* LSTM: [dirs, batch, H] or NULL */
  float *y;          /* [seq, dirs, batch, H] or NULL */
  float *yh, *yc;    /* [dirs, batch, H] or NULL */
} kn_rnn_args;

/* Scratch bytes kn_f32_rnn needs on `threads` threads.  caches: the
 * capacities the products' GEMM blocking comes from (kn_sgemm_blocking_of;
 * NULL: the common sizes); pass the run the same. */
size_t kn_rnn_scratch_size(kn_isa isa, const kn_rnn_args *a, const kn_rnn_weights *w,
                           int32_t threads, const kn_caches *caches);
void kn_f32_rnn(kn_isa isa, kn_pool *pool, const kn_rnn_args *a, const kn_rnn_weights *w,
                void *scratch, const kn_caches *caches);

#endif
