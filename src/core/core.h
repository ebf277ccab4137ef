/* Internal core helpers shared by every layer: error reporting, checked
 * allocation, dtype classes, half-precision conversion. */
#ifndef KN_CORE_H
#define KN_CORE_H

#include "kiln.h"

#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KN_WUR __attribute__((warn_unused_result))
#define KN_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* Largest single tensor kiln will allocate (guards against hostile shapes). */
#define KN_MAX_TENSOR_BYTES ((size_t)16 << 30)

/* Fill `err` (may be NULL) and return `status`. */
kn_status kn_fail(kn_error *err, kn_status status, const char *fmt, ...)
    KN_PRINTF(3, 4);
/* Prefix an existing message: "<prefix>: <old message>". */
void kn_error_prefix(kn_error *err, const char *fmt, ...) KN_PRINTF(2, 3);
const char *kn_status_name(kn_status s);

/* Always-on assertion for programmer errors. */
#define KN_ASSERT(cond)                                                      \
  do {                                                                       \
    if (!(cond)) kn_assert_fail(#cond, __FILE__, __LINE__);                  \
  } while (0)
_Noreturn void kn_assert_fail(const char *what, const char *file, int line);

void *kn_malloc(size_t n);           /* NULL on failure or n == 0 -> 1 byte */
void *kn_calloc(size_t n, size_t sz);
void *kn_realloc(void *p, size_t n);
char *kn_strdup(const char *s);
char *kn_strndup(const char *s, size_t n);

/* A growable list of owned strings (the builder's decisions). */
typedef struct kn_lines {
  char **s;
  int32_t n;
} kn_lines;
/* Appends a copy of text; false when out of memory (the list unchanged). */
bool kn_lines_add(kn_lines *l, const char *text);
/* Appends a copy unless an equal line is there already. */
bool kn_lines_add_once(kn_lines *l, const char *text);
void kn_lines_free(kn_lines *l);

/* A large long-lived buffer (weights, arenas; bigmem.c): zeroed, page- and,
 * from 2 MiB up, huge-page-aligned, prefaulted, in huge pages where the
 * kernel allows.  NULL when out of memory.  Freed only by kn_big_free with
 * the same size. */
void *kn_big_alloc(size_t bytes);
/* The same without the prefault and in small pages: zeroed, its pages made
 * resident only as they are first written (an arena planned for larger
 * shapes than the runs use).  Freed by kn_big_free. */
void *kn_big_alloc_lazy(size_t bytes);
void kn_big_free(void *p, size_t bytes);
/* A spill file (bigmem.c): bytes moved out of the heap into an unlinked
 * file on a disk-backed file system ($TMPDIR, /var/tmp or /tmp; never
 * tmpfs, where they would still be memory), each copy mapped on its own and
 * resident only while read.  kn_spill_open: NULL where no folder takes
 * one.  kn_spill_put: a mapping holding a copy of p's bytes, valid until
 * kn_spill_close; NULL when it cannot be written (the caller keeps p). */
typedef struct kn_spill kn_spill;
kn_spill *kn_spill_open(void);
void *kn_spill_put(kn_spill *s, const void *p, size_t bytes);
int32_t kn_spill_count(const kn_spill *s); /* copies made */
/* Drops the resident pages of [p, p + bytes) when it lies in one of s's
 * copies (read again, they come back from the file); else nothing. */
void kn_spill_drop(const kn_spill *s, const void *p, size_t bytes);
void kn_spill_close(kn_spill *s);
/* Gives the heap's free pages back to the system where the allocator can
 * (glibc's malloc_trim); a no-op elsewhere. */
void kn_heap_trim(void);
/* Drops this process's pages wholly inside [p, p + bytes) of a private
 * read-only file mapping (they fault back in from the page cache if read
 * again); a no-op off Linux. */
void kn_drop_pages(const void *p, size_t bytes);

/* Grow an array so that it holds at least `need` elements. */
#define KN_GROW(ptr, cap, need)                                              \
  kn_grow_array((void **)&(ptr), &(cap), (need), sizeof(*(ptr)))
bool kn_grow_array(void **ptr, int32_t *cap, int64_t need, size_t elem) KN_WUR;

/* dtype classes */
bool kn_dtype_is_float(kn_dtype t);   /* f16, bf16, f32, f64 */
bool kn_dtype_is_int(kn_dtype t);     /* signed or unsigned integers */
bool kn_dtype_is_signed(kn_dtype t);  /* signed ints and floats */
bool kn_dtype_is_valid(int32_t t);    /* a dtype kiln knows */

/* half precision */
float kn_f16_to_f32(uint16_t h);
uint16_t kn_f32_to_f16(float f);
float kn_bf16_to_f32(uint16_t h);
uint16_t kn_f32_to_bf16(float f);

/* Generic element access through double / int64 (slow paths, reference
 * kernels and constant folding). */
double kn_load_f64(const void *data, kn_dtype t, int64_t i);
void kn_store_f64(void *data, kn_dtype t, int64_t i, double v);
int64_t kn_load_i64(const void *data, kn_dtype t, int64_t i);
void kn_store_i64(void *data, kn_dtype t, int64_t i, int64_t v);

/* Convert n elements of numeric dtype s at src into dtype d at dst (no
 * strings; the buffers must not overlap).  f16/bf16 <-> f32, f32 <-> f64
 * and i32/i64/u64 -> f32 have direct loops (the integer ones round once,
 * not through double); integer <-> integer goes through int64 exactly
 * (bool reads as 0/1 and stores v != 0); every other pair goes through
 * double, and floats stored to integers saturate (NaN -> 0) before
 * narrowing. */
void kn_convert(const void *src, kn_dtype s, void *dst, kn_dtype d, int64_t n);

/* Shapes */
/* numel with overflow check; -1 when any dim is negative or on overflow. */
int64_t kn_shape_numel(int32_t rank, const int64_t *dims);
/* "1x3x224x224" (or "scalar"), into buf. */
const char *kn_shape_str(int32_t rank, const int64_t *dims, char *buf,
                         size_t len);
/* Deep copy (strings too); dst must be empty. */
kn_status kn_tensor_copy(kn_tensor *dst, const kn_tensor *src,
                         kn_error *err) KN_WUR;
/* A borrowed view of src (not owned). */
kn_tensor kn_tensor_view(const kn_tensor *src);

#endif
