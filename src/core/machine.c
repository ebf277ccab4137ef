/* Machine descriptions: the OS's view, the fallback, JSON (machine.h). */
#define _GNU_SOURCE
#include "machine.h"

#include "cpu.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <unistd.h>

/* ---- what the OS and the CPU report --------------------------------------- */

int32_t kn_machine_cpus(void) {
#ifdef CPU_COUNT
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
#endif
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int32_t)n : 1;
}

/* First line of a small sysfs file into buf; false when unreadable. */
static bool read_line(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, len - 1, f);
  fclose(f);
  buf[n] = 0;
  char *nl = strchr(buf, '\n');
  if (nl) *nl = 0;
  return n > 0;
}

/* "48K", "1024K", "32M" -> bytes (0 when unreadable). */
static uint64_t parse_size(const char *s) {
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return 0;
  if (*end == 'K') v <<= 10;
  else if (*end == 'M') v <<= 20;
  else if (*end == 'G') v <<= 30;
  return (uint64_t)v;
}

/* CPUs in a list such as "0-3,8,10-11". */
static int32_t count_cpu_list(const char *s) {
  int32_t n = 0;
  while (*s) {
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s) break;
    long b = a;
    s = end;
    if (*s == '-') {
      b = strtol(s + 1, &end, 10);
      if (end == s + 1) break;
      s = end;
    }
    if (b >= a && b - a < 65536) n += (int32_t)(b - a + 1);
    if (*s != ',') break;
    s++;
  }
  return n;
}

static void set_level(kn_mem_level *l, const char *name, uint64_t bytes, uint32_t line,
                      int32_t shared_by) {
  memset(l, 0, sizeof *l);
  snprintf(l->name, sizeof l->name, "%s", name);
  l->bytes = bytes;
  l->line_bytes = line ? line : 64;
  l->shared_by = shared_by > 0 ? shared_by : 1;
}

/* Data caches by level (index 1..3) from sysfs, then from sysconf (glibc
 * asks cpuid); 0 where neither says. */
static void os_caches(uint64_t size[4], uint32_t line[4], int32_t shared[4]) {
  char buf[256], path[128];
  for (int i = 0; i < 16; i++) {
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
    if (!read_line(path, buf, sizeof buf)) break;
    if (!strncmp(buf, "Instruction", 11)) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    if (!read_line(path, buf, sizeof buf)) continue;
    int lv = atoi(buf);
    if (lv < 1 || lv > 3) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    if (read_line(path, buf, sizeof buf)) size[lv] = parse_size(buf);
    snprintf(path, sizeof path,
             "/sys/devices/system/cpu/cpu0/cache/index%d/coherency_line_size", i);
    if (read_line(path, buf, sizeof buf)) line[lv] = (uint32_t)atoi(buf);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/shared_cpu_list",
             i);
    if (read_line(path, buf, sizeof buf)) shared[lv] = count_cpu_list(buf);
  }
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
  static const int sc_size[4] = {0, _SC_LEVEL1_DCACHE_SIZE, _SC_LEVEL2_CACHE_SIZE,
                                 _SC_LEVEL3_CACHE_SIZE};
  static const int sc_line[4] = {0, _SC_LEVEL1_DCACHE_LINESIZE, _SC_LEVEL2_CACHE_LINESIZE,
                                 _SC_LEVEL3_CACHE_LINESIZE};
  for (int lv = 1; lv <= 3; lv++) {
    long v;
    if (!size[lv] && (v = sysconf(sc_size[lv])) > 0) size[lv] = (uint64_t)v;
    if (!line[lv] && (v = sysconf(sc_line[lv])) > 0) line[lv] = (uint32_t)v;
  }
#endif
}

uint64_t kn_machine_os_l3(void) {
  uint64_t size[4] = {0};
  uint32_t line[4] = {0};
  int32_t shared[4] = {0};
  os_caches(size, line, shared);
  return size[3];
}

