/*
 * Helpers shared by the pattern-recognition passes (layernorm, gelu,
 * hardswish, attention): who produces and who reads a value, constants and
 * scalars.  A pattern may only replace nodes whose intermediate results
 * nobody else reads; kn_pat_sole_reader is the check for that (a graph
 * output or a subgraph's outer reference counts as a reader, so such a
 * value never has a sole reader node).
 */
#ifndef KN_PATTERN_H
#define KN_PATTERN_H

#include "pass.h"

typedef struct kn_pat {
  kn_graph *g;
  int32_t *uses;  /* readers of each value (kn_graph_use_counts) */
  int32_t *first; /* first live node reading each value as an input, or -1 */
  int32_t n;      /* values counted */
} kn_pat;

/* Counts readers of every value of g; fails only when out of memory. */
kn_status kn_pat_init(kn_pat *p, kn_graph *g, kn_error *err) KN_WUR;
/* Recount after an edit (nodes added or marked dead, values added). */
kn_status kn_pat_refresh(kn_pat *p, kn_error *err) KN_WUR;
void kn_pat_free(kn_pat *p);

/* Node `n` is live, of the default domain and of op type `op`. */
bool kn_pat_is(const kn_node *n, const char *op);
/* Index of the live default-domain node of type `op` producing v, or -1. */
int32_t kn_pat_producer(const kn_graph *g, int32_t v, const char *op);
/* Index of the one node reading v (once), when nothing else reads v; -1
 * otherwise. */
int32_t kn_pat_sole_reader(const kn_pat *p, int32_t v);
/* Same, and that node is a default-domain `op`. */
int32_t kn_pat_sole_reader_op(const kn_pat *p, int32_t v, const char *op);
/* The distinct live nodes reading v as an input, in order, into out[0..max);
 * returns their count, or -1 when there are more than max. */
int32_t kn_pat_readers(const kn_pat *p, int32_t v, int32_t *out, int32_t max);
/* How many inputs of node n are v. */
int32_t kn_pat_reads(const kn_node *n, int32_t v);
/* Of a two-input node reading v exactly once, the other input; else -1. */
int32_t kn_pat_other(const kn_node *n, int32_t v);

/* A view of v's value when it is constant (an initializer, a folded
 * constant or a Constant node's tensor, float or int attribute). */
bool kn_pat_const(const kn_graph *g, int32_t v, kn_tensor *view);
/* v is a numeric constant of one element whose rank is at most max_rank
 * (so that broadcasting it never grows the other operand); *out its value. */
bool kn_pat_scalar(const kn_graph *g, int32_t v, int32_t max_rank, double *out);
/* a within 1e-6 relative of b (export constants such as 1/sqrt(2)). */
bool kn_pat_near(double a, double b);
/* Rank of v's static type, -1 unknown. */
int32_t kn_pat_rank(const kn_graph *g, int32_t v);
/* dtype of v's static type (0 unknown). */
kn_dtype kn_pat_dtype(const kn_graph *g, int32_t v);

/* Node n (a BatchNormalization) is an inference one: 5 inputs, no used
 * second output, not training, per-channel (spatial before opset 9); *eps
 * its epsilon.  fold_bn and channels_last share it. */
bool kn_pat_bn_inference(const kn_node *n, double *eps);
/* Channel i's scale gamma / sqrt(var + eps) of BatchNormalization
 * parameters p = {gamma, beta, mean, var}; *shift = beta - mean * scale. */
double kn_pat_bn_scale(const float *const p[4], int64_t i, double eps, double *shift);

/* Pad node n's 8 pads of a 4-D input ([begin of each axis, end of each
 * axis]), from its `pads` attribute (opsets 2 to 10) or its constant
 * input 1 (11 and later, no axes input); false when neither.  channels_last
 * and fuse_pad share it. */
bool kn_pat_pad_pads(const kn_graph *g, const kn_node *n, int64_t pads[8]);

/* Replace the pattern nodes[0..n) by one new node `op` (domain "" or
 * KN_DOMAIN) reading in[0..n_in) and writing `out` (the value the pattern's
 * last node wrote, so its readers and name stay), named after node
 * `name_from` (one of nodes[]) and covering all of them (kn_node_add_covers);
 * marks the pattern dead and recounts readers.  Returns the
 * new node's index, or -1 after failing with KN_ERR_OOM in err. */
int32_t kn_pat_replace(kn_pat *p, const int32_t *nodes, int32_t n, int32_t name_from,
                       const char *op, const char *domain, int32_t n_in, const int32_t *in,
                       int32_t out, kn_error *err);

#endif
