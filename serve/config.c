/* config.json: a model's configuration, Triton's model config rendered as
 * JSON (the names of its protobuf fields), plus kiln's "slo", "validation"
 * and instance_group "threads".  Parsing is strict: an unknown field is an
 * error (a typo would otherwise pass silently), except the Triton fields
 * kiln has no use for, which are accepted and ignored.  docs/SERVE.md
 * describes every field. */
#include "serve.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

void sv_config_defaults(sv_config *c) {
  memset(c, 0, sizeof *c);
  c->priority_levels = 1;
  c->default_priority_level = 1;
  c->timeout_action = SV_TIMEOUT_REJECT;
  c->allow_timeout_override = true;
  c->instance_count = 1;
  c->version_policy = SV_POLICY_LATEST;
  c->num_versions = 1;
  c->min_cosine = c->max_abs_error = c->max_p99_ms = -1;
  c->validation_runs = 20;
  c->validation_timeout_ms = 10000;
}

typedef struct cparse {
  const char *label;
  char *err;
  size_t err_n;
} cparse;

static bool bad(cparse *p, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool bad(cparse *p, const char *field, const char *fmt, ...) {
  char what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(p->err, p->err_n, "%s: %s: %s", p->label, field, what);
  return false;
}

/* Every member of obj must be one of `known` (NULL-terminated). */
static bool known_fields(cparse *p, const cJSON *obj, const char *where,
                         const char *const *known) {
  for (const cJSON *m = obj->child; m; m = m->next) {
    bool ok = false;
    for (const char *const *k = known; *k && !ok; k++) ok = !strcmp(m->string, *k);
    if (!ok) {
      char list[400] = "";
      size_t n = 0;
      for (const char *const *k = known; *k && n < sizeof list; k++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", k == known ? "" : ", ", *k);
      char field[200], safe[80];
      snprintf(field, sizeof field, "%s%s%s", where, *where ? "." : "",
               sv_printable(m->string, safe, sizeof safe));
      return bad(p, field, "unknown field; expected one of %s", list);
    }
  }
  return true;
}

static bool int_field(cparse *p, const cJSON *j, const char *field, int64_t lo, int64_t hi,
                      int64_t *out) {
  if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) ||
      j->valuedouble < (double)lo || j->valuedouble > (double)hi)
    return bad(p, field, "expected an integer from %lld to %lld", (long long)lo, (long long)hi);
  *out = (int64_t)j->valuedouble;
  return true;
}

static bool num_field(cparse *p, const cJSON *j, const char *field, double lo, double hi,
                      double *out) {
  if (!cJSON_IsNumber(j) || !(j->valuedouble >= lo && j->valuedouble <= hi))
    return bad(p, field, "expected a number from %g to %g", lo, hi);
  *out = j->valuedouble;
  return true;
}

static bool obj_field(cparse *p, const cJSON *j, const char *field) {
  return cJSON_IsObject(j) || bad(p, field, "expected an object");
}

static bool parse_queue_policy(cparse *p, const cJSON *q, sv_config *c) {
  static const char *const known[] = {"timeout_action", "default_timeout_microseconds",
                                      "allow_timeout_override", "max_queue_size", NULL};
  const char *where = "dynamic_batching.default_queue_policy";
  if (!obj_field(p, q, where) || !known_fields(p, q, where, known)) return false;
  int64_t v;
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(q, "timeout_action");
  if (j) {
    if (cJSON_IsString(j) && !strcmp(j->valuestring, "REJECT")) c->timeout_action = SV_TIMEOUT_REJECT;
    else if (cJSON_IsString(j) && !strcmp(j->valuestring, "DELAY")) c->timeout_action = SV_TIMEOUT_DELAY;
    else return bad(p, "dynamic_batching.default_queue_policy.timeout_action",
                    "expected \"REJECT\" or \"DELAY\"");
  }
  if ((j = cJSON_GetObjectItemCaseSensitive(q, "default_timeout_microseconds"))) {
    if (!int_field(p, j, "dynamic_batching.default_queue_policy.default_timeout_microseconds", 0,
                   INT64_C(1) << 50, &v))
      return false;
    c->default_timeout_us = v;
  }
  if ((j = cJSON_GetObjectItemCaseSensitive(q, "allow_timeout_override"))) {
    if (!cJSON_IsBool(j))
      return bad(p, "dynamic_batching.default_queue_policy.allow_timeout_override",
                 "expected true or false");
    c->allow_timeout_override = cJSON_IsTrue(j);
  }
  if ((j = cJSON_GetObjectItemCaseSensitive(q, "max_queue_size"))) {
    if (!int_field(p, j, "dynamic_batching.default_queue_policy.max_queue_size", 0, 1 << 24, &v))
      return false;
    c->max_queue_size = (int32_t)v;
  }
  return true;
}

