/*
 * Einsum: a general reference implementation.  The equation is parsed into
 * label ids (letters, plus one id per ellipsis dim), every operand gets a
 * stride per label (repeated labels add up, which walks the diagonal;
 * broadcast ellipsis dims get stride 0), and the combined index space is
 * walked output labels first, summed labels inside.
 */
#include "op.h"

enum {
  EIN_LETTERS = 52,                       /* a-z, A-Z */
  EIN_LABELS = EIN_LETTERS + KN_MAX_RANK, /* then ellipsis dims */
  EIN_MAX_INPUTS = 64
};
/* Largest combined index space walked (guards hostile equations). */
#define EIN_MAX_ITER ((int64_t)1 << 36)

typedef struct ein_term {
  int32_t n;             /* labels written (letters, plus ellipsis dims) */
  int32_t ell_pos;       /* index in `lab` where the ellipsis starts, -1 none */
  int32_t ell_rank;      /* dims the ellipsis stands for */
  int32_t lab[KN_MAX_RANK];
} ein_term;

typedef struct ein_plan {
  int32_t n_in;
  ein_term in[EIN_MAX_INPUTS];
  ein_term out;
  int32_t ell_rank;             /* broadcast ellipsis rank, -1 unknown */
  int64_t size[EIN_LABELS];     /* -1 unknown */
  bool used[EIN_LABELS];
  bool rank_unknown;
} ein_plan;

static int32_t letter_id(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -1;
}

/* Parses one term from [s, e): letters and at most one "...".  Ellipsis
 * dims are recorded as -1 placeholders (resolved once ranks are known). */
static kn_status parse_term(kn_op_ctx *ctx, const char *s, const char *e,
                            ein_term *t, int32_t *letters) {
  t->n = 0;
  t->ell_pos = -1;
  t->ell_rank = 0;
  *letters = 0;
  int32_t tmp[KN_MAX_RANK + 1];
  int32_t n = 0;
  for (const char *p = s; p < e; p++) {
    if (*p == ' ') continue;
    if (*p == '.') {
      if (e - p < 3 || p[1] != '.' || p[2] != '.' || t->ell_pos >= 0)
        return kn_op_fail(ctx, KN_ERR_PARSE,
                          "equation: malformed or repeated ellipsis in a term");
      t->ell_pos = n;
      p += 2;
      continue;
    }
    int32_t id = letter_id(*p);
    if (id < 0)
      return kn_op_fail(ctx, KN_ERR_PARSE, "equation: unexpected character '%c'", *p);
    if (n >= KN_MAX_RANK)
      return kn_op_fail(ctx, KN_ERR_LIMIT, "equation: a term has more than %d labels",
                        KN_MAX_RANK);
    tmp[n++] = id;
  }
  for (int32_t i = 0; i < n; i++) t->lab[i] = tmp[i];
  t->n = n;
  *letters = n;
  return KN_OK;
}

/* Inserts the ellipsis label ids (EIN_LETTERS + j, right-aligned to the
 * broadcast rank) into a term. */
static kn_status expand_ellipsis(kn_op_ctx *ctx, ein_term *t, int32_t ell_rank,
                                 int32_t total_ell) {
  if (t->ell_pos < 0) return KN_OK;
  if (t->n + ell_rank > KN_MAX_RANK)
    return kn_op_fail(ctx, KN_ERR_LIMIT, "equation: a term spans more than %d dims",
                      KN_MAX_RANK);
  int32_t lab[KN_MAX_RANK];
  int32_t n = 0;
  for (int32_t i = 0; i < t->ell_pos; i++) lab[n++] = t->lab[i];
  for (int32_t j = 0; j < ell_rank; j++) lab[n++] = EIN_LETTERS + (total_ell - ell_rank) + j;
  for (int32_t i = t->ell_pos; i < t->n; i++) lab[n++] = t->lab[i];
  memcpy(t->lab, lab, sizeof(int32_t) * (size_t)n);
  t->n = n;
  t->ell_rank = ell_rank;
  return KN_OK;
}