void kn_machine_from_os(kn_machine *m) {
  memset(m, 0, sizeof *m);
  kn_cpu_identity(m->vendor, sizeof m->vendor, m->cpu, sizeof m->cpu, &m->family, &m->model);
  if (!m->cpu[0]) snprintf(m->cpu, sizeof m->cpu, "unknown CPU");
  m->features = kn_cpu_features();
  int32_t cpus = kn_machine_cpus();
  char buf[256];
  int32_t smt = 1;
  if (read_line("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list", buf,
                sizeof buf))
    smt = count_cpu_list(buf);
  if (smt < 1 || smt > cpus) smt = 1;
  m->threads_per_core = smt;
  m->cores = cpus / smt > 0 ? cpus / smt : 1;
  uint64_t size[4] = {0};
  uint32_t line[4] = {0};
  int32_t shared[4] = {0};
  os_caches(size, line, shared);
  static const uint64_t common[4] = {0, 48 << 10, 1 << 20, 32 << 20};
  for (int lv = 1; lv <= 3; lv++)
    if (!size[lv]) size[lv] = common[lv];
  if (size[3] > common[3]) size[3] = common[3];
  if (size[2] < size[1]) size[2] = size[1] * 4;
  if (size[3] <= size[2]) size[3] = size[2] * 4;
  set_level(&m->levels[0], "L1", size[1], line[1], shared[1] ? shared[1] : smt);
  set_level(&m->levels[1], "L2", size[2], line[2], shared[2] ? shared[2] : smt);
  set_level(&m->levels[2], "L3", size[3], line[3], shared[3] ? shared[3] : cpus);
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t dram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : (uint64_t)8 << 30;
  set_level(&m->levels[3], "DRAM", dram, line[3] ? line[3] : 64, cpus);
  m->n_levels = 4;
}

/* Nominal per-core rates of a recent core of each class (docs/MACHINE.md):
 * deliberately round, for engines built with probing off. */
void kn_machine_fallback(kn_machine *m) {
  kn_machine_from_os(m);
  bool avx512 = (m->features & KN_CPU_BIT(AVX512F)) != 0;
  bool avx2 = (m->features & KN_CPU_BIT(AVX2)) && (m->features & KN_CPU_BIT(FMA));
  double fp32 = avx512 ? 150 : avx2 ? 90 : 20;
  double n = m->cores;
  m->fp32_gflops[0] = fp32;
  m->fp32_gflops[1] = fp32 * n;
  if (m->features & KN_CPU_BIT(AVX512BF16)) {
    m->bf16_gflops[0] = 2 * fp32;
    m->bf16_gflops[1] = 2 * fp32 * n;
  }
  double i8 = (m->features & KN_CPU_BIT(AVX512VNNI)) ? 4 * fp32 : avx2 ? 2 * fp32 : 0;
  m->int8_gops[0] = i8;
  m->int8_gops[1] = i8 * n;
  /* bytes per second per core: L1, L2, L3, then DRAM for the socket */
  static const double rd[3] = {200, 100, 50}, wr[3] = {100, 60, 30};
  for (int i = 0; i < 3; i++) {
    double share = i == 2 ? fmin(n, 4) : n; /* the L3 scales less */
    m->levels[i].read_gbs[0] = rd[i];
    m->levels[i].read_gbs[1] = rd[i] * share;
    m->levels[i].write_gbs[0] = wr[i];
    m->levels[i].write_gbs[1] = wr[i] * share;
  }
  kn_mem_level *d = &m->levels[3];
  d->read_gbs[0] = 20;
  d->read_gbs[1] = 25;
  d->write_gbs[0] = 10;
  d->write_gbs[1] = 12;
  m->dram_copy_gbs[0] = 20;
  m->dram_copy_gbs[1] = 25;
  snprintf(m->source, sizeof m->source, "fallback");
}

const kn_mem_level *kn_machine_level(const kn_machine *m, const char *name) {
  for (int32_t i = 0; i < m->n_levels; i++)
    if (!strcmp(m->levels[i].name, name)) return &m->levels[i];
  return NULL;
}

void kn_machine_caches(const kn_machine *m, int32_t threads, size_t *l1d, size_t *l2,
                       size_t *l3) {
  const kn_mem_level *a = kn_machine_level(m, "L1"), *b = kn_machine_level(m, "L2"),
                     *c = kn_machine_level(m, "L3");
  *l1d = a ? (size_t)a->bytes : (size_t)32 << 10;
  *l2 = b ? (size_t)b->bytes : (size_t)1 << 20;
  *l3 = c ? (size_t)c->bytes : *l2;
  if (threads > 1 && c) {
    int32_t sharing = threads < c->shared_by ? threads : c->shared_by;
    *l3 /= (size_t)(sharing > 0 ? sharing : 1);
  }
}