static bool parse_batching(cparse *p, const cJSON *d, sv_config *c) {
  static const char *const known[] = {"max_queue_delay_microseconds", "preferred_batch_size",
                                      "priority_levels", "default_priority_level",
                                      "default_queue_policy", "preserve_ordering", "adaptive",
                                      NULL};
  if (!obj_field(p, d, "dynamic_batching") || !known_fields(p, d, "dynamic_batching", known))
    return false;
  c->dynamic_batching = true;
  int64_t v;
  const cJSON *j;
  if ((j = cJSON_GetObjectItemCaseSensitive(d, "max_queue_delay_microseconds"))) {
    if (!int_field(p, j, "dynamic_batching.max_queue_delay_microseconds", 0, 60000000, &v))
      return false;
    c->max_queue_delay_us = v;
  }
  if ((j = cJSON_GetObjectItemCaseSensitive(d, "preferred_batch_size"))) {
    if (!cJSON_IsArray(j))
      return bad(p, "dynamic_batching.preferred_batch_size", "expected an array of integers");
    for (const cJSON *e = j->child; e; e = e->next) {
      if (c->n_preferred >= SV_MAX_PREFERRED)
        return bad(p, "dynamic_batching.preferred_batch_size", "expected at most %d sizes",
                   SV_MAX_PREFERRED);
      if (!int_field(p, e, "dynamic_batching.preferred_batch_size", 1,
                     c->max_batch_size > 0 ? c->max_batch_size : 1, &v))
        return false;
      c->preferred[c->n_preferred++] = (int32_t)v;
    }
  }
  if ((j = cJSON_GetObjectItemCaseSensitive(d, "priority_levels"))) {
    if (!int_field(p, j, "dynamic_batching.priority_levels", 0, SV_MAX_PRIORITY, &v))
      return false;
    c->priority_levels = v ? (int32_t)v : 1;
  }
  if ((j = cJSON_GetObjectItemCaseSensitive(d, "default_priority_level"))) {
    if (!int_field(p, j, "dynamic_batching.default_priority_level", 0, c->priority_levels, &v))
      return false;
    c->default_priority_level = v ? (int32_t)v : 1;
  }
  if ((j = cJSON_GetObjectItemCaseSensitive(d, "preserve_ordering")) && !cJSON_IsBool(j))
    return bad(p, "dynamic_batching.preserve_ordering", "expected true or false");
  /* adaptive: default on unless preferred sizes say which batches to form */
  c->adaptive = c->n_preferred == 0;
  if ((j = cJSON_GetObjectItemCaseSensitive(d, "adaptive"))) {
    if (!cJSON_IsBool(j)) return bad(p, "dynamic_batching.adaptive", "expected true or false");
    c->adaptive = cJSON_IsTrue(j);
  }
  if ((j = cJSON_GetObjectItemCaseSensitive(d, "default_queue_policy")) &&
      !parse_queue_policy(p, j, c))
    return false;
  return true;
}

static bool parse_instances(cparse *p, const cJSON *g, sv_config *c) {
  static const char *const known[] = {"count", "kind", "threads", "name", NULL};
  const cJSON *one = g;
  if (cJSON_IsArray(g)) {
    if (cJSON_GetArraySize(g) != 1)
      return bad(p, "instance_group", "expected an array of one group (kiln runs on the CPU)");
    one = g->child;
  }
  if (!obj_field(p, one, "instance_group[0]") ||
      !known_fields(p, one, "instance_group[0]", known))
    return false;
  int64_t v;
  const cJSON *j;
  if ((j = cJSON_GetObjectItemCaseSensitive(one, "count"))) {
    if (!int_field(p, j, "instance_group[0].count", 1, SV_MAX_INSTANCES, &v)) return false;
    c->instance_count = (int32_t)v;
  }
  if ((j = cJSON_GetObjectItemCaseSensitive(one, "threads"))) {
    if (!int_field(p, j, "instance_group[0].threads", 0, 1024, &v)) return false;
    c->instance_threads = (int32_t)v;
  }
  if ((j = cJSON_GetObjectItemCaseSensitive(one, "kind")) &&
      !(cJSON_IsString(j) &&
        (!strcmp(j->valuestring, "KIND_CPU") || !strcmp(j->valuestring, "KIND_AUTO"))))
    return bad(p, "instance_group[0].kind", "expected \"KIND_CPU\" or \"KIND_AUTO\"");
  return true;
}

