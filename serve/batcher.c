/* The dynamic batcher of one model version (docs/SERVE.md "Batching").
 *
 * Requests wait in one FIFO per priority level (level 0 = priority 1, served
 * first) plus a queue of those past a DELAY timeout, served last.  Each
 * instance is a thread with its own kn_context (created once, reused for
 * every batch) and its own batch buffers; all instances take from the same
 * queues.  An instance forms a batch when the queued samples reach the
 * batch cap (max_batch_size, or SLO mode's choice) or the largest preferred
 * size, or when the oldest request has waited max_queue_delay_microseconds;
 * it takes requests whose non-batch dims match the first one's, highest
 * priority first, concatenates their inputs along dim 0 (one copy, into the
 * instance's buffer; a lone request's aligned data is bound without any),
 * runs, and hands each request its slice of the outputs.
 *
 * Deadlines: a request's deadline is its arrival plus its "timeout"
 * parameter (when the config allows overrides) or the model's
 * default_timeout_microseconds.  In the queue, a request past it is answered
 * with a timeout (REJECT) or moved behind everything else (DELAY: no
 * deadline after that).  A run whose requests all have deadlines gets the
 * latest of them through kn_context_set_deadline, so the library stops it
 * between steps once all are past; a request past its deadline when its run
 * ends is answered with a timeout too.  The instance goes on serving.
 *
 * SLO mode (slo.p99_ms): before each batch the cap and the delay are chosen
 * to maximise samples per second, b / L(b), over the b with
 * 2 L(b) + delay <= budget, where L(b) is the expected run time of a batch
 * of b: the IO model's prediction for the built profile scaled by b until
 * batches of b have run, then an EWMA of their measured times.  (A request
 * that arrives just after a batch starts waits for it, then runs in the
 * next: hence 2 L(b).)  budget = target * f, f starting at 0.8 and adapted
 * from the measured p99 of the last 256 requests: x0.85 when it exceeds
 * the target, x1.05 (up to 0.9) when it is under 70% of it.  Every 8th
 * batch tries twice or half the chosen size instead (within the budget),
 * so that a wrong estimate is corrected by measurement.
 *
 * Adaptive batching (dynamic_batching.adaptive, on by default unless
 * preferred sizes are given): the same choice with no latency budget, so
 * the cap is the batch size measured to serve the most samples a second,
 * a bigger one only when it pays 2% more, and the delay the configured
 * one.  Where batching does not pay (BERT-base on one core: a batch of 8
 * costs 8 batches of 1) it settles on small batches instead of adding
 * latency and losing throughput to the wait; where it pays (ResNet-50) it
 * grows to max_batch_size. */
#include "serve.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLO_WINDOW 256

typedef struct sv_instance {
  struct sv_batcher *b;
  int32_t index;
  pthread_t th;
  bool started;
  kn_context *ctx;
  void *buf[SV_MAX_IO];
  size_t cap[SV_MAX_IO];
} sv_instance;

struct sv_batcher {
  sv_version *v;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  sv_request *head[SV_MAX_PRIORITY + 1], *tail[SV_MAX_PRIORITY + 1]; /* last: delayed */
  int32_t count[SV_MAX_PRIORITY + 1];
  int64_t samples; /* queued samples (sum of batch dims) */
  _Atomic int32_t depth;
  bool stopping;
  _Atomic int32_t abort; /* server shutdown: cancel runs, refuse queued requests */
  int32_t n_inst;
  sv_instance inst[SV_MAX_INSTANCES];
  /* SLO mode (under mu) */
  int32_t max_batch;
  double *lat_us;  /* [max_batch + 1]: EWMA of measured run time, 0: none yet */
  double *prior_us;
  double scale;    /* measured / prior, EWMA over every batch */
  double budget_f;
  int64_t window[SLO_WINDOW];
  int32_t wn, wpos, since_check;
  int64_t slo_batches; /* batches observed */
  int32_t slo_batch;
  int64_t slo_delay_us;
};

int32_t sv_batcher_depth(const sv_version *v) {
  return v->batcher ? atomic_load(&v->batcher->depth) : 0;
}

