/*
 * Machine descriptions (kn_machine in kiln.h): what the OS and the CPU say
 * about this machine, the shipped fallback, and the JSON form
 * (docs/MACHINE.md).  Measuring (kiln probe) is src/builder/machine_probe.c.
 */
#ifndef KN_MACHINE_H
#define KN_MACHINE_H

#include "core.h"

/* JSON format version this kiln writes and reads. */
#define KN_MACHINE_FORMAT 1

/* The kernel families the IO model fits a factor to (kn_machine.factors),
 * by their tactics (src/ops/tactics.inc; src/cost/iomodel.c maps them). */
enum {
  KN_FAM_GEMM,      /* packed GEMMs: MatMul, Gemm, FusedGemm, MatMulInteger, RNN gates */
  KN_FAM_CONV,      /* convolutions as (implicit) GEMMs, NCHW and channels-last */
  KN_FAM_WINOGRAD,  /* Winograd F(4,3) and F(2,3) 3x3 convolutions */
  KN_FAM_DEPTHWISE, /* depthwise convolutions, and the expand-then-depthwise bands */
  KN_FAM_ATTENTION, /* streamed attention */
  KN_FAM_POOL,      /* pooling */
  KN_FAM_ELTWISE,   /* elementwise chains, softmax, normalisations, resize */
  KN_FAM_COPY,      /* transposes, concats, slices, gathers: blocked copies */
};
/* A step on its op's reference kernel (tactic 0, which is also every step
 * before tactics are chosen: the passes' predictions) has no family. */
_Static_assert(KN_FAM_COPY + 1 == KN_MACHINE_FAMILIES, "kn_machine.factors' families");

/* The family's name in machine.json ("gemm", ...); NULL out of range. */
const char *kn_machine_family_name(int32_t family);

/* The factor the IO model applies to a step of `family` on `threads`
 * threads: the fitted one, 1 where none was fitted. */
double kn_machine_factor(const kn_machine *m, int32_t family, int32_t threads);

/* Fill identity (vendor, model, family, features), topology (cores, SMT,
 * each cache's capacity, line and sharing, DRAM's capacity) as the CPU
 * and OS report them; rates are left 0.  Caches the OS does not report
 * get common sizes (48 KiB L1d, 1 MiB L2, 32 MiB L3), and an L3 reported
 * above 32 MiB per instance (VMs report the host's socket) is capped
 * there; the probe measures it instead. */
void kn_machine_from_os(kn_machine *m);
/* The L3 capacity of one instance as the OS reports it, uncapped (0: not
 * reported). */
uint64_t kn_machine_os_l3(void);

/* Logical CPUs this process may run on (its affinity mask), at least 1. */
int32_t kn_machine_cpus(void);

/* The level named `name` ("L2"), or NULL. */
const kn_mem_level *kn_machine_level(const kn_machine *m, const char *name);

/* Capacities a blocking may count on for one core: the L1d and L2 of one
 * instance, and the L3 share of one thread when all `threads` threads
 * use it (the whole L3 for threads <= 1). */
void kn_machine_caches(const kn_machine *m, int32_t threads, size_t *l1d, size_t *l2,
                       size_t *l3);

/* The description as JSON text (NUL-terminated, malloc'd; NULL when out
 * of memory), and parsed back from `len` bytes of text.  `label` names
 * the source in messages ("machine.json"). */
char *kn_machine_to_json(const kn_machine *m);
/* The same on one line, without spaces (engine files keep it). */
char *kn_machine_to_json_compact(const kn_machine *m);
kn_status kn_machine_from_json(const char *text, size_t len, const char *label,
                               kn_machine *out, kn_error *err) KN_WUR;

#endif
