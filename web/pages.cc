#include "web/pages.h"

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/match.h"

namespace podprof::web {
namespace generated {
struct Embedded {
  const char* name;
  const char* data;
  size_t size;
};
extern const Embedded kAssets[];
}  // namespace generated

namespace {

std::string_view TypeOf(std::string_view n) {
  const absl::string_view name(n.data(), n.size());  // Debian's Abseil has its own string_view
  if (absl::EndsWith(name, ".html")) return "text/html; charset=utf-8";
  if (absl::EndsWith(name, ".js")) return "text/javascript; charset=utf-8";
  if (absl::EndsWith(name, ".css")) return "text/css; charset=utf-8";
  return "application/octet-stream";
}

const std::vector<Asset>& Assets() {
  static const auto* assets = [] {
    auto* out = new std::vector<Asset>;
    for (const generated::Embedded* e = generated::kAssets; e->name != nullptr; ++e) {
      out->push_back({e->name, TypeOf(e->name), std::string_view(e->data, e->size)});
    }
    return out;
  }();
  return *assets;
}

http::Response Serve(const Asset& a, const char* cache) {
  http::Response r = http::Response::Text(200, std::string(a.body), std::string(a.content_type));
  r.headers.emplace_back("Cache-Control", cache);
  // The pages load nothing from elsewhere; say so to the browser too.
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'self'; img-src 'self' data: blob:; "
                         "style-src 'self' 'unsafe-inline'; frame-ancestors 'none'");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  return r;
}

}  // namespace

const Asset* FindAsset(std::string_view name) {
  for (const Asset& a : Assets()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

void AddPageRoutes(http::Router& router) {
  // The page is the same for every view; its script reads the path.
  auto page = [](const http::Request&) { return Serve(*FindAsset("index.html"), "no-cache"); };
  for (const char* path :
       {"/", "/captures", "/captures/{id}", "/kernels/{name}", "/diff", "/pod"}) {
    router.Add("GET", path, page);
  }
  router.Add("GET", "/assets/{name}", [](const http::Request& req) {
    const Asset* a = FindAsset(req.params.at("name"));
    if (a == nullptr || a->name == "index.html") {
      return http::Response::Error(absl::NotFoundError("no such asset: " + req.params.at("name")));
    }
    // Assets change only with the binary: a browser may keep them for an hour.
    return Serve(*a, "max-age=3600");
  });
}

}  // namespace podprof::web
