/* The Open Inference Protocol v2 (KServe v2) infer request and response,
 * REST/JSON with Triton's binary-data extension:
 *   request body = JSON header [+ binary tensors], the header's length in
 *   the Inference-Header-Content-Length HTTP header; an input whose
 *   "parameters" hold "binary_data_size" takes its bytes from the binary
 *   part, in the order the inputs are listed; an output asked for with
 *   "parameters": {"binary_data": true} (or every output when the
 *   request's "parameters" hold "binary_data_output": true) is returned in
 *   the binary part of the response the same way.
 * Everything a request says is checked against the model's metadata before
 * it is queued; messages name the input and what was expected. */
#include "serve.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct {
  kn_dtype dt;
  const char *name;
} v2_types[] = {
    {KN_DTYPE_BOOL, "BOOL"},   {KN_DTYPE_U8, "UINT8"},   {KN_DTYPE_U16, "UINT16"},
    {KN_DTYPE_U32, "UINT32"},  {KN_DTYPE_U64, "UINT64"}, {KN_DTYPE_I8, "INT8"},
    {KN_DTYPE_I16, "INT16"},   {KN_DTYPE_I32, "INT32"},  {KN_DTYPE_I64, "INT64"},
    {KN_DTYPE_F16, "FP16"},    {KN_DTYPE_F32, "FP32"},   {KN_DTYPE_F64, "FP64"},
    {KN_DTYPE_BF16, "BF16"},   {KN_DTYPE_STRING, "BYTES"},
};

const char *sv_dtype_v2(kn_dtype dt) {
  for (size_t i = 0; i < sizeof v2_types / sizeof v2_types[0]; i++)
    if (v2_types[i].dt == dt) return v2_types[i].name;
  return NULL;
}

kn_dtype sv_dtype_from_v2(const char *s) {
  for (size_t i = 0; i < sizeof v2_types / sizeof v2_types[0]; i++)
    if (!strcmp(v2_types[i].name, s)) return v2_types[i].dt;
  return KN_DTYPE_UNDEFINED;
}

void sv_request_clear(sv_request *r) {
  for (int32_t i = 0; i < r->n_in; i++) free(r->in[i].owned);
  memset(r, 0, sizeof *r);
  r->timeout_us = -1;
}

static void dims_text(const int64_t *dims, int32_t rank, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int32_t i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)dims[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* ---- half precision conversions (round to nearest even) ------------------ */
static uint16_t f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 0xff, m = x & 0x7fffff;
  if (e == 0xff) return (uint16_t)(sign | 0x7c00 | (m ? 0x200 : 0));
  int32_t ex = (int32_t)e - 127 + 15;
  if (ex >= 31) return (uint16_t)(sign | 0x7c00);
  if (ex <= 0) {
    if (ex < -10) return (uint16_t)sign;
    m |= 0x800000;
    uint32_t shift = (uint32_t)(14 - ex);
    uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)ex << 10) | (m >> 13), rem = m & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

static float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
  if (e == 0) {
    if (!m) x = sign;
    else {
      e = 113;
      while (!(m & 0x400)) {
        m <<= 1;
        e--;
      }
      x = sign | (e << 23) | ((m & 0x3ff) << 13);
    }
  } else if (e == 31) x = sign | 0x7f800000 | (m << 13);
  else x = sign | ((e + 112) << 23) | (m << 13);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static uint16_t f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

