/* kiln loadgen URL --model M: load for a KServe v2 (Open Inference
 * Protocol) server, as Triton's perf_analyzer gives it: closed loop (a
 * number of clients, each sending its next request when the last one is
 * answered) or open loop (Poisson arrivals at a rate), over HTTP/1.1 with
 * keep-alive, one thread driving every connection through libcurl's multi
 * interface.  Requests carry the model's inputs (generated, or read from
 * files) as binary tensors (the binary-data extension) or JSON; a response
 * counts as a success only when it is a 200 whose outputs are well formed
 * (every output of the model's metadata, its datatype, and a shape that
 * matches the data).
 *
 * A tool of its own, the kiln-loadgen executable (main.c), built only when
 * libcurl is found (tools/loadgen/CMakeLists.txt); `kiln loadgen` runs it
 * (tools/kiln/cmd_loadgen.c, which holds the usage text).  It parses its
 * options with the CLI's helpers (tools/kiln/cli.h). */
#include "cli.h"
#include "core/core.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdarg.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <unistd.h>

#define LG_MAX_TENSORS 64
#define LG_MAX_STATUS 16  /* distinct HTTP statuses kept apart in the report */
#define LG_ID_DIGITS 12   /* request ids "lg-%012" PRIu64: a header of fixed length */
#define LG_MAX_BODY ((size_t)1 << 31) /* refused above: a response body this large is broken */

/* ---- datatypes ------------------------------------------------------------ */

typedef struct lg_dtype {
  const char *name; /* the protocol's datatype */
  kn_dtype dt;
} lg_dtype;

static const lg_dtype lg_dtypes[] = {
    {"BOOL", KN_DTYPE_BOOL}, {"UINT8", KN_DTYPE_U8},   {"UINT16", KN_DTYPE_U16},
    {"UINT32", KN_DTYPE_U32}, {"UINT64", KN_DTYPE_U64}, {"INT8", KN_DTYPE_I8},
    {"INT16", KN_DTYPE_I16}, {"INT32", KN_DTYPE_I32},   {"INT64", KN_DTYPE_I64},
    {"FP16", KN_DTYPE_F16},  {"BF16", KN_DTYPE_BF16},   {"FP32", KN_DTYPE_F32},
    {"FP64", KN_DTYPE_F64}};

static kn_dtype lg_dtype_of(const char *name) {
  for (size_t i = 0; i < sizeof lg_dtypes / sizeof lg_dtypes[0]; i++)
    if (!strcmp(lg_dtypes[i].name, name)) return lg_dtypes[i].dt;
  return KN_DTYPE_UNDEFINED;
}

/* ---- growable buffers ----------------------------------------------------- */

typedef struct lg_buf {
  char *p;
  size_t n, cap;
  bool overflow; /* a body past LG_MAX_BODY */
} lg_buf;

static bool lg_buf_add(lg_buf *b, const void *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    if (b->n + n + 1 > LG_MAX_BODY) return !(b->overflow = true);
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return false;
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
  return true;
}

static bool lg_buf_printf(lg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool lg_buf_printf(lg_buf *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  return n >= 0 && (size_t)n < sizeof tmp && lg_buf_add(b, tmp, (size_t)n);
}

/* A JSON string literal of s into b (names come from the server). */
static bool lg_buf_json_str(lg_buf *b, const char *s) {
  if (!lg_buf_add(b, "\"", 1)) return false;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    bool ok = *p == '"' || *p == '\\' ? lg_buf_printf(b, "\\%c", *p)
              : *p < 0x20           ? lg_buf_printf(b, "\\u%04x", *p)
                                    : lg_buf_add(b, p, 1);
    if (!ok) return false;
  }
  return lg_buf_add(b, "\"", 1);
}

static size_t lg_collect(char *data, size_t size, size_t nmemb, void *arg) {
  lg_buf *b = arg;
  return lg_buf_add(b, data, size * nmemb) ? size * nmemb : 0;
}

/* ---- the model: its metadata and the request's inputs -------------------- */

typedef struct lg_tensor {
  char *name;
  char datatype[16];
  int32_t rank;               /* of the metadata */
  int64_t meta[KN_MAX_RANK];  /* the metadata's dims, -1 dynamic */
  kn_tensor t;                /* inputs: the data sent */
} lg_tensor;

typedef struct lg_model {
  lg_tensor in[LG_MAX_TENSORS], out[LG_MAX_TENSORS];
  int nin, nout;
  int64_t batch; /* inferences per request: dim 0 of input 0 when dynamic, else 1 */
} lg_model;

static void lg_model_free(lg_model *m) {
  for (int i = 0; i < m->nin; i++) {
    free(m->in[i].name);
    kn_tensor_release(&m->in[i].t);
  }
  for (int i = 0; i < m->nout; i++) free(m->out[i].name);
}

typedef struct lg_opts {
  const char *url, *model, *version;
  const char *shapes[KN_CLI_MAX_LIST], *files[KN_CLI_MAX_LIST];
  int n_shapes, n_files;
  int64_t concurrency, requests, seed, timeout_us, priority;
  double rate, duration, warmup, request_timeout;
  bool json, json_data, has_timeout, has_priority, has_concurrency;
} lg_opts;

/* One tensor of the metadata: name, datatype, shape ([-1 ...] kept in t.dims). */
static int lg_read_tensor(const cJSON *j, const char *what, int k, lg_tensor *lt) {
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(j, "datatype");
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(j, "shape");
  if (!cJSON_IsString(name) || !cJSON_IsString(dt) || !cJSON_IsArray(shape))
    return kn_cli_fail("model metadata: %s[%d] lacks a string \"name\", a string \"datatype\" "
                       "or a \"shape\" array", what, k);
  int rank = cJSON_GetArraySize(shape);
  if (rank > KN_MAX_RANK)
    return kn_cli_fail("model metadata: %s '%s' has %d dims, more than kiln's %d", what,
                       name->valuestring, rank, KN_MAX_RANK);
  lt->name = strdup(name->valuestring);
  if (!lt->name) return kn_cli_fail("out of memory");
  snprintf(lt->datatype, sizeof lt->datatype, "%s", dt->valuestring);
  lt->t.dtype = lg_dtype_of(dt->valuestring);
  lt->rank = rank;
  int d = 0;
  for (const cJSON *e = shape->child; e; e = e->next, d++) {
    if (!cJSON_IsNumber(e) || e->valuedouble < -1 || e->valuedouble > 0x1p40 ||
        e->valuedouble != floor(e->valuedouble))
      return kn_cli_fail("model metadata: %s '%s': dim %d is not an integer in [-1, 2^40]",
                         what, lt->name, d);
    lt->meta[d] = (int64_t)e->valuedouble;
  }
  return KN_EXIT_OK;
}