static bool parse_inputs(cparse *p, const cJSON *a, sv_config *c) {
  static const char *const known[] = {"name", "dims", "data_type", "format", "optional", NULL};
  if (!cJSON_IsArray(a)) return bad(p, "input", "expected an array of {\"name\", \"dims\"}");
  for (const cJSON *e = a->child; e; e = e->next) {
    char where[64];
    snprintf(where, sizeof where, "input[%d]", c->n_inputs);
    if (c->n_inputs >= SV_MAX_IO) return bad(p, where, "expected at most %d inputs", SV_MAX_IO);
    if (!obj_field(p, e, where) || !known_fields(p, e, where, known)) return false;
    sv_config_input *in = &c->inputs[c->n_inputs++];
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
    if (!cJSON_IsString(name) || !name->valuestring[0] ||
        strlen(name->valuestring) >= sizeof in->name)
      return bad(p, where, "expected a \"name\" string");
    snprintf(in->name, sizeof in->name, "%s", name->valuestring);
    const cJSON *dims = cJSON_GetObjectItemCaseSensitive(e, "dims");
    in->rank = -1;
    if (dims) {
      char f[96];
      snprintf(f, sizeof f, "input[%d].dims", c->n_inputs - 1);
      if (!cJSON_IsArray(dims) || cJSON_GetArraySize(dims) > KN_MAX_RANK)
        return bad(p, f, "expected an array of at most %d integers (-1: dynamic)", KN_MAX_RANK);
      in->rank = 0;
      for (const cJSON *d = dims->child; d; d = d->next) {
        int64_t v;
        if (!int_field(p, d, f, -1, INT64_C(1) << 31, &v)) return false;
        in->dims[in->rank++] = v;
      }
    }
  }
  return true;
}

static bool parse_policy(cparse *p, const cJSON *vp, sv_config *c) {
  static const char *const known[] = {"latest", "specific", "all", NULL};
  if (!obj_field(p, vp, "version_policy") || !known_fields(p, vp, "version_policy", known))
    return false;
  if (cJSON_GetArraySize(vp) != 1)
    return bad(p, "version_policy", "expected exactly one of latest, specific, all");
  const cJSON *j;
  int64_t v;
  if ((j = cJSON_GetObjectItemCaseSensitive(vp, "latest"))) {
    static const char *const kl[] = {"num_versions", NULL};
    if (!obj_field(p, j, "version_policy.latest") ||
        !known_fields(p, j, "version_policy.latest", kl))
      return false;
    c->version_policy = SV_POLICY_LATEST;
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(j, "num_versions");
    if (n) {
      if (!int_field(p, n, "version_policy.latest.num_versions", 1, SV_MAX_VERSIONS, &v))
        return false;
      c->num_versions = (int32_t)v;
    }
  } else if ((j = cJSON_GetObjectItemCaseSensitive(vp, "specific"))) {
    static const char *const ks[] = {"versions", NULL};
    if (!obj_field(p, j, "version_policy.specific") ||
        !known_fields(p, j, "version_policy.specific", ks))
      return false;
    c->version_policy = SV_POLICY_SPECIFIC;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "versions");
    if (!cJSON_IsArray(a) || !a->child)
      return bad(p, "version_policy.specific.versions", "expected a non-empty array of versions");
    for (const cJSON *e = a->child; e; e = e->next) {
      if (c->n_versions >= SV_MAX_VERSIONS)
        return bad(p, "version_policy.specific.versions", "expected at most %d versions",
                   SV_MAX_VERSIONS);
      if (!int_field(p, e, "version_policy.specific.versions", 1, INT64_MAX / 2, &v))
        return false;
      c->versions[c->n_versions++] = v;
    }
  } else {
    j = cJSON_GetObjectItemCaseSensitive(vp, "all");
    if (!obj_field(p, j, "version_policy.all")) return false;
    c->version_policy = SV_POLICY_ALL;
  }
  return true;
}

