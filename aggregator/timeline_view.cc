#include "aggregator/timeline_view.h"

#include <algorithm>
#include <cmath>

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

}  // namespace

TimelineView::TimelineView(TimelineWindow window)
    : w_(std::move(window)),
      ns_per_px_(static_cast<double>(w_.to_ns - w_.from_ns) / std::max(1, w_.width_px)) {}

int TimelineView::KernelIndex(const trace::KernelDef& k) {
  auto [it, added] =
      kernel_index_.emplace(std::make_pair(k.module, k.name), static_cast<int>(kernels_.size()));
  if (added) {
    kernels_.push_back({{"name", k.name}, {"module", k.module}, {"category", k.category}});
  }
  return it->second;
}

Json TimelineView::KernelTrack(const trace::HostCapture& c, int chip) {
  Json slices = Json::array();
  // Per pixel: the time kernels covered it, and the kernel that covered the most of it in one go.
  std::vector<double> busy(w_.width_px, 0), best(w_.width_px, 0);
  std::vector<int> best_kernel(w_.width_px, -1);
  for (const trace::EventBlock& b : c.blocks) {
    if (b.chip != chip || !trace::IsKernelLine(b.kind)) continue;
    for (size_t i = 0; i < b.size(); ++i) {
      const int64_t start = StartNs(b, i), end = EndNs(b, i);
      if (end <= w_.from_ns || start >= w_.to_ns) continue;
      const int64_t s = std::max(start, w_.from_ns), e = std::min(end, w_.to_ns);
      const int kernel = KernelIndex(c.kernels[b.kernel[i]]);
      if (static_cast<double>(end - start) >= ns_per_px_) {
        int collective = 0;
        if (b.collective[i] != 0) {
          collective = collective_index_
                           .emplace(b.collective[i], static_cast<int>(collective_index_.size()) + 1)
                           .first->second;
        }
        for (int64_t v : {s - w_.from_ns, e - s, int64_t{kernel}, int64_t{collective}}) {
          slices.push_back(v);
        }
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
  Json bins = Json::array();
  for (int px = 0; px < w_.width_px; ++px) {
    if (busy[px] <= 0) continue;
    const int permille = static_cast<int>(std::lround(std::min(1.0, busy[px] / ns_per_px_) * 1000));
    for (int v : {px, std::max(1, permille), best_kernel[px]}) bins.push_back(v);
  }
  return {{"slices", std::move(slices)}, {"bins", std::move(bins)}};
}

// Gauges as each pixel's lowest and highest sample; running totals as their rate (per second)
// between samples, by the pixel of the later one.
Json TimelineView::CounterTracks(const trace::HostCapture& c, int chip) {
  Json out = Json::object();
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
    Json points = Json::array();
    for (int px = 0; px < w_.width_px; ++px) {
      if (low[px] > high[px]) continue;
      points.push_back(px);
      points.push_back(low[px]);
      points.push_back(high[px]);
    }
    out[s.name] = std::move(points);
  }
  return out;
}

void TimelineView::AddHost(storage::StoredHost& h) {
  // Series that arrived encoded hold no samples until decoded; a damaged one is left out.
  (void)trace::DecodeEncodedSeries(&h.capture);
  for (size_t ci = 0; ci < h.capture.host.chips.size(); ++ci) {
    const int chip = static_cast<int>(ci);
    Json track = KernelTrack(h.capture, chip);
    track["host"] = h.row.host;
    track["chip"] = h.capture.host.chips[ci].ordinal;
    track["counters"] = CounterTracks(h.capture, chip);
    tracks_.push_back(std::move(track));
  }
}

Json TimelineView::Finish() {
  return {{"from_ns", w_.from_ns},      {"to_ns", w_.to_ns},
          {"ns_per_px", ns_per_px_},    {"kernels", std::move(kernels_)},
          {"counters", counter_names_}, {"tracks", std::move(tracks_)}};
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
  std::map<uint64_t, int64_t> last;  // collective -> the latest arrival
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
