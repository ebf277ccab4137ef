/* Function addresses to names, once per distinct address when a trace is
 * written.  dladdr only knows the dynamic symbol table, which in an
 * executable not linked with -rdynamic holds almost nothing and never
 * holds static functions; so the fallback reads the full ELF symbol table
 * (.symtab) of the object the address lies in (/proc/self/exe for the
 * main program), found with dl_iterate_phdr. */
#define _GNU_SOURCE
#include "trace_internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__LP64__)
#define ELFCLASSW_ ELFCLASS64
#define ELFW_ST_TYPE_ ELF64_ST_TYPE
#else
#define ELFCLASSW_ ELFCLASS32
#define ELFW_ST_TYPE_ ELF32_ST_TYPE
#endif

struct kt_find {
  uintptr_t addr;
  uintptr_t bias;
  const char *name;
  int found;
};

KT_FN static int find_object(struct dl_phdr_info *info, size_t size, void *arg) {
  struct kt_find *f = arg;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (f->addr >= lo && f->addr < lo + ph->p_memsz) {
      f->bias = info->dlpi_addr;
      f->name = info->dlpi_name;
      f->found = 1;
      return 1;
    }
  }
  return 0;
}

KT_FN static int sym_cmp(const void *a, const void *b) {
  const kt_sym *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* Reads the function symbols of the ELF file at path into o (none when the
 * file cannot be read or is not an ELF of this machine's class: the caller
 * then falls back to a hex address). */
KT_FN static void load_symbols(kt_object *o, const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) || (size_t)st.st_size < sizeof(ElfW(Ehdr))) {
    close(fd);
    return;
  }
  void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return;
  size_t len = (size_t)st.st_size;
  const unsigned char *base = map;
  const ElfW(Ehdr) *eh = map;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASSW_ ||
      eh->e_shentsize != sizeof(ElfW(Shdr)) || eh->e_shoff == 0 || eh->e_shoff > len ||
      (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) > len - eh->e_shoff)
    goto unusable;
  const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(base + eh->e_shoff);
  const ElfW(Shdr) *tab = NULL;
  for (int pass = 0; pass < 2 && !tab; pass++)
    for (int i = 0; i < eh->e_shnum; i++)
      if (sh[i].sh_type == (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM)) {
        tab = &sh[i];
        break;
      }
  if (!tab || tab->sh_link >= eh->e_shnum || tab->sh_entsize != sizeof(ElfW(Sym)) ||
      tab->sh_offset > len || tab->sh_size > len - tab->sh_offset)
    goto unusable;
  const ElfW(Shdr) *strs = &sh[tab->sh_link];
  /* the string table must end with a NUL for every name to end inside it */
  if (strs->sh_offset > len || strs->sh_size > len - strs->sh_offset || strs->sh_size == 0 ||
      base[strs->sh_offset + strs->sh_size - 1] != '\0')
    goto unusable;
  const ElfW(Sym) *syms = (const ElfW(Sym) *)(base + tab->sh_offset);
  const char *str = (const char *)(base + strs->sh_offset);
  size_t n = tab->sh_size / sizeof(ElfW(Sym)), k = 0;
  kt_sym *out = malloc((n ? n : 1) * sizeof *out);
  if (!out) goto unusable;
  for (size_t i = 0; i < n; i++) {
    int type = ELFW_ST_TYPE_(syms[i].st_info);
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || syms[i].st_shndx == SHN_UNDEF ||
        syms[i].st_value == 0 || syms[i].st_name >= strs->sh_size)
      continue;
    out[k++] = (kt_sym){syms[i].st_value, syms[i].st_size, str + syms[i].st_name};
  }
  qsort(out, k, sizeof *out, sym_cmp);
  o->syms = out;
  o->n_syms = k;
  o->map = map;
  o->map_len = len;
  return;
unusable:
  munmap(map, len);
}

KT_FN static const char *elf_lookup(kt_symcache *c, const void *addr) {
  struct kt_find f = {.addr = (uintptr_t)addr};
  dl_iterate_phdr(find_object, &f);
  if (!f.found) return NULL;
  const char *path = f.name && f.name[0] ? f.name : "/proc/self/exe";
  kt_object *o = c->objects;
  for (; o; o = o->next)
    if (o->bias == f.bias && !strcmp(o->path, path)) break;
  if (!o) {
    o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->bias = f.bias;
    o->path = strdup(path);
    if (!o->path) {
      free(o);
      return NULL;
    }
    load_symbols(o, path);
    o->next = c->objects;
    c->objects = o;
  }
  uintptr_t off = (uintptr_t)addr - o->bias;
  size_t lo = 0, hi = o->n_syms; /* the last symbol starting at or below off */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (o->syms[mid].start <= off) lo = mid + 1;
    else hi = mid;
  }
  /* among symbols at the same address (aliases), any will do */
  if (lo == 0) return NULL;
  const kt_sym *s = &o->syms[lo - 1];
  if (off >= s->start + (s->size ? s->size : 1)) return NULL;
  return s->name;
}

KT_FN static size_t slot_of(const void *addr, size_t cap) {
  uint64_t h = (uint64_t)(uintptr_t)addr * 0x9e3779b97f4a7c15ull;
  return (size_t)(h >> 17) & (cap - 1);
}

KT_FN static int grow(kt_symcache *c) {
  size_t cap = c->cap ? c->cap * 2 : 1024;
  struct kt_slot *s = calloc(cap, sizeof *s);
  if (!s) return -1;
  for (size_t i = 0; i < c->cap; i++) {
    if (!c->slots[i].addr) continue;
    size_t j = slot_of(c->slots[i].addr, cap);
    while (s[j].addr) j = (j + 1) & (cap - 1);
    s[j] = c->slots[i];
  }
  free(c->slots);
  c->slots = s;
  c->cap = cap;
  return 0;
}

const char *kt_symcache_name(kt_symcache *c, const void *addr) {
  if ((c->n + 1) * 2 > c->cap && grow(c)) return NULL;
  size_t j = slot_of(addr, c->cap);
  while (c->slots[j].addr) {
    if (c->slots[j].addr == addr) return c->slots[j].name;
    j = (j + 1) & (c->cap - 1);
  }
  char *name = NULL;
  Dl_info info;
  if (dladdr(addr, &info) && info.dli_sname && info.dli_saddr == addr)
    name = strdup(info.dli_sname);
  if (!name) {
    const char *s = elf_lookup(c, addr);
    if (s) name = strdup(s);
  }
  if (!name) {
    char hex[2 + 2 * sizeof(uintptr_t) + 1];
    snprintf(hex, sizeof hex, "0x%lx", (unsigned long)(uintptr_t)addr);
    name = strdup(hex);
  }
  if (!name) return NULL;
  c->slots[j].addr = addr;
  c->slots[j].name = name;
  c->n++;
  return name;
}
