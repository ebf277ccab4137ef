/* HTTP on libmicrohttpd: a pool of --http-threads threads, each with its
 * own epoll set, serves every connection.  An infer request is parsed and
 * queued, and its connection suspended, so that a waiting request holds no
 * thread; the instance that answers it builds the response body and
 * resumes the connection, and libmicrohttpd sends it.  Bodies are read
 * into one buffer sized from Content-Length (refused with 413 above
 * --max-request-bytes before anything is read). */
#include "serve.h"

#include "dashboard_page.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

enum { R_NONE, R_INFER, R_OTHER };

typedef struct sv_conn {
  sv_server *s;
  struct MHD_Connection *c;
  int64_t arrival_ns;
  uint64_t rid;
  sv_buf body;
  bool too_large;
  pthread_mutex_t mu;
  bool suspended, done;
  /* an infer request */
  sv_request *req;
  int status;
  sv_buf resp;
  int64_t resp_header_len;
} sv_conn;

static enum MHD_Result send_buf(struct MHD_Connection *c, int status, sv_buf *b,
                                const char *type, int64_t header_len) {
  if (b->oom) {
    sv_buf_free(b);
    sv_v2_error(b, "out of memory building the response");
    status = 500;
    header_len = -1;
  }
  struct MHD_Response *r;
  if (b->n) {
    r = MHD_create_response_from_buffer(b->n, b->p, MHD_RESPMEM_MUST_FREE);
    if (r) *b = (sv_buf){0};
  } else r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  if (header_len >= 0) {
    char h[32];
    snprintf(h, sizeof h, "%lld", (long long)header_len);
    MHD_add_response_header(r, "Inference-Header-Content-Length", h);
  }
  enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, int status, sv_buf *b) {
  return send_buf(c, status, b, "application/json", -1);
}

static enum MHD_Result send_error(struct MHD_Connection *c, int status, const char *msg) {
  sv_buf b = {0};
  sv_v2_error(&b, msg);
  return send_json(c, status, &b);
}

static int outcome_status(int outcome) {
  switch (outcome) {
  case SV_OUT_SUCCESS: return 200;
  case SV_OUT_INVALID: return 400;
  case SV_OUT_REJECTED: return 503;
  case SV_OUT_TIMEOUT: return 504;
  default: return 500;
  }
}

static const char *const outcome_text[SV_OUT_COUNT] = {"success", "invalid", "rejected",
                                                       "timeout", "error"};

static void log_request(sv_server *s, const sv_conn *k, const sv_request *r, const char *model,
                        int64_t version, int outcome, int status, const char *error) {
  if (!s->log.f) return;
  sv_buf b = {0};
  sv_buf_printf(&b, "\"request\":%llu", (unsigned long long)k->rid);
  if (r && r->has_id) {
    sv_buf_puts(&b, ",\"id\":");
    sv_buf_json_str(&b, r->id);
  }
  sv_buf_puts(&b, ",\"model\":");
  sv_buf_json_str(&b, model);
  if (version >= 0) sv_buf_printf(&b, ",\"version\":\"%lld\"", (long long)version);
  sv_buf_printf(&b, ",\"outcome\":\"%s\",\"status\":%d", outcome_text[outcome], status);
  int64_t now = sv_now_ns();
  if (r && r->start_ns) {
    sv_buf_printf(&b, ",\"queue_us\":%.1f,\"compute_us\":%.1f,\"batch\":%lld",
                  (double)(r->start_ns - r->enqueue_ns) * 1e-3,
                  (double)((r->end_ns ? r->end_ns : now) - r->start_ns) * 1e-3,
                  (long long)r->batch_size);
  }
  sv_buf_printf(&b, ",\"total_us\":%.1f", (double)(now - k->arrival_ns) * 1e-3);
  if (error) {
    sv_buf_puts(&b, ",\"error\":");
    sv_buf_json_str(&b, error);
  }
  if (!b.oom) sv_log_event(&s->log, "request", b.p);
  sv_buf_free(&b);
}

/* Marks k answered and resumes its connection.  k was suspended before
 * its work was handed out, and it may be freed (on_completed) as soon as
 * the connection resumes: nothing touches it after that. */
static void resume_done(sv_conn *k) {
  struct MHD_Connection *c = k->c;
  pthread_mutex_lock(&k->mu);
  k->done = true;
  pthread_mutex_unlock(&k->mu);
  MHD_resume_connection(c);
}

