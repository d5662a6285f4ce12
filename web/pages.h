// The aggregator's web pages: one page (index.html) that draws captures, a capture (hosts,
// kernels, the pod timeline, the waits heatmap, exports), a kernel (texts, per-chip rows,
// history chart) and a diff from the JSON API, with its scripts, styles and uPlot built in.
#ifndef PODPROF_WEB_PAGES_H_
#define PODPROF_WEB_PAGES_H_

#include <string_view>

#include "http/server.h"

namespace podprof::web {

struct Asset {
  std::string_view name;  // "app.js"
  std::string_view content_type;
  std::string_view body;
};

// The built-in asset `name`; null for none.
const Asset* FindAsset(std::string_view name);

// GET /, /captures, /captures/{id}, /kernels/{name} and /diff (the page, which reads its
// path), and /assets/{name}.
void AddPageRoutes(http::Router& router);

}  // namespace podprof::web

#endif  // PODPROF_WEB_PAGES_H_
