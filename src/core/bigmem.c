/*
 * Large long-lived buffers: prepacked weights, engine weight copies, the
 * activation arena (kn_big_alloc_lazy where the runs use less of it than
 * it was planned for).
 *
 * They get their own anonymous mapping, 2 MiB-aligned and advised for
 * transparent huge pages, and are prefaulted once.  Two measured reasons,
 * on the Zen 5 VMs kiln is benchmarked on (kernel 6.18):
 *  - first touch of 4 KiB anonymous pages costs ~20 us each there (437 MB:
 *    2.4 s), against 0.16 s for the same bytes in prefaulted huge pages;
 *  - steps that stream weights run with far fewer TLB misses.
 * Where the kernel has no THP (or not for us) this is plain page-aligned
 * anonymous memory; off Linux it is aligned_alloc.
 */
#define _GNU_SOURCE
#include "core/core.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_BYTES ((size_t)2 << 20)

static size_t page_bytes(void) {
  long pg = sysconf(_SC_PAGESIZE);
  return pg > 0 ? (size_t)pg : 4096;
}

void *kn_big_alloc(size_t bytes) {
  if (!bytes) bytes = 1;
  size_t pg = page_bytes();
  size_t len = (bytes + pg - 1) & ~(pg - 1);
  if (len < bytes) return NULL;
  /* over-map by up to 2 MiB to place the start on a huge-page boundary */
  size_t slack = len >= HUGE_BYTES ? HUGE_BYTES : 0;
  if (len + slack < len) return NULL;
  uint8_t *p = mmap(NULL, len + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                    -1, 0);
  if (p == MAP_FAILED) return NULL;
  if (slack) {
    uintptr_t at = ((uintptr_t)p + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1);
    size_t head = (size_t)(at - (uintptr_t)p), tail = slack - head;
    if (head) munmap(p, head);
    if (tail) munmap((uint8_t *)at + len, tail);
    p = (uint8_t *)at;
#ifdef MADV_HUGEPAGE
    madvise(p, len, MADV_HUGEPAGE); /* advice: refused where THP is off */
#endif
  }
#ifdef MADV_POPULATE_WRITE
  madvise(p, len, MADV_POPULATE_WRITE); /* Linux 5.14+; else faults on use */
#endif
  return p;
}

void *kn_big_alloc_lazy(size_t bytes) {
  if (!bytes) bytes = 1;
  size_t pg = page_bytes();
  size_t len = (bytes + pg - 1) & ~(pg - 1);
  if (len < bytes) return NULL;
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
#ifdef MADV_NOHUGEPAGE
  /* where THP is "always", a first write would make 2 MiB resident */
  madvise(p, len, MADV_NOHUGEPAGE);
#endif
  return p;
}

void kn_big_free(void *p, size_t bytes) {
  if (!p) return;
  size_t pg = page_bytes();
  munmap(p, ((bytes ? bytes : 1) + pg - 1) & ~(pg - 1));
}

void kn_drop_pages(const void *p, size_t bytes) {
  uintptr_t pg = page_bytes();
  uintptr_t lo = ((uintptr_t)p + pg - 1) & ~(pg - 1);
  uintptr_t hi = ((uintptr_t)p + bytes) & ~(pg - 1);
  if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

#else

void *kn_big_alloc(size_t bytes) {
  size_t len = ((bytes ? bytes : 1) + 4095) & ~(size_t)4095;
  void *p = len >= bytes ? aligned_alloc(4096, len) : NULL;
  if (p) memset(p, 0, len);
  return p;
}

void *kn_big_alloc_lazy(size_t bytes) { return kn_big_alloc(bytes); }

void kn_big_free(void *p, size_t bytes) {
  (void)bytes;
  free(p);
}

void kn_drop_pages(const void *p, size_t bytes) {
  (void)p;
  (void)bytes;
}

#endif