/* From the instance thread that answered (or the handler, when refused). */
static void infer_done(sv_request *r, int outcome, const char *error, const kn_tensor *outs,
                       void *arg) {
  sv_conn *k = arg;
  sv_version *v = r->version;
  int status = outcome_status(outcome);
  if (outcome == SV_OUT_SUCCESS) sv_v2_emit(v, r, outs, &k->resp, &k->resp_header_len);
  else {
    sv_v2_error(&k->resp, error ? error : "failed");
    k->resp_header_len = -1;
  }
  k->status = status;
  log_request(k->s, k, r, v->owner ? v->owner->name : "", v->version, outcome, status, error);
  resume_done(k);
}

/* "/v2/models/M[/versions/V][/TAIL]" -> M, V (-1), TAIL ("" when none) */
static bool split_model_url(const char *url, char *model, size_t mn, int64_t *version,
                            const char **tail, char *err, size_t err_n) {
  const char *p = url + strlen("/v2/models/");
  const char *slash = strchr(p, '/');
  size_t len = slash ? (size_t)(slash - p) : strlen(p);
  if (len == 0 || len >= mn) {
    char safe[240];
    snprintf(err, err_n, "bad model name in '%s'", sv_printable(url, safe, sizeof safe));
    return false;
  }
  memcpy(model, p, len);
  model[len] = 0;
  *version = -1;
  p += len;
  if (!strncmp(p, "/versions/", 10)) {
    p += 10;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 1 || errno || (*end && *end != '/')) {
      char safe[240];
      snprintf(err, err_n, "bad version in '%s': expected a positive integer",
               sv_printable(url, safe, sizeof safe));
      return false;
    }
    *version = v;
    p = end;
  }
  *tail = p;
  return true;
}

static enum MHD_Result handle_infer(sv_conn *k, const char *model, int64_t version) {
  sv_server *s = k->s;
  char err[1200];
  int code;
  int64_t header_len = -1;
  const char *h = MHD_lookup_connection_value(k->c, MHD_HEADER_KIND,
                                              "Inference-Header-Content-Length");
  if (h) {
    char *end;
    errno = 0;
    long long x = strtoll(h, &end, 10);
    if (end == h || *end || x < 0 || errno)
      return send_error(k->c, 400, "Inference-Header-Content-Length must be a whole number >= 0");
    header_len = x;
  }
  sv_version *v = sv_repo_acquire(s, model, version, &code, err, sizeof err);
  if (!v) {
    log_request(s, k, NULL, model, version, code == 404 ? SV_OUT_INVALID : SV_OUT_REJECTED, code,
                err);
    return send_error(k->c, code, err);
  }
  sv_request *r = calloc(1, sizeof *r);
  if (!r) {
    sv_version_release(v);
    return send_error(k->c, 500, "out of memory");
  }
  k->req = r;
  if (!sv_v2_parse(v, k->body.p ? k->body.p : "", k->body.n, header_len, r, &code, err,
                   sizeof err)) {
    atomic_fetch_add(&v->stats->requests[SV_OUT_INVALID], 1);
    log_request(s, k, NULL, model, v->version, SV_OUT_INVALID, code, err);
    sv_version_release(v);
    return send_error(k->c, code, err);
  }
  r->arrival_ns = k->arrival_ns;
  r->done = infer_done;
  r->done_arg = k;
  pthread_mutex_lock(&k->mu);
  MHD_suspend_connection(k->c);
  k->suspended = true;
  pthread_mutex_unlock(&k->mu);
  sv_batcher_submit(v, r); /* the reference goes with r */
  return MHD_YES;
}

/* Load and unload take as long as a build: they run on a thread of their
 * own while the connection is suspended, so that no HTTP thread (and none
 * of the connections it serves) waits for them. */
typedef struct control_job {
  sv_conn *k;
  char model[SV_NAME_MAX];
  bool load;
} control_job;

static void *control_job_main(void *arg) {
  control_job *j = arg;
  sv_conn *k = j->k;
  sv_server *s = k->s;
  char err[1200];
  bool ok = j->load ? sv_repo_sync(s, j->model, err, sizeof err)
                    : sv_repo_unload(s, j->model, err, sizeof err);
  if (ok) {
    sv_buf_puts(&k->resp, "{}");
    k->status = 200;
  } else {
    sv_v2_error(&k->resp, err);
    k->status = strstr(err, "unknown model") == err ? 404 : 400;
  }
  k->resp_header_len = -1;
  free(j);
  resume_done(k);
  atomic_fetch_sub(&s->control_jobs, 1);
  return NULL;
}

