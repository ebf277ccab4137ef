/* The server: options, start and stop, and the control thread that polls
 * the repository and frees versions whose last request has ended. */
#include "serve.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void sv_options_defaults(sv_options *o) {
  memset(o, 0, sizeof *o);
  o->port = 8000;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  o->threads = n > 0 ? (int32_t)n : 1;
  o->http_threads = 2;
  o->poll_secs = 5;
  o->control = SV_CONTROL_POLL;
  o->max_request_bytes = 64ull << 20;
  o->max_connections = 1024;
  o->connection_timeout_s = 60;
}

void sv_server_kick(sv_server *s) {
  pthread_mutex_lock(&s->ctl_mu);
  pthread_cond_signal(&s->ctl_cv);
  pthread_mutex_unlock(&s->ctl_mu);
}

static void *control_main(void *arg) {
  sv_server *s = arg;
  int64_t next_poll = sv_now_ns() + (int64_t)s->opt.poll_secs * 1000000000;
  pthread_mutex_lock(&s->ctl_mu);
  while (!atomic_load(&s->stopping)) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t wake = sv_now_ns() + 1000000000;
    if (s->opt.control == SV_CONTROL_POLL && next_poll < wake) wake = next_poll;
    ts.tv_sec = (time_t)(wake / 1000000000);
    ts.tv_nsec = (long)(wake % 1000000000);
    pthread_cond_timedwait(&s->ctl_cv, &s->ctl_mu, &ts);
    if (atomic_load(&s->stopping)) break;
    pthread_mutex_unlock(&s->ctl_mu);
    sv_repo_reap(s);
    if (s->opt.control == SV_CONTROL_POLL && sv_now_ns() >= next_poll) {
      char err[SV_REASON_MAX];
      sv_repo_sync(s, NULL, err, sizeof err); /* failures are in the index and the log */
      next_poll = sv_now_ns() + (int64_t)s->opt.poll_secs * 1000000000;
    }
    pthread_mutex_lock(&s->ctl_mu);
  }
  pthread_mutex_unlock(&s->ctl_mu);
  return NULL;
}

bool sv_server_start(sv_server *s, const sv_options *o, char *err, size_t err_n) {
  memset(s, 0, sizeof *s);
  s->opt = *o;
  pthread_mutex_init(&s->repo_mu, NULL);
  pthread_mutex_init(&s->load_mu, NULL);
  pthread_mutex_init(&s->ctl_mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->ctl_cv, &ca);
  pthread_condattr_destroy(&ca);
  sv_metrics_init(&s->metrics);
  if (!sv_log_open(&s->log, o->log_path)) {
    snprintf(err, err_n, "--log %s: %s", o->log_path, strerror(errno));
    sv_log_open(&s->log, NULL);
    return false;
  }
  sv_log_event(&s->log, "server_starting", NULL);
  char e[SV_REASON_MAX];
  if (!sv_repo_sync(s, NULL, e, sizeof e)) {
    if (strstr(e, "cannot open the repository")) {
      snprintf(err, err_n, "%s", e);
      return false;
    }
    /* a bad model is reported not ready; the others serve */
  }
  if (pthread_create(&s->control, NULL, control_main, s) != 0) {
    snprintf(err, err_n, "cannot start the control thread");
    return false;
  }
  s->control_started = true;
  if (o->port >= 0 && !sv_http_start(s, err, err_n)) return false;
  sv_buf b = {0};
  sv_buf_printf(&b, "\"port\":%d", s->bound_port);
  sv_log_event(&s->log, "server_ready", b.p);
  sv_buf_free(&b);
  return true;
}

void sv_server_stop(sv_server *s) {
  atomic_store(&s->stopping, 1);
  sv_server_kick(s);
  if (s->control_started) pthread_join(s->control, NULL);
  s->control_started = false;
  /* answer everything queued or running, so that no connection stays
   * suspended, then stop HTTP, then free the models */
  pthread_mutex_lock(&s->repo_mu);
  for (sv_model *m = s->models; m; m = m->next)
    for (int32_t i = 0; i < m->n_slots; i++)
      if (m->slots[i].v) sv_batcher_abort(m->slots[i].v);
  pthread_mutex_unlock(&s->repo_mu);
  for (int64_t until = sv_now_ns() + 120 * INT64_C(1000000000); sv_now_ns() < until;) {
    int32_t busy = 0;
    pthread_mutex_lock(&s->repo_mu);
    for (sv_model *m = s->models; m; m = m->next)
      for (int32_t i = 0; i < m->n_slots; i++)
        if (m->slots[i].v) busy += atomic_load(&m->slots[i].v->refs) - 1;
    pthread_mutex_unlock(&s->repo_mu);
    busy += atomic_load(&s->control_jobs);
    if (!busy) break;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  sv_http_stop(s);
  sv_repo_free(s);
  sv_log_event(&s->log, "server_stopped", NULL);
  sv_log_close(&s->log);
  sv_metrics_free(&s->metrics);
  pthread_mutex_destroy(&s->repo_mu);
  pthread_mutex_destroy(&s->load_mu);
  pthread_mutex_destroy(&s->ctl_mu);
  pthread_cond_destroy(&s->ctl_cv);
}