void sv_batcher_slo_state(const sv_version *v, int32_t *batch, int64_t *delay_us) {
  sv_batcher *b = v->batcher;
  pthread_mutex_lock(&b->mu);
  *batch = b->slo_batch;
  *delay_us = b->slo_delay_us;
  pthread_mutex_unlock(&b->mu);
}

static int32_t cancel_hook(void *arg) { return atomic_load((_Atomic int32_t *)arg); }

/* ---- SLO policy (under mu) ---------------------------------------------------- */
static double expected_us(const sv_batcher *b, int32_t n) {
  if (b->lat_us[n] > 0) return b->lat_us[n];
  return b->prior_us[n] * b->scale;
}

/* Whether the cap and delay are chosen from measured batch times: SLO
 * mode, or adaptive batching (its choice without a latency budget). */
static bool adapts(const sv_config *c) {
  return c->slo_p99_ms > 0 || (c->adaptive && c->dynamic_batching && c->max_batch_size > 1);
}

static void slo_choose(sv_batcher *b) {
  const sv_config *c = &b->v->cfg;
  double budget = c->slo_p99_ms > 0 ? c->slo_p99_ms * 1000 * b->budget_f : INFINITY;
  int32_t best = 1;
  double best_rate = 0;
  for (int32_t n = 1; n <= b->max_batch; n++) {
    double l = expected_us(b, n);
    if (2 * l > budget && n > 1) continue;
    double rate = n / l;
    if (rate > best_rate * 1.02) { /* a bigger batch must pay: 2% more per second */
      best_rate = rate;
      best = n;
    }
  }
  /* Every 8th batch tries a neighbour (twice or half the size, in turn)
   * that fits the budget, so that the sizes the estimate favours or
   * disfavours wrongly get measured: the prior can be far off (BERT's
   * batches pay nothing on some CPUs, ResNet's a little). */
  if (b->slo_batches % 8 == 7) {
    int32_t up = best * 2 <= b->max_batch ? best * 2 : b->max_batch, down = best / 2;
    int32_t cand = (b->slo_batches / 8) % 2 ? down : up;
    if (cand >= 1 && cand != best && (cand == 1 || 2 * expected_us(b, cand) <= budget))
      best = cand;
  }
  b->slo_batch = best;
  if (c->slo_p99_ms <= 0) { /* adaptive: the configured delay */
    b->slo_delay_us = c->max_queue_delay_us;
    return;
  }
  double slack = budget - 2 * expected_us(b, best);
  int64_t d = slack > 0 ? (int64_t)slack : 0;
  if (c->max_queue_delay_us > 0 && d > c->max_queue_delay_us) d = c->max_queue_delay_us;
  b->slo_delay_us = d;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static void slo_observe(sv_batcher *b, int32_t n, double run_us, const int64_t *lat_ns,
                        int32_t n_lat) {
  if (n > b->max_batch) n = b->max_batch;
  b->lat_us[n] = b->lat_us[n] > 0 ? 0.8 * b->lat_us[n] + 0.2 * run_us : run_us;
  double ratio = run_us / b->prior_us[n];
  b->scale = 0.8 * b->scale + 0.2 * ratio;
  for (int32_t i = 0; i < n_lat; i++) {
    b->window[b->wpos] = lat_ns[i];
    b->wpos = (b->wpos + 1) % SLO_WINDOW;
    if (b->wn < SLO_WINDOW) b->wn++;
  }
  b->slo_batches++;
  b->since_check += n_lat;
  if (b->since_check >= 64 && b->wn >= 64 && b->v->cfg.slo_p99_ms > 0) {
    b->since_check = 0;
    int64_t sorted[SLO_WINDOW];
    memcpy(sorted, b->window, sizeof(int64_t) * (size_t)b->wn);
    qsort(sorted, (size_t)b->wn, sizeof sorted[0], cmp_i64);
    double p99_ms = (double)sorted[(b->wn * 99) / 100] * 1e-6;
    double target = b->v->cfg.slo_p99_ms;
    if (p99_ms > target) b->budget_f = fmax(0.1, b->budget_f * 0.85);
    else if (p99_ms < 0.7 * target) b->budget_f = fmin(0.9, b->budget_f * 1.05);
  }
  slo_choose(b);
}

/* ---- queues (under mu) --------------------------------------------------------- */
static void push(sv_batcher *b, int32_t q, sv_request *r) {
  r->next = NULL;
  if (b->tail[q]) b->tail[q]->next = r;
  else b->head[q] = r;
  b->tail[q] = r;
  b->count[q]++;
  b->samples += r->batch;
  atomic_fetch_add(&b->depth, 1);
}

static void unlink_req(sv_batcher *b, int32_t q, sv_request *prev, sv_request *r) {
  if (prev) prev->next = r->next;
  else b->head[q] = r->next;
  if (b->tail[q] == r) b->tail[q] = prev;
  b->count[q]--;
  b->samples -= r->batch;
  atomic_fetch_sub(&b->depth, 1);
  r->next = NULL;
}

static void finish(sv_request *r, int outcome, const char *error, const kn_tensor *outs) {
  sv_version *v = r->version;
  sv_stats *st = v->stats;
  int64_t now = sv_now_ns();
  r->end_ns = now;
  atomic_fetch_add(&st->requests[outcome], 1);
  if (outcome == SV_OUT_SUCCESS) {
    atomic_fetch_add(&st->inferences, (uint64_t)r->batch);
    sv_hist_add(&st->queue, r->start_ns - r->enqueue_ns);
    sv_hist_add(&st->compute, r->end_ns - r->start_ns);
  }
  sv_hist_add(&st->request, now - r->arrival_ns);
  r->done(r, outcome, error, outs, r->done_arg); /* r may be gone after this */
  sv_version_release(v);
}

/* Moves requests past their queue deadline: REJECT ones onto *expired
 * (answered outside the lock), DELAY ones to the delayed queue. */
static void expire(sv_batcher *b, int64_t now, sv_request **expired) {
  int32_t levels = b->v->cfg.priority_levels;
  for (int32_t q = 0; q < levels; q++) {
    sv_request *prev = NULL, *r = b->head[q];
    while (r) {
      sv_request *next = r->next;
      if (r->deadline_ns && now >= r->deadline_ns) {
        unlink_req(b, q, prev, r);
        if (b->v->cfg.timeout_action == SV_TIMEOUT_DELAY) {
          r->deadline_ns = 0;
          r->delayed = true;
          push(b, SV_MAX_PRIORITY, r);
        } else {
          r->next = *expired;
          *expired = r;
        }
      } else prev = r;
      r = next;
    }
  }
}

static int64_t earliest_deadline(const sv_batcher *b) {
  int64_t t = 0;
  for (int32_t q = 0; q < b->v->cfg.priority_levels; q++)
    for (const sv_request *r = b->head[q]; r; r = r->next)
      if (r->deadline_ns && (!t || r->deadline_ns < t)) t = r->deadline_ns;
  return t;
}

static int64_t oldest_enqueue(const sv_batcher *b) {
  int64_t t = 0;
  for (int32_t q = 0; q <= SV_MAX_PRIORITY; q++)
    if (b->head[q] && (!t || b->head[q]->enqueue_ns < t)) t = b->head[q]->enqueue_ns;
  return t;
}

static bool same_shape(const sv_request *a, const sv_request *r) {
  for (int32_t i = 0; i < a->n_in; i++) {
    const sv_in *x = &a->in[i], *y = NULL;
    for (int32_t j = 0; j < r->n_in; j++)
      if (r->in[j].index == x->index) y = &r->in[j];
    if (!y || y->rank != x->rank) return false;
    for (int32_t d = 1; d < x->rank; d++)
      if (x->dims[d] != y->dims[d]) return false;
  }
  return true;
}

/* Takes up to `limit` samples of compatible requests, best priority first;
 * the first request is taken whatever its size. */
static int32_t take(sv_batcher *b, int64_t limit, sv_request **out, int32_t max_out,
                    int64_t *samples) {
  int32_t n = 0;
  *samples = 0;
  const sv_request *first = NULL;
  bool batching = b->v->batching && b->v->cfg.dynamic_batching;
  for (int32_t q = 0; q <= SV_MAX_PRIORITY && n < max_out; q++) {
    if (q >= b->v->cfg.priority_levels && q != SV_MAX_PRIORITY) continue;
    sv_request *prev = NULL, *r = b->head[q];
    while (r && n < max_out) {
      sv_request *next = r->next;
      bool ok = !first || (batching && *samples + r->batch <= limit && same_shape(first, r));
      if (ok) {
        unlink_req(b, q, prev, r);
        if (!first) first = r;
        out[n++] = r;
        *samples += r->batch;
        if (!batching || *samples >= limit) return n;
      } else prev = r;
      r = next;
    }
  }
  return n;
}

/* ---- running a batch ------------------------------------------------------------- */
static bool aligned_for(const void *p, kn_dtype dt) {
  size_t a = kn_dtype_size(dt);
  if (a == 0 || a > 8) a = 8;
  return ((uintptr_t)p % a) == 0;
}

static void run_batch(sv_instance *in, sv_request **reqs, int32_t n, int64_t samples) {
  sv_batcher *b = in->b;
  sv_version *v = b->v;
  kn_error err = {0};
  char msg[1100];
  int64_t start = sv_now_ns();
  for (int32_t i = 0; i < n; i++) {
    reqs[i]->start_ns = start;
    reqs[i]->batch_size = samples;
  }
  /* bind the inputs: a lone request's data in place, else concatenated */
  kn_tensor t[SV_MAX_IO];
  const sv_request *r0 = reqs[0];
  for (int32_t k = 0; k < r0->n_in; k++) {
    const sv_in *x = &r0->in[k];
    t[k] = (kn_tensor){.dtype = x->dtype, .rank = x->rank};
    memcpy(t[k].dims, x->dims, sizeof x->dims);
    if (n == 1 && aligned_for(x->data, x->dtype)) {
      t[k].data = (void *)x->data;
      t[k].nbytes = x->nbytes;
    } else {
      size_t total = 0;
      for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < reqs[i]->n_in; j++)
          if (reqs[i]->in[j].index == x->index) total += reqs[i]->in[j].nbytes;
      int32_t slot = x->index;
      if (in->cap[slot] < total) {
        free(in->buf[slot]);
        in->buf[slot] = aligned_alloc(64, (total + 63) / 64 * 64);
        in->cap[slot] = in->buf[slot] ? total : 0;
        if (!in->buf[slot]) {
          snprintf(msg, sizeof msg, "out of memory for a batch of %lld", (long long)samples);
          for (int32_t i = 0; i < n; i++) finish(reqs[i], SV_OUT_ERROR, msg, NULL);
          return;
        }
      }
      size_t off = 0;
      for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < reqs[i]->n_in; j++)
          if (reqs[i]->in[j].index == x->index) {
            memcpy((char *)in->buf[slot] + off, reqs[i]->in[j].data, reqs[i]->in[j].nbytes);
            off += reqs[i]->in[j].nbytes;
          }
      t[k].data = in->buf[slot];
      t[k].nbytes = total;
      if (v->batching) t[k].dims[0] = samples;
    }
    if (kn_context_set_input(in->ctx, x->index, &t[k], &err) != KN_OK) {
      snprintf(msg, sizeof msg, "input '%s': %s", x->name, err.msg);
      for (int32_t i = 0; i < n; i++) finish(reqs[i], SV_OUT_INVALID, msg, NULL);
      return;
    }
  }
  int64_t deadline = 0;
  for (int32_t i = 0; i < n; i++) {
    if (!reqs[i]->deadline_ns) {
      deadline = 0;
      break;
    }
    if (reqs[i]->deadline_ns > deadline) deadline = reqs[i]->deadline_ns;
  }
  kn_context_set_deadline(in->ctx, deadline);
  kn_status st = kn_context_run(in->ctx, &err);
  int64_t end = sv_now_ns();
  atomic_fetch_add(&v->stats->busy_ns[in->index], (uint64_t)(end - start));
  atomic_fetch_add(&v->stats->batches, 1);
  sv_bhist_add(&v->stats->batch, samples);
  if (st != KN_OK) {
    int outcome = st == KN_ERR_CANCELLED ? SV_OUT_TIMEOUT
                  : (st == KN_ERR_SHAPE || st == KN_ERR_INVALID_ARG || st == KN_ERR_DTYPE)
                      ? SV_OUT_INVALID
                      : SV_OUT_ERROR;
    if (st == KN_ERR_CANCELLED && atomic_load(&b->abort)) {
      outcome = SV_OUT_REJECTED;
      snprintf(msg, sizeof msg, "the server is shutting down: the run was cancelled");
    } else if (st == KN_ERR_CANCELLED)
      snprintf(msg, sizeof msg, "request timed out: the run passed its deadline (%s)", err.msg);
    else snprintf(msg, sizeof msg, "inference failed: %s", err.msg);
    for (int32_t i = 0; i < n; i++) finish(reqs[i], outcome, msg, NULL);
    return;
  }
  /* slice the outputs */
  int64_t off_rows = 0;
  int64_t lat_ns[256];
  int32_t n_lat = 0;
  for (int32_t i = 0; i < n; i++) {
    sv_request *r = reqs[i];
    kn_tensor outs[SV_MAX_IO];
    const char *problem = NULL;
    for (int32_t k = 0; k < r->n_out; k++) {
      const kn_tensor *o = kn_context_output(in->ctx, r->out[k].index);
      if (!o) {
        problem = "the model produced no such output";
        break;
      }
      outs[k] = *o;
      outs[k].owned = 0;
      if (v->batching) {
        if (o->rank < 1 || o->dims[0] != samples) {
          problem = "an output's dim 0 is not the batch";
          break;
        }
        size_t row = samples ? o->nbytes / (size_t)samples : 0;
        outs[k].dims[0] = r->batch;
        outs[k].data = (char *)o->data + row * (size_t)off_rows;
        outs[k].nbytes = row * (size_t)r->batch;
      }
    }
    off_rows += r->batch;
    int64_t now = sv_now_ns();
    if (n_lat < 256) lat_ns[n_lat++] = now - r->arrival_ns;
    if (problem) {
      snprintf(msg, sizeof msg, "inference failed: %s", problem);
      finish(r, SV_OUT_ERROR, msg, NULL);
    } else if (r->deadline_ns && now > r->deadline_ns) {
      finish(r, SV_OUT_TIMEOUT, "request timed out: its run ended past its deadline", NULL);
    } else finish(r, SV_OUT_SUCCESS, NULL, outs);
  }
  if (adapts(&v->cfg)) {
    pthread_mutex_lock(&b->mu);
    slo_observe(b, (int32_t)samples, (double)(end - start) * 1e-3, lat_ns, n_lat);
    pthread_mutex_unlock(&b->mu);
  }
}