static enum MHD_Result start_control(sv_conn *k, const char *model, bool load) {
  control_job *j = calloc(1, sizeof *j);
  if (!j) return send_error(k->c, 500, "out of memory");
  j->k = k;
  j->load = load;
  snprintf(j->model, sizeof j->model, "%s", model);
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  pthread_t th;
  atomic_fetch_add(&k->s->control_jobs, 1);
  pthread_mutex_lock(&k->mu);
  MHD_suspend_connection(k->c);
  k->suspended = true;
  int rc = pthread_create(&th, &at, control_job_main, j);
  if (rc != 0) {
    k->suspended = false;
    MHD_resume_connection(k->c);
  }
  pthread_mutex_unlock(&k->mu);
  pthread_attr_destroy(&at);
  if (rc != 0) {
    atomic_fetch_sub(&k->s->control_jobs, 1);
    free(j);
    return send_error(k->c, 500, "cannot start a thread for the load");
  }
  return MHD_YES;
}

static enum MHD_Result route(sv_conn *k, const char *url, const char *method) {
  sv_server *s = k->s;
  struct MHD_Connection *c = k->c;
  bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
  sv_buf b = {0};
  char err[1200];
  int code;
  if (!strcmp(url, "/v2/health/live")) {
    if (!get) return send_error(c, 405, "use GET");
    sv_buf_puts(&b, "{\"live\":true}");
    return send_json(c, 200, &b);
  }
  if (!strcmp(url, "/v2/health/ready")) {
    if (!get) return send_error(c, 405, "use GET");
    bool ready = !atomic_load(&s->stopping);
    sv_buf_printf(&b, "{\"ready\":%s}", ready ? "true" : "false");
    return send_json(c, ready ? 200 : 503, &b);
  }
  if (!strcmp(url, "/v2") || !strcmp(url, "/v2/")) {
    if (!get) return send_error(c, 405, "use GET");
    sv_buf_printf(&b, "{\"name\":\"kiln\",\"version\":\"%s\",\"extensions\":["
                      "\"binary_tensor_data\",\"model_repository\",\"schedule_policy\","
                      "\"statistics\"]}", KN_VERSION_STRING);
    return send_json(c, 200, &b);
  }
  if (!strcmp(url, "/metrics")) {
    if (!get) return send_error(c, 405, "use GET");
    sv_metrics_render(s, &b);
    return send_buf(c, 200, &b, "text/plain; version=0.0.4; charset=utf-8", -1);
  }
  if (!strcmp(url, "/dashboard") || !strcmp(url, "/dashboard/")) {
    if (!get) return send_error(c, 405, "use GET");
    size_t len = 0;
    const char *page = sv_dashboard_page(&len);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)page, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
  }
  if (!strcmp(url, "/v2/repository/index")) {
    if (!post && !get) return send_error(c, 405, "use POST");
    sv_repo_index(s, &b);
    return send_json(c, 200, &b);
  }
  if (!strncmp(url, "/v2/repository/models/", 22)) {
    const char *p = url + 22, *slash = strrchr(p, '/');
    if (!slash || slash == p || (size_t)(slash - p) >= SV_NAME_MAX)
      return send_error(c, 404, "expected /v2/repository/models/MODEL/load or /unload");
    char model[SV_NAME_MAX];
    memcpy(model, p, (size_t)(slash - p));
    model[slash - p] = 0;
    if (strchr(model, '/') || !strcmp(model, ".") || !strcmp(model, ".."))
      return send_error(c, 400, "bad model name");
    if (!post) return send_error(c, 405, "use POST");
    if (strcmp(slash, "/load") && strcmp(slash, "/unload"))
      return send_error(c, 404, "expected /v2/repository/models/MODEL/load or /unload");
    return start_control(k, model, !strcmp(slash, "/load"));
  }
  if (!strncmp(url, "/v2/models/", 11)) {
    char model[SV_NAME_MAX];
    int64_t version;
    const char *tail;
    if (!split_model_url(url, model, sizeof model, &version, &tail, err, sizeof err))
      return send_error(c, 400, err);
    if (!strcmp(tail, "/infer")) {
      if (!post) return send_error(c, 405, "use POST");
      return handle_infer(k, model, version);
    }
    if (!strcmp(tail, "/ready")) {
      if (!get) return send_error(c, 405, "use GET");
      sv_version *v = sv_repo_acquire(s, model, version, &code, err, sizeof err);
      if (v) sv_version_release(v);
      if (code == 404) return send_error(c, 404, err);
      sv_buf_puts(&b, "{\"name\":");
      sv_buf_json_str(&b, model);
      sv_buf_printf(&b, ",\"ready\":%s}", v ? "true" : "false");
      return send_json(c, v ? 200 : 503, &b);
    }
    if (!*tail || !strcmp(tail, "/")) {
      if (!get) return send_error(c, 405, "use GET");
      if (!sv_repo_metadata(s, model, version, &b, &code, err, sizeof err)) {
        sv_buf_free(&b);
        return send_error(c, code, err);
      }
      return send_json(c, 200, &b);
    }
  }
  char safe[240], msafe[40];
  snprintf(err, sizeof err, "no such endpoint: %s %s", sv_printable(method, msafe, sizeof msafe),
           sv_printable(url, safe, sizeof safe));
  return send_error(c, 404, err);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls) {
  sv_server *s = cls;
  sv_conn *k = *con_cls;
  if (!k) {
    k = calloc(1, sizeof *k);
    if (!k) return MHD_NO;
    k->s = s;
    k->c = c;
    k->arrival_ns = sv_now_ns();
    k->rid = atomic_fetch_add(&s->request_seq, 1) + 1;
    k->resp_header_len = -1;
    pthread_mutex_init(&k->mu, NULL);
    *con_cls = k;
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
      unsigned long long n = strtoull(cl, NULL, 10);
      if (n > s->opt.max_request_bytes) k->too_large = true;
      else if (n) sv_buf_reserve(&k->body, (size_t)n);
    }
    if (k->too_large) {
      char msg[200];
      snprintf(msg, sizeof msg, "request body of %s bytes exceeds the limit of %llu "
               "(--max-request-bytes)", cl, (unsigned long long)s->opt.max_request_bytes);
      return send_error(c, 413, msg);
    }
    return MHD_YES;
  }
  if (*upload_size) {
    if (!k->too_large) {
      if (k->body.n + *upload_size > s->opt.max_request_bytes) {
        k->too_large = true;
        sv_buf_free(&k->body);
      } else sv_buf_put(&k->body, upload, *upload_size);
    }
    *upload_size = 0;
    return MHD_YES;
  }
  pthread_mutex_lock(&k->mu);
  bool done = k->done, suspended = k->suspended;
  pthread_mutex_unlock(&k->mu);
  if (done) {
    const char *type = k->resp_header_len >= 0 ? "application/octet-stream" : "application/json";
    return send_buf(c, k->status, &k->resp, type, k->resp_header_len);
  }
  if (suspended) return MHD_YES;
  if (k->too_large) {
    char msg[200];
    snprintf(msg, sizeof msg, "request body exceeds the limit of %llu bytes (--max-request-bytes)",
             (unsigned long long)s->opt.max_request_bytes);
    return send_error(c, 413, msg);
  }
  if (k->body.oom) return send_error(c, 500, "out of memory reading the request body");
  (void)version;
  return route(k, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  sv_conn *k = *con_cls;
  (void)cls;
  (void)c;
  (void)toe;
  if (!k) return;
  if (k->req) {
    sv_request_clear(k->req);
    free(k->req);
  }
  sv_buf_free(&k->body);
  sv_buf_free(&k->resp);
  pthread_mutex_destroy(&k->mu);
  free(k);
  *con_cls = NULL;
}