/* ---- the IO model's factors ------------------------------------------------ */

const char *kn_machine_family_name(int32_t family) {
  static const char *const names[KN_MACHINE_FAMILIES] = {
      "gemm", "conv", "winograd", "depthwise", "attention", "pool", "eltwise", "copy"};
  return family >= 0 && family < KN_MACHINE_FAMILIES ? names[family] : NULL;
}

double kn_machine_factor(const kn_machine *m, int32_t family, int32_t threads) {
  if (family < 0 || family >= KN_MACHINE_FAMILIES) return 1.0;
  double f = m->factors[family][threads > 1 ? 1 : 0];
  return f > 0 ? f : 1.0;
}

/* ---- JSON ------------------------------------------------------------------ */

static double round1(double v) { return round(v * 10) / 10; }

static cJSON *pair(const double v[2]) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddNumberToObject(o, "one", round1(v[0]));
  cJSON_AddNumberToObject(o, "all", round1(v[1]));
  return o;
}

static char *to_json(const kn_machine *m, bool pretty);

char *kn_machine_to_json(const kn_machine *m) { return to_json(m, true); }
char *kn_machine_to_json_compact(const kn_machine *m) { return to_json(m, false); }

static char *to_json(const kn_machine *m, bool pretty) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  cJSON_AddStringToObject(root, "format", "kiln-machine");
  cJSON_AddNumberToObject(root, "version", KN_MACHINE_FORMAT);
  cJSON_AddStringToObject(root, "kiln", KN_VERSION_STRING);
  cJSON_AddStringToObject(root, "source", m->source);
  cJSON_AddNumberToObject(root, "probe_seconds", round1(m->probe_seconds));
  cJSON *cpu = cJSON_AddObjectToObject(root, "cpu");
  if (cpu) {
    cJSON_AddStringToObject(cpu, "model", m->cpu);
    cJSON_AddStringToObject(cpu, "vendor", m->vendor);
    cJSON_AddNumberToObject(cpu, "family", m->family);
    cJSON_AddNumberToObject(cpu, "model_number", m->model);
    cJSON *f = cJSON_AddArrayToObject(cpu, "features");
    for (int bit = 0; f && bit < 64; bit++) {
      const char *name = kn_cpu_feature_name(bit);
      if ((m->features >> bit & 1) && name) cJSON_AddItemToArray(f, cJSON_CreateString(name));
    }
  }
  cJSON_AddNumberToObject(root, "cores", m->cores);
  cJSON_AddNumberToObject(root, "threads_per_core", m->threads_per_core);
  cJSON *peak = cJSON_AddObjectToObject(root, "peak");
  if (peak) {
    cJSON_AddItemToObject(peak, "fp32_gflops", pair(m->fp32_gflops));
    cJSON_AddItemToObject(peak, "bf16_gflops", pair(m->bf16_gflops));
    cJSON_AddItemToObject(peak, "int8_gops", pair(m->int8_gops));
  }
  cJSON_AddItemToObject(root, "dram_copy_gbs", pair(m->dram_copy_gbs));
  cJSON *lv = cJSON_AddArrayToObject(root, "levels");
  for (int32_t i = 0; lv && i < m->n_levels; i++) {
    const kn_mem_level *l = &m->levels[i];
    cJSON *o = cJSON_CreateObject();
    if (!o) break;
    cJSON_AddStringToObject(o, "name", l->name);
    cJSON_AddNumberToObject(o, "bytes", (double)l->bytes);
    cJSON_AddNumberToObject(o, "line_bytes", l->line_bytes);
    cJSON_AddNumberToObject(o, "shared_by", l->shared_by);
    cJSON_AddItemToObject(o, "read_gbs", pair(l->read_gbs));
    cJSON_AddItemToObject(o, "write_gbs", pair(l->write_gbs));
    cJSON_AddItemToArray(lv, o);
  }
  if (m->factors_cpu[0]) {
    cJSON *fo = cJSON_AddObjectToObject(root, "factors");
    cJSON *on = fo ? cJSON_AddObjectToObject(fo, "cpu") : NULL;
    if (on) {
      cJSON_AddStringToObject(on, "model", m->factors_cpu);
      cJSON_AddNumberToObject(on, "family", m->factors_family);
      cJSON_AddNumberToObject(on, "model_number", m->factors_model);
      cJSON_AddStringToObject(on, "isa", m->factors_isa);
    }
    if (fo) {
      cJSON_AddStringToObject(fo, "measured", m->factors_when);
      cJSON_AddNumberToObject(fo, "seconds", round(m->factors_seconds * 100) / 100);
    }
    cJSON *fam = fo ? cJSON_AddObjectToObject(fo, "families") : NULL;
    for (int32_t k = 0; fam && k < KN_MACHINE_FAMILIES; k++) {
      if (!(m->factors[k][0] > 0) && !(m->factors[k][1] > 0)) continue;
      cJSON *o = cJSON_CreateObject();
      if (!o) break;
      cJSON_AddNumberToObject(o, "one", round(m->factors[k][0] * 1000) / 1000);
      cJSON_AddNumberToObject(o, "all", round(m->factors[k][1] * 1000) / 1000);
      cJSON_AddItemToObject(fam, kn_machine_family_name(k), o);
    }
  }
  char *text = pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!text) return NULL;
  /* a copy callers free() whatever hooks cJSON was given; a file's text
   * ends in a newline */
  size_t n = strlen(text);
  char *out = malloc(n + 2);
  if (out) {
    memcpy(out, text, n);
    out[n] = pretty ? '\n' : 0;
    out[n + 1] = 0;
  }
  cJSON_free(text);
  return out;
}

