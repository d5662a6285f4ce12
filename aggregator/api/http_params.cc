#include "aggregator/api/http_params.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace podprof::aggregator {

using http::Request;

// Whether ?format asks for CSV; InvalidArgument for anything but json (the default) and csv.
absl::StatusOr<bool> WantsCsv(const Request& req) {
  auto f = req.query.find("format");
  if (f == req.query.end() || f->second == "json") return false;
  if (f->second == "csv") return true;
  return absl::InvalidArgumentError(absl::StrCat("format '", f->second, "': use json or csv"));
}

std::string Param(const Request& req, const char* name, const std::string& fallback) {
  auto it = req.query.find(name);
  return it == req.query.end() ? fallback : it->second;
}

absl::StatusOr<int64_t> IntParam(const Request& req, const char* name, int64_t fallback) {
  const std::string v = Param(req, name);
  int64_t n = fallback;
  if (!v.empty() && (!absl::SimpleAtoi(v, &n) || n < 0)) {
    return absl::InvalidArgumentError(absl::StrCat(name, "='", v, "' is not a count"));
  }
  return n;
}

}  // namespace podprof::aggregator
