/*
 * Text ops: StringNormalizer (opset 10) and TfIdfVectorizer (opset 9).
 *
 * String tensors hold char* elements owned by the tensor (kn_strdup).
 * Case changes decode UTF-8 and map the letters of Basic Latin, Latin-1,
 * Latin Extended-A, Greek and Cyrillic; other code points and malformed
 * bytes pass through unchanged.
 */
#include "op.h"

/* ---- UTF-8 case mapping -------------------------------------------------- */

/* Decode one code point at s (length left n); *len receives its byte count.
 * Malformed bytes decode as themselves with length 1 and *ok false. */
static uint32_t utf8_decode(const unsigned char *s, size_t n, size_t *len, bool *ok) {
  *ok = true;
  *len = 1;
  unsigned c = s[0];
  if (c < 0x80) return c;
  int extra = (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
  if (extra < 0 || (size_t)extra >= n) {
    *ok = false;
    return c;
  }
  uint32_t cp = c & (0x3Fu >> extra);
  for (int i = 1; i <= extra; i++) {
    if ((s[i] & 0xC0) != 0x80) {
      *ok = false;
      return c;
    }
    cp = (cp << 6) | (s[i] & 0x3Fu);
  }
  *len = (size_t)extra + 1;
  return cp;
}

static size_t utf8_encode(uint32_t cp, unsigned char *o) {
  if (cp < 0x80) {
    o[0] = (unsigned char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (unsigned char)(0xC0 | (cp >> 6));
    o[1] = (unsigned char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (unsigned char)(0xE0 | (cp >> 12));
    o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (unsigned char)(0xF0 | (cp >> 18));
  o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (unsigned char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Latin Extended-A pairs: upper case at even (or odd) code points. */
static bool latin_ext_upper(uint32_t c) {
  if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) ||
      (c >= 0x14A && c <= 0x177))
    return (c & 1) == 0;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) == 1;
  return false;
}

static uint32_t cp_lower(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (latin_ext_upper(c)) return c + 1;
  return c;
}

static uint32_t cp_upper(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if (c >= 0x101 && c <= 0x17E && latin_ext_upper(c - 1)) return c - 1;
  return c;
}

/* New string with every letter mapped (mode 'L' lower, 'U' upper, else copy). */
static char *str_case(const char *s, char mode) {
  size_t n = strlen(s);
  if (mode != 'L' && mode != 'U') return kn_strdup(s);
  unsigned char *o = kn_malloc(n * 4 + 1); /* 1 byte may become up to 4 */
  if (!o) return NULL;
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0, k = 0;
  while (i < n) {
    size_t len;
    bool ok;
    uint32_t cp = utf8_decode(p + i, n - i, &len, &ok);
    if (!ok) {
      o[k++] = p[i++];
      continue;
    }
    cp = mode == 'L' ? cp_lower(cp) : cp_upper(cp);
    k += utf8_encode(cp, o + k);
    i += len;
  }
  o[k] = 0;
  return (char *)o;
}

/* ---- StringNormalizer ---------------------------------------------------- */

typedef struct {
  char mode; /* 'L', 'U' or 'N' */
  bool case_sensitive;
  int32_t n_stop;
  char **stop; /* attribute strings (borrowed) */
} strnorm_params;

static kn_status strnorm_params_get(kn_op_ctx *ctx, strnorm_params *p) {
  const char *act = kn_attr_str(ctx, "case_change_action", "NONE");
  if (!strcmp(act, "LOWER")) p->mode = 'L';
  else if (!strcmp(act, "UPPER")) p->mode = 'U';
  else if (!strcmp(act, "NONE")) p->mode = 'N';
  else
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                      "case_change_action '%s' is not LOWER, UPPER or NONE", act);
  p->case_sensitive = kn_attr_int(ctx, "is_case_sensitive", 0) != 0;
  const kn_attr *sw = kn_attr_get(ctx, "stopwords");
  p->n_stop = 0;
  p->stop = NULL;
  if (sw) {
    if (sw->type != KN_ATTR_STRINGS)
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "attribute 'stopwords' must be strings");
    p->n_stop = sw->n;
    p->stop = sw->strings;
  }
  return KN_OK;
}

static kn_status strnorm_check(kn_op_ctx *ctx, const kn_tensor *x) {
  static const kn_dtype str[] = {KN_DTYPE_STRING, 0};
  kn_status st = kn_check_dtype(ctx, 0, x, str);
  if (st) return st;
  if (x->rank < 0) return KN_OK;
  if (x->rank == 1) return KN_OK;
  if (x->rank == 2 && (x->dims[0] == 1 || x->dims[0] < 0)) return KN_OK;
  char sb[128];
  return kn_op_fail(ctx, KN_ERR_SHAPE, "input must have shape [C] or [1, C], got %s",
                    kn_shape_str(x->rank, x->dims, sb, sizeof sb));
}

static kn_status strnorm_infer(kn_op_ctx *ctx) {
  strnorm_params p;
  kn_status st = strnorm_params_get(ctx, &p);
  if (st) return st;
  const kn_tensor *x = kn_in(ctx, 0);
  if (!x) {
    kn_out_set(ctx, 0, KN_DTYPE_STRING, -1, NULL);
    return KN_OK;
  }
  if ((st = strnorm_check(ctx, x))) return st;
  /* The kept count depends on the values; leave it unknown. */
  int64_t dims[2] = {1, -1};
  if (x->rank == 1) kn_out_set(ctx, 0, KN_DTYPE_STRING, 1, dims + 1);
  else kn_out_set(ctx, 0, KN_DTYPE_STRING, x->rank, x->rank == 2 ? dims : NULL);
  return KN_OK;
}

static kn_status strnorm_run(kn_op_ctx *ctx) {
  strnorm_params p;
  kn_status st = strnorm_params_get(ctx, &p);
  if (st) return st;
  const kn_tensor *x;
  if ((st = kn_in_req(ctx, 0, &x))) return st;
  if ((st = strnorm_check(ctx, x))) return st;
  int64_t n = kn_tensor_numel(x);
  char *const *xs = x->data;
  /* Lower-cased stopwords for case-insensitive matching. */
  char **stop = kn_calloc((size_t)(p.n_stop ? p.n_stop : 1), sizeof *stop);
  bool *keep = kn_calloc((size_t)(n ? n : 1), sizeof *keep);
  if (!stop || !keep) {
    st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
    goto done;
  }
  for (int32_t i = 0; i < p.n_stop; i++) {
    stop[i] = str_case(p.stop[i] ? p.stop[i] : "", p.case_sensitive ? 'N' : 'L');
    if (!stop[i]) {
      st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
      goto done;
    }
  }
  int64_t kept = 0;
  for (int64_t i = 0; i < n; i++) {
    const char *s = xs[i] ? xs[i] : "";
    char *cmp = p.case_sensitive ? NULL : str_case(s, 'L');
    if (!p.case_sensitive && !cmp) {
      st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
      goto done;
    }
    bool hit = false;
    for (int32_t k = 0; k < p.n_stop && !hit; k++) hit = !strcmp(cmp ? cmp : s, stop[k]);
    free(cmp);
    keep[i] = !hit;
    kept += keep[i];
  }
  int64_t dims[2] = {1, kept ? kept : 1};
  if (x->rank == 1) st = kn_out_alloc(ctx, 0, KN_DTYPE_STRING, 1, dims + 1);
  else st = kn_out_alloc(ctx, 0, KN_DTYPE_STRING, 2, dims);
  if (st) goto done;
  kn_tensor *y = kn_out(ctx, 0);
  char **ys = y->data;
  if (!kept) {
    ys[0] = kn_strdup("");
    if (!ys[0]) st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
    goto done;
  }
  for (int64_t i = 0, k = 0; i < n; i++) {
    if (!keep[i]) continue;
    ys[k] = str_case(xs[i] ? xs[i] : "", p.mode);
    if (!ys[k]) {
      st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
      goto done;
    }
    k++;
  }
done:
  if (stop)
    for (int32_t i = 0; i < p.n_stop; i++) free(stop[i]);
  free(stop);
  free(keep);
  return st;
}

/* ---- TfIdfVectorizer ----------------------------------------------------- */

enum { TFIDF_TF, TFIDF_IDF, TFIDF_TFIDF };

typedef struct {
  int mode;
  int64_t min_gram, max_gram, max_skip;
  const int64_t *counts; /* ngram_counts: start of each n-gram length in pool */
  int32_t n_counts;
  const int64_t *indexes; /* output column of each pool n-gram */
  int32_t n_indexes;
  const float *weights;
  int32_t n_weights;
  const int64_t *pool_i;
  char *const *pool_s;
  int64_t pool_len;
  bool strings;
  int64_t out_size; /* max(ngram_indexes) + 1 */
} tfidf_params;

static kn_status tfidf_params_get(kn_op_ctx *ctx, tfidf_params *p) {
  memset(p, 0, sizeof *p);
  const char *mode = kn_attr_str(ctx, "mode", NULL);
  if (!mode) return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "attribute 'mode' is required");
  if (!strcmp(mode, "TF")) p->mode = TFIDF_TF;
  else if (!strcmp(mode, "IDF")) p->mode = TFIDF_IDF;
  else if (!strcmp(mode, "TFIDF")) p->mode = TFIDF_TFIDF;
  else
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "mode '%s' is not TF, IDF or TFIDF", mode);
  p->min_gram = kn_attr_int(ctx, "min_gram_length", 0);
  p->max_gram = kn_attr_int(ctx, "max_gram_length", 0);
  p->max_skip = kn_attr_int(ctx, "max_skip_count", 0);
  if (p->min_gram < 1 || p->max_gram < p->min_gram || p->max_gram > 64)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                      "expected 1 <= min_gram_length (%lld) <= max_gram_length (%lld) <= 64",
                      (long long)p->min_gram, (long long)p->max_gram);
  if (p->max_skip < 0 || p->max_skip > ((int64_t)1 << 30))
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "max_skip_count %lld is out of range",
                      (long long)p->max_skip);
  p->n_counts = kn_attr_ints(ctx, "ngram_counts", &p->counts);
  p->n_indexes = kn_attr_ints(ctx, "ngram_indexes", &p->indexes);
  p->n_weights = kn_attr_floats(ctx, "weights", &p->weights);
  const kn_attr *pi = kn_attr_get(ctx, "pool_int64s");
  const kn_attr *ps = kn_attr_get(ctx, "pool_strings");
  if ((pi != NULL) == (ps != NULL))
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                      "exactly one of pool_int64s and pool_strings must be set");
  if (pi) {
    if (pi->type != KN_ATTR_INTS && pi->type != KN_ATTR_INT)
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "pool_int64s must be integers");
    int32_t n = kn_attr_ints(ctx, "pool_int64s", &p->pool_i);
    p->pool_len = n;
  } else {
    if (ps->type != KN_ATTR_STRINGS)
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "pool_strings must be strings");
    p->pool_s = ps->strings;
    p->pool_len = ps->n;
    p->strings = true;
  }
  /* ngram_counts: non-decreasing starts within the pool, each segment a
   * whole number of n-grams; their total must match ngram_indexes. */
  int64_t total = 0;
  for (int32_t i = 0; i < p->n_counts; i++) {
    int64_t start = p->counts[i];
    int64_t end = i + 1 < p->n_counts ? p->counts[i + 1] : p->pool_len;
    if (start < 0 || end < start || end > p->pool_len || (end - start) % (i + 1) != 0)
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                        "ngram_counts[%d] = %lld does not split the pool of %lld items "
                        "into whole %d-grams",
                        (int)i, (long long)start, (long long)p->pool_len, (int)i + 1);
    total += (end - start) / (i + 1);
  }
  if (p->n_counts > 0 && p->counts[0] != 0)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "ngram_counts must start at 0");
  if (total != p->n_indexes)
    return kn_op_fail(ctx, KN_ERR_INVALID_ARG,
                      "the pool holds %lld n-grams but ngram_indexes has %d entries",
                      (long long)total, (int)p->n_indexes);
  int64_t mx = -1;
  for (int32_t i = 0; i < p->n_indexes; i++) {
    if (p->indexes[i] < 0 || p->indexes[i] > ((int64_t)1 << 30))
      return kn_op_fail(ctx, KN_ERR_INVALID_ARG, "ngram_indexes[%d] = %lld is out of range",
                        (int)i, (long long)p->indexes[i]);
    if (p->indexes[i] > mx) mx = p->indexes[i];
  }
  p->out_size = mx + 1;
  return KN_OK;
}

