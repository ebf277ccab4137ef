/*
 * Memory under a budget (budget.h).
 *
 * At batch 1 the arena's peak is a few large feature maps live together:
 * the early layers' outputs (MobileNetV2's 112x112x32 maps on both sides
 * of a depthwise conv, ResNet-50's 56x56x256 residual inputs with a block's
 * output).  Lifetime planning already packs them as tightly as their
 * lifetimes allow (the arena equals the most bytes live at one step on
 * both), so what is left is to make them not exist whole: a run of steps
 * around the peak is executed in bands of rows (patch.h), which keeps its
 * inputs and output whole and every intermediate one band at a time.
 *
 * Candidates are every run [first, last] of steps patch.c accepts, in
 * K = 2 .. 32 bands.  Each is estimated without touching the graph, from
 * the current plan's bytes live at each step: outside the run they stay;
 * inside it the tensors live across the run from before it, the run's
 * output (whole) and the largest band's own tensors (kn_patch_estimate).
 * Its price is the IO model's: each step's predicted time (kn_io_predict)
 * times the extra rows its bands compute (the halos), plus a step's
 * overhead for each extra band step and the row copies into band inputs
 * at the L2's bandwidth.  When some candidates reach the workspace, the
 * cheapest of them (the least predicted time per byte it must save) is
 * taken; otherwise the one that saves the most (then the cheapest), since
 * steps once in bands are not banded again and a cheap partial saving
 * taken first would block a larger one; the search goes on from the
 * rewritten graph while the peak lies elsewhere.  Each applied
 * rewrite is planned for real (the estimate is a lower bound's) and
 * recorded with the arena before and after and the IO model's time for
 * the new steps against the old.
 *
 * Recomputation of single producers (checkpointing) is not among the
 * candidates: at inference a producer's inputs must stay alive until the
 * recomputation, and on the models kiln targets the long-lived tensors
 * (residual inputs) are made by convolutions from inputs as large as
 * themselves, so it saves nothing that bands do not save more cheaply.
 */
#include "budget.h"

#include "cost/iomodel.h"
#include "patch.h"

static const int32_t band_counts[] = {2, 3, 4, 6, 8, 12, 16, 24, 32};
#define N_BAND_COUNTS ((int32_t)(sizeof band_counts / sizeof band_counts[0]))
#define MAX_ROUNDS 8

typedef struct candidate {
  int32_t first, last, bands;
  uint64_t peak;  /* estimated most bytes live at one step after it */
  double cost_s;  /* estimated extra time */
} candidate;

static uint64_t value_bytes(const kn_graph *g, int32_t v) {
  const kn_type *t = &g->values[v].type;
  uint64_t b = kn_dtype_size(t->dtype);
  for (int32_t d = 0; d < t->rank; d++) b *= (uint64_t)(t->dims[d] > 0 ? t->dims[d] : 0);
  return b;
}

/* The best candidate for plan p of m's graph (false: none lowers the
 * peak).  pred/over: each step's predicted time and overhead. */
static bool best_candidate(const kn_ir_model *m, const kn_mem_plan *p, uint64_t workspace,
                           const double *pred, const double *over, double copy_bw,
                           candidate *best) {
  const kn_graph *g = m->graph;
  int32_t ns = p->n_steps;
  uint64_t peak = p->lower_bound_bytes;
  uint64_t *suffix = kn_calloc((size_t)ns + 2, sizeof *suffix);
  double *rows = kn_calloc((size_t)ns + 1, sizeof *rows);
  bool found = false, found_fit = false;
  if (!suffix || !rows) goto done;
  for (int32_t i = ns - 1; i >= 0; i--)
    suffix[i] = p->live[i] > suffix[i + 1] ? p->live[i] : suffix[i + 1];
  uint64_t before = 0;
  for (int32_t s = 0; s < ns; s++) {
    if (s > 0 && p->live[s - 1] > before) before = p->live[s - 1];
    if (before >= peak) break;
    /* tensors made before the run and live at its start stay whole */
    uint64_t across = 0;
    for (int32_t t = 0; t < p->n_tensors; t++) {
      const kn_plan_tensor *pt = &p->tensors[t];
      if (pt->offset >= 0 && pt->view_of < 0 && pt->first < s && pt->last >= s)
        across += pt->bytes;
    }
    for (int32_t e = s; e < ns; e++) {
      uint64_t outside = before > suffix[e + 1] ? before : suffix[e + 1];
      if (outside >= peak) continue;
      const kn_node *last = &g->nodes[e];
      if (last->n_outputs != 1 || last->outputs[0] < 0) continue;
      uint64_t out_bytes = value_bytes(g, last->outputs[0]);
      for (int32_t b = 0; b < N_BAND_COUNTS; b++) {
        uint64_t band_peak, slice_bytes;
        int32_t k = band_counts[b];
        if (!kn_patch_estimate(g, s, e, k, &band_peak, rows, &slice_bytes)) break;
        uint64_t est = across + out_bytes + band_peak;
        if (est < outside) est = outside;
        if (est >= peak) continue;
        double cost = copy_bw > 0 ? 2.0 * (double)slice_bytes / copy_bw : 0;
        for (int32_t i = s; i <= e; i++)
          cost += pred[i] * (rows[i - s] - 1.0) + over[i] * (double)(k - 1);
        cost += over[e]; /* the join */
        bool fits = est <= workspace;
        bool better = !found || (fits && !found_fit) ||
                      (fits == found_fit &&
                       (fits ? cost < best->cost_s
                             : est < best->peak || (est == best->peak && cost < best->cost_s)));
        if (!better) continue;
        *best = (candidate){.first = s, .last = e, .bands = k, .peak = est, .cost_s = cost};
        found = true;
        found_fit |= fits;
      }
    }
  }
done:
  free(suffix);
  free(rows);
  return found;
}