typedef struct jreader {
  const char *label;
  kn_error *err;
} jreader;

static kn_status jbad(jreader *r, const char *field, const char *expected) {
  return kn_fail(r->err, KN_ERR_PARSE, "%s: %s: expected %s", r->label, field, expected);
}

static const cJSON *jfield(const cJSON *o, const char *name) {
  return cJSON_GetObjectItemCaseSensitive(o, name);
}

/* Member `name` of o, with field = "path.name" ("name" at the top level)
 * for messages; NULL after the "missing" failure (*st set). */
static const cJSON *jmember(jreader *r, const cJSON *o, const char *name, const char *path,
                            char field[96], kn_status *st) {
  snprintf(field, 96, "%s%s%s", path, *path ? "." : "", name);
  const cJSON *v = jfield(o, name);
  *st = v ? KN_OK : kn_fail(r->err, KN_ERR_PARSE, "%s: %s is missing", r->label, field);
  return v;
}

static kn_status jnum(jreader *r, const cJSON *o, const char *name, const char *path,
                      double lo, double hi, double *out) {
  char field[96], what[96];
  kn_status st;
  const cJSON *v = jmember(r, o, name, path, field, &st);
  if (!v) return st;
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
      v->valuedouble > hi) {
    snprintf(what, sizeof what, "a number in [%g, %g]", lo, hi);
    return jbad(r, field, what);
  }
  *out = v->valuedouble;
  return KN_OK;
}

static kn_status jint(jreader *r, const cJSON *o, const char *name, const char *path,
                      double lo, double hi, int64_t *out) {
  double d;
  kn_status st = jnum(r, o, name, path, lo, hi, &d);
  if (st) return st;
  if (d != floor(d)) {
    char field[96];
    snprintf(field, sizeof field, "%s%s%s", path, *path ? "." : "", name);
    return jbad(r, field, "an integer");
  }
  *out = (int64_t)d;
  return KN_OK;
}

static kn_status jstr(jreader *r, const cJSON *o, const char *name, const char *path,
                      char *dst, size_t len) {
  char field[96];
  kn_status st;
  const cJSON *v = jmember(r, o, name, path, field, &st);
  if (!v) return st;
  if (!cJSON_IsString(v) || !v->valuestring) return jbad(r, field, "a string");
  if (strlen(v->valuestring) >= len) {
    char what[48];
    snprintf(what, sizeof what, "at most %zu characters", len - 1);
    return jbad(r, field, what);
  }
  snprintf(dst, len, "%s", v->valuestring);
  return KN_OK;
}