static kn_status tfidf_check_input(kn_op_ctx *ctx, const tfidf_params *p,
                                   const kn_tensor *x) {
  if (!x) return KN_OK;
  if (x->dtype) {
    bool ok = p->strings ? x->dtype == KN_DTYPE_STRING
                         : (x->dtype == KN_DTYPE_I32 || x->dtype == KN_DTYPE_I64);
    if (!ok)
      return kn_op_fail(ctx, KN_ERR_DTYPE, "input has dtype %s, expected %s for %s",
                        kn_dtype_name(x->dtype), p->strings ? "string" : "int32 or int64",
                        p->strings ? "pool_strings" : "pool_int64s");
  }
  if (x->rank >= 0 && x->rank != 1 && x->rank != 2)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "input must be 1-D or 2-D, got rank %d",
                      (int)x->rank);
  return KN_OK;
}

static kn_status tfidf_infer(kn_op_ctx *ctx) {
  tfidf_params p;
  kn_status st = tfidf_params_get(ctx, &p);
  if (st) return st;
  const kn_tensor *x = kn_in(ctx, 0);
  if ((st = tfidf_check_input(ctx, &p, x))) return st;
  if (!x || x->rank < 0) {
    kn_out_set(ctx, 0, KN_DTYPE_F32, -1, NULL);
    return KN_OK;
  }
  int64_t dims[2] = {x->dims[0], p.out_size};
  if (x->rank == 1) kn_out_set(ctx, 0, KN_DTYPE_F32, 1, dims + 1);
  else kn_out_set(ctx, 0, KN_DTYPE_F32, 2, dims);
  return KN_OK;
}

