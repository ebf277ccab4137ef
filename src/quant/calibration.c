/* Calibration tables and their text file, the calibration cache
 * (kiln.h; the format is docs/CALIBRATION.md's, restated here):
 *
 *   kiln-calibration 1          first line, exactly (the format version)
 *   # comment                   lines starting with '#' (after blanks), and
 *                               blank lines, anywhere after the first
 *   method NAME [PARAM]         once: minmax | percentile P | entropy | mse
 *   samples N                   once: N >= 1
 *   NAME AMAX MIN MAX           one per tensor, after method and samples
 *   end                         last: a file without it was cut short
 *
 * Fields are separated by spaces or tabs; a line may end in "\r\n".  A
 * NAME is written bare when it is non-empty, every byte is printable and
 * not a space, '"' or '\\', it does not start with '#' and is none of the
 * words kiln-calibration, method, samples, end; otherwise it is quoted:
 * "..." with \" \\ \n \r \t and \xHH (two hex digits, not 00) escapes, any
 * other byte as itself.  Bytes from 0x80 up (UTF-8) are themselves either
 * way.  Numbers are decimal floats (digits, '.', 'e', signs), finite and
 * within float range: AMAX >= 0, MIN <= MAX. */
#include "calibration.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <unistd.h>

#define VERSION 1
#define MAX_FILE_BYTES ((size_t)1 << 30)

const char *kn_calib_method_name(kn_calib_method m) {
  switch (m) {
  case KN_CALIB_MINMAX: return "minmax";
  case KN_CALIB_PERCENTILE: return "percentile";
  case KN_CALIB_ENTROPY: return "entropy";
  case KN_CALIB_MSE: return "mse";
  }
  return NULL;
}

int32_t kn_calib_method_from_name(const char *name) {
  for (int32_t m = KN_CALIB_MINMAX; m <= KN_CALIB_MSE; m++)
    if (name && !strcmp(name, kn_calib_method_name((kn_calib_method)m))) return m;
  return -1;
}

/* ---- the table ---------------------------------------------------------------- */

kn_status kn_calibration_new(kn_calib_method method, double param, int64_t samples,
                             kn_calibration **out, kn_error *err) {
  *out = kn_calloc(1, sizeof **out);
  if (!*out) return kn_fail(err, KN_ERR_OOM, "out of memory for a calibration table");
  (*out)->method = method;
  /* a float, as the file holds it: %.9g writes it back exactly */
  (*out)->param = method == KN_CALIB_PERCENTILE ? (double)(float)param : 0;
  (*out)->samples = samples;
  return KN_OK;
}

kn_status kn_calibration_append(kn_calibration *c, const char *name, size_t len, float amax,
                                float min, float max, kn_error *err) {
  if (c->n == INT32_MAX - 1 || !KN_GROW(c->r, c->cap, (int64_t)c->n + 1))
    return kn_fail(err, KN_ERR_OOM, "out of memory for a calibration table");
  char *nm = kn_strndup(name, len);
  if (!nm) return kn_fail(err, KN_ERR_OOM, "out of memory for a calibration table");
  c->r[c->n++] = (kn_calib_range){.name = nm, .amax = amax, .scale = amax / 127.0f,
                                  .min = min, .max = max};
  return KN_OK;
}

/* qsort has no argument: the table rides in a file-scope-free way, by
 * sorting pointers to the entries instead of indices. */
static int cmp_range_ptr(const void *a, const void *b) {
  const kn_calib_range *x = *(const kn_calib_range *const *)a;
  const kn_calib_range *y = *(const kn_calib_range *const *)b;
  int c = strcmp(x->name, y->name);
  return c ? c : (x < y ? -1 : x > y);
}