bool sv_config_parse(const char *text, size_t n, const char *label, const char *model_name,
                     sv_config *c, char *err, size_t err_n) {
  cparse p = {.label = label, .err = err, .err_n = err_n};
  sv_config_defaults(c);
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, n, &end, 0);
  bool ok = false;
  if (!root) {
    size_t at = end && end >= text && end <= text + n ? (size_t)(end - text) : 0;
    bad(&p, "(document)", "malformed JSON at byte %zu", at);
    goto done;
  }
  if (!cJSON_IsObject(root)) {
    bad(&p, "(document)", "expected a JSON object");
    goto done;
  }
  static const char *const known[] = {
      "name", "max_batch_size", "input", "dynamic_batching", "instance_group",
      "version_policy", "slo", "validation", "platform", "backend", "output", "parameters",
      "optimization", "model_warmup", "default_model_filename", NULL};
  if (!known_fields(&p, root, "", known)) goto done;
  const cJSON *j;
  int64_t v;
  if ((j = cJSON_GetObjectItemCaseSensitive(root, "name"))) {
    if (!cJSON_IsString(j) || (model_name && strcmp(j->valuestring, model_name))) {
      bad(&p, "name", "expected the model directory's name \"%s\"",
          model_name ? model_name : "");
      goto done;
    }
  }
  if ((j = cJSON_GetObjectItemCaseSensitive(root, "max_batch_size"))) {
    if (!int_field(&p, j, "max_batch_size", 0, 4096, &v)) goto done;
    c->max_batch_size = (int32_t)v;
  }
  if ((j = cJSON_GetObjectItemCaseSensitive(root, "input")) && !parse_inputs(&p, j, c))
    goto done;
  if ((j = cJSON_GetObjectItemCaseSensitive(root, "dynamic_batching"))) {
    if (c->max_batch_size == 0) {
      bad(&p, "dynamic_batching", "needs max_batch_size > 0 (the batch dim's limit)");
      goto done;
    }
    if (!parse_batching(&p, j, c)) goto done;
  }
  if ((j = cJSON_GetObjectItemCaseSensitive(root, "instance_group")) &&
      !parse_instances(&p, j, c))
    goto done;
  if ((j = cJSON_GetObjectItemCaseSensitive(root, "version_policy")) && !parse_policy(&p, j, c))
    goto done;
  if ((j = cJSON_GetObjectItemCaseSensitive(root, "slo"))) {
    static const char *const ks[] = {"p99_ms", NULL};
    if (!obj_field(&p, j, "slo") || !known_fields(&p, j, "slo", ks)) goto done;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "p99_ms");
    if (!t) {
      bad(&p, "slo.p99_ms", "expected the target p99 latency in milliseconds");
      goto done;
    }
    if (!num_field(&p, t, "slo.p99_ms", 0.01, 3.6e6, &c->slo_p99_ms)) goto done;
    if (!c->dynamic_batching) {
      bad(&p, "slo", "needs a dynamic_batching section (SLO mode chooses its batch and delay)");
      goto done;
    }
  }
  if ((j = cJSON_GetObjectItemCaseSensitive(root, "validation"))) {
    static const char *const kv[] = {"min_cosine", "max_abs_error", "max_p99_ms", "runs",
                                      "timeout_ms", NULL};
    if (!obj_field(&p, j, "validation") || !known_fields(&p, j, "validation", kv)) goto done;
    const cJSON *t;
    if ((t = cJSON_GetObjectItemCaseSensitive(j, "min_cosine")) &&
        !num_field(&p, t, "validation.min_cosine", -1, 1, &c->min_cosine))
      goto done;
    if ((t = cJSON_GetObjectItemCaseSensitive(j, "max_abs_error")) &&
        !num_field(&p, t, "validation.max_abs_error", 0, 1e300, &c->max_abs_error))
      goto done;
    if ((t = cJSON_GetObjectItemCaseSensitive(j, "max_p99_ms")) &&
        !num_field(&p, t, "validation.max_p99_ms", 0.001, 3.6e6, &c->max_p99_ms))
      goto done;
    if ((t = cJSON_GetObjectItemCaseSensitive(j, "timeout_ms"))) {
      if (!int_field(&p, t, "validation.timeout_ms", 1, 3600000, &v)) goto done;
      c->validation_timeout_ms = v;
    }
    if ((t = cJSON_GetObjectItemCaseSensitive(j, "runs"))) {
      if (!int_field(&p, t, "validation.runs", 1, 100000, &v)) goto done;
      c->validation_runs = (int32_t)v;
    }
  }
  ok = true;
done:
  cJSON_Delete(root);
  return ok;
}
