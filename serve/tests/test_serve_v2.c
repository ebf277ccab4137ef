/* kiln serve's v2 codec (serve/v2.c) field by field against the
 * Open Inference Protocol's REST spec and Triton's binary-data extension:
 * requests parsed and validated against model metadata (every 400 names
 * what was wrong), responses emitted as JSON tensors or JSON header plus
 * binary tensors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "serve.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* A model "m" version 3: x FP32 [-1, 3], ids INT64 [-1, 2] -> y FP32
 * [-1, 4], z INT32 [-1]; max_batch_size 4. */
static sv_model g_model = {.name = "m"};

static void make_version(sv_version *v) {
  memset(v, 0, sizeof *v);
  v->owner = &g_model;
  v->version = 3;
  sv_config_defaults(&v->cfg);
  v->cfg.max_batch_size = 4;
  v->batching = true;
  v->n_in = 2;
  v->in[0] = (sv_io){.name = "x", .dtype = KN_DTYPE_F32, .rank = 2, .dims = {-1, 3}};
  v->in[1] = (sv_io){.name = "ids", .dtype = KN_DTYPE_I64, .rank = 2, .dims = {-1, 2}};
  v->n_out = 2;
  v->out[0] = (sv_io){.name = "y", .dtype = KN_DTYPE_F32, .rank = 2, .dims = {-1, 4}};
  v->out[1] = (sv_io){.name = "z", .dtype = KN_DTYPE_I32, .rank = 1, .dims = {-1}};
}

static sv_request *new_req(void) {
  sv_request *r = calloc(1, sizeof *r);
  assert_non_null(r);
  return r;
}

static bool parse(const sv_version *v, const char *body, size_t n, int64_t hl, sv_request *r,
                  int *code, char *err) {
  return sv_v2_parse(v, body, n, hl, r, code, err, 1024);
}

static void test_json_request(void **state) {
  (void)state;
  sv_version v;
  make_version(&v);
  sv_request *r = new_req();
  const char *body =
      "{\"id\":\"req-7\",\"parameters\":{\"timeout\":2500,\"priority\":0},"
      "\"inputs\":[{\"name\":\"ids\",\"datatype\":\"INT64\",\"shape\":[2,2],\"data\":[[1,2],[3,-4]]},"
      "{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2,3],\"data\":[0.5,1,2,3,4,5]}],"
      "\"outputs\":[{\"name\":\"z\"}]}";
  int code;
  char err[1024];
  assert_true(parse(&v, body, strlen(body), -1, r, &code, err));
  assert_int_equal(code, 200);
  assert_true(r->has_id);
  assert_string_equal(r->id, "req-7");
  assert_int_equal(r->timeout_us, 2500);
  assert_int_equal(r->batch, 2);
  assert_int_equal(r->n_in, 2);
  assert_int_equal(r->in[0].index, 1);
  assert_int_equal(r->in[0].nbytes, 4 * 8);
  const int64_t *ids = r->in[0].data;
  assert_int_equal(ids[3], -4);
  const float *x = r->in[1].data;
  assert_true(x[0] == 0.5f && x[5] == 5.0f);
  assert_int_equal(r->n_out, 1);
  assert_int_equal(r->out[0].index, 1);
  assert_false(r->out[0].binary);
  sv_request_clear(r);
  free(r);
}

static void test_binary_request(void **state) {
  (void)state;
  sv_version v;
  make_version(&v);
  const char *hdr =
      "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,3],"
      "\"parameters\":{\"binary_data_size\":12}},"
      "{\"name\":\"ids\",\"datatype\":\"INT64\",\"shape\":[1,2],\"data\":[7,8]}],"
      "\"parameters\":{\"binary_data_output\":true},"
      "\"outputs\":[{\"name\":\"y\"},{\"name\":\"z\",\"parameters\":{\"binary_data\":false}}]}";
  size_t hl = strlen(hdr);
  char body[1024];
  memcpy(body, hdr, hl);
  float xs[3] = {1.5f, -2, 3};
  memcpy(body + hl, xs, sizeof xs);
  sv_request *r = new_req();
  int code;
  char err[1024];
  assert_true(parse(&v, body, hl + 12, (int64_t)hl, r, &code, err));
  assert_int_equal(r->n_in, 2);
  assert_ptr_equal(r->in[0].data, body + hl); /* in place: no copy */
  assert_null(r->in[0].owned);
  assert_true(r->binary_output);
  assert_true(r->out[0].binary);
  assert_false(r->out[1].binary);
  /* every output, binary, when "outputs" is absent */
  const char *h2 = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,3],"
                   "\"parameters\":{\"binary_data_size\":12}},{\"name\":\"ids\",\"datatype\":"
                   "\"INT64\",\"shape\":[1,2],\"parameters\":{\"binary_data_size\":16}}],"
                   "\"parameters\":{\"binary_data_output\":true}}";
  size_t hl2 = strlen(h2);
  memcpy(body, h2, hl2);
  memset(body + hl2, 0, 28);
  assert_true(parse(&v, body, hl2 + 28, (int64_t)hl2, r, &code, err));
  assert_int_equal(r->n_out, 2);
  assert_true(r->out[0].binary && r->out[1].binary);
  assert_ptr_equal(r->in[1].data, body + hl2 + 12);
  sv_request_clear(r);
  free(r);
}