/* A rate pair {"one": x, "all": y}, GB/s or GFLOP/s. */
static kn_status jpair(jreader *r, const cJSON *o, const char *name, const char *path,
                       double lo, double out[2]) {
  char field[96];
  kn_status st;
  const cJSON *v = jmember(r, o, name, path, field, &st);
  if (!v) return st;
  if (!cJSON_IsObject(v)) return jbad(r, field, "an object {\"one\": N, \"all\": N}");
  st = jnum(r, v, "one", field, lo, 1e9, &out[0]);
  if (!st) st = jnum(r, v, "all", field, lo, 1e9, &out[1]);
  return st;
}

/* The optional "factors" object (descriptions written before it existed
 * have none: every factor stays 0, which the IO model reads as 1).  A
 * family this kiln does not know is skipped, as feature names are. */
static kn_status read_factors(jreader *r, const cJSON *fo, kn_machine *m) {
  if (!fo) return KN_OK;
  if (!cJSON_IsObject(fo)) return jbad(r, "factors", "an object");
  const cJSON *on = jfield(fo, "cpu");
  if (!cJSON_IsObject(on)) return jbad(r, "factors.cpu", "an object");
  int64_t i64;
  kn_status st = jstr(r, on, "model", "factors.cpu", m->factors_cpu, sizeof m->factors_cpu);
  if (!st) st = jint(r, on, "family", "factors.cpu", 0, 1e6, &i64);
  if (!st) m->factors_family = (int32_t)i64;
  if (!st) st = jint(r, on, "model_number", "factors.cpu", 0, 1e6, &i64);
  if (!st) m->factors_model = (int32_t)i64;
  if (!st) st = jstr(r, on, "isa", "factors.cpu", m->factors_isa, sizeof m->factors_isa);
  if (!st) st = jstr(r, fo, "measured", "factors", m->factors_when, sizeof m->factors_when);
  if (!st) st = jnum(r, fo, "seconds", "factors", 0, 1e6, &m->factors_seconds);
  if (st) return st;
  const cJSON *fam = jfield(fo, "families");
  if (!cJSON_IsObject(fam)) return jbad(r, "factors.families", "an object");
  for (int32_t k = 0; k < KN_MACHINE_FAMILIES; k++) {
    const char *name = kn_machine_family_name(k);
    if (!jfield(fam, name)) continue;
    const cJSON *o = jfield(fam, name);
    char field[96];
    snprintf(field, sizeof field, "factors.families.%s", name);
    if (!cJSON_IsObject(o)) return jbad(r, field, "an object {\"one\": N, \"all\": N}");
    if ((st = jnum(r, o, "one", field, 0, 100, &m->factors[k][0]))) return st;
    if ((st = jnum(r, o, "all", field, 0, 100, &m->factors[k][1]))) return st;
  }
  if (!m->factors_cpu[0]) return jbad(r, "factors.cpu.model", "the CPU's name");
  return KN_OK;
}

