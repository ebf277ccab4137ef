/* Shared between the files of src/onnx only. */
#ifndef KN_ONNX_INTERNAL_H
#define KN_ONNX_INTERNAL_H

#include "onnx.h"
#include "onnx.pb-c.h"

/* Convert a TensorProto into an owned tensor.  base_dir resolves external
 * data (NULL refuses it).  `what` names the tensor in messages. */
kn_status kn_onnx_tensor_from_proto(const KnOnnx__TensorProto *tp,
                                    const char *base_dir, const char *what,
                                    kn_tensor *out, kn_error *err) KN_WUR;
kn_status kn_onnx_sparse_to_dense(const KnOnnx__SparseTensorProto *sp,
                                  const char *base_dir, const char *what,
                                  kn_tensor *out, kn_error *err) KN_WUR;
/* Refuse messages nested deeper than protobuf recursion can safely go. */
kn_status kn_onnx_check_nesting(const void *buf, size_t size,
                                const ProtobufCMessageDescriptor *desc,
                                const char *label, kn_error *err) KN_WUR;
#endif