/* Builds the plan from the equation and the inputs' shapes.  Unknown
 * ranks set rank_unknown; unknown dims leave sizes at -1. */
static kn_status ein_parse(kn_op_ctx *ctx, ein_plan *p) {
  memset(p, 0, sizeof *p);
  const char *eq = kn_attr_str(ctx, "equation", NULL);
  if (!eq)
    return kn_op_fail(ctx, KN_ERR_MISSING, "attribute 'equation' is required");
  if (ctx->n_in > EIN_MAX_INPUTS)
    return kn_op_fail(ctx, KN_ERR_LIMIT, "at most %d operands are supported, got %d",
                      EIN_MAX_INPUTS, (int)ctx->n_in);
  p->n_in = ctx->n_in;
  const char *arrow = strstr(eq, "->");
  const char *lhs_end = arrow ? arrow : eq + strlen(eq);
  /* input terms */
  int32_t ti = 0;
  int32_t count[EIN_LETTERS] = {0};
  const char *s = eq;
  int32_t max_ell = 0;
  bool any_ell = false;
  p->rank_unknown = false;
  for (;;) {
    const char *e = s;
    while (e < lhs_end && *e != ',') e++;
    if (ti >= p->n_in)
      return kn_op_fail(ctx, KN_ERR_SHAPE, "equation has more terms than the %d inputs",
                        (int)p->n_in);
    ein_term *t = &p->in[ti];
    int32_t letters;
    kn_status st = parse_term(ctx, s, e, t, &letters);
    if (st) return st;
    for (int32_t i = 0; i < t->n; i++) count[t->lab[i]]++;
    const kn_tensor *x = kn_in(ctx, ti);
    if (!x)
      return kn_op_fail(ctx, KN_ERR_MISSING, "input %d must be a tensor", (int)ti);
    if (x->rank < 0) {
      p->rank_unknown = true;
    } else if (t->ell_pos < 0 ? x->rank != letters : x->rank < letters) {
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "term %d has %d labels%s but input %d has rank %d", (int)ti,
                        (int)letters, t->ell_pos >= 0 ? " and an ellipsis" : "",
                        (int)ti, (int)x->rank);
    } else if (t->ell_pos >= 0) {
      t->ell_rank = x->rank - letters;
      if (t->ell_rank > max_ell) max_ell = t->ell_rank;
    }
    if (t->ell_pos >= 0) any_ell = true;
    ti++;
    if (e >= lhs_end) break;
    s = e + 1;
  }
  if (ti != p->n_in)
    return kn_op_fail(ctx, KN_ERR_SHAPE, "equation has %d terms but there are %d inputs",
                      (int)ti, (int)p->n_in);
  /* output term */
  int32_t out_letters = 0;
  if (arrow) {
    kn_status st = parse_term(ctx, arrow + 2, arrow + 2 + strlen(arrow + 2), &p->out,
                              &out_letters);
    if (st) return st;
    bool seen[EIN_LETTERS] = {false};
    for (int32_t i = 0; i < p->out.n; i++) {
      int32_t id = p->out.lab[i];
      if (seen[id] || !count[id])
        return kn_op_fail(ctx, KN_ERR_SHAPE,
                          "output label '%c' is repeated or absent from the inputs",
                          id < 26 ? 'a' + id : 'A' + id - 26);
      seen[id] = true;
    }
    if (p->out.ell_pos >= 0 && !any_ell)
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "the output has an ellipsis but no input term does");
  } else {
    ein_term *o = &p->out;
    o->n = 0;
    o->ell_pos = any_ell ? 0 : -1;
    for (int32_t id = 0; id < EIN_LETTERS; id++) {
      /* ASCII order (upper case first), as numpy sorts */
      int32_t lid = id < 26 ? 26 + id : id - 26;
      if (count[lid] == 1) {
        if (o->n >= KN_MAX_RANK)
          return kn_op_fail(ctx, KN_ERR_LIMIT, "implicit output has more than %d dims",
                            KN_MAX_RANK);
        o->lab[o->n++] = lid;
      }
    }
  }
  if (p->rank_unknown) {
    p->ell_rank = -1;
    return KN_OK;
  }
  p->ell_rank = max_ell;
  for (int32_t i = 0; i < p->n_in; i++) {
    kn_status st = expand_ellipsis(ctx, &p->in[i], p->in[i].ell_rank, max_ell);
    if (st) return st;
  }
  kn_status st = expand_ellipsis(ctx, &p->out, max_ell, max_ell);
  if (st) return st;
  /* label sizes */
  for (int32_t l = 0; l < EIN_LABELS; l++) p->size[l] = -2; /* unset */
  for (int32_t i = 0; i < p->n_in; i++) {
    const kn_tensor *x = kn_in(ctx, i);
    for (int32_t d = 0; d < p->in[i].n; d++) {
      int32_t l = p->in[i].lab[d];
      int64_t v = x->dims[d];
      p->used[l] = true;
      int64_t cur = p->size[l];
      if (cur == -2 || (cur == -1 && v >= 0)) {
        p->size[l] = v;
        continue;
      }
      if (v < 0 || v == cur) continue;
      if (l >= EIN_LETTERS && (v == 1 || cur == 1)) { /* ellipsis broadcast */
        p->size[l] = v > cur ? v : cur;
        continue;
      }
      return kn_op_fail(ctx, KN_ERR_SHAPE,
                        "label '%c' has size %lld in input %d but %lld elsewhere",
                        l < 26 ? 'a' + l : l < 52 ? 'A' + l - 26 : '.', (long long)v,
                        (int)i, (long long)cur);
    }
  }
  for (int32_t l = 0; l < EIN_LABELS; l++)
    if (p->size[l] == -2) p->size[l] = -1;
  return KN_OK;
}