/* The input's data: a file, else generated for the metadata's shape with
 * --shape filling its dynamic dims (1 when not given, said on stderr). */
static int lg_make_input(const lg_opts *o, lg_tensor *lt, kn_cli_rng *rng) {
  if (lt->t.dtype == KN_DTYPE_UNDEFINED)
    return kn_cli_fail("input '%s': datatype %s is not one loadgen can send (BOOL, UINT*, "
                       "INT*, FP16, BF16, FP32, FP64)", lt->name, lt->datatype);
  kn_error err = {0};
  const int64_t *meta = lt->meta;
  int32_t rank = lt->rank;
  const char *file = kn_cli_spec_for(o->files, o->n_files, lt->name);
  const char *shape = kn_cli_spec_for(o->shapes, o->n_shapes, lt->name);
  kn_dtype want = lt->t.dtype;
  if (file) {
    kn_tensor t = {0};
    if (kn_tensor_read_file(file, &t, NULL, &err)) return kn_cli_error(&err);
    if (t.dtype != want) {
      const char *got = kn_dtype_name(t.dtype);
      kn_tensor_release(&t);
      return kn_cli_fail("--input %s=%s: the file holds %s, the model takes %s (%s)", lt->name,
                         file, got ? got : "?", kn_dtype_name(want), lt->datatype);
    }
    bool fits = t.rank == rank;
    for (int32_t d = 0; fits && d < rank; d++) fits = meta[d] < 0 || meta[d] == t.dims[d];
    if (!fits) {
      char got[128], exp[128];
      kn_cli_dims_text(t.dims, t.rank, got, sizeof got);
      kn_cli_dims_text(meta, rank, exp, sizeof exp);
      kn_tensor_release(&t);
      return kn_cli_fail("--input %s=%s: shape %s does not fit the model's %s", lt->name, file,
                         got, exp);
    }
    lt->t = t;
    return KN_EXIT_OK;
  }
  int64_t dims[KN_MAX_RANK];
  if (shape) {
    int32_t r;
    if (!kn_cli_parse_dims(shape, dims, &r)) return KN_EXIT_USAGE; /* checked by the parser */
    bool fits = r == rank;
    for (int32_t d = 0; fits && d < rank; d++) fits = meta[d] < 0 || meta[d] == dims[d];
    if (!fits) {
      char exp[128];
      kn_cli_dims_text(meta, rank, exp, sizeof exp);
      return kn_cli_fail("--shape %s=%s does not fit the model's %s (-1: any)", lt->name, shape,
                         exp);
    }
  } else {
    bool dyn = false;
    for (int32_t d = 0; d < rank; d++) {
      dims[d] = meta[d] < 0 ? 1 : meta[d];
      dyn |= meta[d] < 0;
    }
    if (dyn && !o->json) {
      char got[128];
      kn_cli_dims_text(dims, rank, got, sizeof got);
      fprintf(stderr, "kiln loadgen: input '%s' has dynamic dims, taken as %s (--shape %s=...)\n",
              lt->name, got, lt->name);
    }
  }
  if (kn_tensor_alloc(&lt->t, want, rank, dims, &err))
    return kn_cli_fail("input '%s': %s", lt->name, err.msg);
  int64_t n = kn_tensor_numel(&lt->t);
  bool fl = want == KN_DTYPE_F32 || want == KN_DTYPE_F64 || want == KN_DTYPE_F16 ||
            want == KN_DTYPE_BF16;
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = kn_cli_rng_next(rng);
    double v = fl ? (double)(r >> 11) * 0x1.0p-53 * 2.0 - 1.0 : (double)(r >> 63);
    kn_store_f64(lt->t.data, want, i, v);
  }
  return KN_EXIT_OK;
}

/* A blocking GET of URL into body; the HTTP status, or 0 after a message
 * naming the transport error. */