static void *instance_main(void *arg) {
  sv_instance *in = arg;
  sv_batcher *b = in->b;
  const sv_config *c = &b->v->cfg;
  int32_t max_reqs = c->max_batch_size > 0 ? c->max_batch_size : 1;
  sv_request **reqs = malloc(sizeof *reqs * (size_t)max_reqs);
  pthread_mutex_lock(&b->mu);
  for (;;) {
    int64_t now = sv_now_ns();
    sv_request *expired = NULL;
    expire(b, now, &expired);
    if (expired) {
      pthread_mutex_unlock(&b->mu);
      while (expired) {
        sv_request *r = expired;
        expired = r->next;
        r->start_ns = now;
        finish(r, SV_OUT_TIMEOUT, "request timed out in the queue", NULL);
      }
      pthread_mutex_lock(&b->mu);
      continue;
    }
    int32_t queued = atomic_load(&b->depth);
    if (queued == 0) {
      if (b->stopping) break;
      int64_t dl = earliest_deadline(b);
      if (dl) {
        struct timespec ts = {(time_t)(dl / 1000000000), (long)(dl % 1000000000)};
        pthread_cond_timedwait(&b->cv, &b->mu, &ts);
      } else pthread_cond_wait(&b->cv, &b->mu);
      continue;
    }
    if (atomic_load(&b->abort)) {
      sv_request *r0 = NULL;
      int64_t s;
      while (take(b, 1, &r0, 1, &s) == 1) {
        pthread_mutex_unlock(&b->mu);
        r0->start_ns = sv_now_ns();
        finish(r0, SV_OUT_REJECTED, "the server is shutting down", NULL);
        pthread_mutex_lock(&b->mu);
      }
      continue;
    }
    int64_t cap = c->max_batch_size > 0 ? c->max_batch_size : 1;
    int64_t delay_us = c->max_queue_delay_us;
    if (adapts(c)) {
      cap = b->slo_batch;
      delay_us = b->slo_delay_us;
    }
    bool ready = !c->dynamic_batching || b->stopping || b->samples >= cap;
    int64_t limit = cap;
    if (!ready && c->n_preferred) {
      int32_t maxp = 0;
      for (int32_t i = 0; i < c->n_preferred; i++)
        if (c->preferred[i] <= cap && c->preferred[i] > maxp) maxp = c->preferred[i];
      if (maxp && b->samples >= maxp) {
        ready = true;
        limit = maxp;
      }
    }
    int64_t due = oldest_enqueue(b) + delay_us * 1000;
    if (!ready && now >= due) {
      /* Triton's rule: the largest preferred size the queue can fill,
       * else everything up to the cap */
      ready = true;
      int32_t best = 0;
      for (int32_t i = 0; i < c->n_preferred; i++)
        if (c->preferred[i] <= b->samples && c->preferred[i] <= cap && c->preferred[i] > best)
          best = c->preferred[i];
      limit = best ? best : cap;
    }
    if (!ready) {
      int64_t wake = due, dl = earliest_deadline(b);
      if (dl && dl < wake) wake = dl;
      struct timespec ts = {(time_t)(wake / 1000000000), (long)(wake % 1000000000)};
      pthread_cond_timedwait(&b->cv, &b->mu, &ts);
      continue;
    }
    int64_t samples = 0;
    int32_t n = take(b, limit, reqs, max_reqs, &samples);
    if (atomic_load(&b->depth) > 0) pthread_cond_signal(&b->cv); /* another instance */
    pthread_mutex_unlock(&b->mu);
    if (n > 0 && reqs) run_batch(in, reqs, n, samples);
    pthread_mutex_lock(&b->mu);
  }
  pthread_mutex_unlock(&b->mu);
  free(reqs);
  return NULL;
}

