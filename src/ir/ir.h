/*
 * kiln's graph IR.  A graph owns its values and nodes; values are referred
 * to by index.  Subgraphs (If/Loop/Scan bodies) are graphs whose `parent`
 * is the enclosing graph; a value they use from an enclosing scope is a
 * local value with `outer` set to the value's index in the parent graph.
 */
#ifndef KN_IR_H
#define KN_IR_H

#include "core/core.h"
#include "core/slot.h"

typedef struct kn_graph kn_graph;
struct kn_op_def;
struct kn_op_tactics;

/* Attribute types, numbered as ONNX's AttributeProto.AttributeType. */
typedef enum kn_attr_type {
  KN_ATTR_UNDEFINED = 0,
  KN_ATTR_FLOAT = 1,
  KN_ATTR_INT = 2,
  KN_ATTR_STRING = 3,
  KN_ATTR_TENSOR = 4,
  KN_ATTR_GRAPH = 5,
  KN_ATTR_FLOATS = 6,
  KN_ATTR_INTS = 7,
  KN_ATTR_STRINGS = 8,
  KN_ATTR_TENSORS = 9,
  KN_ATTR_GRAPHS = 10,
  KN_ATTR_SPARSE_TENSOR = 11, /* densified at import: read it as `t` */
  KN_ATTR_TYPE_PROTO = 13,    /* only the element dtype is kept, in `i` */
} kn_attr_type;

typedef struct kn_attr {
  char *name;
  kn_attr_type type;
  float f;
  int64_t i;
  char *s; /* NUL-terminated; s_len excludes the NUL (bytes may hold NULs) */
  size_t s_len;
  kn_tensor t;
  kn_graph *g;
  int32_t n; /* element count of the list below that matches `type` */
  float *floats;
  int64_t *ints;
  char **strings;
  kn_tensor *tensors;
  kn_graph **graphs;
} kn_attr;

/* Type of a value as known before running. */
typedef struct kn_type {
  kn_kind kind;     /* TENSOR, SEQUENCE, or NONE when not known */
  bool optional;    /* an ONNX optional(...) type */
  kn_dtype dtype;   /* tensor dtype or sequence element dtype; 0 unknown */
  int32_t rank;     /* -1 unknown (for sequences: element rank) */
  int64_t dims[KN_MAX_RANK]; /* -1 unknown */
} kn_type;

typedef struct kn_value {
  char *name;
  kn_type type;
  char *dim_params[KN_MAX_RANK]; /* symbolic names of graph input dims */
  kn_tensor *constant;           /* initializer or folded constant, owned */
  int32_t producer;              /* node index, or -1 */
  int32_t outer;                 /* index in parent graph, or -1 */
  bool is_input;                 /* listed in graph.input */
  bool is_output;
} kn_value;

/* The int8 quantization a pass or the builder gives a step: typed fields,
 * read and set through the accessors below (edit.c).  Engine files store
 * them as the node attributes kiln.a_scale, kiln.a_zero, kiln.w_scale and
 * kiln.qdq (src/engine/format.c converts both ways). */
typedef struct kn_node_quant {
  bool from_qdq;        /* the qdq pass took it from the model's Q/DQ pair:
                           the builder keeps that quantization */
  bool has_input;       /* input_scale / input_zero are set */
  float input_scale;    /* u8 quantization of input 0: x = (q - zero) * scale */
  int32_t input_zero;   /* 0..255 */
  int32_t n_weight_scales; /* per-output-channel weight scales (0: none) */
  float *weight_scales;    /* owned */
} kn_node_quant;