static long lg_get(const char *url, lg_buf *body, double timeout_s) {
  CURL *c = curl_easy_init();
  if (!c) return 0;
  char errbuf[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, lg_collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1e3));
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  long status = 0;
  CURLcode rc = curl_easy_perform(c);
  if (rc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  else kn_cli_fail("GET %s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
  curl_easy_cleanup(c);
  return status;
}

static int lg_metadata(const lg_opts *o, const char *base, lg_model *m) {
  lg_buf body = {0};
  int rc = KN_EXIT_ERROR;
  cJSON *j = NULL;
  long status = lg_get(base, &body, o->request_timeout);
  if (!status) goto done;
  if (status != 200) {
    rc = kn_cli_fail("GET %s: HTTP %ld: %.200s", base, status, body.p ? body.p : "");
    goto done;
  }
  j = body.p ? cJSON_ParseWithLength(body.p, body.n) : NULL;
  const cJSON *ins = cJSON_GetObjectItemCaseSensitive(j, "inputs");
  const cJSON *outs = cJSON_GetObjectItemCaseSensitive(j, "outputs");
  if (!cJSON_IsArray(ins) || !cJSON_IsArray(outs)) {
    rc = kn_cli_fail("GET %s: the model metadata is not JSON with \"inputs\" and \"outputs\" "
                     "arrays: %.200s", base, body.p ? body.p : "");
    goto done;
  }
  if (cJSON_GetArraySize(ins) > LG_MAX_TENSORS || cJSON_GetArraySize(outs) > LG_MAX_TENSORS) {
    rc = kn_cli_fail("GET %s: more than %d inputs or outputs", base, LG_MAX_TENSORS);
    goto done;
  }
  for (const cJSON *e = ins->child; e; e = e->next) {
    lg_tensor *t = &m->in[m->nin++]; /* counted first: freed on failure too */
    if ((rc = lg_read_tensor(e, "inputs", m->nin - 1, t))) goto done;
  }
  for (const cJSON *e = outs->child; e; e = e->next) {
    lg_tensor *t = &m->out[m->nout++];
    if ((rc = lg_read_tensor(e, "outputs", m->nout - 1, t))) goto done;
  }
  for (int k = 0; k < o->n_shapes + o->n_files; k++) {
    const char *spec = k < o->n_shapes ? o->shapes[k] : o->files[k - o->n_shapes];
    size_t len = (size_t)(strrchr(spec, '=') - spec);
    bool found = false;
    for (int i = 0; i < m->nin && !found; i++)
      found = strlen(m->in[i].name) == len && !strncmp(m->in[i].name, spec, len);
    if (!found) {
      rc = kn_cli_fail("%s %s: the model has no input '%.*s'",
                       k < o->n_shapes ? "--shape" : "--input", spec, (int)len, spec);
      goto done;
    }
  }
  kn_cli_rng rng = {.s = (uint64_t)o->seed * 0x9E3779B97F4A7C15ull + 1};
  rc = KN_EXIT_OK;
  for (int i = 0; i < m->nin && !rc; i++) rc = lg_make_input(o, &m->in[i], &rng);
  m->batch = !rc && m->nin && m->in[0].rank > 0 && m->in[0].meta[0] < 0 ? m->in[0].t.dims[0] : 1;
done:
  cJSON_Delete(j);
  free(body.p);
  return rc;
}

/* ---- the request body ------------------------------------------------------
 * {"id":"lg-000000000001","parameters":{...},"inputs":[...],"outputs":[...]}
 * then, with binary tensors, every input's bytes.  Only the id's digits
 * change from one request to the next: each slot keeps its own copy of the
 * first `head` bytes and the rest is shared. */
typedef struct lg_body {
  lg_buf b;
  size_t head;     /* bytes up to the end of the id's digits */
  size_t json_len; /* the JSON header's length (Inference-Header-Content-Length) */
} lg_body;

static int lg_json_element(lg_buf *b, const kn_tensor *t, int64_t i, const char *name) {
  switch (t->dtype) {
  case KN_DTYPE_BOOL: return lg_buf_add(b, ((const uint8_t *)t->data)[i] ? "true" : "false",
                                        ((const uint8_t *)t->data)[i] ? 4 : 5) ? 0 : -1;
  case KN_DTYPE_F32: case KN_DTYPE_F64: case KN_DTYPE_F16: case KN_DTYPE_BF16: {
    double v = kn_load_f64(t->data, t->dtype, i);
    if (!isfinite(v)) {
      kn_cli_fail("input '%s': element %" PRId64 " is %g, which JSON cannot carry (send it "
                  "binary: leave out --json-data)", name, i, v);
      return 1;
    }
    return lg_buf_printf(b, t->dtype == KN_DTYPE_F64 ? "%.17g" : "%.9g", v) ? 0 : -1;
  }
  case KN_DTYPE_U64: return lg_buf_printf(b, "%" PRIu64, ((const uint64_t *)t->data)[i]) ? 0 : -1;
  default: return lg_buf_printf(b, "%" PRId64, kn_load_i64(t->data, t->dtype, i)) ? 0 : -1;
  }
}

static int lg_make_body(const lg_opts *o, const lg_model *m, lg_body *body) {
  lg_buf *b = &body->b;
  bool ok = lg_buf_printf(b, "{\"id\":\"lg-%0*d\"", LG_ID_DIGITS, 0);
  body->head = b->n - 1;
  if (o->has_timeout || o->has_priority) {
    ok = ok && lg_buf_printf(b, ",\"parameters\":{");
    if (o->has_timeout) ok = ok && lg_buf_printf(b, "\"timeout\":%" PRId64, o->timeout_us);
    if (o->has_priority)
      ok = ok && lg_buf_printf(b, "%s\"priority\":%" PRId64, o->has_timeout ? "," : "",
                               o->priority);
    ok = ok && lg_buf_printf(b, "}");
  }
  ok = ok && lg_buf_printf(b, ",\"inputs\":[");
  for (int i = 0; ok && i < m->nin; i++) {
    const kn_tensor *t = &m->in[i].t;
    ok = lg_buf_printf(b, "%s{\"name\":", i ? "," : "") && lg_buf_json_str(b, m->in[i].name) &&
         lg_buf_printf(b, ",\"shape\":[");
    for (int32_t d = 0; ok && d < t->rank; d++)
      ok = lg_buf_printf(b, "%s%" PRId64, d ? "," : "", t->dims[d]);
    ok = ok && lg_buf_printf(b, "],\"datatype\":\"%s\"", m->in[i].datatype);
    if (!o->json_data) {
      ok = ok && lg_buf_printf(b, ",\"parameters\":{\"binary_data_size\":%zu}}", t->nbytes);
      continue;
    }
    ok = ok && lg_buf_printf(b, ",\"data\":[");
    int64_t n = kn_tensor_numel(t);
    for (int64_t k = 0; ok && k < n; k++) {
      if (k && !lg_buf_add(b, ",", 1)) ok = false;
      int r = ok ? lg_json_element(b, t, k, m->in[i].name) : -1;
      if (r > 0) return KN_EXIT_ERROR;
      ok = r == 0;
    }
    ok = ok && lg_buf_printf(b, "]}");
  }
  ok = ok && lg_buf_printf(b, "],\"outputs\":[");
  for (int i = 0; ok && i < m->nout; i++) {
    ok = lg_buf_printf(b, "%s{\"name\":", i ? "," : "") && lg_buf_json_str(b, m->out[i].name);
    ok = ok && lg_buf_printf(b, "%s}", o->json_data ? "" : ",\"parameters\":{\"binary_data\":true}");
  }
  ok = ok && lg_buf_printf(b, "]}");
  body->json_len = b->n;
  for (int i = 0; ok && !o->json_data && i < m->nin; i++)
    ok = lg_buf_add(b, m->in[i].t.data, m->in[i].t.nbytes);
  if (!ok)
    return kn_cli_fail(b->overflow ? "the request body would pass %zu bytes" : "out of memory",
                       LG_MAX_BODY);
  return KN_EXIT_OK;
}

/* ---- results ----------------------------------------------------------------- */

typedef struct lg_count {
  char key[40];    /* "503", "version 2" */
  int64_t n;
  char first[200]; /* the first such answer's message */
} lg_count;

typedef struct lg_stats {
  double *lat_us; /* measured successes */
  int64_t n, cap;
  int64_t sent, done, success, delayed;
  lg_count status[LG_MAX_STATUS]; /* failures by HTTP status, "transport", "malformed" */
  int nstatus;
  lg_count versions[LG_MAX_STATUS];
  int nversions;
} lg_stats;

static lg_count *lg_count_for(lg_count *c, int *n, const char *key) {
  for (int i = 0; i < *n; i++)
    if (!strcmp(c[i].key, key)) return &c[i];
  if (*n == LG_MAX_STATUS) key = "other";
  for (int i = 0; i < *n; i++)
    if (!strcmp(c[i].key, key)) return &c[i];
  if (*n == LG_MAX_STATUS) return &c[*n - 1];
  lg_count *e = &c[(*n)++];
  snprintf(e->key, sizeof e->key, "%s", key);
  return e;
}

static void lg_count_add(lg_count *c, int *n, const char *key, const char *msg) {
  lg_count *e = lg_count_for(c, n, key);
  if (!e->n++ && msg) {
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p && k + 1 < sizeof e->first; p++)
      e->first[k++] = *p < 0x20 || *p == 0x7f ? ' ' : (char)*p; /* one line */
    e->first[k] = 0;
  }
}

