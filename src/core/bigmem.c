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
#include <errno.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/mman.h>
#include <sys/vfs.h>
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


/* ---- spill files ---- */

struct kn_spill {
  int fd;
  uint64_t end; /* where the next copy goes (page-aligned) */
  int32_t n, cap;
  struct spill_map {
    void *p;
    size_t len;
  } *maps;
};

/* tmpfs and ramfs keep their files in memory: moving bytes there saves
 * nothing, it only hides them from the process's resident set. */
static bool memory_backed(int fd) {
  struct statfs sf;
  if (fstatfs(fd, &sf) != 0) return true;
  unsigned long t = (unsigned long)sf.f_type;
  return t == 0x01021994UL /* tmpfs */ || t == 0x858458f6UL /* ramfs */;
}

static int open_unlinked(const char *dir) {
#ifdef O_TMPFILE
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
#endif
  char path[4096];
  if (snprintf(path, sizeof path, "%s/kiln-spill-XXXXXX", dir) >= (int)sizeof path) return -1;
  int f = mkstemp(path);
  if (f >= 0) unlink(path);
  return f;
}

kn_spill *kn_spill_open(void) {
  const char *dirs[] = {getenv("TMPDIR"), "/var/tmp", "/tmp"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    if (!dirs[i] || !*dirs[i]) continue;
    int fd = open_unlinked(dirs[i]);
    if (fd < 0) continue;
    if (memory_backed(fd)) {
      close(fd);
      continue;
    }
    kn_spill *s = kn_calloc(1, sizeof *s);
    if (!s) {
      close(fd);
      return NULL;
    }
    s->fd = fd;
    return s;
  }
  return NULL;
}

void *kn_spill_put(kn_spill *s, const void *p, size_t bytes) {
  size_t pg = page_bytes();
  size_t len = (bytes + pg - 1) & ~(pg - 1);
  if (!s || !bytes || len < bytes || !KN_GROW(s->maps, s->cap, (int64_t)s->n + 1)) return NULL;
  for (size_t done = 0; done < bytes;) {
    ssize_t w = pwrite(s->fd, (const char *)p + done, bytes - done, (off_t)(s->end + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return NULL; /* a full disk: the caller keeps its copy */
    done += (size_t)w;
  }
  /* read-only: constants are never written (an engine's are a read-only
   * file mapping too), so its pages can always be dropped */
  void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, s->fd, (off_t)s->end);
  if (m == MAP_FAILED) return NULL;
  s->end += len;
  s->maps[s->n].p = m;
  s->maps[s->n].len = len;
  s->n++;
  return m;
}

int32_t kn_spill_count(const kn_spill *s) { return s ? s->n : 0; }

void kn_spill_drop(const kn_spill *s, const void *p, size_t bytes) {
  const uint8_t *b = p;
  for (int32_t i = 0; s && b && i < s->n; i++) {
    const uint8_t *lo = s->maps[i].p;
    if (b >= lo && b < lo + s->maps[i].len && bytes <= (size_t)(lo + s->maps[i].len - b)) {
      /* to the copy's page end: the mapping covers it */
      size_t pg = page_bytes();
      size_t end = ((size_t)(b - lo) + bytes + pg - 1) & ~(pg - 1);
      kn_drop_pages(b, end - (size_t)(b - lo));
      return;
    }
  }
}

void kn_heap_trim(void) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

void kn_spill_close(kn_spill *s) {
  if (!s) return;
  for (int32_t i = 0; i < s->n; i++) munmap(s->maps[i].p, s->maps[i].len);
  free(s->maps);
  close(s->fd);
  free(s);
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


kn_spill *kn_spill_open(void) { return NULL; }
void *kn_spill_put(kn_spill *s, const void *p, size_t bytes) {
  (void)s;
  (void)p;
  (void)bytes;
  return NULL;
}
int32_t kn_spill_count(const kn_spill *s) {
  (void)s;
  return 0;
}
void kn_spill_drop(const kn_spill *s, const void *p, size_t bytes) {
  (void)s;
  (void)p;
  (void)bytes;
}
void kn_spill_close(kn_spill *s) { (void)s; }
void kn_heap_trim(void) {}

#endif