typedef struct bad_case {
  const char *body;
  int64_t header_len; /* -1: JSON only */
  size_t extra;       /* binary bytes after the header */
  const char *expect; /* in the message */
} bad_case;

#define XOK "{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,3],\"data\":[1,2,3]}"
#define IDS "{\"name\":\"ids\",\"datatype\":\"INT64\",\"shape\":[1,2],\"data\":[1,2]}"

static void test_bad_requests(void **state) {
  (void)state;
  sv_version v;
  make_version(&v);
  static const bad_case cases[] = {
      {"{\"inputs\":[", -1, 0, "malformed JSON"},
      {"[1,2]", -1, 0, "must be a JSON object"},
      {"{}", -1, 0, "\"inputs\" must be an array"},
      {"{\"id\":5,\"inputs\":[" XOK "," IDS "]}", -1, 0, "\"id\" must be a string"},
      {"{\"inputs\":[" XOK "]}", -1, 0, "missing input 'ids'"},
      {"{\"inputs\":[" XOK "," IDS ",{\"name\":\"w\",\"datatype\":\"FP32\",\"shape\":[1],"
       "\"data\":[1]}]}", -1, 0, "unknown input 'w'; the model's inputs are 'x', 'ids'"},
      {"{\"inputs\":[" XOK "," XOK "," IDS "]}", -1, 0, "input 'x' is given twice"},
      {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP64\",\"shape\":[1,3],\"data\":[1,2,3]}," IDS
       "]}", -1, 0, "datatype FP64 does not match the model's FP32"},
      {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[3],\"data\":[1,2,3]}," IDS
       "]}", -1, 0, "shape [3] has 1 dims; the model's is [-1,3]"},
      {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,4],\"data\":[1,2,3,4]},"
       IDS "]}", -1, 0, "shape [1,4] does not match the model's [-1,3]"},
      {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[5,3],\"data\":[]}," IDS "]}",
       -1, 0, "batch dim 5 is outside 1..4"},
      {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2,3],\"data\":[1,2,3,4,5,6]},"
       IDS "]}", -1, 0, "batch dim 1 differs from the other inputs' 2"},
      {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,3],\"data\":[1,2]}," IDS
       "]}", -1, 0, "\"data\" holds 2 elements; shape [1,3] needs 3"},
      {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,3],\"data\":[1,2,3,4]},"
       IDS "]}", -1, 0, "\"data\" holds 4 elements; shape [1,3] needs 3"},
      {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,3],\"data\":[1,\"a\",3]},"
       IDS "]}", -1, 0, "element 1 is not a number"},
      {"{\"inputs\":[" XOK ",{\"name\":\"ids\",\"datatype\":\"INT64\",\"shape\":[1,2],"
       "\"data\":[1,2.5]}]}", -1, 0, "element 1 (2.5) is not a INT64"},
      {"{\"inputs\":[" XOK ",{\"name\":\"ids\",\"datatype\":\"INT64\",\"shape\":[1,-2],"
       "\"data\":[]}]}", -1, 0, "shape element 1 is not a whole number"},
      {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,3],\"parameters\":"
       "{\"binary_data_size\":12}}," IDS "]}", -1, 0, "without an Inference-Header-Content-Length"},
      {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,3],\"parameters\":"
       "{\"binary_data_size\":8}}," IDS "]}", 0, 8, "binary_data_size 8 but shape [1,3] of FP32 "
       "needs 12 bytes"},
      {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,3],\"parameters\":"
       "{\"binary_data_size\":12}}," IDS "]}", 0, 8, "runs past the body's binary part"},
      {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,3],\"parameters\":"
       "{\"binary_data_size\":12}}," IDS "]}", 0, 20, "binary part has 20 bytes; the inputs' "
       "binary_data_size add up to 12"},
      {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,3],\"data\":[1,2,3],"
       "\"parameters\":{\"binary_data_size\":12}}," IDS "]}", 0, 12, "both \"data\" and"},
      {"{\"inputs\":[" XOK "," IDS "],\"outputs\":[{\"name\":\"q\"}]}", -1, 0, "unknown output 'q'"},
      {"{\"inputs\":[" XOK "," IDS "],\"outputs\":[{\"name\":\"y\"},{\"name\":\"y\"}]}", -1, 0,
       "output 'y' is asked for twice"},
      {"{\"inputs\":[" XOK "," IDS "],\"outputs\":[{\"name\":\"y\",\"parameters\":"
       "{\"binary_data\":1}}]}", -1, 0, "binary_data must be true or false"},
      {"{\"inputs\":[" XOK "," IDS "],\"parameters\":{\"timeout\":-1}}", -1, 0,
       "parameters.timeout must be"},
      {"{\"inputs\":[" XOK "," IDS "],\"parameters\":{\"priority\":3}}", -1, 0,
       "parameters.priority must be an integer from 0"},
  };
  char body[4096], err[1024];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const bad_case *c = &cases[i];
    size_t n = strlen(c->body);
    memcpy(body, c->body, n);
    int64_t hl = c->header_len;
    if (hl == 0) hl = (int64_t)n;
    memset(body + n, 0, c->extra);
    sv_request *r = new_req();
    int code = 0;
    err[0] = 0;
    bool ok = parse(&v, body, n + c->extra, hl, r, &code, err);
    if (ok || code != 400 || !strstr(err, c->expect))
      fail_msg("case %zu: ok %d code %d: '%s' lacks '%s'", i, ok, code, err, c->expect);
    assert_int_equal(r->n_in, 0); /* nothing left owned */
    sv_request_clear(r);
    free(r);
  }
  /* a header length past the body */
  sv_request *r = new_req();
  int code;
  assert_false(parse(&v, "{}", 2, 10, r, &code, err));
  assert_non_null(strstr(err, "Inference-Header-Content-Length 10 exceeds the body's 2 bytes"));
  free(r);
}