kn_status kn_machine_from_json(const char *text, size_t len, const char *label,
                               kn_machine *out, kn_error *err) {
  jreader r = {label, err};
  kn_machine m;
  memset(&m, 0, sizeof m);
  memset(out, 0, sizeof *out);
  cJSON *root = cJSON_ParseWithLength(text, len);
  if (!root) {
    const char *at = cJSON_GetErrorPtr();
    size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : 0;
    return kn_fail(err, KN_ERR_PARSE, "%s: not valid JSON (near byte %zu)", label, off);
  }
  kn_status st = KN_OK;
  int64_t i64;
  char buf[32];
  if (!cJSON_IsObject(root)) {
    st = jbad(&r, "the document", "a JSON object");
    goto done;
  }
  if ((st = jstr(&r, root, "format", "", buf, sizeof buf))) goto done;
  if (strcmp(buf, "kiln-machine")) {
    st = jbad(&r, "format", "\"kiln-machine\"");
    goto done;
  }
  if ((st = jint(&r, root, "version", "", 1, 1e6, &i64))) goto done;
  if (i64 > KN_MACHINE_FORMAT) {
    st = kn_fail(err, KN_ERR_UNSUPPORTED,
                 "%s: machine description version %lld is newer than this kiln reads (%d)",
                 label, (long long)i64, KN_MACHINE_FORMAT);
    goto done;
  }
  if ((st = jstr(&r, root, "source", "", m.source, sizeof m.source))) goto done;
  if ((st = jnum(&r, root, "probe_seconds", "", 0, 1e6, &m.probe_seconds))) goto done;
  const cJSON *cpu = jfield(root, "cpu");
  if (!cJSON_IsObject(cpu)) {
    st = jbad(&r, "cpu", "an object");
    goto done;
  }
  if ((st = jstr(&r, cpu, "model", "cpu", m.cpu, sizeof m.cpu))) goto done;
  if ((st = jstr(&r, cpu, "vendor", "cpu", m.vendor, sizeof m.vendor))) goto done;
  if ((st = jint(&r, cpu, "family", "cpu", 0, 1e6, &i64))) goto done;
  m.family = (int32_t)i64;
  if ((st = jint(&r, cpu, "model_number", "cpu", 0, 1e6, &i64))) goto done;
  m.model = (int32_t)i64;
  const cJSON *feats = jfield(cpu, "features");
  if (!cJSON_IsArray(feats)) {
    st = jbad(&r, "cpu.features", "an array of feature names");
    goto done;
  }
  const cJSON *f;
  cJSON_ArrayForEach(f, feats) {
    if (!cJSON_IsString(f) || !f->valuestring) {
      st = jbad(&r, "cpu.features", "an array of feature names");
      goto done;
    }
    /* Names a newer kiln knows and this one does not are skipped. */
    for (int bit = 0; bit < 64; bit++) {
      const char *name = kn_cpu_feature_name(bit);
      if (name && !strcmp(name, f->valuestring)) m.features |= UINT64_C(1) << bit;
    }
  }
  if ((st = jint(&r, root, "cores", "", 1, 65536, &i64))) goto done;
  m.cores = (int32_t)i64;
  if ((st = jint(&r, root, "threads_per_core", "", 1, 16, &i64))) goto done;
  m.threads_per_core = (int32_t)i64;
  const cJSON *peak = jfield(root, "peak");
  if (!cJSON_IsObject(peak)) {
    st = jbad(&r, "peak", "an object");
    goto done;
  }
  if ((st = jpair(&r, peak, "fp32_gflops", "peak", 0.001, m.fp32_gflops))) goto done;
  if ((st = jpair(&r, peak, "bf16_gflops", "peak", 0, m.bf16_gflops))) goto done;
  if ((st = jpair(&r, peak, "int8_gops", "peak", 0, m.int8_gops))) goto done;
  if ((st = jpair(&r, root, "dram_copy_gbs", "", 0, m.dram_copy_gbs))) goto done;
  const cJSON *levels = jfield(root, "levels");
  int n = cJSON_IsArray(levels) ? cJSON_GetArraySize(levels) : -1;
  if (n < 2 || n > KN_MACHINE_MAX_LEVELS) {
    char what[64];
    snprintf(what, sizeof what, "an array of 2 to %d memory levels", KN_MACHINE_MAX_LEVELS);
    st = jbad(&r, "levels", what);
    goto done;
  }
  for (int i = 0; i < n; i++) {
    const cJSON *o = cJSON_GetArrayItem(levels, i);
    kn_mem_level *l = &m.levels[i];
    char path[32];
    snprintf(path, sizeof path, "levels[%d]", i);
    if (!cJSON_IsObject(o)) {
      st = jbad(&r, path, "an object");
      goto done;
    }
    if ((st = jstr(&r, o, "name", path, l->name, sizeof l->name))) goto done;
    if ((st = jint(&r, o, "bytes", path, 1, 9e15, &i64))) goto done;
    l->bytes = (uint64_t)i64;
    if ((st = jint(&r, o, "line_bytes", path, 8, 65536, &i64))) goto done;
    l->line_bytes = (uint32_t)i64;
    if (l->line_bytes & (l->line_bytes - 1)) {
      char field[48];
      snprintf(field, sizeof field, "%s.line_bytes", path);
      st = jbad(&r, field, "a power of two");
      goto done;
    }
    if ((st = jint(&r, o, "shared_by", path, 1, 1 << 20, &i64))) goto done;
    l->shared_by = (int32_t)i64;
    if ((st = jpair(&r, o, "read_gbs", path, 0.001, l->read_gbs))) goto done;
    if ((st = jpair(&r, o, "write_gbs", path, 0.001, l->write_gbs))) goto done;
    if (i > 0 && l->bytes <= m.levels[i - 1].bytes) {
      char field[48], what[96];
      snprintf(field, sizeof field, "%s.bytes", path);
      snprintf(what, sizeof what, "more than %s's %llu (levels go from nearest to farthest)",
               m.levels[i - 1].name, (unsigned long long)m.levels[i - 1].bytes);
      st = jbad(&r, field, what);
      goto done;
    }
  }
  m.n_levels = n;
  if (strcmp(m.levels[n - 1].name, "DRAM")) {
    char field[48];
    snprintf(field, sizeof field, "levels[%d].name", n - 1);
    st = jbad(&r, field, "\"DRAM\" (the last level is main memory)");
    goto done;
  }
  if ((st = read_factors(&r, jfield(root, "factors"), &m))) goto done;
  *out = m;
done:
  cJSON_Delete(root);
  return st;
}

