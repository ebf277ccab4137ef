/* The IO model (src/cost/iomodel.h): its counts against the closed forms
 * of the matmul and streamed-attention bounds, against a tiled loop that
 * counts what it copies, and the machine description's capacities
 * changing tiles and transfers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/machine.h"
#include "cost/iomodel.h"

/* C[a, c] += A[a, b] B[b, c] in loop order (outer to inner) given by the
 * permutation `order` of the dims {0: a, 1: c, 2: b}. */
static kn_loopnest matmul_nest(int64_t a, int64_t b, int64_t c, const int order[3]) {
  kn_loopnest l;
  memset(&l, 0, sizeof l);
  static const char *names[3] = {"a", "c", "b"};
  int64_t ext[3] = {a, c, b};
  int pos[3];
  for (int i = 0; i < 3; i++) pos[order[i]] = kn_loop_dim(&l, names[order[i]], ext[order[i]]);
  kn_loop_tensor_add(&l, "A", 1u << pos[0] | 1u << pos[2], 4, false, false);
  kn_loop_tensor_add(&l, "B", 1u << pos[2] | 1u << pos[1], 4, false, true);
  kn_loop_tensor_add(&l, "C", 1u << pos[0] | 1u << pos[1], 4, true, false);
  l.flops = 2.0 * (double)(a * b * c);
  return l;
}

static const int ACB[3] = {0, 1, 2}; /* a, c outer, b (the reduction) inner */

/* Square tiles t of a and c, depth tile 1: 2abc/t + ac elements. */
static void test_matmul_closed_form(void **state) {
  (void)state;
  int64_t a = 256, b = 192, c = 320;
  kn_loopnest l = matmul_nest(a, b, c, ACB);
  for (int64_t t = 1; t <= 64; t *= 2) {
    int64_t tiles[3] = {t, t, 1};
    double per[3];
    double bytes = kn_io_transfers(&l, tiles, per);
    assert_true(fabs(per[0] - 4.0 * a * b * c / t) < 1e-6);
    assert_true(fabs(per[1] - 4.0 * a * b * c / t) < 1e-6);
    assert_true(fabs(per[2] - 4.0 * a * c) < 1e-6);
    assert_true(fabs(bytes - 4.0 * (2.0 * a * b * c / t + a * c)) < 1e-6);
  }
  /* The best tiles for M bytes come within the closed form's constant of
   * 2abc/sqrt(M) + ac elements (M in elements; the tiles of A and B are
   * sqrt(M/2) a side when C's tile is the one kept, power-of-two tiles
   * cost at most another sqrt(2)). */
  for (double m = 4096; m <= 1 << 20; m *= 4) {
    int64_t tiles[3];
    double bytes;
    kn_io_best_tiles(&l, m, 0, tiles, &bytes);
    assert_true(kn_io_footprint(&l, tiles) <= m);
    double el = m / 4, bound = 2.0 * a * b * c / sqrt(el) + (double)(a * c);
    double got = bytes / 4;
    assert_true(got >= 0.5 * bound);
    assert_true(got <= 2.0 * bound);
  }
}

/* Heads bh, queries q, features d, keys x: Q and O once, K and V once
 * per query tile: 2qxd/Tq + 2qd, i.e. 4qxd^2/M + 2qd with Tq = M/2d. */
static void test_attention_closed_form(void **state) {
  (void)state;
  int64_t q = 512, x = 384, d = 64;
  kn_loopnest l;
  memset(&l, 0, sizeof l);
  uint32_t B = 1u << kn_loop_dim(&l, "bh", 1), Q = 1u << kn_loop_dim(&l, "q", q),
           D = 1u << kn_loop_dim(&l, "d", d), X = 1u << kn_loop_dim(&l, "x", x);
  kn_loop_tensor_add(&l, "Q", B | Q | D, 4, false, false);
  kn_loop_tensor_add(&l, "K", B | X | D, 4, false, false);
  kn_loop_tensor_add(&l, "V", B | X | D, 4, false, false);
  kn_loop_tensor_add(&l, "O", B | Q | D, 4, true, false);
  for (int64_t tq = 8; tq <= q; tq *= 4) {
    int64_t tiles[4] = {1, tq, d, 1};
    double el = 2.0 * (double)(tq * d); /* the query and output tiles */
    double want = 4.0 * q * x * d * d / el + 2.0 * q * d;
    double bytes = kn_io_transfers(&l, tiles, NULL);
    assert_true(fabs(bytes / 4 - want) < 1e-6 * want);
  }
  /* The best tiles for M do at least as well as the closed form's
   * schedule (query tiles of Tq = M/2d rows, rounded down to a power of
   * two, keys one at a time), and no better than reading every tensor
   * once. */
  for (double m = 64 << 10; m <= 4 << 20; m *= 4) {
    int64_t tiles[4];
    double bytes;
    kn_io_best_tiles(&l, m, 0, tiles, &bytes);
    double el = m / 4;
    int64_t tq = 1;
    while (tq * 2 <= q && (double)(2 * tq * 2 * d + 2 * d) <= el) tq *= 2;
    double sched = 2.0 * x * d * q / (double)tq + 2.0 * q * d, once = 2.0 * (q + x) * d;
    if (bytes / 4 > sched * (1 + 1e-9) || bytes / 4 < once * (1 - 1e-9))
      fail_msg("M %.0f: best %.0f elements, schedule %.0f, all once %.0f", m, bytes / 4, sched,
               once);
  }
}

/* ---- a tiled matmul that counts what it copies ---------------------------
 * Each tensor has one resident tile; a tile is copied in when the loop
 * needs a different one (a whole tile, padding included, as packing
 * does).  The output's tile is written back when it is replaced, and read
 * back first when it was written before (partial sums). */
