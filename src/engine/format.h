/*
 * kiln engine file format, version 3 (a reader also reads versions 1, without
 * PACKED, and 2, without step precisions)
 *
 * An engine is one file.  Every integer is little-endian and fixed-width
 * (u8/u32/i32/u64/i64; f32 is an IEEE-754 binary32 in its little-endian bit
 * pattern); nothing holds a pointer.  The same model, options and tactic
 * choices always give the same bytes: nothing depends on time, paths or
 * memory addresses, and every padding byte is zero.  (Tactics chosen by
 * timing may differ between builds; --tactics heuristic, or a timing cache
 * that holds every step, fixes them.)
 *
 * 1. Header (96 bytes, at offset 0)
 *      0  u8[8]   magic "KILNENG\0"
 *      8  u32     format version (1).  A reader refuses a newer version
 *                 before reading anything else.
 *     12  u32     header bytes (96)
 *     16  u8[32]  kiln version that wrote the file ("0.1.0"), NUL-padded
 *     48  u64     CPU features the engine's tactics need: bit i set = the
 *                 feature of bit i in src/core/cpu.h (0 sse4.2, 1 avx, 2 avx2,
 *                 3 fma, 4 f16c, 5 avx512f, 6 avx512bw, 7 avx512vl,
 *                 8 avx512vnni, 9 avx512bf16, 10 amx-tile, 11 amx-int8,
 *                 12 amx-bf16); a loader refuses the file on a machine that
 *                 lacks any of them, and any bit it does not know
 *     56  u64     file size in bytes
 *     64  u32     config bytes: size of the build configuration (2.), a
 *                 multiple of 8
 *     68  u32     section count
 *     72  u64     section table offset (= 96 + config bytes)
 *     80  u64     header checksum: xxhash64 (seed 0) of bytes
 *                 [0, table offset + 32 * section count) with these 8 bytes
 *                 read as zero
 *     88  u64     reserved (0)
 *
 * 2. Build configuration (at offset 96)
 *    u32 entry count, then per entry: u32 key length, key bytes, u32 value
 *    length, value bytes; zero-padded to a multiple of 8.  Keys, in this
 *    order: "precision" (e.g. "fp32"), "shape" (one per --shape, as given:
 *    "NAME=1x3x224x224"), "profile" (one per --profile: "NAME=MIN:OPT:MAX"),
 *    "disable_pass" (one per disabled pass), "workspace" (decimal bytes, 0 =
 *    no cap), then "machine" (at most once): the machine description the
 *    engine was built for, as compact JSON (docs/MACHINE.md); its
 *    capacities chose the steps' tiles; then "decision" (one per choice
 *    the builder made: a tactic timed, "STEP: TACTIC 216.7 us;
 *    conv_igemm_nhwc 430.2 us", or a fusion with its predicted saving).  A reader skips keys it does not know.
 *
 * 3. Section table (at the table offset): one 32-byte entry per section
 *      0  u32  type: 1 GRAPH, 2 TENSORS, 3 PLAN, 4 WEIGHTS, 5 PACKED
 *      4  u32  reserved (0)
 *      8  u64  offset of the section from the file start (a multiple of 64)
 *     16  u64  size in bytes
 *     24  u64  xxhash64 (seed 0) of the section's bytes
 *    GRAPH, TENSORS and WEIGHTS appear exactly once, PLAN and PACKED (from
 *    version 2) at most once.  A writer places them after the table in the
 *    order GRAPH, TENSORS, PLAN, WEIGHTS, PACKED; a reader requires each to
 *    start after the table, within the file.
 *
 * 4. GRAPH section: the optimized model.
 *    A string is u32 length + bytes (no NUL); an optional string is the same
 *    with length 0xFFFFFFFF meaning absent.
 *      i64 ir_version
 *      u32 opset count, per opset: string domain, i64 version
 *      u32 graph count (the top-level graph and every subgraph)
 *      graph (the top-level one)
 *    A graph is:
 *      string name
 *      u32 value count, per value:
 *        string name; u8 kind (0 unknown, 1 tensor, 2 sequence);
 *        u8 optional; u8 flags (1 graph input, 2 graph output); u8 0;
 *        i32 dtype (ONNX TensorProto.DataType numbers, 0 unknown);
 *        i32 rank (-1 unknown); i64 dims[rank] (-1 unknown);
 *        optional string dim_param[rank];
 *        i32 outer: index of the value in the enclosing graph that this
 *        subgraph value refers to, or -1
 *      u32 input count, i32 value index per input (initializers included)
 *      u32 output count, i32 value index per output
 *      u32 node count, per node (in execution order):
 *        string name; optional string covers (the ONNX nodes a fused step
 *        replaces, comma-separated); u32 tactic id (the kernel that runs the
 *        step: src/ops/tactics.inc; 0 = reference); u32 precision (from
 *        version 3: kiln.h kn_precision, 0 fp32 .. 5 int8-weights; int8
 *        steps keep their input's quantization in the attributes
 *        kiln.a_scale and kiln.a_zero); string op_type; string domain;
 *        u32 input count, i32 value index each (-1: omitted);
 *        u32 output count, i32 value index each (-1: omitted);
 *        u32 attribute count, per attribute:
 *          string name; u32 type (ONNX AttributeProto.AttributeType);
 *          f32 f; i64 i (FLOAT and INT values; TYPE_PROTO keeps the dtype
 *          in i and the kind in f); then by type:
 *            STRING: string; TENSOR, SPARSE_TENSOR: u32 tensor index (5.);
 *            GRAPH: a graph; FLOATS: u32 n, f32[n]; INTS: u32 n, i64[n];
 *            STRINGS: u32 n, string[n]; TENSORS: u32 n, u32 tensor index[n];
 *            GRAPHS: u32 n, graph[n]; other types: nothing.
 *    Graphs are numbered in the order they appear (the top-level graph is 0,
 *    then each subgraph as its attribute is reached, depth first).
 *
 * 5. TENSORS section: the tensor table.
 *      u32 count, u32 reserved (0), then per tensor 96 bytes:
 *        0  u32  graph number (4.)
 *        4  i32  value index in that graph whose constant this is, or -1
 *                for a tensor attribute
 *        8  i32  dtype
 *       12  i32  rank (0..8)
 *       16  i64  dims[8] (unused ones 0)
 *       80  u64  offset of its bytes from the start of WEIGHTS (a multiple
 *                of 64)
 *       88  u64  size in bytes
 *    Tensors come in the order the GRAPH section reaches them: a graph's
 *    value constants by value index, then its nodes' tensor attributes and
 *    subgraphs in node order.
 *
 * 6. PLAN section (optional): the memory plan of the top-level graph
 *    (src/plan/plan.h).
 *      u32 tensor count, u32 alignment, u64 arena bytes, u64 lower bound
 *      bytes, u64 naive bytes, then per tensor 32 bytes:
 *        i32 value, i32 first step, i32 last step, i32 in-place-of value
 *        (-1 none), u64 bytes, i64 arena offset (-1: not in the arena)
 *
 * 7. WEIGHTS section: every tensor's bytes, each starting at a multiple of
 *    64 from the file start, in the order of the tensor table.  Numbers are
 *    raw little-endian elements in row-major order, exactly as kernels read
 *    them, so a loader maps the file read-only and points constants into the
 *    mapping without copying.  A string tensor is, per element, u32 length +
 *    bytes.
 *
 * 8. PACKED section (optional, version 2): weights prepacked at build time
 *    for the steps' fast kernels (their tactics' `pack`), stored as made so
 *    a loader maps them in place and never repacks.
 *      u32 count, u32 reserved (0), then per entry 32 bytes:
 *        0  u32  step: node index in the top-level graph
 *        4  i32  ISA the block was packed for (src/kernels/kernels.h:
 *                0 portable, 1 avx2, 2 avx512)
 *        8  u32  tactic of that step when packed (must equal the step's)
 *       12  u32  reserved (0)
 *       16  u64  offset of the block from the section start (a multiple of
 *                64; the section starts 64-byte aligned)
 *       24  u64  size of the block in bytes
 *    Each block is relocatable (offsets, no pointers) and starts with its
 *    own size (u64), ISA (i32) and tactic (i32), which must agree with the
 *    entry; the rest is the op's (src/ops).  A loader on a machine whose
 *    best ISA differs ignores the blocks and packs the original weights,
 *    which the file always keeps in WEIGHTS.
 *
 * A loader checks, once, before building anything: magic, version, header
 * checksum, every section in bounds ("truncated: section X needs bytes A..B
 * but the file has N"), CPU features, every section checksum, then every
 * count, offset, size and index while it decodes.
 */