/* ---- a response's checks ----------------------------------------------------- */

static int64_t lg_json_leaves(const cJSON *a, int depth) {
  if (!cJSON_IsArray(a)) return cJSON_IsNumber(a) || cJSON_IsBool(a) ? 1 : -1;
  if (depth > KN_MAX_RANK) return -1;
  int64_t n = 0;
  for (const cJSON *e = a->child; e; e = e->next) {
    int64_t k = lg_json_leaves(e, depth + 1);
    if (k < 0) return -1;
    n += k;
  }
  return n;
}

/* NULL when the 200 response is well formed, else what is wrong (in why). */
static const char *lg_check(const lg_opts *o, const lg_model *m, const char *body, size_t n,
                            long hdr_len, const char *id, char *version, size_t vn, char *why,
                            size_t wn) {
  size_t jn = hdr_len >= 0 ? (size_t)hdr_len : n;
  if (jn > n) {
    snprintf(why, wn, "Inference-Header-Content-Length %ld exceeds the body's %zu bytes",
             hdr_len, n);
    return why;
  }
  cJSON *j = cJSON_ParseWithLength(body, jn);
  const char *bin = body + jn;
  size_t bin_left = n - jn;
  if (!j) {
    snprintf(why, wn, "the response is not JSON: %.80s", body);
    return why;
  }
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "model_name");
  const cJSON *ver = cJSON_GetObjectItemCaseSensitive(j, "model_version");
  const cJSON *rid = cJSON_GetObjectItemCaseSensitive(j, "id");
  const cJSON *outs = cJSON_GetObjectItemCaseSensitive(j, "outputs");
  const char *bad = why;
  if (!cJSON_IsString(name) || strcmp(name->valuestring, o->model))
    snprintf(why, wn, "\"model_name\" is not \"%s\"", o->model);
  else if (rid && (!cJSON_IsString(rid) || strcmp(rid->valuestring, id)))
    snprintf(why, wn, "\"id\" is not the request's \"%s\"", id);
  else if (!cJSON_IsArray(outs))
    snprintf(why, wn, "no \"outputs\" array");
  else
    bad = NULL;
  snprintf(version, vn, "%s", cJSON_IsString(ver) ? ver->valuestring : "?");
  /* outputs in the response's order: the binary parts follow that order */
  int seen = 0;
  for (const cJSON *e = bad ? NULL : outs->child; e && !bad; e = e->next) {
    const cJSON *on = cJSON_GetObjectItemCaseSensitive(e, "name");
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "datatype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const lg_tensor *want = NULL;
    for (int i = 0; cJSON_IsString(on) && i < m->nout && !want; i++)
      if (!strcmp(m->out[i].name, on->valuestring)) want = &m->out[i];
    bad = why;
    if (!want) {
      snprintf(why, wn, "an output that is not the model's: %.60s",
               cJSON_IsString(on) ? on->valuestring : "(no name)");
      break;
    }
    if (!cJSON_IsString(dt) || strcmp(dt->valuestring, want->datatype)) {
      snprintf(why, wn, "output '%s': datatype is not %s", want->name, want->datatype);
      break;
    }
    if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) != want->rank) {
      snprintf(why, wn, "output '%s': shape is not of rank %d", want->name, (int)want->rank);
      break;
    }
    int64_t numel = 1;
    int d = 0;
    for (const cJSON *x = sh->child; x; x = x->next, d++) {
      if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > 0x1p40 ||
          x->valuedouble != floor(x->valuedouble) ||
          (want->meta[d] >= 0 && x->valuedouble != (double)want->meta[d]) ||
          (double)numel * x->valuedouble > 0x1p40) {
        numel = -1;
        break;
      }
      numel *= (int64_t)x->valuedouble;
    }
    if (numel < 0) {
      snprintf(why, wn, "output '%s': shape does not fit the metadata's", want->name);
      break;
    }
    const cJSON *par = cJSON_GetObjectItemCaseSensitive(e, "parameters");
    const cJSON *bsz = cJSON_GetObjectItemCaseSensitive(par, "binary_data_size");
    size_t esz = kn_dtype_size(lg_dtype_of(want->datatype));
    if (bsz) {
      if (!cJSON_IsNumber(bsz) || bsz->valuedouble != (double)numel * (double)esz) {
        snprintf(why, wn, "output '%s': binary_data_size is not %" PRId64 " x %zu bytes",
                 want->name, numel, esz);
        break;
      }
      if ((size_t)bsz->valuedouble > bin_left) {
        snprintf(why, wn, "output '%s': binary data truncated", want->name);
        break;
      }
      bin += (size_t)bsz->valuedouble;
      bin_left -= (size_t)bsz->valuedouble;
    } else {
      const cJSON *data = cJSON_GetObjectItemCaseSensitive(e, "data");
      if (lg_json_leaves(data, 0) != numel) {
        snprintf(why, wn, "output '%s': \"data\" does not hold %" PRId64 " numbers", want->name,
                 numel);
        break;
      }
      if (!o->json_data) {
        snprintf(why, wn, "output '%s': JSON data where binary was asked for", want->name);
        break;
      }
    }
    seen++;
    bad = NULL;
  }
  if (!bad && seen != m->nout)
    snprintf(why, wn, "%d outputs where the model has %d", seen, m->nout), bad = why;
  if (!bad && bin_left)
    snprintf(why, wn, "%zu bytes after the outputs' binary data", bin_left), bad = why;
  (void)bin;
  cJSON_Delete(j);
  return bad;
}