typedef struct resident {
  int64_t id; /* -1: none */
} resident;

static double count_tiled(int64_t a, int64_t b, int64_t c, const int order[3],
                          const int64_t tile[3] /* by dim: a, c, b */) {
  int64_t ext[3] = {a, c, b};
  int64_t trips[3];
  for (int i = 0; i < 3; i++) trips[i] = (ext[i] + tile[i] - 1) / tile[i];
  double copies = 0;
  resident ra = {-1}, rb = {-1}, rc = {-1};
  int64_t n_ct = trips[0] * trips[1];
  char *visited = calloc((size_t)n_ct, 1);
  int64_t it[3];
  for (it[order[0]] = 0; it[order[0]] < trips[order[0]]; it[order[0]]++)
    for (it[order[1]] = 0; it[order[1]] < trips[order[1]]; it[order[1]]++)
      for (it[order[2]] = 0; it[order[2]] < trips[order[2]]; it[order[2]]++) {
        int64_t ia = it[0], ic = it[1], ib = it[2];
        int64_t ida = ia * trips[2] + ib, idb = ib * trips[1] + ic, idc = ia * trips[1] + ic;
        if (ra.id != ida) {
          ra.id = ida;
          copies += (double)(tile[0] * tile[2]);
        }
        if (rb.id != idb) {
          rb.id = idb;
          copies += (double)(tile[2] * tile[1]);
        }
        if (rc.id != idc) {
          if (rc.id >= 0) copies += (double)(tile[0] * tile[1]); /* write back */
          if (visited[idc]) copies += (double)(tile[0] * tile[1]); /* read partial */
          visited[idc] = 1;
          rc.id = idc;
        }
      }
  if (rc.id >= 0) copies += (double)(tile[0] * tile[1]);
  free(visited);
  return copies;
}

static void test_counts_match_instrumented_loop(void **state) {
  (void)state;
  static const int orders[6][3] = {{0, 1, 2}, {1, 0, 2}, {0, 2, 1},
                                   {2, 0, 1}, {1, 2, 0}, {2, 1, 0}};
  static const int64_t shapes[][3] = {{37, 29, 23}, {16, 16, 16}, {64, 9, 33}, {5, 70, 12}};
  static const int64_t tilings[][3] = {{8, 4, 16}, {1, 1, 1}, {16, 16, 16}, {3, 7, 5},
                                       {64, 1, 2}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int o = 0; o < 6; o++)
      for (size_t t = 0; t < sizeof tilings / sizeof tilings[0]; t++) {
        int64_t a = shapes[s][0], b = shapes[s][1], c = shapes[s][2];
        kn_loopnest l = matmul_nest(a, b, c, orders[o]);
        /* the nest's dims are in loop order: map the tiles there */
        int64_t by_dim[3] = {tilings[t][0] < a ? tilings[t][0] : a,
                             tilings[t][1] < c ? tilings[t][1] : c,
                             tilings[t][2] < b ? tilings[t][2] : b};
        int64_t tiles[3];
        for (int i = 0; i < 3; i++) tiles[i] = by_dim[orders[o][i]];
        double model = kn_io_transfers(&l, tiles, NULL) / 4;
        double counted = count_tiled(a, b, c, orders[o], by_dim);
        if (fabs(model - counted) > 1e-9 * counted)
          fail_msg("shape %lldx%lldx%lld order %d tiles %lld,%lld,%lld: model %.0f, loop %.0f",
                   (long long)a, (long long)b, (long long)c, o, (long long)by_dim[0],
                   (long long)by_dim[1], (long long)by_dim[2], model, counted);
      }
}

/* Halving a capacity: tiles shrink and the transfers past it grow as the
 * closed form says (the 2abc/sqrt(M) term by about sqrt(2)). */
static void test_half_capacity(void **state) {
  (void)state;
  int64_t a = 1024, b = 1024, c = 1024;
  kn_loopnest l = matmul_nest(a, b, c, ACB);
  double ratios = 0;
  int n = 0;
  for (double m = 1 << 16; m <= 1 << 22; m *= 2) {
    int64_t t1[3], t2[3];
    double b1, b2;
    kn_io_best_tiles(&l, m, 0, t1, &b1);
    kn_io_best_tiles(&l, m / 2, 0, t2, &b2);
    assert_true(kn_io_footprint(&l, t2) <= m / 2);
    assert_true(kn_io_footprint(&l, t2) < kn_io_footprint(&l, t1));
    double ac = 4.0 * a * c;
    double r = (b2 - ac) / (b1 - ac);
    assert_true(r >= 1.0 && r <= 2.0);
    ratios += log(r);
    n++;
  }
  /* over the doublings the growth averages sqrt(2) */
  double mean = exp(ratios / n);
  if (fabs(mean - sqrt(2.0)) > 0.08) fail_msg("mean growth %.3f, expected about 1.414", mean);
}

/* A whole step: a machine with half the L2 moves more bytes across the
 * L2-L3 boundary for a GEMM too large for either L2. */
static void test_half_l2_step(void **state) {
  (void)state;
  kn_machine m;
  kn_machine_fallback(&m);
  kn_loopnest l = matmul_nest(512, 2048, 1024, ACB);
  int64_t t1[3], t2[3];
  double b1, b2;
  kn_io_best_tiles(&l, (double)m.levels[1].bytes, 0, t1, &b1);
  kn_io_best_tiles(&l, (double)m.levels[1].bytes / 2, 0, t2, &b2);
  assert_true(b2 > b1 * 1.2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_closed_form),
      cmocka_unit_test(test_attention_closed_form),
      cmocka_unit_test(test_counts_match_instrumented_loop),
      cmocka_unit_test(test_half_capacity),
      cmocka_unit_test(test_half_l2_step),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