/* ---- lifecycle ------------------------------------------------------------------------ */
static void batcher_free(sv_batcher *b) {
  for (int32_t i = 0; i < SV_MAX_INSTANCES; i++) {
    kn_context_free(b->inst[i].ctx);
    for (int32_t k = 0; k < SV_MAX_IO; k++) free(b->inst[i].buf[k]);
  }
  free(b->lat_us);
  free(b->prior_us);
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->cv);
  free(b);
}

bool sv_batcher_start(sv_version *v, int32_t threads_total, char *err, size_t err_n) {
  const sv_config *c = &v->cfg;
  sv_batcher *b = calloc(1, sizeof *b);
  if (!b) {
    snprintf(err, err_n, "out of memory");
    return false;
  }
  b->v = v;
  pthread_mutex_init(&b->mu, NULL);
  pthread_condattr_t ca; /* deadlines and delays are CLOCK_MONOTONIC times */
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&b->cv, &ca);
  pthread_condattr_destroy(&ca);
  b->max_batch = c->max_batch_size > 0 ? c->max_batch_size : 1;
  b->lat_us = calloc((size_t)b->max_batch + 1, sizeof(double));
  b->prior_us = calloc((size_t)b->max_batch + 1, sizeof(double));
  if (!b->lat_us || !b->prior_us) {
    snprintf(err, err_n, "out of memory");
    batcher_free(b);
    return false;
  }
  /* the prior: the IO model's time for the built profile (planned for the
   * max batch), linear in the batch with a floor of 1/8 of it */
  double pmax = v->predicted_batch_us > 0 ? v->predicted_batch_us : 1000;
  for (int32_t n = 1; n <= b->max_batch; n++)
    b->prior_us[n] = pmax * (0.125 + 0.875 * (double)n / b->max_batch);
  b->scale = 1;
  b->budget_f = 0.8;
  b->slo_batch = b->max_batch;
  b->slo_delay_us = c->max_queue_delay_us;
  if (adapts(c)) slo_choose(b);

  int32_t count = c->instance_count;
  int32_t threads = c->instance_threads;
  if (threads <= 0) threads = threads_total > count ? threads_total / count : 1;
  kn_error e = {0};
  for (int32_t i = 0; i < count; i++) {
    sv_instance *in = &b->inst[i];
    in->b = b;
    in->index = i;
    if (kn_context_create(v->kmodel, &in->ctx, &e) != KN_OK ||
        kn_context_set_threads(in->ctx, threads, &e) != KN_OK) {
      snprintf(err, err_n, "instance %d: %s", i, e.msg);
      batcher_free(b);
      return false;
    }
    kn_context_set_cancel(in->ctx, cancel_hook, &b->abort);
  }
  v->batcher = b;
  atomic_store(&v->stats->n_instances, count);
  for (int32_t i = 0; i < count; i++) {
    if (pthread_create(&b->inst[i].th, NULL, instance_main, &b->inst[i]) != 0) {
      snprintf(err, err_n, "cannot start instance thread %d", i);
      sv_batcher_stop(v);
      return false;
    }
    b->inst[i].started = true;
    b->n_inst = i + 1;
  }
  return true;
}