int32_t kn_calibration_index(kn_calibration *c) {
  free(c->sorted);
  c->sorted = kn_malloc(sizeof(int32_t) * ((size_t)c->n + 1));
  const kn_calib_range **p = kn_malloc(sizeof(*p) * ((size_t)c->n + 1));
  if (!c->sorted || !p) {
    free(p);
    return -2;
  }
  for (int32_t i = 0; i < c->n; i++) p[i] = &c->r[i];
  qsort(p, (size_t)c->n, sizeof *p, cmp_range_ptr);
  int32_t dup = -1;
  for (int32_t i = 0; i < c->n; i++) {
    c->sorted[i] = (int32_t)(p[i] - c->r);
    if (i && !strcmp(p[i]->name, p[i - 1]->name)) {
      int32_t later = (int32_t)(p[i] - c->r); /* the pair's second in file order */
      if (dup < 0 || later < dup) dup = later;
    }
  }
  free(p);
  return dup;
}

void kn_calibration_free(kn_calibration *c) {
  if (!c) return;
  for (int32_t i = 0; i < c->n; i++) free((char *)c->r[i].name);
  free(c->r);
  free(c->sorted);
  free(c);
}

kn_calib_method kn_calibration_method(const kn_calibration *c, double *param) {
  if (param) *param = c->param;
  return c->method;
}

int64_t kn_calibration_samples(const kn_calibration *c) { return c->samples; }
int32_t kn_calibration_count(const kn_calibration *c) { return c->n; }

kn_status kn_calibration_entry(const kn_calibration *c, int32_t i, kn_calib_range *out) {
  if (i < 0 || i >= c->n)
    return KN_ERR_INVALID_ARG;
  *out = c->r[i];
  return KN_OK;
}

int32_t kn_calibration_get(const kn_calibration *c, const char *name, kn_calib_range *out) {
  KN_ASSERT(c->sorted || c->n == 0);
  int32_t lo = 0, hi = c->n;
  while (lo < hi) {
    int32_t mid = lo + (hi - lo) / 2;
    int cmp = strcmp(c->r[c->sorted[mid]].name, name);
    if (cmp == 0) {
      *out = c->r[c->sorted[mid]];
      return 1;
    }
    if (cmp < 0) lo = mid + 1;
    else hi = mid;
  }
  return 0;
}

void kn_calib_u8_params(const kn_calib_range *r, float *scale, int32_t *zero) {
  float lo = r->min > -r->amax ? r->min : -r->amax;
  float hi = r->max < r->amax ? r->max : r->amax;
  if (!(lo < 0.0f)) lo = 0.0f; /* NaN-safe: widened to hold 0 */
  if (!(hi > 0.0f)) hi = 0.0f;
  if (!(hi - lo > 0.0f) || !isfinite(hi - lo)) {
    *scale = 1.0f;
    *zero = 0;
    return;
  }
  float s = (hi - lo) / 255.0f;
  float z = nearbyintf(-lo / s);
  *scale = s;
  *zero = z < 0.0f ? 0 : z > 255.0f ? 255 : (int32_t)z;
}

/* ---- writing ------------------------------------------------------------------ */

static const char *const keywords[] = {"kiln-calibration", "method", "samples", "end"};

static bool bare_ok(const char *s) {
  if (!*s || *s == '#') return false;
  for (size_t i = 0; i < sizeof keywords / sizeof *keywords; i++)
    if (!strcmp(s, keywords[i])) return false;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if (*p <= 0x20 || *p == 0x7f || *p == '"' || *p == '\\') return false;
  return true;
}

size_t kn_calib_name_write(const char *name, char *buf, size_t size) {
  size_t o = 0;
#define PUT(ch)                                                                              \
  do {                                                                                       \
    if (o + 1 < size) buf[o] = (char)(ch);                                                   \
    o++;                                                                                     \
  } while (0)
  if (bare_ok(name)) {
    for (const char *p = name; *p; p++) PUT(*p);
  } else {
    PUT('"');
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
      const char *esc = *p == '"' ? "\\\"" : *p == '\\' ? "\\\\" : *p == '\n' ? "\\n"
                      : *p == '\r' ? "\\r" : *p == '\t' ? "\\t" : NULL;
      char hex[5];
      if (!esc && (*p < 0x20 || *p == 0x7f)) {
        snprintf(hex, sizeof hex, "\\x%02x", *p);
        esc = hex;
      }
      if (esc)
        for (; *esc; esc++) PUT(*esc);
      else PUT(*p);
    }
    PUT('"');
  }