typedef struct kn_node {
  char *name;    /* never NULL: import names unnamed nodes "<op>_<index>" */
  char *op_type;
  char *domain;  /* "" for the default domain */
  int32_t n_inputs, *inputs;   /* value indices, -1 for an omitted input */
  int32_t n_outputs, *outputs; /* value indices, -1 for an omitted output */
  int32_t n_attrs;
  kn_attr *attrs;
  const struct kn_op_def *op; /* resolved at import */
  int32_t opset;              /* version of the node's domain in the model */
  bool dead;                  /* removed by a pass; dropped by kn_graph_compact */
  char *covers;               /* fused nodes: the original ONNX node names they
                                 replace, comma-separated; NULL: just `name` */
  int32_t tactic;             /* kernel implementation (src/ops/tactics.inc) */
  const struct kn_op_tactics *impl; /* the op's fast paths (src/tactics), set
                                       with the tactic (kn_tactics_select)
                                       and at engine load; NULL: none */
  int32_t precision;          /* kn_precision (kiln.h) the step runs in; int8
                                 steps carry their input's quantization in
                                 `quant` */
  kn_node_quant quant;
} kn_node;

struct kn_graph {
  char *name;
  kn_graph *parent;
  int32_t n_values, cap_values;
  kn_value *values;
  int32_t n_nodes, cap_nodes;
  kn_node *nodes;           /* topologically sorted after kn_graph_finish */
  int32_t n_inputs, *inputs;    /* every graph input, initializers included */
  int32_t n_outputs, *outputs;
  /* name -> value index (open addressing) */
  int32_t map_cap, *map;
};

typedef struct kn_opset {
  char *domain;
  int64_t version;
} kn_opset;

typedef struct kn_ir_model {
  kn_graph *graph;
  int64_t ir_version;
  int32_t n_opsets;
  kn_opset *opsets;
  char *label; /* the file name used in messages */
  /* A model read from an engine file: its constants' data point into this
   * read-only mapping of the file (kn_engine_read), unmapped by
   * kn_ir_model_free after the graph.  NULL otherwise. */
  void *mapping;
  size_t mapping_size;
} kn_ir_model;

kn_graph *kn_graph_new(kn_graph *parent);
void kn_graph_free(kn_graph *g);
void kn_ir_model_free(kn_ir_model *m);
void kn_attr_clear(kn_attr *a);

/* Index of the value named `name` in g only, or -1. */
int32_t kn_graph_find(const kn_graph *g, const char *name);
/* Add a value (name must be new in g); returns its index or -1 on OOM. */
int32_t kn_graph_add_value(kn_graph *g, const char *name);
/* Find `name` in g, else in an enclosing graph (adding an outer reference
 * value to g and any graph in between); -1 when no scope has it. */
int32_t kn_graph_resolve(kn_graph *g, const char *name);
/* Rebuild the name lookup after values were renamed. */
void kn_graph_reindex(kn_graph *g);
/* Append a node; returns its pointer (zeroed) or NULL on OOM. */
kn_node *kn_graph_add_node(kn_graph *g);

/* Sort nodes topologically, fill producers; fails on cycles, on a value
 * produced twice and on a node input that nothing produces. */
kn_status kn_graph_finish(kn_graph *g, const char *label, kn_error *err) KN_WUR;
/* kn_graph_finish, except that a node order that is topological already is
 * kept as it is (engine files: a memory plan's step indices refer to the
 * order the engine was built with). */
kn_status kn_graph_finish_ordered(kn_graph *g, const char *label, kn_error *err) KN_WUR;

/* Calls fn(v, node, arg) for each value of g that node `n` (index `node`)
 * reads: explicit inputs and values its subgraphs use from g's scope. */
void kn_node_foreach_read(const kn_graph *g, const kn_node *n,
                          void (*fn)(int32_t v, int32_t node, void *arg),
                          int32_t node, void *arg);

/* ---- editing (src/ir/edit.c), for the optimization passes -------------
 * Passes edit a graph in place: add values and nodes, point uses at other
 * values, mark nodes dead, then kn_graph_compact() drops dead nodes and
 * unused values' producers and re-sorts.  Node pointers are invalidated
 * by kn_graph_add_node and kn_graph_compact; keep indices. */

/* A value name not yet used in g or any graph it encloses' scope chain,
 * made from `hint`. Returns a malloc'd string. */
char *kn_graph_unique_name(const kn_graph *g, const char *hint);
/* Add a constant value (takes ownership of *t's data: *t is cleared).
 * Returns its index, or -1 on OOM. */