/* ---- the load loop ----------------------------------------------------------- */

typedef struct lg_slot {
  CURL *h;
  char head[64]; /* the body's first bytes, with this request's id */
  size_t off;    /* bytes of the body sent so far */
  lg_buf resp;
  long hdr_len;  /* the response's Inference-Header-Content-Length, -1 none */
  double sched;  /* when the request was due (latency counts from here) */
  bool busy, measured;
  const struct lg_run *run;
} lg_slot;

typedef struct lg_run {
  const lg_opts *o;
  const lg_model *m;
  const lg_body *body;
  lg_stats st;
} lg_run;

static size_t lg_read(char *dst, size_t size, size_t nmemb, void *arg) {
  lg_slot *s = arg;
  const lg_body *b = s->run->body;
  size_t cap = size * nmemb, n = 0;
  while (n < cap && s->off < b->b.n) {
    const char *src = s->off < b->head ? s->head + s->off : b->b.p + s->off;
    size_t lim = s->off < b->head ? b->head - s->off : b->b.n - s->off;
    size_t k = lim < cap - n ? lim : cap - n;
    memcpy(dst + n, src, k);
    n += k;
    s->off += k;
  }
  return n;
}

static int lg_seek(void *arg, curl_off_t offset, int origin) {
  lg_slot *s = arg;
  if (origin != SEEK_SET || offset < 0 || (size_t)offset > s->run->body->b.n)
    return CURL_SEEKFUNC_CANTSEEK;
  s->off = (size_t)offset;
  return CURL_SEEKFUNC_OK;
}

static size_t lg_header(char *data, size_t size, size_t nmemb, void *arg) {
  lg_slot *s = arg;
  size_t n = size * nmemb;
  static const char key[] = "inference-header-content-length:";
  if (n > sizeof key - 1 && !strncasecmp(data, key, sizeof key - 1)) {
    char num[32];
    size_t k = n - (sizeof key - 1) < sizeof num - 1 ? n - (sizeof key - 1) : sizeof num - 1;
    memcpy(num, data + sizeof key - 1, k);
    num[k] = 0;
    char *end;
    long v = strtol(num, &end, 10);
    s->hdr_len = end != num && v >= 0 ? v : -2; /* -2: unreadable, never fits */
  }
  return n;
}

static bool lg_slot_init(lg_slot *s, lg_run *r, const char *url, struct curl_slist *hdrs) {
  memset(s, 0, sizeof *s);
  s->run = r;
  if (!(s->h = curl_easy_init())) return false;
  CURL *h = s->h;
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body->b.n);
  curl_easy_setopt(h, CURLOPT_READFUNCTION, lg_read);
  curl_easy_setopt(h, CURLOPT_READDATA, s);
  curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, lg_seek);
  curl_easy_setopt(h, CURLOPT_SEEKDATA, s);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, lg_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, s);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, lg_collect);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &s->resp);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(r->o->request_timeout * 1e3));
  curl_easy_setopt(h, CURLOPT_PRIVATE, s);
  memcpy(s->head, r->body->b.p, r->body->head);
  return true;
}

static void lg_start(CURLM *multi, lg_slot *s, double sched, bool measured, uint64_t id) {
  char digits[LG_ID_DIGITS + 1];
  snprintf(digits, sizeof digits, "%0*" PRIu64, LG_ID_DIGITS, id % UINT64_C(1000000000000));
  memcpy(s->head + s->run->body->head - LG_ID_DIGITS, digits, LG_ID_DIGITS);
  s->off = 0;
  s->resp.n = 0;
  s->resp.overflow = false;
  s->hdr_len = -1;
  s->sched = sched;
  s->measured = measured;
  s->busy = true;
  curl_multi_add_handle(multi, s->h);
}

static bool lg_add_latency(lg_stats *st, double us) {
  if (st->n == st->cap) {
    int64_t cap = st->cap ? st->cap * 2 : 4096;
    double *p = realloc(st->lat_us, (size_t)cap * sizeof *p);
    if (!p) return false;
    st->lat_us = p;
    st->cap = cap;
  }
  st->lat_us[st->n++] = us;
  return true;
}

/* A finished request: counted when measured. */
static bool lg_finish(lg_run *r, lg_slot *s, CURLcode res, double now) {
  s->busy = false;
  if (!s->measured) return true;
  lg_stats *st = &r->st;
  st->done++;
  char why[240], key[40], version[64] = "?", id[8 + LG_ID_DIGITS];
  snprintf(id, sizeof id, "lg-%.*s", LG_ID_DIGITS,
           s->head + r->body->head - LG_ID_DIGITS);
  if (res != CURLE_OK) {
    lg_count_add(st->status, &st->nstatus, "transport", curl_easy_strerror(res));
    return true;
  }
  long code = 0;
  curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &code);
  if (code != 200) {
    snprintf(key, sizeof key, "%ld", code);
    lg_count_add(st->status, &st->nstatus, key, s->resp.p ? s->resp.p : "");
    return true;
  }
  const char *bad = s->resp.overflow ? "the response body is too large"
                    : !s->resp.n     ? "an empty body"
                                     : lg_check(r->o, r->m, s->resp.p, s->resp.n, s->hdr_len, id,
                                                version, sizeof version, why, sizeof why);
  if (bad) {
    lg_count_add(st->status, &st->nstatus, "malformed", bad);
    return true;
  }
  st->success++;
  char vk[40];
  snprintf(vk, sizeof vk, "%.39s", version);
  lg_count_add(st->versions, &st->nversions, vk, NULL);
  return lg_add_latency(st, (now - s->sched) * 1e6);
}