static void test_emit(void **state) {
  (void)state;
  sv_version v;
  make_version(&v);
  sv_request *r = new_req();
  r->has_id = true;
  snprintf(r->id, sizeof r->id, "a\"b");
  r->n_out = 2;
  r->out[0] = (sv_out_req){.index = 0, .binary = false};
  r->out[1] = (sv_out_req){.index = 1, .binary = false};
  float y[8] = {0.5f, -1, 3.25f, 1e-3f, 7, 8, 9, 10};
  int32_t z[2] = {-3, 4};
  kn_tensor outs[2] = {
      {.dtype = KN_DTYPE_F32, .rank = 2, .dims = {2, 4}, .data = y, .nbytes = sizeof y},
      {.dtype = KN_DTYPE_I32, .rank = 1, .dims = {2}, .data = z, .nbytes = sizeof z}};
  sv_buf b = {0};
  int64_t hl;
  sv_v2_emit(&v, r, outs, &b, &hl);
  assert_int_equal(hl, -1);
  cJSON *j = cJSON_Parse(b.p);
  assert_non_null(j);
  assert_string_equal(cJSON_GetObjectItem(j, "model_name")->valuestring, "m");
  assert_string_equal(cJSON_GetObjectItem(j, "model_version")->valuestring, "3");
  assert_string_equal(cJSON_GetObjectItem(j, "id")->valuestring, "a\"b");
  cJSON *o = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "outputs"), 0);
  assert_string_equal(cJSON_GetObjectItem(o, "name")->valuestring, "y");
  assert_string_equal(cJSON_GetObjectItem(o, "datatype")->valuestring, "FP32");
  cJSON *shape = cJSON_GetObjectItem(o, "shape");
  assert_int_equal(cJSON_GetArraySize(shape), 2);
  assert_int_equal(cJSON_GetArrayItem(shape, 0)->valueint, 2);
  cJSON *data = cJSON_GetObjectItem(o, "data");
  assert_int_equal(cJSON_GetArraySize(data), 8);
  for (int i = 0; i < 8; i++) assert_true((float)cJSON_GetArrayItem(data, i)->valuedouble == y[i]);
  o = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "outputs"), 1);
  assert_string_equal(cJSON_GetObjectItem(o, "datatype")->valuestring, "INT32");
  assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "data"), 0)->valueint, -3);
  cJSON_Delete(j);
  sv_buf_free(&b);

  /* y binary, z JSON: the header, then y's bytes */
  r->out[0].binary = true;
  r->has_id = false;
  sv_v2_emit(&v, r, outs, &b, &hl);
  assert_true(hl > 0 && (size_t)hl + sizeof y == b.n);
  j = cJSON_ParseWithLength(b.p, (size_t)hl);
  assert_non_null(j);
  assert_null(cJSON_GetObjectItem(j, "id"));
  o = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "outputs"), 0);
  assert_null(cJSON_GetObjectItem(o, "data"));
  assert_int_equal(
      cJSON_GetObjectItem(cJSON_GetObjectItem(o, "parameters"), "binary_data_size")->valueint, 32);
  assert_memory_equal(b.p + hl, y, sizeof y);
  cJSON_Delete(j);
  sv_buf_free(&b);

  sv_v2_error(&b, "bad \"thing\"\n");
  j = cJSON_Parse(b.p);
  assert_string_equal(cJSON_GetObjectItem(j, "error")->valuestring, "bad \"thing\"\n");
  cJSON_Delete(j);
  sv_buf_free(&b);
  free(r);
}