/* Each step's predicted time and overhead on o's machine. */
static kn_status predict_all(const kn_ir_model *m, const kn_budget_options *o, double **pred,
                             double **over, kn_error *err) {
  int32_t n = m->graph->n_nodes;
  *pred = kn_calloc((size_t)n + 1, sizeof **pred);
  *over = kn_calloc((size_t)n + 1, sizeof **over);
  if (!*pred || !*over) return kn_fail(err, KN_ERR_OOM, "out of memory planning memory");
  for (int32_t i = 0; i < n; i++) {
    kn_io_step s;
    kn_io_predict(m, i, o->machine, o->threads, &s);
    (*pred)[i] = s.predicted_s;
    (*over)[i] = s.time_s[KN_IO_BOUNDARIES + 1];
  }
  return KN_OK;
}

static double sum_range(const double *v, int32_t a, int32_t b) {
  double s = 0;
  for (int32_t i = a; i <= b; i++) s += v[i];
  return s;
}

kn_status kn_plan_under_budget(kn_ir_model *m, const kn_budget_options *o, kn_mem_plan *out,
                               kn_error *err) {
  kn_graph *g = m->graph;
  kn_status st = kn_plan_memory(g, 0, out, err);
  if (st || !o->workspace || out->arena_bytes <= o->workspace) return st;
  uint64_t first_arena = out->arena_bytes, smallest = out->arena_bytes;
  double *pred = NULL, *over = NULL;
  int32_t rounds = 0;
  const kn_machine *mach = o->machine;
  double copy_bw = mach && mach->n_levels > 1
                       ? 0.5 * (mach->levels[1].read_gbs[0] + mach->levels[1].write_gbs[0]) * 1e9
                       : 0;
  while (o->rewrite && mach && out->live && rounds < MAX_ROUNDS) {
    candidate c;
    if ((st = predict_all(m, o, &pred, &over, err))) goto fail;
    if (!best_candidate(m, out, o->workspace, pred, over, copy_bw, &c)) break;
    int32_t n_before = g->n_nodes;
    double old_s = sum_range(pred, c.first, c.last);
    char from[160], to[160];
    snprintf(from, sizeof from, "%s", g->nodes[c.first].name);
    snprintf(to, sizeof to, "%s", g->nodes[c.last].name);
    uint64_t arena_before = out->arena_bytes;
    if ((st = kn_patch_apply(m, c.first, c.last, c.bands, err))) goto fail;
    kn_mem_plan_free(out);
    if ((st = kn_plan_memory(g, 0, out, err))) goto fail;
    free(pred);
    free(over);
    pred = over = NULL;
    if ((st = predict_all(m, o, &pred, &over, err))) goto fail;
    int32_t added = g->n_nodes - n_before;
    double new_s = sum_range(pred, c.first, c.last + added);
    free(pred);
    free(over);
    pred = over = NULL;
    rounds++;
    if (o->decisions) {
      char line[768];
      snprintf(line, sizeof line,
               "memory: steps %s .. %s (%d) run patch by patch in %d bands of output rows "
               "(halo rows recomputed; %d steps after): arena %.2f -> %.2f MiB (%.2f MiB "
               "saved), +%.1f us predicted (%.1f -> %.1f us)",
               from, to, c.last - c.first + 1, c.bands, c.last - c.first + 1 + added,
               (double)arena_before / 1048576.0, (double)out->arena_bytes / 1048576.0,
               ((double)arena_before - (double)out->arena_bytes) / 1048576.0,
               (new_s - old_s) * 1e6, old_s * 1e6, new_s * 1e6);
      if (!kn_lines_add(o->decisions, line)) {
        st = kn_fail(err, KN_ERR_OOM, "out of memory");
        goto fail;
      }
    }
    if (out->arena_bytes < smallest) smallest = out->arena_bytes;
    if (out->arena_bytes <= o->workspace) return KN_OK;
  }
  free(pred);
  free(over);
  kn_mem_plan_free(out);
  if (!rounds)
    return kn_fail(err, KN_ERR_LIMIT,
                   "workspace of %llu bytes is too small: the plan needs %llu bytes (%llu "
                   "over), and no run of steps can execute in bands to save memory",
                   (unsigned long long)o->workspace, (unsigned long long)first_arena,
                   (unsigned long long)(first_arena - o->workspace));
  return kn_fail(err, KN_ERR_LIMIT,
                 "workspace of %llu bytes is too small: the smallest plan found needs %llu "
                 "bytes (%llu short; %llu without rewrites, %d run%s in bands)",
                 (unsigned long long)o->workspace, (unsigned long long)smallest,
                 (unsigned long long)(smallest - o->workspace),
                 (unsigned long long)first_arena, rounds, rounds == 1 ? "" : "s");
fail:
  free(pred);
  free(over);
  kn_mem_plan_free(out);
  return st;
}