typedef struct lg_result {
  double window_s; /* the measured period */
} lg_result;

static int lg_load(lg_run *r, const char *url, lg_result *res) {
  const lg_opts *o = r->o;
  /* SIGINT and SIGTERM end the load early: no new request, the ones in
   * flight answered, the report printed for the time measured so far.  A
   * signalfd among curl's wait descriptors (no handler, no global flag). */
  sigset_t stop_set, old_set;
  sigemptyset(&stop_set);
  sigaddset(&stop_set, SIGINT);
  sigaddset(&stop_set, SIGTERM);
  int sfd = -1;
  bool masked = !pthread_sigmask(SIG_BLOCK, &stop_set, &old_set);
  if (masked) sfd = signalfd(-1, &stop_set, SFD_NONBLOCK | SFD_CLOEXEC);
  bool stopped = false;
  int rc = KN_EXIT_ERROR;
  int64_t nslots = o->concurrency;
  lg_slot *slots = calloc((size_t)nslots, sizeof *slots);
  CURLM *multi = curl_multi_init();
  struct curl_slist *hdrs = NULL;
  char hl[96];
  snprintf(hl, sizeof hl, "Inference-Header-Content-Length: %zu", r->body->json_len);
  hdrs = curl_slist_append(hdrs, "Expect:");
  hdrs = curl_slist_append(hdrs, o->json_data ? "Content-Type: application/json"
                                              : "Content-Type: application/octet-stream");
  if (!o->json_data) hdrs = curl_slist_append(hdrs, hl);
  int64_t ready = 0;
  if (!slots || !multi || !hdrs) {
    rc = kn_cli_fail("out of memory");
    goto done;
  }
  curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)nslots);
  curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)nslots);
  for (; ready < nslots; ready++)
    if (!lg_slot_init(&slots[ready], r, url, hdrs)) {
      rc = kn_cli_fail("out of memory");
      goto done;
    }
  kn_cli_rng rng = {.s = (uint64_t)o->seed * 0xD1B54A32D192ED03ull + 7};
  double t0 = kn_cli_now_s(), t_meas = t0 + o->warmup;
  double t_end = o->requests ? INFINITY : t_meas + o->duration;
  double next = t0, last_done = t_meas;
  uint64_t id = 0;
  int64_t measured_sent = 0, busy = 0;
  for (;;) {
    double now = kn_cli_now_s();
    bool issuing = !stopped && (o->requests ? measured_sent < o->requests : now < t_end);
    for (int64_t i = 0; issuing && i < nslots; i++) {
      if (slots[i].busy) continue;
      double sched = now;
      if (o->rate > 0) {
        if (next > now) break;
        sched = next;
        double u = (double)(kn_cli_rng_next(&rng) >> 11) * 0x1.0p-53;
        next += -log1p(-u) / o->rate;
        if (now - sched > 1e-3 && sched >= t_meas) r->st.delayed++;
      }
      /* --requests N: the N sent after the warm-up are measured.  A duration:
       * every request answered inside the measured period counts, whenever it
       * was sent, as perf_analyzer counts its window (requests that take
       * seconds would otherwise count only from their latency on) */
      bool in_req = sched >= t_meas && (!o->requests || measured_sent < o->requests);
      bool meas = o->requests ? in_req : true;
      measured_sent += in_req;
      r->st.sent += in_req;
      lg_start(multi, &slots[i], sched, meas, ++id);
      busy++;
      issuing = !stopped && (o->requests ? measured_sent < o->requests : now < t_end);
    }
    if (!issuing && !busy) break;
    int running = 0, left = 0, finished = 0;
    curl_multi_perform(multi, &running);
    for (CURLMsg *msg; (msg = curl_multi_info_read(multi, &left));) {
      if (msg->msg != CURLMSG_DONE) continue;
      lg_slot *s = NULL;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
      CURLcode cres = msg->data.result;
      curl_multi_remove_handle(multi, msg->easy_handle);
      double t = kn_cli_now_s();
      /* answered inside the measured period; after a stop, the requests in
       * flight count too */
      bool in_window = s->measured && (o->requests || ((stopped || t <= t_end) && t >= t_meas));
      if (!in_window) s->measured = false;
      if (in_window && t > last_done) last_done = t;
      if (!lg_finish(r, s, cres, t)) {
        rc = kn_cli_fail("out of memory");
        goto done;
      }
      busy--;
      finished++;
    }
    if (finished) continue;
    int wait_ms = 50;
    if (o->rate > 0 && issuing) {
      double dt = (next - kn_cli_now_s()) * 1e3;
      wait_ms = dt <= 0 ? 0 : dt < 50 ? (int)ceil(dt) : 50;
    }
    struct curl_waitfd wfd = {.fd = sfd, .events = CURL_WAIT_POLLIN};
    curl_multi_poll(multi, sfd >= 0 ? &wfd : NULL, sfd >= 0 ? 1 : 0, wait_ms, NULL);
    if (sfd >= 0 && !stopped && (wfd.revents & CURL_WAIT_POLLIN)) {
      struct signalfd_siginfo si;
      if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        stopped = true;
        if (!o->json)
          fprintf(stderr, "kiln loadgen: %s: stopping, waiting for %" PRId64 " requests in "
                  "flight\n", strsignal((int)si.ssi_signo), busy);
      }
    }
  }
  res->window_s = o->requests || stopped ? last_done - t_meas : o->duration;
  rc = KN_EXIT_OK;
done:
  for (int64_t i = 0; i < ready; i++) {
    if (slots[i].busy) curl_multi_remove_handle(multi, slots[i].h);
    curl_easy_cleanup(slots[i].h);
    free(slots[i].resp.p);
  }
  free(slots);
  if (multi) curl_multi_cleanup(multi);
  curl_slist_free_all(hdrs);
  if (sfd >= 0) close(sfd);
  if (masked) pthread_sigmask(SIG_SETMASK, &old_set, NULL);
  return rc;
}

/* ---- the report -------------------------------------------------------------- */

