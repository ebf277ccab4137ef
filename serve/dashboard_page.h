/* kiln serve's live dashboard page (GET /dashboard): one self-contained
 * HTML page (style and script inline, nothing fetched but GET /metrics,
 * which it polls every second), made at build time from
 * serve/dashboard.{html,css,js} by serve/embed_dashboard.cmake into the
 * kiln_serve_dashboard library. */
#ifndef KILN_SERVE_DASHBOARD_PAGE_H
#define KILN_SERVE_DASHBOARD_PAGE_H

#include <stddef.h>

/* The page, NUL-terminated, static (never freed); its length in bytes,
 * without the NUL, in *len when len is not NULL.  Serve it as
 * "text/html; charset=utf-8". */
const char *sv_dashboard_page(size_t *len);

#endif
