/* A growable byte buffer for response bodies and messages, and the clock. */
#include "serve.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t sv_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A buffer that failed to grow stays failed (oom) and takes nothing more:
 * the caller checks once at the end. */
void sv_buf_reserve(sv_buf *b, size_t extra) {
  if (b->oom) return;
  if (b->n + extra + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->n + extra + 1) {
    if (cap > SIZE_MAX / 2) {
      b->oom = true;
      return;
    }
    cap *= 2;
  }
  char *p = realloc(b->p, cap);
  if (!p) {
    b->oom = true;
    return;
  }
  b->p = p;
  b->cap = cap;
}

void sv_buf_put(sv_buf *b, const void *data, size_t n) {
  sv_buf_reserve(b, n);
  if (b->oom) return;
  if (n) memcpy(b->p + b->n, data, n);
  b->n += n;
  b->p[b->n] = 0;
}

void sv_buf_puts(sv_buf *b, const char *s) { sv_buf_put(b, s, strlen(s)); }

void sv_buf_printf(sv_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char tmp[256];
  int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (k < 0) return;
  if ((size_t)k < sizeof tmp) {
    sv_buf_put(b, tmp, (size_t)k);
    return;
  }
  sv_buf_reserve(b, (size_t)k);
  if (b->oom) return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)k;
}

void sv_buf_json_str(sv_buf *b, const char *s) {
  sv_buf_reserve(b, strlen(s) + 2);
  sv_buf_put(b, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '"': sv_buf_put(b, "\\\"", 2); break;
    case '\\': sv_buf_put(b, "\\\\", 2); break;
    case '\n': sv_buf_put(b, "\\n", 2); break;
    case '\r': sv_buf_put(b, "\\r", 2); break;
    case '\t': sv_buf_put(b, "\\t", 2); break;
    default:
      if (*p < 0x20 || *p == 0x7f) sv_buf_printf(b, "\\u%04x", *p);
      else sv_buf_put(b, p, 1);
    }
  }
  sv_buf_put(b, "\"", 1);
}

void sv_buf_free(sv_buf *b) {
  free(b->p);
  *b = (sv_buf){0};
}

const char *sv_printable(const char *s, char *out, size_t n) {
  size_t k = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p && k + 5 < n; p++) {
    if (*p < 0x20 || *p == 0x7f) k += (size_t)snprintf(out + k, n - k, "\\x%02x", *p);
    else out[k++] = (char)*p;
  }
  if (n) out[k < n ? k : n - 1] = 0;
  return out;
}