/* Open-addressing table of the pool's n-grams keyed by (n, items). */
typedef struct {
  int64_t n;      /* gram length */
  int64_t off;    /* first item in pool */
  int64_t column; /* output column */
} gram_entry;

typedef struct {
  const tfidf_params *p;
  int64_t cap; /* power of two */
  int32_t *slots; /* entry index + 1, 0 empty */
  gram_entry *entries;
} gram_table;

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}
static uint64_t str_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* Hash of n items read by `get` at positions off, off+step, ... */
static uint64_t hash_items_pool(const tfidf_params *p, int64_t off, int64_t n) {
  uint64_t h = (uint64_t)n;
  for (int64_t k = 0; k < n; k++)
    h = mix(h, p->strings ? str_hash(p->pool_s[off + k] ? p->pool_s[off + k] : "")
                          : (uint64_t)p->pool_i[off + k]);
  return h;
}

static uint64_t hash_items_input(const kn_tensor *x, bool strings, int64_t start,
                                 int64_t step, int64_t n) {
  uint64_t h = (uint64_t)n;
  for (int64_t k = 0; k < n; k++) {
    int64_t i = start + k * step;
    if (strings) {
      const char *s = ((char *const *)x->data)[i];
      h = mix(h, str_hash(s ? s : ""));
    } else {
      h = mix(h, (uint64_t)kn_load_i64(x->data, x->dtype, i));
    }
  }
  return h;
}