static const kn_dtype ein_types[] = {
    KN_DTYPE_F32, KN_DTYPE_F64, KN_DTYPE_F16, KN_DTYPE_BF16, KN_DTYPE_I8,
    KN_DTYPE_I16, KN_DTYPE_I32, KN_DTYPE_I64, KN_DTYPE_U8,  KN_DTYPE_U16,
    KN_DTYPE_U32, KN_DTYPE_U64, 0};

static kn_status einsum_infer(kn_op_ctx *ctx) {
  kn_status st;
  kn_dtype dt = 0;
  for (int32_t i = 0; i < ctx->n_in; i++) {
    const kn_tensor *x;
    if ((st = kn_in_req(ctx, i, &x)) || (st = kn_check_dtype(ctx, i, x, ein_types)))
      return st;
    if (dt && x->dtype && x->dtype != dt)
      return kn_op_fail(ctx, KN_ERR_DTYPE, "input %d is %s but input 0 is %s",
                        (int)i, kn_dtype_name(x->dtype), kn_dtype_name(dt));
    if (!dt) dt = x->dtype;
  }
  ein_plan *p = kn_malloc(sizeof *p);
  if (!p) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
  st = ein_parse(ctx, p);
  if (!st) {
    int64_t d[KN_MAX_RANK];
    for (int32_t i = 0; i < p->out.n; i++)
      d[i] = p->rank_unknown ? -1 : p->size[p->out.lab[i]];
    /* With unknown ranks an output ellipsis leaves the rank unknown. */
    if (p->rank_unknown && p->out.ell_pos >= 0) kn_out_set(ctx, 0, dt, -1, NULL);
    else kn_out_set(ctx, 0, dt, p->out.n, d);
  }
  free(p);
  return st;
}

