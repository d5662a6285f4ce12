#include "report/telemetry_summary.h"

#include <algorithm>
#include <map>
#include <utility>

namespace podprof::report {
namespace {

// The median of `v` (the mean of the middle two for an even count); -1 for none.
double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

// What one chip's rows add up to while they are read.
struct Accumulator {
  ChipTelemetrySummary summary;
  std::vector<double> step_means, duties;
  int64_t latest_step_ns = 0, latest_hbm_ns = 0, latest_queued_ns = 0, latest_dcn_ns = 0;
  double collective_us = 0;  // the collectives' times, summed
  int64_t timed_collectives = 0;

  void Add(const v1::TelemetryRow& row) {
    const v1::ChipTelemetry& t = row.chip();
    ChipTelemetrySummary& s = summary;
    const int64_t at = row.time_ns();
    s.first_ns = s.rows == 0 ? at : std::min(s.first_ns, at);
    s.last_ns = std::max(s.last_ns, at);
    ++s.rows;
    if (t.steps() > 0) {
      s.steps += t.steps();
      step_means.push_back(t.step_mean_us());
      s.worst_step_us = std::max(s.worst_step_us, t.step_max_us());
      if (at >= latest_step_ns) {
        latest_step_ns = at;
        s.latest_step_us = t.step_mean_us();
      }
    }
    if (t.duty_cycle_percent() >= 0) duties.push_back(t.duty_cycle_percent());
    if (t.hbm_used_bytes() >= 0 && at >= latest_hbm_ns) {
      latest_hbm_ns = at;
      s.hbm_used_bytes = t.hbm_used_bytes();
    }
    if (t.queued() >= 0 && at >= latest_queued_ns) {
      latest_queued_ns = at;
      s.queued = t.queued();
    }
    if (t.collectives() > 0) {
      s.collectives += t.collectives();
      if (t.collective_mean_us() >= 0) {
        collective_us += t.collective_mean_us() * static_cast<double>(t.collectives());
        timed_collectives += t.collectives();
      }
    }
    if (t.dcn_transfers() > 0 && t.dcn_latency_p50_us() >= 0) {
      s.dcn_transfers += t.dcn_transfers();
      s.dcn_worst_p99_us = std::max(s.dcn_worst_p99_us, t.dcn_latency_p99_us());
      if (at >= latest_dcn_ns) {
        latest_dcn_ns = at;
        s.dcn_latest_p50_us = t.dcn_latency_p50_us();
      }
    }
  }

  ChipTelemetrySummary Done() && {
    summary.median_step_us = Median(std::move(step_means));
    summary.duty_cycle_percent = Median(std::move(duties));
    if (timed_collectives > 0) {
      summary.collective_mean_us = collective_us / static_cast<double>(timed_collectives);
    }
    return std::move(summary);
  }
};

}  // namespace

std::vector<ChipTelemetrySummary> SummarizeTelemetry(const v1::GetTelemetryResponse& response) {
  std::map<std::pair<std::string, int32_t>, Accumulator> chips;
  for (const v1::TelemetryRow& row : response.rows()) {
    Accumulator& a = chips[{row.host(), row.chip().chip()}];
    a.summary.host = row.host();
    a.summary.chip = row.chip().chip();
    a.Add(row);
  }
  std::vector<ChipTelemetrySummary> out;
  out.reserve(chips.size());
  for (auto& [key, a] : chips) out.push_back(std::move(a).Done());
  return out;
}

}  // namespace podprof::report