#ifndef KN_ENGINE_FORMAT_H
#define KN_ENGINE_FORMAT_H

#include "ir/ir.h"
#include "plan/plan.h"

#define KN_ENGINE_MAGIC "KILNENG"           /* 8 bytes with its NUL */
#define KN_ENGINE_FORMAT_VERSION 3u
#define KN_ENGINE_HEADER_BYTES 96u
#define KN_ENGINE_ALIGN 64u

typedef enum kn_engine_section {
  KN_ENGINE_SECTION_GRAPH = 1,
  KN_ENGINE_SECTION_TENSORS = 2,
  KN_ENGINE_SECTION_PLAN = 3,
  KN_ENGINE_SECTION_WEIGHTS = 4,
  KN_ENGINE_SECTION_PACKED = 5,
} kn_engine_section;

/* One prepacked block (8. above). */
typedef struct kn_engine_packed {
  int32_t node;   /* top-level node index */
  int32_t isa;
  int32_t tactic;
  const void *data; /* starts with u64 size, i32 isa, i32 tactic */
  uint64_t bytes;
} kn_engine_packed;

/* How the engine was built (2. above).  Every pointer may be NULL. */
typedef struct kn_engine_config {
  const char *precision;              /* NULL: "fp32" */
  int32_t n_shapes;
  const char *const *shapes;          /* "NAME=1x3x224x224", as given */
  int32_t n_profiles;
  const char *const *profiles;        /* "NAME=MIN:OPT:MAX", as given */
  int32_t n_disabled_passes;
  const char *const *disabled_passes;
  int32_t n_fixed;
  const char *const *fixed;           /* "NAME=VALUES", pinned inputs, as given */
  uint64_t workspace_bytes;           /* 0: no cap */
  const char *machine_json;           /* NULL: no "machine" entry */
  const char *const *decisions;       /* "decision" entries */
  int32_t n_decisions;
  uint64_t cpu_features;              /* features the chosen tactics need
                                         (KN_CPU_BIT), on top of the build's
                                         own (kn_cpu_build_features) */
  int32_t n_packed;                   /* prepacked weights (PACKED) */
  const kn_engine_packed *packed;
  const kn_spill *spill;              /* a build's spill file: a constant
                                         in it leaves the resident set
                                         once hashed or written */
} kn_engine_config;

