/* Drivers of the elementwise kernels: split a tensor over the context's
 * thread pool when it is large (KN_EW_PARALLEL_MIN elements), else run it
 * on the calling thread, whose per-step cost matters on small models.
 * Work is cut into one contiguous range per thread on boundaries that do
 * not change any element's arithmetic (whole rows, or whole vectors), so
 * results are the same on any thread count. */
#include "eltwise.h"

static int32_t threads_for(const kn_rt *rt, int64_t work) {
  int32_t t = kn_rt_threads(rt);
  return work >= KN_EW_PARALLEL_MIN && t > 1 ? t : 1;
}

/* [begin, end) of task i of n over `total` items, in multiples of `align` */
static void split(int64_t total, int64_t n, int64_t i, int64_t align, int64_t *b, int64_t *e) {
  int64_t units = (total + align - 1) / align;
  *b = units * i / n * align;
  *e = units * (i + 1) / n * align;
  if (*b > total) *b = total;
  if (*e > total) *e = total;
}

/* ---- unary ------------------------------------------------------------------ */

typedef struct un_job {
  const kn_ew_ukernels *k;
  int op;
  const kn_act_params *p;
  const float *x;
  float *y;
  int64_t n, tasks;
} un_job;

static void un_task(void *arg, int64_t task, int32_t thread) {
  (void)thread;
  const un_job *j = arg;
  int64_t b, e;
  split(j->n, j->tasks, task, 64, &b, &e);
  if (e > b) j->k->unary(j->op, j->p, j->x + b, j->y + b, e - b);
}

void kn_ew_unary(kn_rt *rt, int op, const kn_act_params *p, const float *x, float *y,
                 int64_t n) {
  if (n <= 0) return;
  kn_act_params none = {0};
  un_job j = {kn_ew_get(rt ? rt->isa : KN_ISA_PORTABLE), op, p ? p : &none, x, y, n, 1};
  j.tasks = threads_for(rt, n);
  if (j.tasks == 1) un_task(&j, 0, 0);
  else kn_pool_for(rt->pool, j.tasks, un_task, &j);
}

/* ---- broadcast geometry ------------------------------------------------------ */

bool kn_ew_bcast_init(kn_ew_bcast *b, int32_t n_in, const int32_t *ranks,
                      const int64_t *const *dims, int32_t rank, const int64_t *dout) {
  if (n_in > KN_EW_MAX_IN || n_in < 1) return false;
  b->n_in = n_in;
  int32_t r = 0;
  for (int32_t d = 0; d < rank; d++)
    if (dout[d] != 1) b->dims[r++] = dout[d];
  for (int32_t k = 0; k < n_in; k++) {
    /* numpy strides of input k against the output (0 on broadcast dims) */
    int64_t s[KN_MAX_RANK], acc = 1;
    for (int32_t d = rank - 1; d >= 0; d--) {
      int32_t dk = d - (rank - ranks[k]);
      int64_t n = dk >= 0 ? dims[k][dk] : 1;
      s[d] = n == 1 ? 0 : acc;
      acc *= n;
    }
    int32_t i = 0;
    for (int32_t d = 0; d < rank; d++)
      if (dout[d] != 1) b->strides[k][i++] = s[d];
  }
  if (r == 0) {
    b->dims[r++] = 1;
    for (int32_t k = 0; k < n_in; k++) b->strides[k][0] = 0;
  }
  /* merge dim d into d + 1 when every input walks both alike */
  for (int32_t d = r - 2; d >= 0; d--) {
    bool ok = true;
    for (int32_t k = 0; k < n_in && ok; k++)
      ok = b->strides[k][d] == b->strides[k][d + 1] * b->dims[d + 1];
    if (!ok) continue;
    b->dims[d] *= b->dims[d + 1];
    for (int32_t k = 0; k < n_in; k++) {
      b->strides[k][d] = b->strides[k][d + 1];
      for (int32_t e = d + 1; e < r - 1; e++) b->strides[k][e] = b->strides[k][e + 1];
    }
    for (int32_t e = d + 1; e < r - 1; e++) b->dims[e] = b->dims[e + 1];
    r--;
  }
  b->rank = r;
  b->len = b->dims[r - 1];
  b->rows = 1;
  for (int32_t d = 0; d < r - 1; d++) b->rows *= b->dims[d];
  for (int32_t k = 0; k < n_in; k++) b->step[k] = b->strides[k][r - 1] != 0;
  return true;
}

int64_t kn_ew_bcast_offset(const kn_ew_bcast *b, int32_t k, int64_t row) {
  int64_t off = 0;
  for (int32_t d = b->rank - 2; d >= 0 && row > 0; d--) {
    off += (row % b->dims[d]) * b->strides[k][d];
    row /= b->dims[d];
  }
  return off;
}

/* ---- binary ----------------------------------------------------------------- */

typedef struct bin_job {
  const kn_ew_ukernels *k;
  int op;
  const float *a, *b;
  float *y;
  const kn_ew_bcast *g;
  int64_t tasks;
} bin_job;

static void bin_task(void *arg, int64_t task, int32_t thread) {
  (void)thread;
  const bin_job *j = arg;
  const kn_ew_bcast *g = j->g;
  int sa = g->step[0], sb = g->step[1];
  if (g->rows == 1) {
    int64_t b, e;
    split(g->len, j->tasks, task, 64, &b, &e);
    if (e > b) j->k->binary(j->op, j->a + b * sa, sa, j->b + b * sb, sb, j->y + b, e - b);
    return;
  }
  int64_t r0, r1;
  split(g->rows, j->tasks, task, 1, &r0, &r1);
  for (int64_t r = r0; r < r1; r++)
    j->k->binary(j->op, j->a + kn_ew_bcast_offset(g, 0, r), sa, j->b + kn_ew_bcast_offset(g, 1, r),
                 sb, j->y + r * g->len, g->len);
}