static kn_status einsum_compute(kn_op_ctx *ctx, const ein_plan *p, kn_tensor *y) {
  int32_t order[EIN_LABELS], nl = 0, nout = p->out.n;
  bool in_out[EIN_LABELS] = {false};
  for (int32_t i = 0; i < nout; i++) {
    order[nl++] = p->out.lab[i];
    in_out[p->out.lab[i]] = true;
  }
  for (int32_t l = 0; l < EIN_LABELS; l++)
    if (p->used[l] && !in_out[l]) order[nl++] = l;
  int64_t sz[EIN_LABELS];
  double iters = 1;
  int64_t n_outer = 1, n_red = 1;
  for (int32_t j = 0; j < nl; j++) {
    sz[j] = p->size[order[j]];
    iters *= (double)sz[j];
    if (j < nout) n_outer *= sz[j];
    else n_red *= sz[j];
  }
  if (iters > (double)EIN_MAX_ITER)
    return kn_op_fail(ctx, KN_ERR_LIMIT,
                      "the combined index space (%.3g) is too large for Einsum", iters);
  int32_t n_in = p->n_in;
  int64_t (*stride)[EIN_LABELS] = kn_calloc((size_t)n_in, sizeof *stride);
  void **vals = kn_calloc((size_t)n_in, sizeof *vals);
  kn_status st = KN_OK;
  if (!stride || !vals) {
    st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
    goto done;
  }
  bool is_int = kn_dtype_is_int(y->dtype);
  for (int32_t i = 0; i < n_in; i++) {
    const kn_tensor *x = kn_in(ctx, i);
    int64_t n = kn_tensor_numel(x);
    vals[i] = kn_malloc((size_t)(n > 0 ? n : 1) * 8);
    if (!vals[i]) {
      st = kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
      goto done;
    }
    for (int64_t e = 0; e < n; e++) {
      if (is_int) ((uint64_t *)vals[i])[e] = (uint64_t)kn_load_i64(x->data, x->dtype, e);
      else ((double *)vals[i])[e] = kn_load_f64(x->data, x->dtype, e);
    }
    int64_t s = 1;
    for (int32_t d = p->in[i].n - 1; d >= 0; d--) {
      int32_t l = p->in[i].lab[d];
      for (int32_t j = 0; j < nl; j++)
        if (order[j] == l && x->dims[d] != 1) stride[i][j] += s;
      s *= x->dims[d];
    }
  }
  if (n_outer == 0) goto done;
  int64_t idx[EIN_LABELS] = {0};
  int64_t off[EIN_MAX_INPUTS] = {0};
  for (int64_t o = 0; o < n_outer; o++) {
    double facc = 0.0;
    uint64_t iacc = 0;
    for (int64_t r = 0; r < n_red; r++) {
      if (is_int) {
        uint64_t prod = 1;
        for (int32_t i = 0; i < n_in; i++) prod *= ((const uint64_t *)vals[i])[off[i]];
        iacc += prod;
      } else {
        double prod = 1.0;
        for (int32_t i = 0; i < n_in; i++) prod *= ((const double *)vals[i])[off[i]];
        facc += prod;
      }
      for (int32_t j = nl - 1; j >= nout; j--) {
        for (int32_t i = 0; i < n_in; i++) off[i] += stride[i][j];
        if (++idx[j] < sz[j]) break;
        for (int32_t i = 0; i < n_in; i++) off[i] -= stride[i][j] * sz[j];
        idx[j] = 0;
      }
    }
    if (is_int) kn_store_i64(y->data, y->dtype, o, (int64_t)iacc);
    else kn_store_f64(y->data, y->dtype, o, facc);
    for (int32_t j = nout - 1; j >= 0; j--) {
      for (int32_t i = 0; i < n_in; i++) off[i] += stride[i][j];
      if (++idx[j] < sz[j]) break;
      for (int32_t i = 0; i < n_in; i++) off[i] -= stride[i][j] * sz[j];
      idx[j] = 0;
    }
  }
done:
  if (vals)
    for (int32_t i = 0; i < n_in; i++) free(vals[i]);
  free(vals);
  free(stride);
  return st;
}

static kn_status einsum_run(kn_op_ctx *ctx) {
  ein_plan *p = kn_malloc(sizeof *p);
  if (!p) return kn_op_fail(ctx, KN_ERR_OOM, "out of memory");
  kn_status st = ein_parse(ctx, p);
  if (!st) st = einsum_compute(ctx, p, kn_out(ctx, 0));
  free(p);
  return st;
}

const kn_op_def kn_ops_einsum[] = {
    {"Einsum", NULL, 1, -1, 1, 1, 12, 22, einsum_infer, einsum_run, NULL},
    KN_OP_END,
};