static float bf16_to_f32(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* ---- JSON tensor data ------------------------------------------------------ */
typedef struct fill {
  kn_dtype dt;
  size_t esize;
  char *dst;
  int64_t n, cap;
  const char *name;
  char *err;
  size_t err_n;
} fill;

static bool put_elem(fill *f, const cJSON *e) {
  if (f->n >= f->cap) {
    snprintf(f->err, f->err_n, "input '%s': \"data\" holds more elements than its shape's %lld",
             f->name, (long long)f->cap);
    return false;
  }
  double v;
  if (cJSON_IsBool(e)) v = cJSON_IsTrue(e) ? 1 : 0;
  else if (cJSON_IsNumber(e)) v = e->valuedouble;
  else {
    snprintf(f->err, f->err_n, "input '%s': \"data\" element %lld is not a number", f->name,
             (long long)f->n);
    return false;
  }
  char *d = f->dst + (size_t)f->n * f->esize;
  bool integral = v == floor(v);
#define SV_INT(T, lo, hi)                                                                       \
  do {                                                                                          \
    if (!integral || v < (lo) || v > (hi)) {                                                    \
      snprintf(f->err, f->err_n, "input '%s': \"data\" element %lld (%g) is not a %s", f->name, \
               (long long)f->n, v, sv_dtype_v2(f->dt));                                         \
      return false;                                                                             \
    }                                                                                           \
    T t = (T)v;                                                                                 \
    memcpy(d, &t, sizeof t);                                                                    \
  } while (0)
  switch (f->dt) {
  case KN_DTYPE_F32: {
    float t = (float)v;
    memcpy(d, &t, 4);
    break;
  }
  case KN_DTYPE_F64: memcpy(d, &v, 8); break;
  case KN_DTYPE_F16: {
    uint16_t t = f32_to_f16((float)v);
    memcpy(d, &t, 2);
    break;
  }
  case KN_DTYPE_BF16: {
    uint16_t t = f32_to_bf16((float)v);
    memcpy(d, &t, 2);
    break;
  }
  case KN_DTYPE_BOOL: SV_INT(uint8_t, 0, 1); break;
  case KN_DTYPE_U8: SV_INT(uint8_t, 0, 255); break;
  case KN_DTYPE_I8: SV_INT(int8_t, -128, 127); break;
  case KN_DTYPE_U16: SV_INT(uint16_t, 0, 65535); break;
  case KN_DTYPE_I16: SV_INT(int16_t, -32768, 32767); break;
  case KN_DTYPE_U32: SV_INT(uint32_t, 0, 4294967295.0); break;
  case KN_DTYPE_I32: SV_INT(int32_t, -2147483648.0, 2147483647.0); break;
  case KN_DTYPE_U64: SV_INT(uint64_t, 0, 18446744073709549568.0); break;
  case KN_DTYPE_I64: SV_INT(int64_t, -9223372036854775808.0, 9223372036854774784.0); break;
  default:
    snprintf(f->err, f->err_n, "input '%s': datatype %s is not supported in JSON", f->name,
             sv_dtype_v2(f->dt) ? sv_dtype_v2(f->dt) : "?");
    return false;
  }
#undef SV_INT
  f->n++;
  return true;
}

/* "data" may be flat or nested row-major (the protocol allows both). */
static bool flatten(fill *f, const cJSON *a, int depth) {
  if (depth > KN_MAX_RANK + 1) {
    snprintf(f->err, f->err_n, "input '%s': \"data\" is nested deeper than any tensor",
             f->name);
    return false;
  }
  for (const cJSON *e = a->child; e; e = e->next) {
    if (cJSON_IsArray(e)) {
      if (!flatten(f, e, depth + 1)) return false;
    } else if (!put_elem(f, e)) return false;
  }
  return true;
}

/* Elements of a (possibly nested) "data" array; -1 when nested too deep. */
static int64_t count_leaves(const cJSON *a, int depth) {
  if (depth > KN_MAX_RANK + 1) return -1;
  int64_t n = 0;
  for (const cJSON *e = a->child; e; e = e->next) {
    if (cJSON_IsArray(e)) {
      int64_t k = count_leaves(e, depth + 1);
      if (k < 0) return -1;
      n += k;
    } else n++;
  }
  return n;
}

/* ---- request parsing ------------------------------------------------------- */
#define FAIL(...)                                                                               \
  do {                                                                                          \
    snprintf(err, err_n, __VA_ARGS__);                                                          \
    goto fail;                                                                                  \
  } while (0)

static bool get_int(const cJSON *j, int64_t lo, int64_t hi, int64_t *out) {
  if (!cJSON_IsNumber(j)) return false;
  double v = j->valuedouble;
  if (v != floor(v) || v < (double)lo || v > (double)hi) return false;
  *out = (int64_t)v;
  return true;
}

bool sv_v2_parse(const sv_version *v, const char *body, size_t n, int64_t header_len,
                 sv_request *r, int *code, char *err, size_t err_n) {
  sv_request_clear(r);
  *code = 400;
  cJSON *root = NULL;
  size_t json_n = n;
  if (header_len >= 0) {
    if ((uint64_t)header_len > n)
      FAIL("Inference-Header-Content-Length %lld exceeds the body's %zu bytes",
           (long long)header_len, n);
    json_n = (size_t)header_len;
  }
  const char *end = NULL;
  root = cJSON_ParseWithLengthOpts(body, json_n, &end, 0);
  if (!root) {
    size_t at = end && end >= body && end <= body + json_n ? (size_t)(end - body) : 0;
    FAIL("malformed JSON in the request at byte %zu of %zu", at, json_n);
  }
  if (!cJSON_IsObject(root)) FAIL("the request must be a JSON object");

  const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
  if (id) {
    if (!cJSON_IsString(id)) FAIL("\"id\" must be a string");
    if (strlen(id->valuestring) >= sizeof r->id)
      FAIL("\"id\" is longer than %zu bytes", sizeof r->id - 1);
    snprintf(r->id, sizeof r->id, "%s", id->valuestring);
    r->has_id = true;
  }
  const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "parameters");
  if (params) {
    if (!cJSON_IsObject(params)) FAIL("\"parameters\" must be an object");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(params, "binary_data_output");
    if (p) {
      if (!cJSON_IsBool(p)) FAIL("parameters.binary_data_output must be true or false");
      r->binary_output = cJSON_IsTrue(p);
    }
    p = cJSON_GetObjectItemCaseSensitive(params, "timeout");
    if (p && !get_int(p, 0, INT64_C(1) << 50, &r->timeout_us))
      FAIL("parameters.timeout must be a whole number of microseconds >= 0");
    p = cJSON_GetObjectItemCaseSensitive(params, "priority");
    if (p) {
      int64_t pr;
      if (!get_int(p, 0, v->cfg.priority_levels, &pr))
        FAIL("parameters.priority must be an integer from 0 (the model's default) to %d",
             v->cfg.priority_levels);
      r->priority = (int32_t)pr;
    }
  }

  const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(root, "inputs");
  if (!cJSON_IsArray(inputs)) FAIL("\"inputs\" must be an array of tensors");
  bool seen[SV_MAX_IO] = {0};
  size_t bin_off = 0, bin_n = header_len >= 0 ? n - json_n : 0;
  const char *bin = body + json_n;
  r->batch = 1;
  bool have_batch = false;
  for (const cJSON *t = inputs->child; t; t = t->next) {
    if (!cJSON_IsObject(t)) FAIL("each of \"inputs\" must be an object");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
    if (!cJSON_IsString(name)) FAIL("an input has no \"name\" string");
    int32_t idx = -1;
    for (int32_t i = 0; i < v->n_in; i++)
      if (!strcmp(v->in[i].name, name->valuestring)) idx = i;
    if (idx < 0) {
      char names[512] = "";
      size_t k = 0;
      for (int32_t i = 0; i < v->n_in && k < sizeof names; i++)
        k += (size_t)snprintf(names + k, sizeof names - k, "%s'%s'", i ? ", " : "",
                              v->in[i].name);
      char safe[160];
      FAIL("unknown input '%s'; the model's inputs are %s",
           sv_printable(name->valuestring, safe, sizeof safe), names);
    }
    const sv_io *io = &v->in[idx];
    if (seen[idx]) FAIL("input '%s' is given twice", io->name);
    seen[idx] = true;
    sv_in *in = &r->in[r->n_in++];
    snprintf(in->name, sizeof in->name, "%s", io->name);
    in->index = idx;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "datatype");
    if (!cJSON_IsString(dt)) FAIL("input '%s': no \"datatype\" string", io->name);
    in->dtype = sv_dtype_from_v2(dt->valuestring);
    if (in->dtype != io->dtype) {
      char safe[48];
      FAIL("input '%s': datatype %s does not match the model's %s", io->name,
           sv_printable(dt->valuestring, safe, sizeof safe), sv_dtype_v2(io->dtype));
    }
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
    if (!cJSON_IsArray(shape)) FAIL("input '%s': no \"shape\" array", io->name);
    int32_t rank = 0;
    for (const cJSON *d = shape->child; d; d = d->next) {
      if (rank >= KN_MAX_RANK) FAIL("input '%s': shape has more than %d dims", io->name,
                                    KN_MAX_RANK);
      if (!get_int(d, 0, INT64_C(1) << 40, &in->dims[rank]))
        FAIL("input '%s': shape element %d is not a whole number >= 0", io->name, rank);
      rank++;
    }
    in->rank = rank;
    char got[160], want[160];
    dims_text(in->dims, rank, got, sizeof got);
    dims_text(io->dims, io->rank, want, sizeof want);
    if (rank != io->rank)
      FAIL("input '%s': shape %s has %d dims; the model's is %s (-1: any size)", io->name, got,
           rank, want);
    int64_t numel = 1;
    for (int32_t d = 0; d < rank; d++) {
      if (io->dims[d] >= 0 && in->dims[d] != io->dims[d])
        FAIL("input '%s': shape %s does not match the model's %s (-1: any size)", io->name, got,
             want);
      if (in->dims[d] && numel > (INT64_C(1) << 40) / in->dims[d])
        FAIL("input '%s': shape %s is too large", io->name, got);
      numel *= in->dims[d];
    }
    if (v->batching) {
      if (in->dims[0] < 1 || in->dims[0] > v->cfg.max_batch_size)
        FAIL("input '%s': batch dim %lld is outside 1..%d (max_batch_size)", io->name,
             (long long)in->dims[0], v->cfg.max_batch_size);
      if (have_batch && in->dims[0] != r->batch)
        FAIL("input '%s': batch dim %lld differs from the other inputs' %lld", io->name,
             (long long)in->dims[0], (long long)r->batch);
      r->batch = in->dims[0];
      have_batch = true;
    }
    size_t esize = kn_dtype_size(io->dtype);
    in->nbytes = (size_t)numel * esize;
    const cJSON *ip = cJSON_GetObjectItemCaseSensitive(t, "parameters");
    const cJSON *bsz = ip && cJSON_IsObject(ip)
                           ? cJSON_GetObjectItemCaseSensitive(ip, "binary_data_size")
                           : NULL;
    if (ip && !cJSON_IsObject(ip)) FAIL("input '%s': \"parameters\" must be an object", io->name);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(t, "data");
    if (bsz) {
      int64_t size;
      if (data) FAIL("input '%s': both \"data\" and parameters.binary_data_size", io->name);
      if (header_len < 0)
        FAIL("input '%s': binary_data_size without an Inference-Header-Content-Length header",
             io->name);
      if (!get_int(bsz, 0, INT64_MAX, &size))
        FAIL("input '%s': binary_data_size must be a whole number >= 0", io->name);
      if ((uint64_t)size != in->nbytes)
        FAIL("input '%s': binary_data_size %lld but shape %s of %s needs %zu bytes", io->name,
             (long long)size, got, sv_dtype_v2(io->dtype), in->nbytes);
      if (in->nbytes > bin_n - bin_off)
        FAIL("input '%s': binary_data_size %zu runs past the body's binary part (%zu bytes "
             "left)", io->name, in->nbytes, bin_n - bin_off);
      in->data = bin + bin_off;
      bin_off += in->nbytes;
    } else {
      if (!cJSON_IsArray(data))
        FAIL("input '%s': no \"data\" array and no parameters.binary_data_size", io->name);
      if (io->dtype == KN_DTYPE_STRING)
        FAIL("input '%s': BYTES tensors are not supported", io->name);
      /* count first: a shape claiming more than the data holds must not
       * make the server allocate for it */
      int64_t count = count_leaves(data, 0);
      if (count < 0)
        FAIL("input '%s': \"data\" is nested deeper than any tensor", io->name);
      if (count != numel)
        FAIL("input '%s': \"data\" holds %lld elements; shape %s needs %lld", io->name,
             (long long)count, got, (long long)numel);
      in->owned = malloc(in->nbytes ? in->nbytes : 1);
      if (!in->owned) {
        *code = 500;
        FAIL("input '%s': out of memory for %zu bytes", io->name, in->nbytes);
      }
      fill f = {.dt = io->dtype, .esize = esize, .dst = in->owned, .cap = numel,
                .name = io->name, .err = err, .err_n = err_n};
      if (!flatten(&f, data, 0)) goto fail;
      if (f.n != numel)
        FAIL("input '%s': \"data\" holds %lld elements; shape %s needs %lld", io->name,
             (long long)f.n, got, (long long)numel);
      in->data = in->owned;
    }
  }
  for (int32_t i = 0; i < v->n_in; i++)
    if (!seen[i]) FAIL("missing input '%s'", v->in[i].name);
  if (bin_off != bin_n)
    FAIL("the body's binary part has %zu bytes; the inputs' binary_data_size add up to %zu",
         bin_n, bin_off);

  const cJSON *outputs = cJSON_GetObjectItemCaseSensitive(root, "outputs");
  if (outputs) {
    if (!cJSON_IsArray(outputs)) FAIL("\"outputs\" must be an array");
    bool oseen[SV_MAX_IO] = {0};
    for (const cJSON *o = outputs->child; o; o = o->next) {
      if (!cJSON_IsObject(o)) FAIL("each of \"outputs\" must be an object");
      const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
      if (!cJSON_IsString(name)) FAIL("an output has no \"name\" string");
      int32_t idx = -1;
      for (int32_t i = 0; i < v->n_out; i++)
        if (!strcmp(v->out[i].name, name->valuestring)) idx = i;
      char safe[160];
      if (idx < 0) FAIL("unknown output '%s'", sv_printable(name->valuestring, safe, sizeof safe));
      if (oseen[idx]) FAIL("output '%s' is asked for twice", v->out[idx].name);
      oseen[idx] = true;
      sv_out_req *q = &r->out[r->n_out++];
      q->index = idx;
      q->binary = r->binary_output;
      const cJSON *op = cJSON_GetObjectItemCaseSensitive(o, "parameters");
      if (op) {
        if (!cJSON_IsObject(op))
          FAIL("output '%s': \"parameters\" must be an object", v->out[idx].name);
        const cJSON *bd = cJSON_GetObjectItemCaseSensitive(op, "binary_data");
        if (bd) {
          if (!cJSON_IsBool(bd))
            FAIL("output '%s': binary_data must be true or false", v->out[idx].name);
          q->binary = cJSON_IsTrue(bd);
        }
        if (cJSON_GetObjectItemCaseSensitive(op, "classification"))
          FAIL("output '%s': the classification extension is not supported",
               v->out[idx].name);
      }
    }
  } else {
    for (int32_t i = 0; i < v->n_out; i++)
      r->out[r->n_out++] = (sv_out_req){.index = i, .binary = r->binary_output};
  }
  cJSON_Delete(root);
  *code = 200;
  return true;
