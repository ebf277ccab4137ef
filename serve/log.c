/* Structured logs: one JSON object per line, written whole under a lock
 * so that lines from different threads never interleave. */
#include "serve.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

bool sv_log_open(sv_log *l, const char *path) {
  pthread_mutex_init(&l->mu, NULL);
  l->f = NULL;
  l->own = false;
  if (!path) return true;
  if (!strcmp(path, "-")) {
    l->f = stderr;
    return true;
  }
  l->f = fopen(path, "a");
  if (!l->f) return false;
  l->own = true;
  return true;
}

void sv_log_close(sv_log *l) {
  if (l->own && l->f) fclose(l->f);
  l->f = NULL;
  pthread_mutex_destroy(&l->mu);
}

void sv_log_event(sv_log *l, const char *event, const char *fields) {
  if (!l->f) return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char when[64];
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  sv_buf b = {0};
  sv_buf_printf(&b, "{\"ts\":\"%s.%06ldZ\",\"event\":", when, ts.tv_nsec / 1000);
  sv_buf_json_str(&b, event);
  if (fields && *fields) {
    sv_buf_puts(&b, ",");
    sv_buf_puts(&b, fields);
  }
  sv_buf_puts(&b, "}\n");
  if (!b.oom) {
    pthread_mutex_lock(&l->mu);
    fwrite(b.p, 1, b.n, l->f);
    fflush(l->f);
    pthread_mutex_unlock(&l->mu);
  }
  sv_buf_free(&b);
}