void kn_ew_broadcast(kn_rt *rt, int op, const float *a, int32_t ra, const int64_t *da,
                  const float *b, int32_t rb, const int64_t *db, float *y, int32_t ro,
                  const int64_t *dout) {
  int64_t total = kn_shape_numel(ro, dout);
  if (total <= 0) return;
  kn_ew_bcast g;
  int32_t ranks[2] = {ra, rb};
  const int64_t *dims[2] = {da, db};
  bool ok = kn_ew_bcast_init(&g, 2, ranks, dims, ro, dout);
  KN_ASSERT(ok);
  bin_job j = {kn_ew_get(rt ? rt->isa : KN_ISA_PORTABLE), op, a, b, y, &g, 1};
  j.tasks = threads_for(rt, total);
  if (g.rows > 1 && j.tasks > g.rows) j.tasks = g.rows;
  if (j.tasks == 1) {
    bin_task(&j, 0, 0);
    return;
  }
  kn_pool_for(rt->pool, j.tasks, bin_task, &j);
}

/* ---- softmax ---------------------------------------------------------------- */

typedef struct sm_job {
  const kn_ew_ukernels *k;
  const float *x;
  float *y;
  int64_t outer, len, inner, chunks, tasks;
  bool log;
} sm_job;

static void sm_task(void *arg, int64_t task, int32_t thread) {
  (void)thread;
  const sm_job *j = arg;
  if (j->inner == 1) {
    int64_t r0, r1;
    split(j->outer, j->tasks, task, 1, &r0, &r1);
    if (r1 > r0) j->k->softmax_rows(j->x + r0 * j->len, j->y + r0 * j->len, r1 - r0, j->len, j->log);
    return;
  }
  /* units: (outer index, chunk of KN_EW_SOFTMAX_COLS lanes) */
  int64_t u0, u1;
  split(j->outer * j->chunks, j->tasks, task, 1, &u0, &u1);
  for (int64_t u = u0; u < u1; u++) {
    int64_t o = u / j->chunks, c = (u % j->chunks) * KN_EW_SOFTMAX_COLS;
    int64_t cols = j->inner - c < KN_EW_SOFTMAX_COLS ? j->inner - c : KN_EW_SOFTMAX_COLS;
    size_t off = (size_t)(o * j->len * j->inner + c);
    j->k->softmax_cols(j->x + off, j->y + off, j->len, j->inner, cols, j->log);
  }
}

void kn_ew_softmax(kn_rt *rt, const float *x, float *y, int64_t outer, int64_t len,
                   int64_t inner, bool log) {
  if (outer <= 0 || len <= 0 || inner <= 0) return;
  sm_job j = {kn_ew_get(rt ? rt->isa : KN_ISA_PORTABLE), x, y, outer, len, inner,
              (inner + KN_EW_SOFTMAX_COLS - 1) / KN_EW_SOFTMAX_COLS, 1, log};
  int64_t units = inner == 1 ? outer : outer * j.chunks;
  j.tasks = threads_for(rt, outer * len * inner);
  if (j.tasks > units) j.tasks = units;
  if (j.tasks <= 1) sm_task(&j, 0, 0);
  else kn_pool_for(rt->pool, j.tasks, sm_task, &j);
}

/* ---- normalisation ---------------------------------------------------------- */

typedef struct norm_job {
  const kn_ew_ukernels *k;
  const float *x;
  float *y;
  int64_t rows, len, seg, pmod, pmul, tasks;
  double eps;
  const float *sc, *bi;
  double *mean_out, *inv_out;
} norm_job;

static void norm_task(void *arg, int64_t task, int32_t thread) {
  (void)thread;
  const norm_job *j = arg;
  int64_t r0, r1;
  split(j->rows, j->tasks, task, 1, &r0, &r1);
  if (r1 <= r0) return;
  if (j->pmod == 1) {
    size_t off = (size_t)(r0 * j->len);
    j->k->norm_rows(j->x + off, j->y + off, r1 - r0, j->len, j->eps, j->seg, 1, j->pmul, j->sc,
                    j->bi, j->mean_out ? j->mean_out + r0 : NULL,
                    j->inv_out ? j->inv_out + r0 : NULL);
    return;
  }
  /* the kernel indexes parameters by row % pmod: pass rows with their
   * true index by offsetting the parameter base instead */
  for (int64_t r = r0; r < r1;) {
    int64_t pr = r % j->pmod, cnt = j->pmod - pr;
    if (cnt > r1 - r) cnt = r1 - r;
    size_t off = (size_t)(r * j->len), po = (size_t)(pr * j->pmul);
    j->k->norm_rows(j->x + off, j->y + off, cnt, j->len, j->eps, j->seg, j->pmod, j->pmul,
                    j->sc + po, j->bi + po, j->mean_out ? j->mean_out + r : NULL,
                    j->inv_out ? j->inv_out + r : NULL);
    r += cnt;
  }
}

void kn_ew_norm(kn_rt *rt, const float *x, float *y, int64_t rows, int64_t len, double eps,
                int64_t seg, int64_t pmod, int64_t pmul, const float *sc, const float *bi,
                double *mean_out, double *inv_out) {
  if (rows <= 0) return;
  norm_job j = {kn_ew_get(rt ? rt->isa : KN_ISA_PORTABLE), x, y, rows, len, seg, pmod, pmul, 1,
                eps, sc, bi, mean_out, inv_out};
  j.tasks = threads_for(rt, rows * len);
  if (j.tasks > rows) j.tasks = rows;
  if (j.tasks <= 1) norm_task(&j, 0, 0);
  else kn_pool_for(rt->pool, j.tasks, norm_task, &j);
}