#undef PUT
  if (size) buf[o < size ? o : size - 1] = 0;
  return o;
}

/* A growable string. */
typedef struct sbuf {
  char *s;
  size_t n, cap;
  bool oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t len) {
  if (b->oom) return;
  if (b->n + len + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + len + 1) cap *= 2;
    char *ns = kn_realloc(b->s, cap);
    if (!ns) {
      b->oom = true;
      return;
    }
    b->s = ns;
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, len);
  b->n += len;
  b->s[b->n] = 0;
}

static void sb_printf(sbuf *b, const char *fmt, ...) KN_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  KN_ASSERT(n >= 0 && (size_t)n < sizeof line);
  sb_add(b, line, (size_t)n);
}

char *kn_calibration_to_text(const kn_calibration *c) {
  sbuf b = {0};
  sb_printf(&b, "kiln-calibration %d\n", VERSION);
  sb_printf(&b, "# int8 calibration (docs/CALIBRATION.md): one line per tensor,\n"
                "# NAME AMAX MIN MAX; int8 scale = AMAX / 127.  Names as in the ONNX model.\n");
  if (c->method == KN_CALIB_PERCENTILE) sb_printf(&b, "method percentile %.9g\n", c->param);
  else sb_printf(&b, "method %s\n", kn_calib_method_name(c->method));
  sb_printf(&b, "samples %lld\n", (long long)c->samples);
  for (int32_t i = 0; i < c->n; i++) {
    const kn_calib_range *r = &c->r[i];
    size_t need = kn_calib_name_write(r->name, NULL, 0);
    char *nm = kn_malloc(need + 1);
    if (!nm) {
      b.oom = true;
      break;
    }
    kn_calib_name_write(r->name, nm, need + 1);
    sb_add(&b, nm, need);
    free(nm);
    sb_printf(&b, " %.9g %.9g %.9g\n", r->amax, r->min, r->max);
  }
  sb_printf(&b, "end\n");
  if (b.oom) {
    free(b.s);
    return NULL;
  }
  return b.s;
}

kn_status kn_calibration_save(const kn_calibration *c, const char *path, kn_error *err) {
  char *text = kn_calibration_to_text(c);
  if (!text) return kn_fail(err, KN_ERR_OOM, "%s: out of memory writing the calibration", path);
  size_t len = strlen(path) + 5;
  char *tmp = kn_malloc(len);
  if (!tmp) {
    free(text);
    return kn_fail(err, KN_ERR_OOM, "%s: out of memory", path);
  }
  snprintf(tmp, len, "%s.tmp", path);
  kn_status st = KN_OK;
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    st = kn_fail(err, KN_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
  } else {
    size_t n = strlen(text);
    bool ok = fwrite(text, 1, n, f) == n;
    ok &= fflush(f) == 0;
    int e = errno;
    ok &= fclose(f) == 0;
    if (!ok) {
      st = kn_fail(err, KN_ERR_IO, "%s: cannot write: %s", tmp, strerror(e ? e : errno));
      unlink(tmp);
    } else if (rename(tmp, path) != 0) {
      st = kn_fail(err, KN_ERR_IO, "%s: cannot rename %s to it: %s", path, tmp, strerror(errno));
      unlink(tmp);
    }
  }
  free(tmp);
  free(text);
  return st;
}

/* ---- reading ------------------------------------------------------------------ */

typedef struct parser {
  const char *label;
  const char *p, *end; /* the current line: [p, end) without its newline */
  int64_t line;
  kn_error *err;
  char *name;          /* the last name read, NUL-terminated */
  size_t name_len, name_cap;
  char what[300];      /* "tensor NAME" (as written in the file) for messages */
  int64_t *lines;      /* the line of each tensor */
  int32_t lines_cap;
} parser;

