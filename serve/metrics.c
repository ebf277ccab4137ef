/* Metrics: lock-free counters and histograms per model version, rendered
 * in Prometheus' text format 0.0.4.  Names and labels are those of the
 * serve contract (docs/SERVE.md "Metrics"). */
#include "serve.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Latency bucket k's upper bound: 100 us * 1.5^k.  1.5x steps keep a p99
 * read from the buckets within 50% of the truth from 100 us to ~140 s. */
static double lat_bound_s(int k) { return 100e-6 * pow(1.5, k); }

void sv_metrics_init(sv_metrics *m) {
  pthread_mutex_init(&m->mu, NULL);
  m->head = NULL;
}

void sv_metrics_free(sv_metrics *m) {
  for (sv_stats *s = m->head, *n; s; s = n) {
    n = s->next;
    free(s);
  }
  m->head = NULL;
  pthread_mutex_destroy(&m->mu);
}

sv_stats *sv_metrics_series(sv_metrics *m, const char *model, int64_t version) {
  pthread_mutex_lock(&m->mu);
  sv_stats *s = m->head;
  while (s && !(s->version == version && !strcmp(s->model, model))) s = s->next;
  if (!s) {
    s = calloc(1, sizeof *s);
    if (s) {
      snprintf(s->model, sizeof s->model, "%s", model);
      s->version = version;
      sv_stats **tail = &m->head; /* in order of appearance */
      while (*tail) tail = &(*tail)->next;
      *tail = s;
    }
  }
  pthread_mutex_unlock(&m->mu);
  return s;
}

