#include "report/capture_json.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "report/proto_json.h"

namespace podprof::report {

std::string CaptureStatusName(v1::CaptureStatus status) {
  if (status == v1::CAPTURE_STATUS_UNSPECIFIED || !v1::CaptureStatus_IsValid(status)) {
    return "unspecified";
  }
  return absl::AsciiStrToLower(
      absl::StripPrefix(v1::CaptureStatus_Name(status), "CAPTURE_STATUS_"));
}

nlohmann::json CaptureJson(const v1::CaptureSummary& c) {
  nlohmann::json hosts = nlohmann::json::array();
  for (const v1::HostCaptureResult& h : c.hosts()) hosts.push_back(h.host_name());
  // Sorted, so that the output is stable (a proto map's order is not).
  const std::map<std::string, std::string> labels(c.labels().begin(), c.labels().end());
  return {{"capture", c.capture_id()},
          {"created_ns", c.created_ns()},
          {"start_ns", c.start_ns()},
          {"end_ns", c.end_ns()},
          {"status", CaptureStatusName(c.status())},
          {"source", c.source()},
          // A snapshot's window (before-request, after-request, mixed); null for the others.
          {"window", c.window().empty() ? nlohmann::json(nullptr) : nlohmann::json(c.window())},
          {"hosts", c.hosts_size()},
          {"host_names", std::move(hosts)},
          {"chips", c.chip_count()},
          {"kernels", c.kernel_count()},
          {"events", c.event_count()},
          {"labels", labels},
          {"options", ProtoToJson(c.options())},
          {"error_message", c.error_message()}};
}

}  // namespace podprof::report
