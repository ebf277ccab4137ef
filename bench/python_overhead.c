/* python_overhead MODEL RUNS ROUNDS: the C side of bench/python_overhead.py.
 * Loads and builds MODEL (an ONNX model with fixed input shapes), makes one
 * context on 1 thread and zero-filled inputs, then ROUNDS times runs RUNS
 * iterations of kn_context_set_input (every input) + kn_context_run, and prints
 * each round's microseconds per iteration on one line. */
#define _POSIX_C_SOURCE 200809L
#include <kiln.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: python_overhead MODEL RUNS ROUNDS\n");
    return 2;
  }
  long runs = atol(argv[2]), rounds = atol(argv[3]);
  kn_error err = {0};
  kn_model *m = NULL;
  kn_context *c = NULL;
  kn_build_options bo;
  kn_build_options_init(&bo);
  if (kn_model_load(argv[1], &m, &err) || kn_model_build(m, &bo, &err) ||
      kn_context_create(m, &c, &err) || kn_context_set_threads(c, 1, &err)) {
    fprintf(stderr, "python_overhead: %s\n", err.msg);
    return 1;
  }
  int32_t nin = kn_model_input_count(m);
  kn_tensor in[8] = {0};
  for (int32_t i = 0; i < nin && i < 8; i++) {
    kn_value_info vi;
    if (kn_model_input_info(m, i, &vi) ||
        kn_tensor_alloc(&in[i], vi.dtype, vi.rank, vi.dims, &err)) {
      fprintf(stderr, "python_overhead: input %d: %s\n", i, err.msg);
      return 1;
    }
  }
  for (long r = 0; r < rounds; r++) {
    double t0 = now_s();
    for (long k = 0; k < runs; k++) {
      for (int32_t i = 0; i < nin; i++)
        if (kn_context_set_input(c, i, &in[i], &err)) goto fail;
      if (kn_context_run(c, &err)) goto fail;
    }
    printf("%s%.3f", r ? " " : "", (now_s() - t0) / (double)runs * 1e6);
  }
  printf("\n");
  for (int32_t i = 0; i < nin && i < 8; i++) kn_tensor_release(&in[i]);
  kn_context_free(c);
  kn_model_free(m);
  return 0;
fail:
  fprintf(stderr, "python_overhead: %s\n", err.msg);
  return 1;
}