/* What a read found besides the model (kn_engine_info_free frees it). */
typedef struct kn_engine_info {
  uint32_t format_version;
  char kiln_version[33];
  uint64_t cpu_features;
  uint64_t file_bytes;
  uint64_t graph_bytes, tensors_bytes, plan_bytes, weights_bytes;
  int32_t n_tensors;  /* entries of the tensor table */
  bool has_plan;
  int32_t n_config;   /* build configuration, in file order */
  char **config_keys;
  char **config_values;
  /* PACKED blocks, checked against the graph; data points into the
   * mapping (kn_engine_read only: a buffer read drops them) */
  int32_t n_packed;
  kn_engine_packed *packed;
  uint64_t packed_bytes;
} kn_engine_info;

/* Write model m (its top-level graph topologically sorted, no dead nodes)
 * and its memory plan (NULL: no PLAN section) to `path`.  The file is
 * written beside `path` and renamed over it once complete, so a reader
 * (or a process that has the old engine mapped) never sees half a file.
 * cfg may be NULL (defaults). */
kn_status kn_engine_write(const kn_ir_model *m, const kn_mem_plan *plan,
                          const kn_engine_config *cfg, const char *path,
                          kn_error *err) KN_WUR;

/* Map the engine at `path` read-only, verify it (see the list above) and
 * rebuild its model: numeric constants point into the mapping (owned = 0;
 * the model owns the mapping and unmaps it in kn_ir_model_free); string
 * constants are copied.  Ops are not resolved: call kn_ops_prepare next.
 * plan_out (may be NULL) receives the plan (n_tensors 0 when the file has
 * none; free plan_out->tensors with free()).  info_out (may be NULL)
 * receives the header's facts.  Failures are one line naming the file:
 * KN_ERR_IO (cannot open), KN_ERR_PARSE (not an engine, truncated,
 * corrupted, inconsistent), KN_ERR_UNSUPPORTED (newer format, missing CPU
 * features). */
kn_status kn_engine_read(const char *path, kn_ir_model **model_out,
                         kn_mem_plan *plan_out, kn_engine_info *info_out,
                         kn_error *err) KN_WUR;

/* Same from memory; every constant is copied, so `data` may be freed
 * after the call.  `label` names the engine in messages. */
kn_status kn_engine_read_buffer(const void *data, size_t size, const char *label,
                                kn_ir_model **model_out, kn_mem_plan *plan_out,
                                kn_engine_info *info_out, kn_error *err) KN_WUR;

void kn_engine_info_free(kn_engine_info *info);

/* True when `path` is a readable file that starts with the engine magic. */
bool kn_engine_is_file(const char *path);

/* Recompute, in place, every checksum of the engine image in buf (the
 * section checksums, then the header's), as far as its header and table
 * are in bounds.  For tests and the fuzzer: it lets a deliberately altered
 * file reach the decoder's structural checks.  False when the header or
 * table cannot be located. */
bool kn_engine_reseal(void *buf, size_t size);

#endif
