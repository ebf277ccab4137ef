/* The HTML dashboard of `kiln inspect --html` and `kiln profile --report`:
 * one self-contained page (style, script and data inline, nothing fetched)
 * made of the assets in tools/kiln/dashboard/, embedded at build time by
 * cmake/embed_text.cmake, and the inspect and profile JSON texts. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

extern const char kn_dashboard_html[];
extern const char kn_dashboard_css[];
extern const char kn_dashboard_js[];

/* JSON inside <script>: "</" would let the data close the tag. */
static void put_script_text(FILE *f, const char *s) {
  for (; *s; s++) {
    if (s[0] == '<' && s[1] == '/') {
      fputs("<\\/", f);
      s++;
    } else {
      fputc(*s, f);
    }
  }
}

static void put_html_text(FILE *f, const char *s) {
  for (; *s; s++) {
    switch (*s) {
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '&': fputs("&amp;", f); break;
    case '"': fputs("&quot;", f); break;
    default: fputc(*s, f);
    }
  }
}

kn_status kn_cli_dashboard_write(const char *path, const char *title, const char *inspect_json,
                                 const char *profile_json, kn_error *err) {
  size_t n = strlen(path) + 5;
  char *tmp = malloc(n);
  if (!tmp) {
    snprintf(err->msg, sizeof err->msg, "dashboard '%s': out of memory", path);
    return err->status = KN_ERR_OOM;
  }
  snprintf(tmp, n, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) {
    snprintf(err->msg, sizeof err->msg, "dashboard: cannot write '%s': %s", tmp,
             strerror(errno));
    free(tmp);
    return err->status = KN_ERR_IO;
  }
  fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>kiln: ", f);
  put_html_text(f, title ? title : "");
  fputs("</title>\n<style>\n", f);
  fputs(kn_dashboard_css, f);
  fputs("</style>\n</head>\n<body>\n", f);
  fputs(kn_dashboard_html, f);
  fputs("<script type=\"application/json\" id=\"kiln-inspect\">", f);
  put_script_text(f, inspect_json ? inspect_json : "null");
  fputs("</script>\n<script type=\"application/json\" id=\"kiln-profile\">", f);
  put_script_text(f, profile_json ? profile_json : "null");
  fputs("</script>\n<script>\n", f);
  fputs(kn_dashboard_js, f);
  fputs("</script>\n</body></html>\n", f);
  int bad = ferror(f);
  if (fclose(f) || bad || rename(tmp, path)) {
    snprintf(err->msg, sizeof err->msg, "dashboard: cannot write '%s': %s", path,
             strerror(errno));
    remove(tmp);
    free(tmp);
    return err->status = KN_ERR_IO;
  }
  free(tmp);
  return KN_OK;
}
