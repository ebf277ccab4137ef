/* kiln serve internals: the model repository, the dynamic batcher, the
 * KServe v2 request/response codec, metrics and logs (docs/SERVE.md).
 *
 * Layers, each calling only downward:
 *   http.c     libmicrohttpd glue: routing, bodies, suspend/resume
 *   v2.c       v2 request parsing and validation, response emission
 *   repo.c     repository scan, config.json, version load/validate/switch
 *   batcher.c  per-version queues, batch formation, instances, SLO policy
 *   metrics.c  counters and histograms, Prometheus text
 *   log.c      JSON-lines events
 * Everything lives in an sv_server (no global mutable state).  Only
 * include/kiln.h is used of the library. */
#ifndef KILN_SERVE_H
#define KILN_SERVE_H

#include "kiln.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SV_MAX_IO 16          /* inputs or outputs of a served model */
#define SV_MAX_PRIORITY 16    /* priority levels */
#define SV_MAX_PREFERRED 16   /* preferred batch sizes */
#define SV_MAX_INSTANCES 64
#define SV_MAX_VERSIONS 64    /* version directories considered per model */
#define SV_NAME_MAX 128
#define SV_REASON_MAX 512

int64_t sv_now_ns(void); /* CLOCK_MONOTONIC */

/* ---- a growable byte buffer -------------------------------------------- */
typedef struct sv_buf {
  char *p;
  size_t n, cap;
  bool oom;
} sv_buf;
void sv_buf_reserve(sv_buf *b, size_t extra);
void sv_buf_put(sv_buf *b, const void *data, size_t n);
void sv_buf_puts(sv_buf *b, const char *s);
void sv_buf_printf(sv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sv_buf_json_str(sv_buf *b, const char *s); /* a JSON string literal */
void sv_buf_free(sv_buf *b);
/* s with control bytes written \xNN, cut to fit out (n bytes): names a
 * client sent, made safe for one-line messages and logs.  Returns out. */
const char *sv_printable(const char *s, char *out, size_t n);

/* ---- v2 datatypes ------------------------------------------------------- */
/* "FP32" <-> KN_DTYPE_F32 ...; NULL / KN_DTYPE_UNDEFINED when unknown. */
const char *sv_dtype_v2(kn_dtype dt);
kn_dtype sv_dtype_from_v2(const char *s);

/* ---- model configuration (config.json) ----------------------------------- */
enum { SV_TIMEOUT_REJECT = 0, SV_TIMEOUT_DELAY = 1 };
enum { SV_POLICY_LATEST = 0, SV_POLICY_SPECIFIC, SV_POLICY_ALL };

typedef struct sv_config_input {
  char name[SV_NAME_MAX];
  int32_t rank; /* dims without the batch dim when max_batch_size > 0; -1: not given */
  int64_t dims[KN_MAX_RANK];
} sv_config_input;

typedef struct sv_config {
  int32_t max_batch_size; /* 0: no batching (requests run as sent) */
  bool dynamic_batching;  /* the section is present */
  int64_t max_queue_delay_us;
  int32_t preferred[SV_MAX_PREFERRED];
  int32_t n_preferred;
  int32_t priority_levels;        /* >= 1 */
  int32_t default_priority_level; /* 1 .. priority_levels (1 is served first) */
  int32_t timeout_action;         /* SV_TIMEOUT_* */
  int64_t default_timeout_us;     /* 0: none */
  bool allow_timeout_override;
  int32_t max_queue_size; /* per priority level; 0: unbounded */
  int32_t instance_count;
  int32_t instance_threads; /* 0: the server's --threads spread over instances */
  sv_config_input inputs[SV_MAX_IO];
  int32_t n_inputs;
  int32_t version_policy; /* SV_POLICY_* */
  int32_t num_versions;   /* latest */
  int64_t versions[SV_MAX_VERSIONS];
  int32_t n_versions; /* specific */
  double slo_p99_ms; /* 0: off */
  /* dynamic_batching.adaptive (kiln's; default true without preferred
   * sizes): the batch cap is the size measured to serve the most samples a
   * second (SLO mode's choice without a latency budget), not always
   * max_batch_size, so batching never costs throughput where it does not
   * pay (BERT-base on one core: flat cost per sample) */
  bool adaptive;
  double min_cosine, max_abs_error, max_p99_ms; /* < 0: gate off */
  int32_t validation_runs;
  int64_t validation_timeout_ms; /* one validation run's deadline */
} sv_config;

void sv_config_defaults(sv_config *c);
/* Parses config.json text (label names the file in messages).  false with
 * one line in err: "FILE: FIELD: what was wrong; expected what". */
bool sv_config_parse(const char *text, size_t n, const char *label, const char *model_name,
                     sv_config *c, char *err, size_t err_n);

/* ---- metrics ------------------------------------------------------------- */
#define SV_LAT_BUCKETS 36 /* 100 us * 1.5^k, k = 0 .. 35 (up to ~140 s) */
#define SV_BATCH_BUCKETS 8 /* 1 2 4 8 16 32 64 128 */
typedef struct sv_hist {
  _Atomic uint64_t bucket[SV_LAT_BUCKETS + 1]; /* last: +Inf */
  _Atomic uint64_t sum_ns, count;
} sv_hist;
typedef struct sv_bhist {
  _Atomic uint64_t bucket[SV_BATCH_BUCKETS + 1];
  _Atomic uint64_t sum, count;
} sv_bhist;

enum { SV_OUT_SUCCESS, SV_OUT_INVALID, SV_OUT_REJECTED, SV_OUT_TIMEOUT, SV_OUT_ERROR, SV_OUT_COUNT };
enum { SV_LOAD_LOADED, SV_LOAD_REJECTED, SV_LOAD_FAILED, SV_LOAD_UNLOADED, SV_LOAD_COUNT };

/* Series of one model version; kept until the server ends (bounded by the
 * versions ever seen), so that counters never go backwards. */
typedef struct sv_stats {
  struct sv_stats *next;
  char model[SV_NAME_MAX];
  int64_t version;
  _Atomic uint64_t requests[SV_OUT_COUNT];
  _Atomic uint64_t inferences, batches;
  _Atomic uint64_t loads[SV_LOAD_COUNT];
  _Atomic int32_t ready;
  sv_hist queue, compute, request;
  sv_bhist batch;
  _Atomic uint64_t busy_ns[SV_MAX_INSTANCES];
  _Atomic int32_t n_instances;
} sv_stats;

typedef struct sv_metrics {
  pthread_mutex_t mu; /* guards the list */
  sv_stats *head;
} sv_metrics;
void sv_metrics_init(sv_metrics *m);
void sv_metrics_free(sv_metrics *m);
sv_stats *sv_metrics_series(sv_metrics *m, const char *model, int64_t version);
void sv_hist_add(sv_hist *h, int64_t ns);
void sv_bhist_add(sv_bhist *h, int64_t size);
struct sv_server;
/* The /metrics page (Prometheus text format 0.0.4) into b. */
void sv_metrics_render(struct sv_server *s, sv_buf *b);

/* ---- logs ---------------------------------------------------------------- */
typedef struct sv_log {
  pthread_mutex_t mu;
  FILE *f; /* NULL: off */
  bool own;
} sv_log;
/* path "-": stderr; NULL: off.  false when the file cannot be opened. */
bool sv_log_open(sv_log *l, const char *path);
void sv_log_close(sv_log *l);
/* One event: {"ts":..., "event":EVENT, <fields>} where fields is the
 * inside of a JSON object ("\"model\":\"m\",..."), may be NULL. */
void sv_log_event(sv_log *l, const char *event, const char *fields);

/* ---- requests ------------------------------------------------------------ */
typedef struct sv_in {
  char name[SV_NAME_MAX];
  int32_t index; /* the model's input index */
  kn_dtype dtype;
  int32_t rank;
  int64_t dims[KN_MAX_RANK];
  const void *data; /* into the body (binary) or owned (JSON) */
  size_t nbytes;
  void *owned;
} sv_in;

typedef struct sv_out_req {
  int32_t index; /* the model's output index */
  bool binary;
} sv_out_req;

typedef struct sv_request sv_request;
/* Called once per request, from an instance thread (or from the thread
 * that enqueued it when it is refused at once).  outs[i] (n_outs of them,
 * in request order, for SV_OUT_SUCCESS only) are views valid only during
 * the call. */
typedef void (*sv_done_fn)(sv_request *r, int outcome, const char *error,
                           const kn_tensor *outs, void *arg);

struct sv_request {
  sv_request *next;
  /* parsed */
  char id[256];
  bool has_id;
  sv_in in[SV_MAX_IO];
  int32_t n_in;
  sv_out_req out[SV_MAX_IO];
  int32_t n_out;
  bool binary_output; /* request-level binary_data_output */
  int32_t priority;   /* 0: the model's default */
  int64_t timeout_us; /* -1: not given */
  int64_t batch;      /* dim 0 when batching, else 1 */
  /* scheduling */
  int64_t arrival_ns, deadline_ns, enqueue_ns, start_ns, end_ns;
  int32_t level;   /* queue index */
  bool delayed;    /* past a DELAY queue timeout */
  int64_t batch_size; /* the batch it ran in */
  sv_done_fn done;
  void *done_arg;
  struct sv_version *version; /* a reference held while queued or running */
};
void sv_request_clear(sv_request *r); /* frees owned inputs */

/* ---- versions and models ------------------------------------------------- */
enum { SV_STATE_LOADING, SV_STATE_VALIDATING, SV_STATE_READY, SV_STATE_UNAVAILABLE,
       SV_STATE_FAILED };
const char *sv_state_name(int state);

typedef struct sv_io {
  char name[SV_NAME_MAX];
  kn_dtype dtype;
  int32_t rank;
  int64_t dims[KN_MAX_RANK]; /* -1 dynamic; dims[0] -1 when batching */
} sv_io;

typedef struct sv_batcher sv_batcher;

typedef struct sv_version {
  struct sv_server *server;
  struct sv_model *owner;
  int64_t version;
  char path[1024];
  kn_model *kmodel;
  sv_config cfg; /* the model's config when this version was loaded */
  sv_io in[SV_MAX_IO], out[SV_MAX_IO];
  int32_t n_in, n_out;
  bool batching; /* cfg.max_batch_size > 0 */
  _Atomic int32_t refs; /* queued/running requests + 1 while served */
  sv_batcher *batcher;
  sv_stats *stats;
  struct sv_version *next_dead;
  uint64_t arena_bytes, weight_bytes;
  double predicted_batch_us; /* IO model: one run at max batch (or 1) */
} sv_version;

/* A version slot in the index: state and reason survive the version's
 * unload, so that /v2/repository/index reports failures. */
typedef struct sv_vslot {
  int64_t version;
  int state;
  char reason[SV_REASON_MAX];
  int64_t mtime_ns; /* of the model file when last tried (a failed one is retried when it changes) */
  sv_version *v; /* served (READY) or NULL */
} sv_vslot;

typedef struct sv_model {
  struct sv_model *next;
  char name[SV_NAME_MAX];
  char dir[1024];
  sv_vslot slots[SV_MAX_VERSIONS];
  int32_t n_slots;
  char config_error[SV_REASON_MAX]; /* the last config.json's problem, "" */
  bool unloaded;                    /* explicitly unloaded */
} sv_model;

/* Takes a reference to the version a request names (version < 0: the
 * highest ready one); NULL with *code 404 (unknown) or 503 (not ready)
 * and a message in err. */
sv_version *sv_repo_acquire(struct sv_server *s, const char *model, int64_t version, int *code,
                            char *err, size_t err_n);
void sv_version_release(sv_version *v);
/* Scans the repository (all models, or only `model` when not NULL):
 * loads what the version policy wants and is not loaded, validates and
 * switches, unloads what it no longer wants.  Serialized.  false when
 * `model` does not exist or failed to load (reason in err). */
bool sv_repo_sync(struct sv_server *s, const char *model, char *err, size_t err_n);
bool sv_repo_unload(struct sv_server *s, const char *model, char *err, size_t err_n);
/* /v2/repository/index body. */
void sv_repo_index(struct sv_server *s, sv_buf *b);
/* Model metadata body; false when unknown (404) with err. */
bool sv_repo_metadata(struct sv_server *s, const char *model, int64_t version, sv_buf *b,
                      int *code, char *err, size_t err_n);
/* Frees versions whose last reference ended (the control thread). */
void sv_repo_reap(struct sv_server *s);
void sv_repo_free(struct sv_server *s);

/* Loads the model at path (an ONNX model is built for cfg: the batch dim
 * as a profile 1..max_batch_size) into a version of md, not yet served
 * (refs 1, no batcher); NULL with one line in err.  sv_version_free stops
 * its batcher and frees it.  Used by repo.c and the unit tests. */
sv_version *sv_version_open(struct sv_server *s, sv_model *md, int64_t ver, const char *path,
                            const sv_config *cfg, char *err, size_t err_n);
void sv_version_free(sv_version *v);
/* Builds a version from a loaded model: metadata, batch checks (err names
 * what does not fit the config).  Used by repo.c and the unit tests. */
bool sv_version_describe(sv_version *v, char *err, size_t err_n);

/* ---- batcher ------------------------------------------------------------- */
/* Starts cfg.instance_count instance threads for v (threads each from
 * cfg or `threads_total` spread over them). */
bool sv_batcher_start(sv_version *v, int32_t threads_total, char *err, size_t err_n);
/* Queues r (r->version holds a reference, released when done is called).
 * Refusals (queue full, stopping) call done at once. */
void sv_batcher_submit(sv_version *v, sv_request *r);
/* Server shutdown: running batches are cancelled, queued requests refused. */
void sv_batcher_abort(sv_version *v);
/* Stops taking requests, lets the queue drain, joins the instances. */
void sv_batcher_stop(sv_version *v);
int32_t sv_batcher_depth(const sv_version *v);
/* SLO mode's current choice (for logs/tests): batch cap and delay. */
void sv_batcher_slo_state(const sv_version *v, int32_t *batch, int64_t *delay_us);

/* ---- v2 codec ------------------------------------------------------------ */
/* Parses an infer request body (JSON, or JSON header + binary when
 * header_len >= 0) against v's metadata into r (cleared first).  Binary
 * input data points into body (which must outlive r).  false with an
 * HTTP status in *code (400) and one line in err. */
bool sv_v2_parse(const sv_version *v, const char *body, size_t n, int64_t header_len,
                 sv_request *r, int *code, char *err, size_t err_n);
/* The response for a successful request: JSON header (+ binary outputs)
 * into b; *header_len: the JSON header's length when any output is binary,
 * else -1. */
void sv_v2_emit(const sv_version *v, const sv_request *r, const kn_tensor *outs, sv_buf *b,
                int64_t *header_len);
/* {"error": msg} */
void sv_v2_error(sv_buf *b, const char *msg);

/* ---- the server ---------------------------------------------------------- */
enum { SV_CONTROL_POLL = 0, SV_CONTROL_EXPLICIT = 1, SV_CONTROL_NONE = 2 };

typedef struct sv_options {
  const char *repository;
  const char *host; /* NULL: any */
  int32_t port;
  int32_t threads;      /* compute threads per model (over its instances) */
  int32_t http_threads; /* libmicrohttpd's pool */
  int32_t poll_secs;
  int32_t control;
  const char *log_path;
  uint64_t max_request_bytes;
  int32_t max_connections;
  int32_t connection_timeout_s;
} sv_options;

typedef struct sv_server {
  sv_options opt;
  pthread_mutex_t repo_mu; /* guards models, slots and served pointers */
  pthread_mutex_t load_mu; /* one sync/unload at a time */
  sv_model *models;
  sv_version *dead; /* released, waiting for the control thread (repo_mu) */
  sv_metrics metrics;
  sv_log log;
  _Atomic uint64_t request_seq;
  _Atomic int32_t stopping;
  _Atomic int32_t control_jobs; /* load/unload requests running (http.c) */
  pthread_mutex_t ctl_mu;
  pthread_cond_t ctl_cv;
  pthread_t control;
  bool control_started;
  struct MHD_Daemon *mhd;
  int32_t bound_port;
} sv_server;

void sv_options_defaults(sv_options *o);
/* Loads the repository, starts the control thread and, when port >= 0,
 * the HTTP daemon.  false with one line in err. */
bool sv_server_start(sv_server *s, const sv_options *o, char *err, size_t err_n);
void sv_server_stop(sv_server *s);
/* Wakes the control thread (a dead version to free, or a stop). */
void sv_server_kick(sv_server *s);

/* http.c */
bool sv_http_start(sv_server *s, char *err, size_t err_n);
void sv_http_stop(sv_server *s);

#endif
