#include "aggregator/timeline_view.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "export/nesting.h"
#include "trace/columns.h"

namespace podprof::aggregator {
namespace {

using Json = nlohmann::json;

int64_t StartNs(const trace::EventBlock& b, size_t i) {
  return b.base_ns + exporter::FloorDiv(b.start_ps[i], 1000);
}
int64_t EndNs(const trace::EventBlock& b, size_t i) {
  return b.base_ns + exporter::FloorDiv(b.start_ps[i] + b.duration_ps[i], 1000);
}

// Four significant digits: a counter row is 12 pixels high, and 0.7199999999999999 costs
// eighteen bytes where 0.72 costs four.
double Round(double v) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double scale = std::pow(10.0, 3 - std::floor(std::log10(std::fabs(v))));
  return std::round(v * scale) / scale;
}

// The first of AutoCounters() the host has; empty when none.
std::string AutoCounter(const trace::HostCapture& c) {
  for (const std::string& preferred : AutoCounters()) {
    for (const trace::CounterSeries& s : c.counters) {
      if (s.name == preferred) return s.name;
    }
  }
  return "";
}

}  // namespace

const std::vector<std::string>& AutoCounters() {
  static const auto* names =
      new std::vector<std::string>{"mxu_busy", "tpu.runtime.tensorcore.dutycycle.percent"};
  return *names;
}

TimelineView::TimelineView(TimelineWindow window)
    : w_(std::move(window)),
      ns_per_px_(static_cast<double>(w_.to_ns - w_.from_ns) / std::max(1, w_.width_px)),
      auto_counter_(w_.counters.erase("auto") > 0) {}

int TimelineView::KernelIndex(const trace::KernelDef& k) {
  auto [it, added] =
      kernel_index_.emplace(std::make_pair(k.module, k.name), static_cast<int>(kernels_.size()));
  if (added) {
    kernels_.push_back({{"name", k.name}, {"module", k.module}, {"category", k.category}});
  }
  return it->second;
}

void TimelineView::KernelTrack(const trace::HostCapture& c, int chip,
                               const std::vector<int>& kernel_of, std::string* out) {
  std::string slices;
  // Per pixel: the time kernels covered it, and the kernel that covered the most of it in one go.
  std::vector<double> busy(w_.width_px, 0), best(w_.width_px, 0);
  std::vector<int> best_kernel(w_.width_px, -1);
  for (const trace::EventBlock& b : c.blocks) {
    if (b.chip != chip || !trace::IsKernelLine(b.kind)) continue;
    for (size_t i = 0; i < b.size(); ++i) {
      const int64_t start = StartNs(b, i), end = EndNs(b, i);
      if (end <= w_.from_ns || start >= w_.to_ns) continue;
      const int64_t s = std::max(start, w_.from_ns), e = std::min(end, w_.to_ns);
      const int kernel = kernel_of[b.kernel[i]];
      if (static_cast<double>(end - start) >= ns_per_px_) {
        int collective = 0;
        if (b.collective[i] != 0) {
          collective = collective_index_
                           .emplace(b.collective[i], static_cast<int>(collective_index_.size()) + 1)
                           .first->second;
        }
        absl::StrAppend(&slices, slices.empty() ? "" : ",", s - w_.from_ns, ",", e - s, ",", kernel,
                        ",", collective);
        continue;
      }
      // Narrower than a pixel: its time goes to the pixels it covers.
      const double x0 = static_cast<double>(s - w_.from_ns) / ns_per_px_;
      const double x1 = static_cast<double>(e - w_.from_ns) / ns_per_px_;
      for (int px = static_cast<int>(x0); px <= static_cast<int>(x1) && px < w_.width_px; ++px) {
        const double covered =
            (std::min<double>(x1, px + 1) - std::max<double>(x0, px)) * ns_per_px_;
        if (covered <= 0) continue;
        busy[px] += covered;
        if (covered > best[px]) {
          best[px] = covered;
          best_kernel[px] = kernel;
        }
      }
    }
  }
  std::string bins;
  for (int px = 0; px < w_.width_px; ++px) {
    if (busy[px] <= 0) continue;
    const int permille = static_cast<int>(std::lround(std::min(1.0, busy[px] / ns_per_px_) * 1000));
    absl::StrAppend(&bins, bins.empty() ? "" : ",", px, ",", std::max(1, permille), ",",
                    best_kernel[px]);
  }
  absl::StrAppend(out, "\"slices\":[", slices, "],\"bins\":[", bins, "]");
}

// Gauges as each pixel's lowest and highest sample; running totals as their rate (per second)
// between samples, by the pixel of the later one.
void TimelineView::CounterTracks(const trace::HostCapture& c, int chip, std::string* out) {
  absl::StrAppend(out, "\"counters\":{");
  bool first = true;
  for (const trace::CounterSeries& s : c.counters) {
    if (s.chip != chip) continue;
    counter_names_.insert(s.name);
    if (w_.counters.count(s.name) == 0) continue;
    const bool rate = s.kind() == trace::CounterKind::kCumulative;
    std::vector<double> low(w_.width_px, INFINITY), high(w_.width_px, -INFINITY);
    for (size_t i = rate ? 1 : 0; i < s.time_ns.size(); ++i) {
      const int64_t t = s.time_ns[i];
      if (t < w_.from_ns || t >= w_.to_ns) continue;
      double v = s.value[i];
      if (rate) {
        const int64_t dt = t - s.time_ns[i - 1];
        if (dt <= 0) continue;
        v = (s.value[i] - s.value[i - 1]) * 1e9 / static_cast<double>(dt);
      }
      const int px = std::min(w_.width_px - 1,
                              static_cast<int>(static_cast<double>(t - w_.from_ns) / ns_per_px_));
      low[px] = std::min(low[px], v);
      high[px] = std::max(high[px], v);
    }
    std::string points;
    for (int px = 0; px < w_.width_px; ++px) {
      if (low[px] > high[px]) continue;
      absl::StrAppend(&points, points.empty() ? "" : ",", px, ",", Round(low[px]), ",",
                      Round(high[px]));
    }
    absl::StrAppend(out, first ? "" : ",", Json(s.name).dump(), ":[", points, "]");
    first = false;
  }
  absl::StrAppend(out, "}");
}