static void test_dtypes(void **state) {
  (void)state;
  static const char *names[] = {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
                                "INT32", "INT64", "FP16", "FP32", "FP64", "BF16", "BYTES"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    assert_string_equal(sv_dtype_v2(sv_dtype_from_v2(names[i])), names[i]);
  assert_int_equal(sv_dtype_from_v2("FLOAT"), KN_DTYPE_UNDEFINED);
}

/* FP16 from JSON numbers: round to nearest even, and back in the response. */
static void test_half_json(void **state) {
  (void)state;
  sv_version v;
  make_version(&v);
  v.n_in = 1;
  v.in[0] = (sv_io){.name = "h", .dtype = KN_DTYPE_F16, .rank = 1, .dims = {-1}};
  v.n_out = 1;
  v.out[0] = v.in[0];
  const char *body = "{\"inputs\":[{\"name\":\"h\",\"datatype\":\"FP16\",\"shape\":[4],"
                     "\"data\":[1,-2.5,65504,0.0001]}]}";
  sv_request *r = new_req();
  int code;
  char err[1024];
  assert_true(parse(&v, body, strlen(body), -1, r, &code, err));
  const uint16_t *h = r->in[0].data;
  assert_int_equal(h[0], 0x3c00);
  assert_int_equal(h[1], 0xc100);
  assert_int_equal(h[2], 0x7bff);
  assert_int_equal(h[3], 0x068e);
  kn_tensor t = {.dtype = KN_DTYPE_F16, .rank = 1, .dims = {4}, .data = (void *)h, .nbytes = 8};
  r->n_out = 1;
  r->out[0] = (sv_out_req){0};
  sv_buf b = {0};
  int64_t hl;
  sv_v2_emit(&v, r, &t, &b, &hl);
  assert_non_null(strstr(b.p, "\"data\":[1,-2.5,65504,0.00010002]"));
  sv_buf_free(&b);
  /* a huge shape with little data: refused before anything is allocated
   * for the shape (an unbatched model with a dynamic dim) */
  v.batching = false;
  body = "{\"inputs\":[{\"name\":\"h\",\"datatype\":\"FP16\",\"shape\":[549755813888],"
         "\"data\":[1]}]}";
  assert_false(parse(&v, body, strlen(body), -1, r, &code, err));
  assert_int_equal(code, 400);
  assert_non_null(strstr(err, "\"data\" holds 1 elements; shape [549755813888] needs"));
  sv_request_clear(r);
  free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_json_request), cmocka_unit_test(test_binary_request),
      cmocka_unit_test(test_bad_requests), cmocka_unit_test(test_emit),
      cmocka_unit_test(test_dtypes),       cmocka_unit_test(test_half_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