fail:
  cJSON_Delete(root);
  for (int32_t i = 0; i < r->n_in; i++) {
    free(r->in[i].owned);
    r->in[i].owned = NULL;
  }
  r->n_in = 0;
  return false;
}
#undef FAIL

/* ---- responses --------------------------------------------------------------- */
void sv_v2_error(sv_buf *b, const char *msg) {
  sv_buf_puts(b, "{\"error\":");
  sv_buf_json_str(b, msg);
  sv_buf_puts(b, "}");
}

static void put_f(sv_buf *b, double x, int digits) {
  if (!isfinite(x)) {
    sv_buf_puts(b, "null"); /* JSON has no NaN or infinity */
    return;
  }
  sv_buf_printf(b, "%.*g", digits, x);
}

static void json_data(sv_buf *b, const kn_tensor *t) {
  int64_t n = kn_tensor_numel(t);
  sv_buf_reserve(b, (size_t)n * 12);
  sv_buf_puts(b, "[");
  const char *p = t->data;
  for (int64_t i = 0; i < n; i++) {
    if (i) sv_buf_put(b, ",", 1);
    switch (t->dtype) {
    case KN_DTYPE_F32: {
      float x;
      memcpy(&x, p + i * 4, 4);
      put_f(b, x, 9);
      break;
    }
    case KN_DTYPE_F64: {
      double x;
      memcpy(&x, p + i * 8, 8);
      put_f(b, x, 17);
      break;
    }
    case KN_DTYPE_F16:
    case KN_DTYPE_BF16: {
      uint16_t h;
      memcpy(&h, p + i * 2, 2);
      put_f(b, t->dtype == KN_DTYPE_F16 ? f16_to_f32(h) : bf16_to_f32(h), 5);
      break;
    }
    case KN_DTYPE_BOOL: sv_buf_puts(b, p[i] ? "true" : "false"); break;
    case KN_DTYPE_U8: sv_buf_printf(b, "%u", (unsigned)((const uint8_t *)p)[i]); break;
    case KN_DTYPE_I8: sv_buf_printf(b, "%d", (int)((const int8_t *)p)[i]); break;
#define SV_EMIT(T, FMT, CAST)                                                                   \
  {                                                                                             \
    T x;                                                                                        \
    memcpy(&x, p + (size_t)i * sizeof x, sizeof x);                                             \
    sv_buf_printf(b, FMT, (CAST)x);                                                             \
    break;                                                                                      \
  }
    case KN_DTYPE_U16: SV_EMIT(uint16_t, "%u", unsigned)
    case KN_DTYPE_I16: SV_EMIT(int16_t, "%d", int)
    case KN_DTYPE_U32: SV_EMIT(uint32_t, "%lu", unsigned long)
    case KN_DTYPE_I32: SV_EMIT(int32_t, "%ld", long)
    case KN_DTYPE_U64: SV_EMIT(uint64_t, "%llu", unsigned long long)
    case KN_DTYPE_I64: SV_EMIT(int64_t, "%lld", long long)
#undef SV_EMIT
    case KN_DTYPE_STRING: sv_buf_json_str(b, ((char *const *)t->data)[i]); break;
    default: sv_buf_puts(b, "null");
    }
  }
  sv_buf_puts(b, "]");
}