static void lg_report(const lg_opts *o, const lg_model *m, const lg_run *r, double window,
                      const char *url) {
  const lg_stats *st = &r->st;
  double *v = st->lat_us;
  int64_t n = st->n;
  qsort(v, (size_t)n, sizeof *v, kn_cli_cmp_double);
  double sum = 0;
  for (int64_t i = 0; i < n; i++) sum += v[i];
  double avg = n ? sum / (double)n : NAN, p50 = n ? kn_cli_percentile(v, n, 0.5) : NAN,
         p90 = n ? kn_cli_percentile(v, n, 0.9) : NAN,
         p95 = n ? kn_cli_percentile(v, n, 0.95) : NAN,
         p99 = n ? kn_cli_percentile(v, n, 0.99) : NAN, mx = n ? v[n - 1] : NAN,
         mn = n ? v[0] : NAN;
  double rps = window > 0 ? (double)st->success / window : 0;
  double ips = rps * (double)m->batch;
  int64_t failed = st->done - st->success;
  if (o->json) {
    printf("{\"url\":");
    kn_cli_json_str(stdout, url);
    printf(",\"model\":");
    kn_cli_json_str(stdout, o->model);
    printf(",\"mode\":\"%s\",\"concurrency\":%" PRId64 ",\"rate\":%g,\"binary\":%s,"
           "\"window_s\":%.6f,\"batch\":%" PRId64 ",\"sent\":%" PRId64 ",\"requests\":%" PRId64
           ",\"success\":%" PRId64 ",\"failed\":%" PRId64 ",\"delayed\":%" PRId64
           ",\"throughput_infer_s\":%.3f,\"throughput_req_s\":%.3f",
           o->rate > 0 ? "open" : "closed", o->concurrency, o->rate,
           o->json_data ? "false" : "true", window, m->batch, st->sent, st->done, st->success,
           failed, st->delayed, ips, rps);
    printf(",\"latency_us\":{");
    const char *names[] = {"avg", "min", "p50", "p90", "p95", "p99", "max"};
    double vals[] = {avg, mn, p50, p90, p95, p99, mx};
    for (int i = 0; i < 7; i++)
      printf(isfinite(vals[i]) ? "%s\"%s\":%.1f" : "%s\"%s\":null", i ? "," : "", names[i],
             vals[i]);
    printf("},\"errors\":{");
    for (int i = 0; i < st->nstatus; i++) {
      printf("%s\"%s\":{\"count\":%" PRId64 ",\"first\":", i ? "," : "", st->status[i].key,
             st->status[i].n);
      kn_cli_json_str(stdout, st->status[i].first);
      printf("}");
    }
    printf("},\"versions\":{");
    for (int i = 0; i < st->nversions; i++) {
      printf("%s", i ? "," : "");
      kn_cli_json_str(stdout, st->versions[i].key);
      printf(":%" PRId64, st->versions[i].n);
    }
    printf("}}\n");
    return;
  }
  printf("*** Measurement Settings ***\n");
  printf("  Server: %s, model: %s%s%s\n", url, o->model, o->version ? ", version " : "",
         o->version ? o->version : "");
  if (o->rate > 0)
    printf("  Open loop: %g requests/s, Poisson arrivals, at most %" PRId64 " in flight\n",
           o->rate, o->concurrency);
  else
    printf("  Closed loop: concurrency %" PRId64 "\n", o->concurrency);
  printf("  Tensors: %s; warmup %g s; measured %s", o->json_data ? "JSON" : "binary",
         o->warmup, o->requests ? "" : "over ");
  if (o->requests) printf("%" PRId64 " requests (%.2f s)\n", o->requests, window);
  else printf("%g s\n", window);
  for (int i = 0; i < m->nin; i++) {
    char dims[128];
    kn_cli_dims_text(m->in[i].t.dims, m->in[i].t.rank, dims, sizeof dims);
    printf("  Input %s: %s %s (%zu bytes)\n", m->in[i].name, m->in[i].datatype, dims,
           m->in[i].t.nbytes);
  }
  printf("\n  Request count: %" PRId64 "\n", st->done);
  printf("  Throughput: %.2f infer/sec (%.2f requests/sec, batch %" PRId64 ")\n", ips, rps,
         m->batch);
  if (n)
    printf("  Client latency: avg %.0f usec, p50 %.0f usec, p90 %.0f usec, p95 %.0f usec, "
           "p99 %.0f usec, max %.0f usec\n", avg, p50, p90, p95, p99, mx);
  else
    printf("  Client latency: no request succeeded\n");
  if (o->rate > 0)
    printf("  Late sends (over 1 ms after their arrival time): %" PRId64 "\n", st->delayed);
  printf("  Errors: %" PRId64 "\n", failed);
  for (int i = 0; i < st->nstatus; i++) {
    const lg_count *c = &st->status[i];
    printf("    %s: %" PRId64 "%s%.160s%s\n", c->key, c->n, c->first[0] ? " (first: " : "",
           c->first, c->first[0] ? ")" : "");
  }
  if (st->nversions) {
    printf("  Versions answering:");
    for (int i = 0; i < st->nversions; i++)
      printf(" %s (%" PRId64 ")", st->versions[i].key, st->versions[i].n);
    printf("\n");
  }
}

/* ---- the command -------------------------------------------------------------- */