void TimelineView::AddHost(storage::StoredHost& h) {
  // Series that arrived encoded hold no samples until decoded; a damaged one is left out.
  (void)trace::DecodeEncodedSeries(&h.capture);
  if (auto_counter_ && !h.capture.counters.empty()) {
    auto_counter_ = false;
    const std::string picked = AutoCounter(h.capture);
    if (!picked.empty()) w_.counters.insert(picked);
  }
  std::vector<int> kernel_of;  // the host's kernel definitions -> the response's
  kernel_of.reserve(h.capture.kernels.size());
  for (const trace::KernelDef& k : h.capture.kernels) kernel_of.push_back(KernelIndex(k));
  // The tracks are written as text: a 64-host capture's first view holds about a million
  // numbers, and a JSON value per number would cost more than reading them.
  const std::string host = Json(h.row.host).dump();
  for (size_t ci = 0; ci < h.capture.host.chips.size(); ++ci) {
    const int chip = static_cast<int>(ci);
    absl::StrAppend(&tracks_, tracks_.empty() ? "" : ",", "{\"host\":", host,
                    ",\"chip\":", h.capture.host.chips[ci].ordinal, ",");
    KernelTrack(h.capture, chip, kernel_of, &tracks_);
    tracks_ += ",";
    CounterTracks(h.capture, chip, &tracks_);
    tracks_ += "}";
  }
}

std::string TimelineView::Finish(Json fields) {
  // The caller's fields win (the page wants times from the capture's start).
  fields.emplace("from_ns", w_.from_ns);
  fields.emplace("to_ns", w_.to_ns);
  fields["ns_per_px"] = ns_per_px_;
  fields["kernels"] = std::move(kernels_);
  fields["counters"] = counter_names_;
  fields["counters_shown"] = w_.counters;
  std::string out = fields.dump();
  out.pop_back();  // the closing brace: the tracks go last
  absl::StrAppend(&out, ",\"tracks\":[", tracks_, "]}");
  return out;
}

void WaitHeatmap::AddHost(storage::StoredHost& h) {
  for (size_t ci = 0; ci < h.capture.host.chips.size(); ++ci) {
    ChipWaits chip;
    chip.host = h.row.host;
    chip.chip = h.capture.host.chips[ci].ordinal;
    for (const trace::EventBlock& b : h.capture.blocks) {
      if (b.chip != static_cast<int>(ci)) continue;
      if (b.kind == trace::LineKind::kSteps && steps_.empty()) {
        for (size_t i = 0; i < b.size(); ++i) {
          steps_.emplace_back(StartNs(b, i) - start_ns_, EndNs(b, i) - start_ns_);
        }
      }
      if (!trace::IsKernelLine(b.kind)) continue;
      for (size_t i = 0; i < b.size(); ++i) {
        if (b.collective[i] != 0) chip.arrivals.emplace_back(b.collective[i], StartNs(b, i));
      }
    }
    chips_.push_back(std::move(chip));
  }
}

Json WaitHeatmap::Finish() const {
  std::vector<std::pair<int64_t, int64_t>> steps = steps_;
  std::sort(steps.begin(), steps.end());
  if (steps.empty()) {
    const int64_t span = std::max<int64_t>(1, (end_ns_ - start_ns_) / 16);
    for (int i = 0; i < 16; ++i) steps.emplace_back(i * span, (i + 1) * span);
  }
  absl::flat_hash_map<uint64_t, int64_t> last;  // collective -> the latest arrival
  for (const ChipWaits& c : chips_) {
    for (const auto& [id, t] : c.arrivals) {
      auto [it, added] = last.emplace(id, t);
      if (!added) it->second = std::max(it->second, t);
    }
  }
  Json chips = Json::array(), waits = Json::array();
  for (const ChipWaits& c : chips_) {
    std::vector<int64_t> row(steps.size(), 0);
    for (const auto& [id, t] : c.arrivals) {
      const int64_t rel = t - start_ns_;
      auto it = std::upper_bound(steps.begin(), steps.end(), std::make_pair(rel, INT64_MAX));
      if (it == steps.begin()) continue;
      const size_t step = static_cast<size_t>(it - steps.begin()) - 1;
      if (rel >= steps[step].second) continue;  // between steps
      row[step] += last.at(id) - t;
    }
    chips.push_back({{"host", c.host}, {"chip", c.chip}});
    waits.push_back(row);
  }
  Json spans = Json::array();
  for (const auto& [s, e] : steps) spans.push_back({s, e});
  return {{"steps", std::move(spans)}, {"chips", std::move(chips)}, {"wait_ns", std::move(waits)}};
}

}  // namespace podprof::aggregator