/* A description is at most this big; anything larger is not one. */
#define MAX_JSON_BYTES ((size_t)1 << 20)

kn_status kn_machine_load(const char *path, kn_machine *out, kn_error *err) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f) return kn_fail(err, KN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  char *text = malloc(MAX_JSON_BYTES + 1);
  if (!text) {
    fclose(f);
    return kn_fail(err, KN_ERR_OOM, "%s: out of memory", path);
  }
  size_t n = fread(text, 1, MAX_JSON_BYTES + 1, f);
  bool failed = ferror(f);
  fclose(f);
  kn_status st;
  if (failed) st = kn_fail(err, KN_ERR_IO, "%s: read error", path);
  else if (n > MAX_JSON_BYTES)
    st = kn_fail(err, KN_ERR_PARSE, "%s: larger than %zu bytes: not a machine description",
                 path, MAX_JSON_BYTES);
  else st = kn_machine_from_json(text, n, path, out, err);
  free(text);
  return st;
}

kn_status kn_machine_save(const kn_machine *m, const char *path, kn_error *err) {
  char *text = kn_machine_to_json(m);
  if (!text) return kn_fail(err, KN_ERR_OOM, "%s: out of memory", path);
  /* Written beside the target and renamed over it: concurrent builds that
   * probe at once each leave a whole file, never a mixed one. */
  size_t len = strlen(path) + 32;
  char *tmp = malloc(len);
  kn_status st = KN_OK;
  if (!tmp) {
    free(text);
    return kn_fail(err, KN_ERR_OOM, "%s: out of memory", path);
  }
  snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) st = kn_fail(err, KN_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
  else {
    size_t n = strlen(text);
    bool ok = fwrite(text, 1, n, f) == n;
    ok = fclose(f) == 0 && ok;
    if (!ok) st = kn_fail(err, KN_ERR_IO, "%s: write error", path);
    else if (rename(tmp, path) != 0)
      st = kn_fail(err, KN_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    if (st) remove(tmp);
  }
  free(tmp);
  free(text);
  return st;
}

int32_t kn_machine_is_this_cpu(const kn_machine *m) {
  char vendor[16], cpu[64];
  int32_t family, model;
  kn_cpu_identity(vendor, sizeof vendor, cpu, sizeof cpu, &family, &model);
  if (!cpu[0]) snprintf(cpu, sizeof cpu, "unknown CPU");
  return !strcmp(cpu, m->cpu) && !strcmp(vendor, m->vendor) && family == m->family &&
         model == m->model && m->features == kn_cpu_features() &&
         m->cores * m->threads_per_core == kn_machine_cpus();
}

const char *kn_machine_cache_path(char *buf, size_t len) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (xdg && *xdg) snprintf(buf, len, "%s/kiln/machine.json", xdg);
  else if (home && *home) snprintf(buf, len, "%s/.cache/kiln/machine.json", home);
  else if (len) buf[0] = 0;
  return buf;
}