void sv_batcher_submit(sv_version *v, sv_request *r) {
  sv_batcher *b = v->batcher;
  const sv_config *c = &v->cfg;
  r->version = v;
  r->enqueue_ns = sv_now_ns();
  if (!r->arrival_ns) r->arrival_ns = r->enqueue_ns;
  int64_t timeout = c->default_timeout_us;
  if (r->timeout_us >= 0 && c->allow_timeout_override) timeout = r->timeout_us;
  r->deadline_ns = timeout > 0 ? r->arrival_ns + timeout * 1000 : 0;
  int32_t pr = r->priority > 0 ? r->priority : c->default_priority_level;
  r->level = pr - 1;
  if (r->level < 0 || r->level >= c->priority_levels) r->level = c->priority_levels - 1;
  char msg[256];
  pthread_mutex_lock(&b->mu);
  if (b->stopping || atomic_load(&b->abort)) {
    pthread_mutex_unlock(&b->mu);
    r->start_ns = r->enqueue_ns;
    finish(r, SV_OUT_REJECTED, "the model version is unloading", NULL);
    return;
  }
  if (c->max_queue_size > 0 && b->count[r->level] >= c->max_queue_size) {
    pthread_mutex_unlock(&b->mu);
    snprintf(msg, sizeof msg,
             "the queue of model '%s' version %lld is full (max_queue_size %d at priority %d)",
             v->owner ? v->owner->name : "", (long long)v->version, c->max_queue_size, pr);
    r->start_ns = r->enqueue_ns;
    finish(r, SV_OUT_REJECTED, msg, NULL);
    return;
  }
  push(b, r->level, r);
  pthread_cond_signal(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

void sv_batcher_abort(sv_version *v) {
  if (!v->batcher) return;
  atomic_store(&v->batcher->abort, 1);
  pthread_mutex_lock(&v->batcher->mu);
  pthread_cond_broadcast(&v->batcher->cv);
  pthread_mutex_unlock(&v->batcher->mu);
}

void sv_batcher_stop(sv_version *v) {
  sv_batcher *b = v->batcher;
  if (!b) return;
  pthread_mutex_lock(&b->mu);
  b->stopping = true;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
  for (int32_t i = 0; i < b->n_inst; i++)
    if (b->inst[i].started) pthread_join(b->inst[i].th, NULL);
  v->batcher = NULL;
  batcher_free(b);
}
