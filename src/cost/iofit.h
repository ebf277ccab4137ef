/*
 * Fitting the IO model's per-family factors (kn_machine.factors) to
 * measured step times: `kiln probe` times small steps of each kernel
 * family (src/builder/machine_calib.c) and fits here, one factor per
 * family and thread count, what the model then predicts with
 * (iomodel.h: factor x roofline + overhead).
 */
#ifndef KN_IOFIT_H
#define KN_IOFIT_H

#include "core/core.h"

/* One timed step: its family (KN_FAM_*), whether it ran on several
 * threads, the model's roofline time and fixed overhead for it, and the
 * measured time. */
typedef struct kn_io_sample {
  int32_t family;
  bool all_threads;
  double roofline_s, overhead_s, measured_s;
} kn_io_sample;

/* The factor f that minimises sum_i (log(f r_i + o_i) - log m_i)^2 over
 * the samples given (ratios, not differences: a 20 us step counts as much
 * as a 2 ms one), searched over [1/64, 64]; 0 when no sample has a
 * positive roofline and measurement. */
double kn_io_fit_factor(const double *roofline_s, const double *overhead_s,
                        const double *measured_s, int32_t n);

/* Every family's factor, one thread and all threads ([1]), from n samples
 * into factors (0 where a family and thread count has no sample). */
void kn_io_fit_factors(const kn_io_sample *s, int32_t n,
                       double factors[KN_MACHINE_FAMILIES][2]);

#endif
