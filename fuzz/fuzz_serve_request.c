/* Fuzzes kiln serve's request handling below HTTP: the infer body (JSON,
 * or a JSON header plus binary tensors split at an
 * Inference-Header-Content-Length taken from the input) parsed and
 * validated against a model's metadata, the response emitted for a
 * request that passes, and config.json parsing.  Input layout: byte 0
 * picks the mode (bit 0: config.json; bit 1: binary split), bytes 1-2 the
 * header length (little endian, clamped to the body), the rest the body. */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void make_version(sv_version *v, sv_model *md) {
  memset(v, 0, sizeof *v);
  snprintf(md->name, sizeof md->name, "m");
  v->owner = md;
  v->version = 1;
  sv_config_defaults(&v->cfg);
  v->cfg.max_batch_size = 4;
  v->cfg.priority_levels = 2;
  v->batching = true;
  v->n_in = 3;
  v->in[0] = (sv_io){.name = "x", .dtype = KN_DTYPE_F32, .rank = 2, .dims = {-1, 3}};
  v->in[1] = (sv_io){.name = "ids", .dtype = KN_DTYPE_I64, .rank = 3, .dims = {-1, 2, -1}};
  v->in[2] = (sv_io){.name = "h", .dtype = KN_DTYPE_F16, .rank = 1, .dims = {-1}};
  v->n_out = 2;
  v->out[0] = (sv_io){.name = "y", .dtype = KN_DTYPE_F32, .rank = 2, .dims = {-1, 2}};
  v->out[1] = (sv_io){.name = "b", .dtype = KN_DTYPE_BOOL, .rank = 1, .dims = {-1}};
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  uint8_t mode = data[0];
  size_t hl = (size_t)data[1] | (size_t)data[2] << 8;
  const char *body = (const char *)data + 3;
  size_t n = size - 3;
  char err[1024];
  if (mode & 1) {
    sv_config c;
    sv_config_parse(body, n, "fuzz/config.json", "m", &c, err, sizeof err);
    return 0;
  }
  /* a copy of exactly n bytes, so that ASan sees any read past the body */
  char *copy = malloc(n ? n : 1);
  if (!copy) return 0;
  memcpy(copy, body, n);
  sv_model md;
  sv_version v;
  make_version(&v, &md);
  sv_request *r = calloc(1, sizeof *r);
  int code;
  int64_t header_len = (mode & 2) ? (int64_t)(hl <= n ? hl : n) : -1;
  if (r && sv_v2_parse(&v, copy, n, header_len, r, &code, err, sizeof err)) {
    /* outputs shaped as the request's batch */
    float y[8] = {0};
    uint8_t b[4] = {1, 0, 1, 0};
    kn_tensor outs[SV_MAX_IO];
    for (int32_t i = 0; i < r->n_out; i++) {
      if (r->out[i].index == 0)
        outs[i] = (kn_tensor){.dtype = KN_DTYPE_F32, .rank = 2, .dims = {r->batch, 2}, .data = y,
                              .nbytes = (size_t)r->batch * 8};
      else
        outs[i] = (kn_tensor){.dtype = KN_DTYPE_BOOL, .rank = 1, .dims = {r->batch}, .data = b,
                              .nbytes = (size_t)r->batch};
    }
    sv_buf out = {0};
    int64_t rhl;
    sv_v2_emit(&v, r, outs, &out, &rhl);
    if (!out.oom && rhl > (int64_t)out.n) abort();
    sv_buf_free(&out);
  } else if (strchr(err, '\n')) { /* messages are one line */
    fprintf(stderr, "multi-line message: %s\n", err);
    abort();
  }
  if (r) sv_request_clear(r);
  free(r);
  free(copy);
  return 0;
}
