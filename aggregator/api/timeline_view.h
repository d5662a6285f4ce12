// What the web page's pod timeline draws, computed per visible window: every chip's kernels on
// the corrected clock at a level of detail that fits the pixels, the counters asked for, and
// the collective waits of each chip in each step (the heatmap). A slice at least a pixel wide
// travels as itself; narrower ones are summed into per-pixel busy fractions naming the kernel
// that filled most of the pixel, so a response is bounded by the width, not by the events:
// a 64-host capture's first view is a few hundred kilobytes however many kernels ran.
#ifndef PODPROF_AGGREGATOR_API_TIMELINE_VIEW_H_
#define PODPROF_AGGREGATOR_API_TIMELINE_VIEW_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "storage/rows.h"

namespace podprof::aggregator {

struct TimelineWindow {
  // ns since the Unix epoch on the aggregator's clock; from < to.
  int64_t from_ns = 0, to_ns = 0;
  int width_px = 1000;  // 1..8192
  // Counter series to send per chip (by name); every chip's names are listed either way.
  // "auto": the first of AutoCounters() the capture has.
  std::set<std::string> counters;
};

// The counters a page shows under each chip unless asked for others, by preference: the MXU's
// busy fraction, then the TensorCore duty cycle.
const std::vector<std::string>& AutoCounters();

// One chip's track of a view, as numbers until written.
struct TrackPixels {
  TrackPixels(std::string h, int c, int width)
      : host(std::move(h)), chip(c), busy(width, 0), best(width, 0), best_kernel(width, -1) {}
  // Adds the kernel's time over pixels [x0, x1) (fractional), keeping each pixel's dominant.
  void Spread(double x0, double x1, double ns_per_px, int kernel);

  std::string host;
  int chip = 0;
  std::vector<int64_t> slices;  // start, duration, kernel, collective
  // Per pixel: the time kernels covered it, and the kernel that covered the most of it in one
  // go (and how much).
  std::vector<float> busy, best;
  std::vector<int32_t> best_kernel;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> counters;  // low, high
};

// Builds the response one host at a time (the store hands hosts over one by one).
class TimelineView {
 public:
  explicit TimelineView(TimelineWindow window);
  void AddHost(storage::StoredHost& host);
  // {"from_ns", "to_ns", "ns_per_px", "kernels": [{name, module, category}], "counters":
  //  [names], "counters_shown": [names], "tracks": [{"host", "chip", "slices": [start, duration,
  //  kernel, collective]..., "bins": [px, busy_permille, kernel]..., "counters": {name: [px, low,
  //  high]...}}]}.
  // Times are ns from `from_ns`; `kernel` indexes "kernels"; `collective` is 0 for none, else
  // a number shared by the slices of one collective on different chips (in this response).
  // As JSON text, with `fields` (an object) added at the top; theirs win over from_ns and to_ns.
  std::string Finish(nlohmann::json fields = nlohmann::json::object()) const;
  // The same window at a narrower `width`, from this view's pixels rather than the events:
  // times are summed exactly, a pixel's dominant kernel is the one that dominated the most of
  // it among the finer pixels. How a stored overview answers any page width.
  TimelineView Resampled(int width) const;
  int width_px() const { return w_.width_px; }

 private:
  int KernelIndex(const trace::KernelDef& k);
  void KernelTrack(const trace::HostCapture& c, int chip, const std::vector<int>& kernel_of,
                   TrackPixels* t);
  void CounterTracks(const trace::HostCapture& c, int chip, TrackPixels* t);
  void WriteTrack(const TrackPixels& t, std::string* out) const;

  TimelineWindow w_;
  double ns_per_px_;
  bool auto_counter_;  // "auto" not yet resolved: the first host with counters picks
  std::vector<TrackPixels> tracks_;
  nlohmann::json kernels_ = nlohmann::json::array();
  std::map<std::pair<std::string, std::string>, int> kernel_index_;
  std::map<uint64_t, int> collective_index_;
  std::set<std::string> counter_names_;
};

// The time each chip spent waiting in collectives for the last chip to arrive, per training
// step: for every collective instance (the slices sharing one collective id), a chip waited
// from its own start to the latest start among the chips taking part. Steps are the first
// chip's `Steps` line; a capture without one is cut into 16 equal spans.
class WaitHeatmap {
 public:
  WaitHeatmap(int64_t start_ns, int64_t end_ns) : start_ns_(start_ns), end_ns_(end_ns) {}
  void AddHost(storage::StoredHost& host);
  // {"steps": [[start, end]...] (ns from the capture's start), "chips": [{"host", "chip"}],
  //  "wait_ns": [[per step]...] (one row per chip)}.
  nlohmann::json Finish() const;

 private:
  struct ChipWaits {
    std::string host;
    int chip = 0;
    std::vector<std::pair<uint64_t, int64_t>> arrivals;  // (collective, start ns)
  };
  const int64_t start_ns_, end_ns_;
  std::vector<std::pair<int64_t, int64_t>> steps_;
  std::vector<ChipWaits> chips_;
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_API_TIMELINE_VIEW_H_
