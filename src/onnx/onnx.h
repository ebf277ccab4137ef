/* The ONNX importer's interface to the rest of kiln.  Protobuf types never
 * appear here: everything comes out as kiln IR, tensors or slots. */
#ifndef KN_ONNX_H
#define KN_ONNX_H

#include "core/core.h"
#include "core/slot.h"
#include "ir/ir.h"

/* Parse a serialized ModelProto into IR (nodes resolved to ops, sorted,
 * subgraphs linked).  `base_dir` resolves external data (NULL: refuse it);
 * `label` names the model in messages. */
kn_status kn_onnx_import(const void *buf, size_t size, const char *base_dir,
                         const char *label, kn_ir_model **out,
                         kn_error *err) KN_WUR;
/* The same, taking `buf` (malloc'd, as kn_read_whole_file makes it): it is
 * freed once the protobuf is parsed, before the constants are converted,
 * so the file's bytes are not held beside them. */
kn_status kn_onnx_import_take(void *buf, size_t size, const char *base_dir,
                              const char *label, kn_ir_model **out,
                              kn_error *err) KN_WUR;

/* Read a whole file into memory (size limit 4 GiB). */
kn_status kn_read_whole_file(const char *path, void **buf, size_t *size,
                             kn_error *err) KN_WUR;

/* Decode a serialized TensorProto from memory (no external data). */
kn_status kn_onnx_tensor_decode(const void *buf, size_t size, const char *label,
                                kn_tensor *out, char **name_out,
                                kn_error *err) KN_WUR;
/* Read a test-data file holding a TensorProto, SequenceProto or
 * OptionalProto, as told by `kind`/`optional` (the model's type for it). */
kn_status kn_onnx_read_slot_file(const char *path, kn_kind kind, bool optional,
                                 kn_slot *out, kn_error *err) KN_WUR;

/* .npy (NumPy format 1.0/2.0, little-endian, C order) */
kn_status kn_npy_decode(const void *buf, size_t size, const char *label,
                        kn_tensor *out, kn_error *err) KN_WUR;

/* Encode a tensor as a TensorProto (raw_data; string_data for strings).
 * *out is malloc'd. */
kn_status kn_onnx_tensor_encode(const kn_tensor *t, const char *name,
                                void **out, size_t *size, kn_error *err) KN_WUR;

/* The Q/DQ rewrite of a serialized ModelProto behind kn_quantize_onnx_file
 * (kiln.h): *out (malloc'd, *out_size bytes) is the Q/DQ model; notes
 * and the report as documented there; `label` names the model in
 * messages. */
kn_status kn_onnx_write_qdq(const void *buf, size_t size, const char *label,
                            const kn_calibration *cal, kn_note_fn note, void *note_arg,
                            kn_quantize_report *report, void **out, size_t *out_size,
                            kn_error *err) KN_WUR;
#endif
