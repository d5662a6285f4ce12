// Query parameters as the aggregator's HTTP handlers read them (http_api.cc, http_views.cc).
#ifndef PODPROF_AGGREGATOR_API_HTTP_PARAMS_H_
#define PODPROF_AGGREGATOR_API_HTTP_PARAMS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "http/server.h"

namespace podprof::aggregator {

// Whether ?format asks for CSV; InvalidArgument for anything but json (the default) and csv.
absl::StatusOr<bool> WantsCsv(const http::Request& req);
// The parameter `name`, or `fallback` when absent.
std::string Param(const http::Request& req, const char* name, const std::string& fallback = "");
// A count (>= 0); InvalidArgument naming the parameter otherwise.
absl::StatusOr<int64_t> IntParam(const http::Request& req, const char* name, int64_t fallback);

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_API_HTTP_PARAMS_H_