void sv_hist_add(sv_hist *h, int64_t ns) {
  if (ns < 0) ns = 0;
  double s = (double)ns * 1e-9;
  int k = 0;
  while (k < SV_LAT_BUCKETS && s > lat_bound_s(k)) k++;
  atomic_fetch_add_explicit(&h->bucket[k], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->sum_ns, (uint64_t)ns, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

void sv_bhist_add(sv_bhist *h, int64_t size) {
  int k = 0;
  while (k < SV_BATCH_BUCKETS && size > (1 << k)) k++;
  atomic_fetch_add_explicit(&h->bucket[k], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->sum, (uint64_t)size, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

static const char *const outcome_names[SV_OUT_COUNT] = {"success", "invalid", "rejected",
                                                        "timeout", "error"};
static const char *const load_names[SV_LOAD_COUNT] = {"loaded", "rejected", "failed",
                                                      "unloaded"};

/* {model="m",version="3"} with the model name escaped as the format asks. */
static void labels(sv_buf *b, const char *model, int64_t version, const char *extra) {
  sv_buf_puts(b, "{model=\"");
  for (const char *p = model; *p; p++) {
    if (*p == '\\' || *p == '"') sv_buf_put(b, "\\", 1);
    if (*p == '\n') sv_buf_puts(b, "\\n");
    else sv_buf_put(b, p, 1);
  }
  sv_buf_puts(b, "\"");
  if (version >= 0) sv_buf_printf(b, ",version=\"%lld\"", (long long)version);
  if (extra) sv_buf_printf(b, ",%s", extra);
  sv_buf_puts(b, "}");
}

static void hist_lat(sv_buf *b, const char *name, const sv_stats *s, const sv_hist *h) {
  uint64_t cum = 0;
  for (int k = 0; k <= SV_LAT_BUCKETS; k++) {
    cum += atomic_load_explicit(&h->bucket[k], memory_order_relaxed);
    char le[48];
    if (k < SV_LAT_BUCKETS) snprintf(le, sizeof le, "le=\"%.6g\"", lat_bound_s(k));
    else snprintf(le, sizeof le, "le=\"+Inf\"");
    sv_buf_printf(b, "%s_bucket", name);
    labels(b, s->model, s->version, le);
    sv_buf_printf(b, " %llu\n", (unsigned long long)cum);
  }
  sv_buf_printf(b, "%s_sum", name);
  labels(b, s->model, s->version, NULL);
  sv_buf_printf(b, " %.9f\n", (double)atomic_load(&h->sum_ns) * 1e-9);
  sv_buf_printf(b, "%s_count", name);
  labels(b, s->model, s->version, NULL);
  sv_buf_printf(b, " %llu\n", (unsigned long long)atomic_load(&h->count));
}

static uint64_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, res = 0;
  int k = fscanf(f, "%llu %llu", &size, &res);
  fclose(f);
  return k == 2 ? res * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

void sv_metrics_render(sv_server *srv, sv_buf *b) {
  sv_metrics *m = &srv->metrics;
  pthread_mutex_lock(&m->mu);
  sv_stats *head = m->head; /* the list only grows at its tail */
  pthread_mutex_unlock(&m->mu);

  sv_buf_puts(b, "# HELP kiln_requests_total Inference requests by outcome.\n"
                 "# TYPE kiln_requests_total counter\n");
  for (sv_stats *s = head; s; s = s->next)
    for (int o = 0; o < SV_OUT_COUNT; o++) {
      char ex[48];
      snprintf(ex, sizeof ex, "outcome=\"%s\"", outcome_names[o]);
      sv_buf_puts(b, "kiln_requests_total");
      labels(b, s->model, s->version, ex);
      sv_buf_printf(b, " %llu\n", (unsigned long long)atomic_load(&s->requests[o]));
    }
  sv_buf_puts(b, "# HELP kiln_inferences_total Samples inferred (batch dims of successful "
                 "requests).\n# TYPE kiln_inferences_total counter\n");
  for (sv_stats *s = head; s; s = s->next) {
    sv_buf_puts(b, "kiln_inferences_total");
    labels(b, s->model, s->version, NULL);
    sv_buf_printf(b, " %llu\n", (unsigned long long)atomic_load(&s->inferences));
  }
  sv_buf_puts(b, "# HELP kiln_batches_total Batches executed.\n"
                 "# TYPE kiln_batches_total counter\n");
  for (sv_stats *s = head; s; s = s->next) {
    sv_buf_puts(b, "kiln_batches_total");
    labels(b, s->model, s->version, NULL);
    sv_buf_printf(b, " %llu\n", (unsigned long long)atomic_load(&s->batches));
  }
  static const struct {
    const char *name, *help;
    size_t off;
  } hists[] = {
      {"kiln_queue_duration_seconds", "Time a request waited in the queue.",
       offsetof(sv_stats, queue)},
      {"kiln_compute_duration_seconds", "Run time of the batch a request ran in.",
       offsetof(sv_stats, compute)},
      {"kiln_request_duration_seconds", "End to end: arrival to response.",
       offsetof(sv_stats, request)},
  };
  for (size_t i = 0; i < sizeof hists / sizeof hists[0]; i++) {
    sv_buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", hists[i].name, hists[i].help,
                  hists[i].name);
    for (sv_stats *s = head; s; s = s->next)
      hist_lat(b, hists[i].name, s, (const sv_hist *)((const char *)s + hists[i].off));
  }
  sv_buf_puts(b, "# HELP kiln_batch_size Requests' samples per executed batch.\n"
                 "# TYPE kiln_batch_size histogram\n");
  for (sv_stats *s = head; s; s = s->next) {
    uint64_t cum = 0;
    for (int k = 0; k <= SV_BATCH_BUCKETS; k++) {
      cum += atomic_load(&s->batch.bucket[k]);
      char le[32];
      if (k < SV_BATCH_BUCKETS) snprintf(le, sizeof le, "le=\"%d\"", 1 << k);
      else snprintf(le, sizeof le, "le=\"+Inf\"");
      sv_buf_puts(b, "kiln_batch_size_bucket");
      labels(b, s->model, s->version, le);
      sv_buf_printf(b, " %llu\n", (unsigned long long)cum);
    }
    sv_buf_puts(b, "kiln_batch_size_sum");
    labels(b, s->model, s->version, NULL);
    sv_buf_printf(b, " %llu\n", (unsigned long long)atomic_load(&s->batch.sum));
    sv_buf_puts(b, "kiln_batch_size_count");
    labels(b, s->model, s->version, NULL);
    sv_buf_printf(b, " %llu\n", (unsigned long long)atomic_load(&s->batch.count));
  }
  sv_buf_puts(b, "# HELP kiln_instance_busy_seconds_total Time each instance spent running "
                 "batches.\n# TYPE kiln_instance_busy_seconds_total counter\n");
  for (sv_stats *s = head; s; s = s->next) {
    int32_t n = atomic_load(&s->n_instances);
    for (int32_t i = 0; i < n && i < SV_MAX_INSTANCES; i++) {
      char ex[32];
      snprintf(ex, sizeof ex, "instance=\"%d\"", i);
      sv_buf_puts(b, "kiln_instance_busy_seconds_total");
      labels(b, s->model, s->version, ex);
      sv_buf_printf(b, " %.6f\n", (double)atomic_load(&s->busy_ns[i]) * 1e-9);
    }
  }
  sv_buf_puts(b, "# HELP kiln_model_loads_total Model version load events by outcome.\n"
                 "# TYPE kiln_model_loads_total counter\n");
  for (sv_stats *s = head; s; s = s->next)
    for (int o = 0; o < SV_LOAD_COUNT; o++) {
      uint64_t v = atomic_load(&s->loads[o]);
      char ex[48];
      snprintf(ex, sizeof ex, "outcome=\"%s\"", load_names[o]);
      sv_buf_puts(b, "kiln_model_loads_total");
      labels(b, s->model, s->version, ex);
      sv_buf_printf(b, " %llu\n", (unsigned long long)v);
    }
  sv_buf_puts(b, "# HELP kiln_model_ready Whether a model version serves requests.\n"
                 "# TYPE kiln_model_ready gauge\n");
  for (sv_stats *s = head; s; s = s->next) {
    sv_buf_puts(b, "kiln_model_ready");
    labels(b, s->model, s->version, NULL);
    sv_buf_printf(b, " %d\n", atomic_load(&s->ready));
  }

  /* queue depth and memory: from the served versions */
  uint64_t arena = 0, weights = 0;
  sv_buf_puts(b, "# HELP kiln_queue_depth Requests waiting in a model's queues.\n"
                 "# TYPE kiln_queue_depth gauge\n");
  pthread_mutex_lock(&srv->repo_mu);
  for (sv_model *md = srv->models; md; md = md->next) {
    int64_t depth = 0;
    for (int32_t i = 0; i < md->n_slots; i++) {
      sv_version *v = md->slots[i].v;
      if (!v) continue;
      depth += sv_batcher_depth(v);
      arena += v->arena_bytes;
      weights += v->weight_bytes;
    }
    sv_buf_puts(b, "kiln_queue_depth");
    labels(b, md->name, -1, NULL);
    sv_buf_printf(b, " %lld\n", (long long)depth);
  }
  pthread_mutex_unlock(&srv->repo_mu);
  sv_buf_puts(b, "# HELP kiln_memory_bytes Memory in use: process RSS, activation arenas of "
                 "the instances' contexts, model weights.\n# TYPE kiln_memory_bytes gauge\n");
  sv_buf_printf(b, "kiln_memory_bytes{kind=\"rss\"} %llu\n", (unsigned long long)rss_bytes());
  sv_buf_printf(b, "kiln_memory_bytes{kind=\"arena\"} %llu\n", (unsigned long long)arena);
  sv_buf_printf(b, "kiln_memory_bytes{kind=\"weights\"} %llu\n", (unsigned long long)weights);
}
