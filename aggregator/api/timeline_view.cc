#include "aggregator/api/timeline_view.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/json_text.h"
#include "export/nesting.h"
#include "proto/tpu_metric_names.h"
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
      new std::vector<std::string>{"mxu_busy", tpu_metrics::kDutyCyclePercent};
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

// Adds `time` ns of `kernel` over the pixels [x0, x1) covers (fractional pixels).
void TrackPixels::Spread(double x0, double x1, double ns_per_px, int kernel) {
  const int width = static_cast<int>(busy.size());
  for (int px = std::max(0, static_cast<int>(x0)); px <= static_cast<int>(x1) && px < width; ++px) {
    const double covered = (std::min<double>(x1, px + 1) - std::max<double>(x0, px)) * ns_per_px;
    if (covered <= 0) continue;
    busy[px] += static_cast<float>(covered);
    if (covered > best[px]) {
      best[px] = static_cast<float>(covered);
      best_kernel[px] = kernel;
    }
  }
}

void TimelineView::KernelTrack(const trace::HostCapture& c, int chip,
                               const std::vector<int>& kernel_of, TrackPixels* t) {
  for (const trace::EventBlock& b : c.blocks) {
    if (b.chip != chip || !trace::IsKernelLine(b.kind)) continue;
    for (size_t i = 0; i < b.size(); ++i) {
      const int64_t start = StartNs(b, i), end = EndNs(b, i);
      if (end <= w_.from_ns || start >= w_.to_ns) continue;
      const int64_t s = std::max(start, w_.from_ns), e = std::min(end, w_.to_ns);
      const int kernel = kernel_of[b.kernel[i]];
      // What shows of it decides: a kernel cut by the window to less than a pixel is a
      // pixel's worth of busy time, as a narrow one is (and as a resampled view sees it).
      if (static_cast<double>(e - s) >= ns_per_px_) {
        int collective = 0;
        if (b.collective[i] != 0) {
          collective = collective_index_
                           .emplace(b.collective[i], static_cast<int>(collective_index_.size()) + 1)
                           .first->second;
        }
        t->slices.insert(t->slices.end(), {s - w_.from_ns, e - s, kernel, collective});
        continue;
      }
      // Narrower than a pixel: its time goes to the pixels it covers.
      t->Spread(static_cast<double>(s - w_.from_ns) / ns_per_px_,
                static_cast<double>(e - w_.from_ns) / ns_per_px_, ns_per_px_, kernel);
    }
  }
}

// Gauges as each pixel's lowest and highest sample; running totals as their rate (per second)
// between samples, by the pixel of the later one.
void TimelineView::CounterTracks(const trace::HostCapture& c, int chip, TrackPixels* t) {
  for (const trace::CounterSeries& s : c.counters) {
    if (s.chip != chip) continue;
    counter_names_.insert(s.name);
    if (w_.counters.count(s.name) == 0) continue;
    const bool rate = s.kind() == trace::CounterKind::kCumulative;
    auto& [low, high] = t->counters[s.name];
    low.assign(w_.width_px, INFINITY);
    high.assign(w_.width_px, -INFINITY);
    for (size_t i = rate ? 1 : 0; i < s.time_ns.size(); ++i) {
      const int64_t time = s.time_ns[i];
      if (time < w_.from_ns || time >= w_.to_ns) continue;
      double v = s.value[i];
      if (rate) {
        const int64_t dt = time - s.time_ns[i - 1];
        if (dt <= 0) continue;
        v = (s.value[i] - s.value[i - 1]) * 1e9 / static_cast<double>(dt);
      }
      const int px = std::min(
          w_.width_px - 1, static_cast<int>(static_cast<double>(time - w_.from_ns) / ns_per_px_));
      low[px] = std::min(low[px], v);
      high[px] = std::max(high[px], v);
    }
  }
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
  for (size_t ci = 0; ci < h.capture.host.chips.size(); ++ci) {
    TrackPixels t(h.row.host, h.capture.host.chips[ci].ordinal, w_.width_px);
    KernelTrack(h.capture, static_cast<int>(ci), kernel_of, &t);
    CounterTracks(h.capture, static_cast<int>(ci), &t);
    tracks_.push_back(std::move(t));
  }
}

