/* libkiln-trace internals shared by trace.c (recording, writing) and
 * symbols.c (addresses to names).  Not part of libkiln: this library is
 * linked into programs compiled with -finstrument-functions, so every
 * function here carries KT_FN (no_instrument_function), in case it is
 * itself built with that flag. */
#ifndef KILN_TRACE_INTERNAL_H
#define KILN_TRACE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define KT_FN __attribute__((no_instrument_function))

/* One loaded ELF object's function symbols (.symtab, else .dynsym), sorted
 * by address; the file stays mapped while the cache lives. */
typedef struct kt_sym {
  uintptr_t start, size; /* st_value (unbiased), st_size */
  const char *name;      /* in the mapped string table */
} kt_sym;

typedef struct kt_object {
  struct kt_object *next;
  uintptr_t bias; /* dlpi_addr: run-time address = st_value + bias */
  char *path;
  kt_sym *syms;
  size_t n_syms;
  void *map;
  size_t map_len;
} kt_object;

/* Addresses already resolved (open addressing on the address) and the
 * objects whose symbol tables were read.  Used by the writer only, under
 * the agent's flush lock: never on the recording path. */
typedef struct kt_symcache {
  struct kt_slot {
    const void *addr;
    char *name;
  } *slots;
  size_t cap, n;
  kt_object *objects;
} kt_symcache;

/* The name of the function at addr: dladdr's when it names exactly that
 * address, else the ELF symbol table of the object holding it (static
 * functions, executables not linked with -rdynamic), else "0x<hex>".
 * NULL only when out of memory.  Owned by the cache. */
KT_FN const char *kt_symcache_name(kt_symcache *c, const void *addr);

#endif