int32_t kn_graph_add_constant(kn_graph *g, const char *hint, kn_tensor *t);
/* Add a value with a fresh name made from hint; -1 on OOM. */
int32_t kn_graph_add_fresh_value(kn_graph *g, const char *hint);
/* Append a node (op resolution happens in kn_ops_prepare); returns its
 * index or -1 on OOM.  inputs/outputs are copied. */
int32_t kn_graph_new_node(kn_graph *g, const char *op_type, const char *domain,
                          const char *name, int32_t n_in, const int32_t *inputs,
                          int32_t n_out, const int32_t *outputs);
/* Attributes on a node (replacing one of the same name). */
bool kn_node_set_int(kn_node *n, const char *name, int64_t v) KN_WUR;
bool kn_node_set_float(kn_node *n, const char *name, float v) KN_WUR;
bool kn_node_set_string(kn_node *n, const char *name, const char *v) KN_WUR;
bool kn_node_set_ints(kn_node *n, const char *name, const int64_t *v,
                      int32_t count) KN_WUR;
bool kn_node_set_floats(kn_node *n, const char *name, const float *v,
                        int32_t count) KN_WUR;
/* Record that node `dst` now also computes what `src` did (for fused
 * steps: inspect lists the ONNX nodes each step covers). */
bool kn_node_add_covers(kn_node *dst, const kn_node *src) KN_WUR;
/* Copy every attribute of src onto dst (deep copy, subgraphs excluded),
 * and its quantization (kn_node_copy_quant). */
bool kn_node_copy_attrs(kn_node *dst, const kn_node *src) KN_WUR;

/* The int8 quantization of a step (kn_node_quant). */
/* Sets input 0's u8 quantization; false (n unchanged) unless scale is
 * positive and finite and zero in 0..255. */
bool kn_node_set_input_quant(kn_node *n, float scale, int32_t zero) KN_WUR;
/* input 0's u8 quantization; false when n has none. */
bool kn_node_input_quant(const kn_node *n, float *scale, int32_t *zero);
/* Sets per-output-channel weight scales (copied); false when out of memory. */
bool kn_node_set_weight_scales(kn_node *n, const float *scales, int32_t count) KN_WUR;
/* The weight scales when n has exactly `channels` of them, else NULL. */
const float *kn_node_weight_scales(const kn_node *n, int64_t channels);
/* Copies src's quantization onto dst (replacing dst's); false on OOM. */
bool kn_node_copy_quant(kn_node *dst, const kn_node *src) KN_WUR;
/* Frees what n's quantization owns and clears it. */
void kn_node_quant_clear(kn_node *n);

/* Make every reader of value `from` (node inputs, subgraph outer refs)
 * read `to` instead.  When `from` is a graph output, `to` takes its place
 * and its name (the graph's interface does not change). */
void kn_graph_replace_value(kn_graph *g, int32_t from, int32_t to);
/* Whether kn_graph_replace_value(g, from, to) keeps the graph's interface:
 * false when `from` is a graph output and `to` cannot take its name (a
 * graph input, a constant, an outer value or another output). */
bool kn_graph_can_replace(const kn_graph *g, int32_t from, int32_t to);
/* Readers of each value: counts[v] = node inputs + subgraph outer refs +
 * graph outputs (counts has g->n_values entries). */
void kn_graph_use_counts(const kn_graph *g, int32_t *counts);
/* Drop dead nodes, then re-sort and refresh producers. */
kn_status kn_graph_compact(kn_graph *g, const char *label, kn_error *err) KN_WUR;
/* The same, keeping the node order when it is a topological order already
 * (a schedule chosen on purpose, such as the memory planner's bands run one
 * after another); otherwise as kn_graph_compact. */
kn_status kn_graph_compact_ordered(kn_graph *g, const char *label, kn_error *err) KN_WUR;

/* Opset version of `domain` ("" or "ai.onnx" = default) in the model, 0 if absent. */
int64_t kn_ir_model_opset(const kn_ir_model *m, const char *domain);

/* Attribute lookup on a node: NULL when absent. */
const kn_attr *kn_node_attr(const kn_node *n, const char *name);

#endif