static bool items_equal(const tfidf_params *p, const gram_entry *e, const kn_tensor *x,
                        int64_t start, int64_t step) {
  for (int64_t k = 0; k < e->n; k++) {
    int64_t i = start + k * step;
    if (p->strings) {
      const char *a = p->pool_s[e->off + k], *b = ((char *const *)x->data)[i];
      if (strcmp(a ? a : "", b ? b : "")) return false;
    } else if (p->pool_i[e->off + k] != kn_load_i64(x->data, x->dtype, i)) {
      return false;
    }
  }
  return true;
}

static bool pool_equal(const tfidf_params *p, const gram_entry *a, const gram_entry *b) {
  if (a->n != b->n) return false;
  for (int64_t k = 0; k < a->n; k++) {
    if (p->strings) {
      const char *x = p->pool_s[a->off + k], *y = p->pool_s[b->off + k];
      if (strcmp(x ? x : "", y ? y : "")) return false;
    } else if (p->pool_i[a->off + k] != p->pool_i[b->off + k]) {
      return false;
    }
  }
  return true;
}

static kn_status gram_table_build(kn_op_ctx *ctx, const tfidf_params *p, gram_table *t) {
  memset(t, 0, sizeof *t);
  t->p = p;
  t->cap = 16;
  while (t->cap < 2 * (int64_t)p->n_indexes) t->cap <<= 1;
  t->slots = kn_calloc((size_t)t->cap, sizeof *t->slots);
  t->entries = kn_malloc((size_t)(p->n_indexes ? p->n_indexes : 1) * sizeof *t->entries);
  if (!t->slots || !t->entries) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
  int32_t ord = 0, used = 0;
  for (int32_t i = 0; i < p->n_counts; i++) {
    int64_t n = i + 1;
    int64_t end = i + 1 < p->n_counts ? p->counts[i + 1] : p->pool_len;
    for (int64_t off = p->counts[i]; off + n <= end; off += n, ord++) {
      gram_entry e = {n, off, p->indexes[ord]};
      if (n < p->min_gram || n > p->max_gram) continue;
      uint64_t h = hash_items_pool(p, off, n);
      int64_t s = (int64_t)(h & (uint64_t)(t->cap - 1));
      bool dup = false;
      while (t->slots[s]) {
        /* A repeated pool n-gram keeps its first column (like a map). */
        if (pool_equal(p, &t->entries[t->slots[s] - 1], &e)) {
          dup = true;
          break;
        }
        s = (s + 1) & (t->cap - 1);
      }
      if (dup) continue;
      t->entries[used] = e;
      t->slots[s] = ++used;
    }
  }
  return KN_OK;
}

