// The flight recorder's triggers as the HTTP API shows them.
#include <string>

#include "aggregator/api/http_api.h"
#include "common/json_text.h"
#include "nlohmann/json.hpp"

namespace podprof::aggregator {
namespace {

using http::Response;
using Json = nlohmann::ordered_json;  // the settings in the order written

// GET /api/v1/triggers: the triggers' settings and their last events (fired, or held and why
// no snapshot was taken).
Response Triggers(const HttpApiSources& src) {
  if (src.triggers == nullptr) return Response::Error(absl::NotFoundError("no triggers here"));
  const TriggerOptions& o = src.triggers->options();
  Json settings = {{"enabled", o.enabled},
                   {"window_ms", o.window_ns / 1'000'000},
                   {"recent_s", o.recent_s},
                   {"baseline_s", o.baseline_s},
                   {"step_regression", o.step_regression},
                   {"straggler", o.straggler},
                   {"duty_drop", o.duty_drop},
                   {"hang_after_s", o.hang_ns / 1'000'000'000},
                   {"dcn_regression", o.dcn_regression},
                   {"dcn_margin_us", o.dcn_margin_us},
                   {"dcn_intervals", o.dcn_intervals},
                   {"cooldown_s", o.cooldown_ns / 1'000'000'000},
                   {"hourly_budget", o.hourly_budget},
                   {"min_gap_s", o.min_gap_ns / 1'000'000'000}};
  Json events = Json::array();
  for (const TriggerEvent& e : src.triggers->Events()) {
    events.push_back({{"time_ns", e.time_ns},
                      {"trigger", e.firing.trigger},
                      {"reason", e.firing.reason},
                      {"telemetry", e.firing.evidence},
                      {"outcome", e.outcome},
                      {"capture", e.capture_id}});
  }
  return Response::Text(200, JsonText(Json{{"settings", settings}, {"events", events}}, 1) + "\n",
                        "application/json");
}

}  // namespace

void AddTriggerRoutes(const HttpApiSources& src, http::Router& r) {
  r.Add("GET", "/api/v1/triggers", [src](const http::Request&) { return Triggers(src); });
}

}  // namespace podprof::aggregator