TimelineView TimelineView::Resampled(int width) const {
  TimelineWindow w = w_;
  w.width_px = width;
  TimelineView out(w);  // it adds no host: only the kernels' names are needed
  out.kernels_ = kernels_;
  out.counter_names_ = counter_names_;
  const double r = static_cast<double>(w_.width_px) / width;  // fine pixels per coarse one
  for (const TrackPixels& fine : tracks_) {
    TrackPixels t(fine.host, fine.chip, width);
    for (size_t i = 0; i < fine.slices.size(); i += 4) {
      const int64_t s = fine.slices[i], d = fine.slices[i + 1];
      if (static_cast<double>(d) >= out.ns_per_px_) {
        t.slices.insert(t.slices.end(), fine.slices.begin() + i, fine.slices.begin() + i + 4);
      } else {
        t.Spread(s / out.ns_per_px_, (s + d) / out.ns_per_px_, out.ns_per_px_,
                 static_cast<int>(fine.slices[i + 2]));
      }
    }
    // A fine pixel's time goes to the coarse pixels it overlaps, in proportion; its dominant
    // kernel competes with the others' for each (an approximation of the dominant kernel the
    // events themselves would give).
    for (int f = 0; f < w_.width_px; ++f) {
      if (fine.busy[f] <= 0) continue;
      const double x0 = f / r, x1 = (f + 1) / r;
      for (int c = static_cast<int>(x0); c <= static_cast<int>(x1) && c < width; ++c) {
        const double part = (std::min<double>(x1, c + 1) - std::max<double>(x0, c)) * r;
        if (part <= 0) continue;
        t.busy[c] += static_cast<float>(fine.busy[f] * part);
        if (fine.best[f] * part > t.best[c]) {
          t.best[c] = static_cast<float>(fine.best[f] * part);
          t.best_kernel[c] = fine.best_kernel[f];
        }
      }
    }
    for (const auto& [name, range] : fine.counters) {
      auto& [low, high] = t.counters[name];
      low.assign(width, INFINITY);
      high.assign(width, -INFINITY);
      for (int f = 0; f < w_.width_px; ++f) {
        if (range.first[f] > range.second[f]) continue;
        const int c = std::min(width - 1, static_cast<int>((f + 0.5) / r));
        low[c] = std::min(low[c], range.first[f]);
        high[c] = std::max(high[c], range.second[f]);
      }
    }
    out.tracks_.push_back(std::move(t));
  }
  return out;
}

// One track as JSON text: a 64-host capture's first view holds about a million numbers, and a
// JSON value per number would cost more than reading them.
void TimelineView::WriteTrack(const TrackPixels& t, std::string* out) const {
  absl::StrAppend(out, "{\"host\":", JsonText(Json(t.host)), ",\"chip\":", t.chip, ",\"slices\":[");
  for (size_t i = 0; i < t.slices.size(); ++i) absl::StrAppend(out, i ? "," : "", t.slices[i]);
  absl::StrAppend(out, "],\"bins\":[");
  bool first = true;
  for (int px = 0; px < w_.width_px; ++px) {
    if (t.busy[px] <= 0) continue;
    const int permille =
        static_cast<int>(std::lround(std::min(1.0, t.busy[px] / ns_per_px_) * 1000));
    absl::StrAppend(out, first ? "" : ",", px, ",", std::max(1, permille), ",", t.best_kernel[px]);
    first = false;
  }
  absl::StrAppend(out, "],\"counters\":{");
  first = true;
  for (const auto& [name, range] : t.counters) {
    absl::StrAppend(out, first ? "" : ",", JsonText(Json(name)), ":[");
    bool any = false;
    for (int px = 0; px < w_.width_px; ++px) {
      if (range.first[px] > range.second[px]) continue;
      absl::StrAppend(out, any ? "," : "", px, ",", Round(range.first[px]), ",",
                      Round(range.second[px]));
      any = true;
    }
    absl::StrAppend(out, "]");
    first = false;
  }
  absl::StrAppend(out, "}}");
}

std::string TimelineView::Finish(Json fields) const {
  // The caller's fields win (the page wants times from the capture's start).
  fields.emplace("from_ns", w_.from_ns);
  fields.emplace("to_ns", w_.to_ns);
  fields["ns_per_px"] = ns_per_px_;
  fields["kernels"] = kernels_;
  fields["counters"] = counter_names_;
  fields["counters_shown"] = w_.counters;
  std::string out = JsonText(fields);
  out.pop_back();  // the closing brace: the tracks go last
  out += ",\"tracks\":[";
  for (size_t i = 0; i < tracks_.size(); ++i) {
    if (i > 0) out += ",";
    WriteTrack(tracks_[i], &out);
  }
  out += "]}";
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