static void gram_table_free(gram_table *t) {
  free(t->slots);
  free(t->entries);
}

static const gram_entry *gram_find(const gram_table *t, const kn_tensor *x, int64_t start,
                                   int64_t step, int64_t n) {
  uint64_t h = hash_items_input(x, t->p->strings, start, step, n);
  int64_t s = (int64_t)(h & (uint64_t)(t->cap - 1));
  while (t->slots[s]) {
    const gram_entry *e = &t->entries[t->slots[s] - 1];
    if (e->n == n && items_equal(t->p, e, x, start, step)) return e;
    s = (s + 1) & (t->cap - 1);
  }
  return NULL;
}

static kn_status tfidf_run(kn_op_ctx *ctx) {
  tfidf_params p;
  kn_status st = tfidf_params_get(ctx, &p);
  if (st) return st;
  const kn_tensor *x;
  if ((st = kn_in_req(ctx, 0, &x))) return st;
  if ((st = tfidf_check_input(ctx, &p, x))) return st;
  int64_t rows = x->rank == 2 ? x->dims[0] : 1;
  int64_t C = x->rank == 2 ? x->dims[1] : x->dims[0];
  int64_t dims[2] = {rows, p.out_size};
  if (x->rank == 1) st = kn_out_alloc(ctx, 0, KN_DTYPE_F32, 1, dims + 1);
  else st = kn_out_alloc(ctx, 0, KN_DTYPE_F32, 2, dims);
  if (st) return st;
  float *y = kn_out(ctx, 0)->data;
  gram_table tab;
  if ((st = gram_table_build(ctx, &p, &tab))) {
    gram_table_free(&tab);
    return st;
  }
  /* Counting follows onnxruntime: for each skip distance and start, grams
   * of every length in [start_n, max_gram]; unigrams are counted only for
   * the first skip distance since skipping does not change them. */
  for (int64_t r = 0; r < rows; r++) {
    float *yr = y + r * p.out_size;
    int64_t base = r * C, start_n = p.min_gram;
    for (int64_t dist = 1; dist <= p.max_skip + 1; dist++) {
      for (int64_t s = 0; s < C; s++) {
        if (s + dist * (start_n - 1) >= C) break;
        for (int64_t n = start_n; n <= p.max_gram && s + dist * (n - 1) < C; n++) {
          const gram_entry *e = gram_find(&tab, x, base + s, dist, n);
          if (e) yr[e->column] += 1.0f;
        }
      }
      if (start_n == 1 && ++start_n > p.max_gram) break;
    }
    for (int64_t c = 0; c < p.out_size; c++) {
      float w = c < p.n_weights ? p.weights[c] : 1.0f;
      if (p.mode == TFIDF_IDF) yr[c] = yr[c] > 0 ? w : 0.0f;
      else if (p.mode == TFIDF_TFIDF) yr[c] *= w;
    }
  }
  gram_table_free(&tab);
  return KN_OK;
}

const kn_op_def kn_ops_text[] = {
    {"StringNormalizer", NULL, 1, 1, 1, 1, 10, 22, strnorm_infer, strnorm_run, NULL},
    {"TfIdfVectorizer", NULL, 1, 1, 1, 1, 9, 22, tfidf_infer, tfidf_run, NULL},
    KN_OP_END,
};
