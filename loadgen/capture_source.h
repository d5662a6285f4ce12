// What an emulated host sends for a capture: the pod model's kernels, collectives and hardware
// counters for the host's window, on the host's own clock, as the chunks of a real capture
// stream.
//
// Each host's capture is generated when its stream is about to start, not ahead of time:
// a 2,240-host pod's captures do not fit in memory at once (a 1 s window of 4 chips with
// counters is megabytes per host), while the aggregator reads only tens of hosts at a time
// and the rest wait. Generating per host, rather than shifting one template, keeps each host's
// own noise, stragglers and clock drift, so the aggregator sees what podprof-simhost would
// have given it. The one part that is expensive per host and the same for all of them, the
// pod-wide collective schedule of each step (every chip of the pod takes part), is computed
// once per step and shared.
#ifndef PODPROF_LOADGEN_CAPTURE_SOURCE_H_
#define PODPROF_LOADGEN_CAPTURE_SOURCE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "loadgen/emulated_host.h"
#include "proto/podprof_agent.pb.h"
#include "sim/pod_model.h"
#include "stream/capture_encoder.h"

namespace podprof::loadgen {

struct GeneratedCapture {
  // Every chunk of the stream, the trailer last.
  std::vector<podprof::v1::CaptureChunk> chunks;
  stream::ChunkCounts counts;
  // The XSpace the stream was read from, when asked for (what `podprof import` would read).
  std::string xspace;
};

// Thread-safe: generators on several threads share the step cache.
class CaptureSource {
 public:
  // `pod` describes the whole pod (host_index is ignored); `counters` emits hardware counters.
  static absl::StatusOr<std::unique_ptr<CaptureSource>> Create(const sim::PodConfig& pod,
                                                               bool counters);

  // The chunks of `host`'s capture of the window [start_ns, start_ns + duration_ms) on the
  // host's clock, each at most `max_chunk_bytes`; with `summarise`, the host's summary among
  // them, as an agent that analyses its host sends it; with `keep_xspace`, the XSpace too.
  // InvalidArgument for a bad request;
  // Internal if the generated trace cannot be read back (a bug).
  absl::StatusOr<GeneratedCapture> Generate(const EmulatedHost& host, int64_t start_ns,
                                            int64_t duration_ms, size_t max_chunk_bytes,
                                            bool summarise = false, bool keep_xspace = false);

  // A model of the pod (host 0's), for describing chips.
  const sim::PodModel& model() const { return model_; }

 private:
  CaptureSource(sim::PodConfig pod, sim::PodModel model, bool counters)
      : pod_(std::move(pod)), model_(std::move(model)), counters_(counters) {}
  // The pod-wide part of `step` (sim::PodModel::Schedule), computed on first use.
  std::shared_ptr<const sim::StepSchedule> Schedule(int64_t step);

  const sim::PodConfig pod_;
  const sim::PodModel model_;
  const bool counters_;
  absl::Mutex mu_;
  // Guarded by mu_. Steps of the windows captured so far: a few hundred bytes per step of a
  // single-slice pod, 16 bytes per chip of the pod more with several slices; their total.
  std::map<int64_t, std::shared_ptr<const sim::StepSchedule>> schedules_ ABSL_GUARDED_BY(mu_);
  size_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace podprof::loadgen

#endif  // PODPROF_LOADGEN_CAPTURE_SOURCE_H_
