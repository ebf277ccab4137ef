#include "core.h"

#include <stdarg.h>

kn_status kn_fail(kn_error *err, kn_status status, const char *fmt, ...) {
  if (err) {
    char raw[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* Names come from model files and may hold any bytes: control
     * characters become \xNN so a message stays one line and cannot drive
     * a terminal. */
    size_t o = 0;
    for (const unsigned char *c = (const unsigned char *)raw; *c; c++) {
      if (*c < 0x20 || *c == 0x7f) {
        if (o + 5 >= sizeof err->msg) break;
        snprintf(err->msg + o, 5, "\\x%02x", *c);
        o += 4;
      } else {
        if (o + 1 >= sizeof err->msg) break;
        err->msg[o++] = (char)*c;
      }
    }
    err->msg[o] = 0;
    err->status = status;
  }
  return status;
}

void kn_error_prefix(kn_error *err, const char *fmt, ...) {
  if (!err) return;
  char prefix[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  char old[sizeof err->msg];
  memcpy(old, err->msg, sizeof old);
  old[sizeof old - 1] = 0;
  size_t pl = strlen(prefix), ol = strlen(old);
  if (pl + 2 >= sizeof err->msg) pl = sizeof err->msg - 3;
  memcpy(err->msg, prefix, pl);
  memcpy(err->msg + pl, ": ", 2);
  if (pl + 2 + ol >= sizeof err->msg) ol = sizeof err->msg - pl - 3;
  memcpy(err->msg + pl + 2, old, ol);
  err->msg[pl + 2 + ol] = 0;
}

const char *kn_status_name(kn_status s) {
  static const char *const names[] = {
      [KN_OK] = "ok",
      [KN_ERR_INVALID_ARG] = "invalid argument",
      [KN_ERR_IO] = "i/o error",
      [KN_ERR_PARSE] = "parse error",
      [KN_ERR_UNSUPPORTED] = "unsupported",
      [KN_ERR_SHAPE] = "shape error",
      [KN_ERR_DTYPE] = "dtype error",
      [KN_ERR_MISSING] = "missing value",
      [KN_ERR_LIMIT] = "limit exceeded",
      [KN_ERR_OOM] = "out of memory",
      [KN_ERR_INTERNAL] = "internal error",
      [KN_ERR_CANCELLED] = "cancelled",
  };
  if ((unsigned)s < sizeof names / sizeof names[0] && names[s]) return names[s];
  return "unknown status";
}

_Noreturn void kn_assert_fail(const char *what, const char *file, int line) {
  fprintf(stderr, "kiln: internal assertion failed: %s (%s:%d)\n", what, file,
          line);
  abort();
}

void *kn_malloc(size_t n) { return malloc(n ? n : 1); }
void *kn_calloc(size_t n, size_t sz) { return calloc(n ? n : 1, sz ? sz : 1); }
void *kn_realloc(void *p, size_t n) { return realloc(p, n ? n : 1); }

char *kn_strdup(const char *s) {
  if (!s) return NULL;
  return kn_strndup(s, strlen(s));
}

char *kn_strndup(const char *s, size_t n) {
  char *d = kn_malloc(n + 1);
  if (!d) return NULL;
  if (n) memcpy(d, s, n);
  d[n] = 0;
  return d;
}

bool kn_grow_array(void **ptr, int32_t *cap, int64_t need, size_t elem) {
  if (need <= *cap) return true;
  if (need > INT32_MAX / 2) return false;
  int64_t ncap = *cap ? *cap : 8;
  while (ncap < need) ncap *= 2;
  void *p = realloc(*ptr, (size_t)ncap * elem);
  if (!p) return false;
  memset((char *)p + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
  *ptr = p;
  *cap = (int32_t)ncap;
  return true;
}

bool kn_lines_add(kn_lines *l, const char *text) {
  char **d = kn_realloc(l->s, ((size_t)l->n + 1) * sizeof *d);
  if (!d) return false;
  l->s = d;
  if (!(d[l->n] = kn_strdup(text))) return false;
  l->n++;
  return true;
}

bool kn_lines_add_once(kn_lines *l, const char *text) {
  for (int32_t i = 0; i < l->n; i++)
    if (!strcmp(l->s[i], text)) return true;
  return kn_lines_add(l, text);
}

void kn_lines_free(kn_lines *l) {
  for (int32_t i = 0; i < l->n; i++) free(l->s[i]);
  free(l->s);
  l->s = NULL;
  l->n = 0;
}
