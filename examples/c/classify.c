/* classify MODEL|ENGINE [INPUT.npy|INPUT.pb] [--threads N]
 *
 * Classifies one image tensor with kiln's C API: loads an ONNX model (built
 * with the default options, as `kiln run` does) or an engine file, reads
 * the input tensor (.npy or ONNX TensorProto .pb) or makes a random one of
 * the input's shape (dynamic dims: batch 1, others 224), runs, and prints
 * the top-5 classes of the first row of output 0 with their softmax
 * probabilities.  Exit 1 with kiln's one-line message on any error. */
#include <kiln.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const kn_error *err) {
  fprintf(stderr, "classify: %s\n", err->msg);
  return 1;
}

int main(int argc, char **argv) {
  const char *model_path = NULL, *input_path = NULL;
  int32_t threads = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!model_path) model_path = argv[i];
    else if (!input_path) input_path = argv[i];
    else {
      fprintf(stderr, "usage: classify MODEL|ENGINE [INPUT.npy|INPUT.pb] [--threads N]\n");
      return 2;
    }
  }
  if (!model_path) {
    fprintf(stderr, "usage: classify MODEL|ENGINE [INPUT.npy|INPUT.pb] [--threads N]\n");
    return 2;
  }

  kn_error err = {0};
  kn_model *model = NULL;
  kn_context *ctx = NULL;
  kn_tensor input = {0};
  int rc = 1;
  if (kn_model_load(model_path, &model, &err)) return fail(&err);
  if (kn_model_format_version(model) == 0) { /* an ONNX model: optimize it */
    kn_build_options bo;
    kn_build_options_init(&bo);
    if (kn_model_build(model, &bo, &err)) goto error;
  }
  if (kn_model_input_count(model) != 1) {
    fprintf(stderr, "classify: %s has %d inputs; expected one image tensor\n", model_path,
            kn_model_input_count(model));
    goto done;
  }
  kn_value_info in;
  if (kn_model_input_info(model, 0, &in)) goto done;
  if (input_path) {
    if (kn_tensor_read_file(input_path, &input, NULL, &err)) goto error;
  } else {
    int64_t dims[KN_MAX_RANK];
    for (int32_t d = 0; d < in.rank; d++) dims[d] = in.dims[d] >= 0 ? in.dims[d] : d ? 224 : 1;
    if (kn_tensor_alloc(&input, KN_DTYPE_F32, in.rank, dims, &err)) goto error;
    float *x = input.data;
    uint64_t s = 88172645463325252ull; /* xorshift64: the same input every time */
    for (int64_t i = 0; i < kn_tensor_numel(&input); i++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
  }
  if (kn_context_create(model, &ctx, &err)) goto error;
  if (threads > 0 && kn_context_set_threads(ctx, threads, &err)) goto error;
  if (kn_context_set_input(ctx, 0, &input, &err) || kn_context_run(ctx, &err)) goto error;

  const kn_tensor *out = kn_context_output(ctx, 0);
  if (!out || out->dtype != KN_DTYPE_F32 || out->rank < 1) {
    fprintf(stderr, "classify: output 0 is not a float32 tensor of scores\n");
    goto done;
  }
  int64_t classes = out->dims[out->rank - 1];
  const float *scores = out->data;
  double max = -INFINITY, sum = 0;
  for (int64_t c = 0; c < classes; c++) max = scores[c] > max ? scores[c] : max;
  for (int64_t c = 0; c < classes; c++) sum += exp(scores[c] - max);
  printf("%s: %lld classes\n", model_path, (long long)classes);
  char *taken = calloc((size_t)classes, 1);
  if (!taken) goto done;
  for (int k = 0; k < 5 && k < classes; k++) {
    int64_t best = -1;
    for (int64_t c = 0; c < classes; c++)
      if (!taken[c] && (best < 0 || scores[c] > scores[best])) best = c;
    taken[best] = 1;
    printf("%d. class %lld  score %.5f  p %.5f\n", k + 1, (long long)best, scores[best],
           exp(scores[best] - max) / sum);
  }
  free(taken);
  rc = 0;
  goto done;
error:
  rc = fail(&err);
done:
  kn_tensor_release(&input);
  kn_context_free(ctx);
  kn_model_free(model);
  return rc;
}
