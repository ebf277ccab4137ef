/* The recurrent family (src/ops/rnn.c): what its tactics
 * (src/tactics/rnn_tactics.c) share with the reference ops. */
#ifndef KN_OPS_RNN_H
#define KN_OPS_RNN_H

#include "op.h"

/* The op a node is (the `kind` arguments below). */
enum { KN_RNN_OP_RNN, KN_RNN_OP_GRU, KN_RNN_OP_LSTM };

typedef enum kn_rnn_act_kind {
  KN_RNN_ACT_RELU,
  KN_RNN_ACT_TANH,
  KN_RNN_ACT_SIGMOID,
  KN_RNN_ACT_AFFINE,
  KN_RNN_ACT_LEAKYRELU,
  KN_RNN_ACT_THRESHOLDEDRELU,
  KN_RNN_ACT_SCALEDTANH,
  KN_RNN_ACT_HARDSIGMOID,
  KN_RNN_ACT_ELU,
  KN_RNN_ACT_SOFTSIGN,
  KN_RNN_ACT_SOFTPLUS,
} kn_rnn_act_kind;

typedef struct kn_rnn_act {
  kn_rnn_act_kind kind;
  float alpha, beta;
} kn_rnn_act;

/* A layer's attributes. */
typedef struct kn_rnn_params {
  int kind;          /* KN_RNN_OP_* */
  int gates;         /* G */
  int n_acts;        /* activations per direction */
  int dirs;          /* 1 or 2 */
  bool reverse;      /* direction == "reverse" */
  int64_t hidden;    /* H, -1 when unknown (static inference) */
  int layout;
  float clip;        /* <= 0: no clipping */
  bool input_forget; /* LSTM */
  bool linear_before_reset; /* GRU */
  kn_rnn_act act[2][3];
} kn_rnn_params;

typedef struct kn_rnn_dims {
  int64_t seq, batch, input, hidden;
} kn_rnn_dims;

/* The attributes of ctx's node (a layer of `kind`), checked. */
kn_status kn_rnn_parse(kn_op_ctx *ctx, int kind, kn_rnn_params *p) KN_WUR;
/* Attributes, input shapes checked and the outputs' types set (what infer
 * does, and each run first). */
kn_status kn_rnn_check(kn_op_ctx *ctx, int kind, kn_rnn_params *p, kn_rnn_dims *dm) KN_WUR;

#endif