bool sv_http_start(sv_server *s, char *err, size_t err_n) {
  struct sockaddr_storage addr = {0};
  struct sockaddr *sa = NULL;
  if (s->opt.host && *s->opt.host) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", s->opt.port);
    int rc = getaddrinfo(s->opt.host, port, &hints, &res);
    if (rc != 0 || !res) {
      snprintf(err, err_n, "--host %s: %s", s->opt.host, gai_strerror(rc));
      return false;
    }
    memcpy(&addr, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    sa = (struct sockaddr *)&addr;
  }
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
  if (sa && sa->sa_family == AF_INET6) flags |= MHD_USE_IPv6;
  s->mhd = MHD_start_daemon(
      flags, (uint16_t)s->opt.port, NULL, NULL, on_request, s, MHD_OPTION_NOTIFY_COMPLETED,
      on_completed, s, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)s->opt.http_threads,
      MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->opt.max_connections,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->opt.connection_timeout_s,
      MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, sa ? MHD_OPTION_SOCK_ADDR : MHD_OPTION_END, sa,
      MHD_OPTION_END);
  if (!s->mhd) {
    snprintf(err, err_n, "cannot listen on %s:%d (in use, or not an address of this machine)",
             s->opt.host ? s->opt.host : "*", s->opt.port);
    return false;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
  s->bound_port = info ? info->port : s->opt.port;
  return true;
}

void sv_http_stop(sv_server *s) {
  if (s->mhd) MHD_stop_daemon(s->mhd);
  s->mhd = NULL;
}