static int lg_parse(int argc, char **argv, lg_opts *o) {
  const kn_cli_cmd *cmd = kn_cli_find("loadgen");
  enum {
    O_MODEL = 1, O_VERSION, O_CONCURRENCY, O_RATE, O_DURATION, O_REQUESTS, O_WARMUP, O_SHAPE,
    O_INPUT, O_SEED, O_JSON_DATA, O_TIMEOUT_US, O_PRIORITY, O_REQUEST_TIMEOUT, O_JSON
  };
  static const kn_cli_opt opts[] = {
      {"model", 'm', true, O_MODEL},          {"version", 0, true, O_VERSION},
      {"concurrency", 0, true, O_CONCURRENCY}, {"rate", 0, true, O_RATE},
      {"duration", 0, true, O_DURATION},       {"requests", 0, true, O_REQUESTS},
      {"warmup", 0, true, O_WARMUP},           {"shape", 0, true, O_SHAPE},
      {"input", 0, true, O_INPUT},             {"seed", 0, true, O_SEED},
      {"json-data", 0, false, O_JSON_DATA},    {"timeout-us", 0, true, O_TIMEOUT_US},
      {"priority", 0, true, O_PRIORITY},       {"request-timeout", 0, true, O_REQUEST_TIMEOUT},
      {"json", 0, false, O_JSON},              {NULL, 0, false, 0}};
  kn_cli_args a;
  kn_cli_args_init(&a, cmd, opts, argc, argv);
  o->concurrency = 1;
  o->duration = 10;
  o->warmup = 1;
  o->seed = 1;
  o->request_timeout = 60;
  bool has_duration = false;
  for (int id; (id = kn_cli_next(&a)) != KN_CLI_END;) {
    switch (id) {
    case KN_CLI_BAD: return KN_EXIT_USAGE;
    case O_MODEL: o->model = a.arg; break;
    case O_VERSION: o->version = a.arg; break;
    case O_CONCURRENCY:
      if (!kn_cli_int(&a, 1, 4096, &o->concurrency)) return KN_EXIT_USAGE;
      o->has_concurrency = true;
      break;
    case O_RATE:
      if (!kn_cli_double(&a, 0.001, 1e7, &o->rate)) return KN_EXIT_USAGE;
      break;
    case O_DURATION:
      if (!kn_cli_double(&a, 0.001, 1e7, &o->duration)) return KN_EXIT_USAGE;
      has_duration = true;
      break;
    case O_REQUESTS:
      if (!kn_cli_int(&a, 1, INT64_C(1) << 40, &o->requests)) return KN_EXIT_USAGE;
      break;
    case O_WARMUP:
      if (!kn_cli_double(&a, 0, 1e7, &o->warmup)) return KN_EXIT_USAGE;
      break;
    case O_SHAPE:
    case O_INPUT: {
      const char *eq = strrchr(a.arg, '=');
      if (id == O_SHAPE ? !kn_cli_shape_spec_ok(a.arg) : !eq || eq == a.arg || !eq[1])
        return kn_cli_usage(cmd, "%s takes NAME=%s, got '%s'", a.flag,
                            id == O_SHAPE ? "DIMS such as input=8x3x224x224" : "FILE", a.arg);
      int *n = id == O_SHAPE ? &o->n_shapes : &o->n_files;
      if (*n == KN_CLI_MAX_LIST) return kn_cli_usage(cmd, "too many %s options", a.flag);
      (id == O_SHAPE ? o->shapes : o->files)[(*n)++] = a.arg;
      break;
    }
    case O_SEED:
      if (!kn_cli_int(&a, 0, INT64_MAX, &o->seed)) return KN_EXIT_USAGE;
      break;
    case O_JSON_DATA: o->json_data = true; break;
    case O_TIMEOUT_US:
      if (!kn_cli_int(&a, 0, INT64_C(1) << 50, &o->timeout_us)) return KN_EXIT_USAGE;
      o->has_timeout = true;
      break;
    case O_PRIORITY:
      if (!kn_cli_int(&a, 0, INT64_C(1) << 50, &o->priority)) return KN_EXIT_USAGE;
      o->has_priority = true;
      break;
    case O_REQUEST_TIMEOUT:
      if (!kn_cli_double(&a, 0.001, 1e6, &o->request_timeout)) return KN_EXIT_USAGE;
      break;
    case O_JSON: o->json = true; break;
    case KN_CLI_POSITIONAL:
      if (o->url) return kn_cli_usage(cmd, "unexpected argument '%s'", a.arg);
      o->url = a.arg;
      break;
    }
  }
  if (!o->url) return kn_cli_usage(cmd, "URL is required (http://HOST:PORT)");
  if (strncmp(o->url, "http://", 7) && strncmp(o->url, "https://", 8))
    return kn_cli_usage(cmd, "URL must start with http:// or https://, got '%s'", o->url);
  if (!o->model) return kn_cli_usage(cmd, "--model is required");
  if (!*o->model || strpbrk(o->model, "/?#% ") || (o->version && strpbrk(o->version, "/?#% ")))
    return kn_cli_usage(cmd, "--model and --version take a name without '/', '?', '#', '%%' or "
                             "spaces");
  if (o->requests && has_duration)
    return kn_cli_usage(cmd, "--requests and --duration exclude each other");
  if (o->rate > 0 && !o->has_concurrency) o->concurrency = 64;
  return KN_EXIT_OK;
}

int kn_loadgen_main(int argc, char **argv) {
  lg_opts o;
  memset(&o, 0, sizeof o);
  int rc = lg_parse(argc, argv, &o);
  if (rc) return rc;
  if (curl_global_init(CURL_GLOBAL_DEFAULT)) return kn_cli_fail("libcurl cannot start");
  lg_model m;
  memset(&m, 0, sizeof m);
  lg_body body;
  memset(&body, 0, sizeof body);
  size_t ul = strlen(o.url);
  while (ul > 0 && o.url[ul - 1] == '/') ul--;
  char base[2048], infer[2100];
  if (ul + strlen(o.model) + (o.version ? strlen(o.version) : 0) + 40 > sizeof base) {
    rc = kn_cli_fail("URL, model and version are too long");
    goto done;
  }
  snprintf(base, sizeof base, "%.*s/v2/models/%s%s%s", (int)ul, o.url, o.model,
           o.version ? "/versions/" : "", o.version ? o.version : "");
  snprintf(infer, sizeof infer, "%s/infer", base);
  if ((rc = lg_metadata(&o, base, &m))) goto done;
  if ((rc = lg_make_body(&o, &m, &body))) goto done;
  lg_run run = {.o = &o, .m = &m, .body = &body};
  lg_result res = {0};
  if ((rc = lg_load(&run, infer, &res))) goto done;
  char server[2048];
  snprintf(server, sizeof server, "%.*s", (int)ul, o.url);
  lg_report(&o, &m, &run, res.window_s, server);
  if (!run.st.success) {
    const char *first = run.st.nstatus ? run.st.status[0].first : "";
    rc = kn_cli_fail("no measured request succeeded (%" PRId64 " sent)%s%.200s",
                     run.st.sent, first[0] ? "; first error: " : "", first);
  }
  free(run.st.lat_us);
done:
  lg_model_free(&m);
  free(body.b.p);
  curl_global_cleanup();
  return rc;
}