void sv_v2_emit(const sv_version *v, const sv_request *r, const kn_tensor *outs, sv_buf *b,
                int64_t *header_len) {
  sv_buf_puts(b, "{\"model_name\":");
  sv_buf_json_str(b, v->owner ? v->owner->name : "");
  sv_buf_printf(b, ",\"model_version\":\"%lld\"", (long long)v->version);
  if (r->has_id) {
    sv_buf_puts(b, ",\"id\":");
    sv_buf_json_str(b, r->id);
  }
  sv_buf_puts(b, ",\"outputs\":[");
  bool any_binary = false;
  for (int32_t i = 0; i < r->n_out; i++) {
    const kn_tensor *t = &outs[i];
    const sv_io *io = &v->out[r->out[i].index];
    if (i) sv_buf_puts(b, ",");
    sv_buf_puts(b, "{\"name\":");
    sv_buf_json_str(b, io->name);
    sv_buf_printf(b, ",\"datatype\":\"%s\",\"shape\":[",
                  sv_dtype_v2(t->dtype) ? sv_dtype_v2(t->dtype) : "BYTES");
    for (int32_t d = 0; d < t->rank; d++)
      sv_buf_printf(b, "%s%lld", d ? "," : "", (long long)t->dims[d]);
    sv_buf_puts(b, "]");
    if (r->out[i].binary && t->dtype != KN_DTYPE_STRING) {
      sv_buf_printf(b, ",\"parameters\":{\"binary_data_size\":%zu}}", t->nbytes);
      any_binary = true;
    } else {
      sv_buf_puts(b, ",\"data\":");
      json_data(b, t);
      sv_buf_puts(b, "}");
    }
  }
  sv_buf_puts(b, "]}");
  *header_len = -1;
  if (!any_binary) return;
  *header_len = (int64_t)b->n;
  size_t total = 0;
  for (int32_t i = 0; i < r->n_out; i++)
    if (r->out[i].binary && outs[i].dtype != KN_DTYPE_STRING) total += outs[i].nbytes;
  sv_buf_reserve(b, total);
  for (int32_t i = 0; i < r->n_out; i++)
    if (r->out[i].binary && outs[i].dtype != KN_DTYPE_STRING)
      sv_buf_put(b, outs[i].data, outs[i].nbytes);
}