/* A short, one-line view of the line's text from p, for messages. */
static void excerpt(const char *p, const char *end, char *buf, size_t size) {
  size_t o = 0;
  for (; p < end; p++) {
    unsigned char ch = (unsigned char)*p;
    if (o + 8 >= size) {
      memcpy(buf + o, "...", 3);
      o += 3;
      break;
    }
    if (ch < 0x20 || ch == 0x7f) o += (size_t)snprintf(buf + o, size - o, "\\x%02x", ch);
    else buf[o++] = (char)ch;
  }
  buf[o] = 0;
}

static kn_status bad(parser *ps, const char *fmt, ...) KN_PRINTF(2, 3);
static kn_status bad(parser *ps, const char *fmt, ...) {
  char what[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return kn_fail(ps->err, KN_ERR_PARSE, "%s:%lld: %s", ps->label, (long long)ps->line, what);
}

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

static void skip_blanks(parser *ps) {
  while (ps->p < ps->end && is_blank(*ps->p)) ps->p++;
}

/* The next blank-separated token [*tok, *tok + *len). */
static bool token(parser *ps, const char **tok, size_t *len) {
  skip_blanks(ps);
  *tok = ps->p;
  while (ps->p < ps->end && !is_blank(*ps->p)) ps->p++;
  *len = (size_t)(ps->p - *tok);
  return *len > 0;
}

static bool tok_is(const char *tok, size_t len, const char *word) {
  return len == strlen(word) && !memcmp(tok, word, len);
}

static kn_status name_push(parser *ps, char ch) {
  if (ps->name_len + 2 > ps->name_cap) {
    size_t cap = ps->name_cap ? ps->name_cap * 2 : 64;
    char *n = kn_realloc(ps->name, cap);
    if (!n) return kn_fail(ps->err, KN_ERR_OOM, "%s: out of memory", ps->label);
    ps->name = n;
    ps->name_cap = cap;
  }
  ps->name[ps->name_len++] = ch;
  ps->name[ps->name_len] = 0;
  return KN_OK;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* A tensor name, bare or quoted, into ps->name. */
static kn_status read_name(parser *ps) {
  kn_status st;
  ps->name_len = 0;
  if ((st = name_push(ps, 0))) return st;
  ps->name_len = 0;
  if (*ps->p != '"') {
    while (ps->p < ps->end && !is_blank(*ps->p)) {
      unsigned char ch = (unsigned char)*ps->p;
      if (ch < 0x20 || ch == 0x7f || ch == '"' || ch == '\\')
        return bad(ps, "byte 0x%02x in the bare tensor name '%.*s'; expected the name in "
                       "double quotes (\"...\") with \\ escapes", ch, (int)ps->name_len,
                   ps->name);
      if ((st = name_push(ps, (char)ch))) return st;
      ps->p++;
    }
    return KN_OK;
  }
  ps->p++;
  for (;;) {
    if (ps->p >= ps->end)
      return bad(ps, "tensor name \"%.*s... is not closed; expected a closing '\"' on the "
                     "same line", (int)(ps->name_len < 64 ? ps->name_len : 64), ps->name);
    unsigned char ch = (unsigned char)*ps->p++;
    if (ch == '"') break;
    if (ch < 0x20 && ch != '\t')
      return bad(ps, "byte 0x%02x inside a quoted tensor name; expected it written as \\x%02x",
                 ch, ch);
    if (ch == '\\') {
      if (ps->p >= ps->end)
        return bad(ps, "'\\' at the end of the line; expected an escape: \\\" \\\\ \\n \\r "
                       "\\t or \\xHH");
      char e = *ps->p++;
      switch (e) {
      case '"': ch = '"'; break;
      case '\\': ch = '\\'; break;
      case 'n': ch = '\n'; break;
      case 'r': ch = '\r'; break;
      case 't': ch = '\t'; break;
      case 'x': {
        int hi = ps->end - ps->p >= 2 ? hexval(ps->p[0]) : -1;
        int lo = hi >= 0 ? hexval(ps->p[1]) : -1;
        if (lo < 0)
          return bad(ps, "escape \\x not followed by two hex digits; expected \\xHH");
        ch = (unsigned char)(hi * 16 + lo);
        if (ch == 0) return bad(ps, "escape \\x00 in a tensor name; names hold no NUL byte");
        ps->p += 2;
        break;
      }
      default: {
        char ex[16];
        excerpt(ps->p - 1, ps->p, ex, sizeof ex);
        return bad(ps, "unknown escape '\\%s' in a tensor name; expected \\\" \\\\ \\n \\r "
                       "\\t or \\xHH", ex);
      }
      }
    }
    if ((st = name_push(ps, (char)ch))) return st;
  }
  if (ps->p < ps->end && !is_blank(*ps->p))
    return bad(ps, "text right after the closing '\"' of tensor name; expected a space, "
                   "then AMAX MIN MAX");
  return KN_OK;
}

/* A finite decimal float field. */
static kn_status read_float(parser *ps, const char *field, float *out) {
  const char *what = ps->what;
  const char *tok;
  size_t len;
  char ex[64];
  if (!token(ps, &tok, &len))
    return bad(ps, "%s: no %s; expected NAME AMAX MIN MAX", what, field);
  excerpt(tok, tok + len, ex, sizeof ex);
  bool chars_ok = len < 64;
  for (size_t i = 0; chars_ok && i < len; i++)
    chars_ok = (tok[i] >= '0' && tok[i] <= '9') || tok[i] == '.' || tok[i] == 'e' ||
               tok[i] == 'E' || tok[i] == '+' || tok[i] == '-';
  char num[64];
  if (chars_ok) {
    memcpy(num, tok, len);
    num[len] = 0;
    char *endp;
    errno = 0;
    float v = strtof(num, &endp);
    bool overflow = errno == ERANGE && isinf(v);
    if (endp == num + len && len > 0 && !overflow && isfinite(v)) {
      *out = v;
      return KN_OK;
    }
    if (overflow && endp == num + len)
      return bad(ps, "%s: %s '%s' is out of float range; expected a finite float", what,
                 field, ex);
  }
  return bad(ps, "%s: %s '%s' is not a number; expected a decimal float such as 1.5 or "
                 "2.5e-3", what, field, ex);
}

static kn_status expect_end_of_line(parser *ps, const char *what) {
  skip_blanks(ps);
  if (ps->p < ps->end) {
    char ex[64];
    excerpt(ps->p, ps->end, ex, sizeof ex);
    return bad(ps, "unexpected '%s' after %s; expected the end of the line", ex, what);
  }
  return KN_OK;
}

/* A whole non-negative integer token. */
static bool parse_i64(const char *tok, size_t len, int64_t *out) {
  if (len == 0 || len > 18) return false;
  int64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    if (tok[i] < '0' || tok[i] > '9') return false;
    v = v * 10 + (tok[i] - '0');
  }
  *out = v;
  return true;
}

static kn_status parse_lines(parser *ps, const char *text, size_t size, kn_calibration *c) {
  const char *cur = text, *stop = text + size;
  bool have_method = false, have_samples = false, ended = false;
  int64_t method_line = 0, samples_line = 0;
  kn_status st;
  for (ps->line = 1; cur < stop; ps->line++) {
    const char *nl = memchr(cur, '\n', (size_t)(stop - cur));
    ps->p = cur;
    ps->end = nl ? nl : stop;
    cur = nl ? nl + 1 : stop;
    if (ps->end > ps->p && ps->end[-1] == '\r') ps->end--;
    const char *nul = memchr(ps->p, 0, (size_t)(ps->end - ps->p));
    if (nul) return bad(ps, "NUL byte at column %d; expected text", (int)(nul - ps->p) + 1);
    char ex[64];
    if (ps->line == 1) {
      const char *tok;
      size_t len;
      int64_t v;
      excerpt(ps->p, ps->end, ex, sizeof ex);
      if (!token(ps, &tok, &len) || !tok_is(tok, len, "kiln-calibration"))
        return bad(ps, "first line is '%s', not a kiln calibration file; expected "
                       "'kiln-calibration %d'", ex, VERSION);
      if (!token(ps, &tok, &len) || !parse_i64(tok, len, &v))
        return bad(ps, "first line is '%s'; expected 'kiln-calibration %d'", ex, VERSION);
      if (v != VERSION)
        return bad(ps, "calibration file version %lld; expected version %d (this kiln reads "
                       "only that)", (long long)v, VERSION);
      if ((st = expect_end_of_line(ps, "the version"))) return st;
      continue;
    }
    skip_blanks(ps);
    if (ps->p == ps->end || *ps->p == '#') continue;
    if (ended) {
      excerpt(ps->p, ps->end, ex, sizeof ex);
      return bad(ps, "'%s' after the 'end' line; expected nothing but comments or blank lines",
                 ex);
    }
    const char *tok = ps->p;
    size_t len = 0;
    if (*ps->p != '"') {
      const char *save = ps->p;
      token(ps, &tok, &len);
      ps->p = save;
    }
    if (tok_is(tok, len, "kiln-calibration"))
      return bad(ps, "a second 'kiln-calibration' line; expected it only as the first line");
    if (tok_is(tok, len, "method")) {
      ps->p += len;
      if (have_method)
        return bad(ps, "a second 'method' line (the first is line %lld); expected one",
                   (long long)method_line);
      if (c->n) return bad(ps, "'method' after the tensors; expected it before them");
      const char *mt;
      size_t ml;
      if (!token(ps, &mt, &ml))
        return bad(ps, "'method' with no name; expected minmax, percentile P, entropy or mse");
      char mname[16] = "";
      if (ml < sizeof mname) memcpy(mname, mt, ml), mname[ml] = 0;
      int32_t m = kn_calib_method_from_name(mname);
      if (m < 0) {
        excerpt(mt, mt + ml, ex, sizeof ex);
        return bad(ps, "unknown method '%s'; expected minmax, percentile P, entropy or mse", ex);
      }
      c->method = (kn_calib_method)m;
      if (m == KN_CALIB_PERCENTILE) {
        float p;
        snprintf(ps->what, sizeof ps->what, "method percentile");
        if ((st = read_float(ps, "P", &p))) return st;
        if (!(p > 0 && p <= 100))
          return bad(ps, "percentile %.9g; expected a number in (0, 100]", p);
        c->param = p;
      }
      if ((st = expect_end_of_line(ps, "the method"))) return st;
      have_method = true;
      method_line = ps->line;
      continue;
    }
    if (tok_is(tok, len, "samples")) {
      ps->p += len;
      if (have_samples)
        return bad(ps, "a second 'samples' line (the first is line %lld); expected one",
                   (long long)samples_line);
      if (c->n) return bad(ps, "'samples' after the tensors; expected it before them");
      const char *nt;
      size_t nlen;
      int64_t v = 0;
      if (!token(ps, &nt, &nlen) || !parse_i64(nt, nlen, &v) || v < 1) {
        excerpt(nt, nt + nlen, ex, sizeof ex);
        return bad(ps, "samples '%s'; expected a whole number >= 1", ex);
      }
      c->samples = v;
      if ((st = expect_end_of_line(ps, "the sample count"))) return st;
      have_samples = true;
      samples_line = ps->line;
      continue;
    }
    if (tok_is(tok, len, "end")) {
      ps->p += len;
      if ((st = expect_end_of_line(ps, "'end'"))) return st;
      if (!have_method || !have_samples)
        return bad(ps, "'end' before a '%s' line; expected both 'method' and 'samples' lines",
                   have_method ? "samples" : "method");
      ended = true;
      continue;
    }
    /* a tensor */
    if (!have_method || !have_samples)
      return bad(ps, "tensor line before the '%s' line; expected 'method' and 'samples' "
                     "first", have_method ? "samples" : "method");
    if ((st = read_name(ps))) return st;
    char nm[256];
    kn_calib_name_write(ps->name, nm, sizeof nm);
    snprintf(ps->what, sizeof ps->what, "tensor %s", nm);
    float amax, mn, mx;
    if ((st = read_float(ps, "AMAX", &amax)) || (st = read_float(ps, "MIN", &mn)) ||
        (st = read_float(ps, "MAX", &mx)))
      return st;
    if ((st = expect_end_of_line(ps, "MAX"))) return st;
    if (amax < 0)
      return bad(ps, "%s: AMAX %.9g is negative; expected a threshold >= 0", ps->what, amax);
    if (mn > mx)
      return bad(ps, "%s: MIN %.9g is above MAX %.9g; expected MIN <= MAX", ps->what, mn, mx);
    if ((st = kn_calibration_append(c, ps->name, ps->name_len, amax, mn, mx, ps->err)))
      return st;
    if (!KN_GROW(ps->lines, ps->lines_cap, c->n))
      return kn_fail(ps->err, KN_ERR_OOM, "%s: out of memory", ps->label);
    ps->lines[c->n - 1] = ps->line;
  }
  if (size == 0) {
    ps->line = 1;
    return bad(ps, "empty file; expected 'kiln-calibration %d' on the first line", VERSION);
  }
  if (!ended) {
    ps->line--;
    return bad(ps, "the file ends without its 'end' line (cut short?); expected the "
                   "tensor lines to be followed by 'end'");
  }
  return KN_OK;
}

kn_status kn_calibration_parse(const char *text, size_t size, const char *label,
                               kn_calibration **out, kn_error *err) {
  *out = NULL;
  kn_calibration *c;
  kn_status st = kn_calibration_new(KN_CALIB_MINMAX, 0, 0, &c, err);
  if (st) return st;
  parser ps = {.label = label ? label : "calibration", .err = err};
  st = parse_lines(&ps, text, size, c);
  free(ps.name);
  if (!st) {
    int32_t dup = kn_calibration_index(c);
    if (dup == -2) {
      st = kn_fail(err, KN_ERR_OOM, "%s: out of memory", ps.label);
    } else if (dup >= 0) {
      int32_t first = 0;
      while (first < dup && strcmp(c->r[first].name, c->r[dup].name)) first++;
      char nm[256];
      kn_calib_name_write(c->r[dup].name, nm, sizeof nm);
      st = kn_fail(err, KN_ERR_PARSE, "%s:%lld: tensor %s listed again (first on line %lld); "
                   "expected each tensor once", ps.label, (long long)ps.lines[dup], nm,
                   (long long)ps.lines[first]);
    }
  }
  free(ps.lines);
  if (st) {
    kn_calibration_free(c);
    return st;
  }
  *out = c;
  return KN_OK;
}

kn_status kn_calibration_load(const char *path, kn_calibration **out, kn_error *err) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return kn_fail(err, KN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  char *buf = NULL;
  size_t n = 0, cap = 0;
  kn_status st = KN_OK;
  for (;;) {
    if (n == cap) {
      if (cap >= MAX_FILE_BYTES) {
        st = kn_fail(err, KN_ERR_LIMIT, "%s: larger than %zu MiB; expected a calibration file",
                     path, MAX_FILE_BYTES >> 20);
        break;
      }
      cap = cap ? cap * 2 : 65536;
      char *nb = kn_realloc(buf, cap);
      if (!nb) {
        st = kn_fail(err, KN_ERR_OOM, "%s: out of memory reading it", path);
        break;
      }
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) st = kn_fail(err, KN_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
      break;
    }
  }
  fclose(f);
  if (!st) st = kn_calibration_parse(buf ? buf : "", n, path, out, err);
  free(buf);
  return st;
}
