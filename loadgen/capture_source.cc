#include "loadgen/capture_source.h"

#include <sstream>

#include "absl/strings/str_cat.h"
#include "analysis/host_summary.h"
#include "sim/xspace_builder.h"
#include "trace/byte_source.h"
#include "trace/xspace_reader.h"

namespace podprof::loadgen {
namespace {

// Longer windows than a real agent allows would only exhaust memory.
constexpr int64_t kMaxDurationMs = 300'000;
// The step cache is cleared past this many bytes (hours of windows at typical step periods
// for a single-slice pod; a multi-slice pod's steps carry every chip's DCN arrivals).
constexpr size_t kMaxCachedBytes = 256 << 20;

// Collects a capture stream's chunks.
class CollectingSink final : public stream::ChunkSink {
 public:
  explicit CollectingSink(std::vector<podprof::v1::CaptureChunk>* out) : out_(out) {}
  bool Write(const podprof::v1::CaptureChunk& chunk) override {
    out_->push_back(chunk);
    return true;
  }

 private:
  std::vector<podprof::v1::CaptureChunk>* const out_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CaptureSource>> CaptureSource::Create(const sim::PodConfig& pod,
                                                                     bool counters) {
  sim::PodConfig host0 = pod;
  host0.host_index = 0;
  absl::StatusOr<sim::PodModel> model = sim::PodModel::Create(host0);
  if (!model.ok()) return model.status();
  return std::unique_ptr<CaptureSource>(new CaptureSource(pod, std::move(*model), counters));
}

std::shared_ptr<const sim::StepSchedule> CaptureSource::Schedule(int64_t step) {
  absl::MutexLock lock(&mu_);
  auto it = schedules_.find(step);
  if (it != schedules_.end()) return it->second;
  // Computed under the lock: a generator that wants the same step would otherwise compute it
  // too, and every generator of a window wants the same steps.
  auto schedule = std::make_shared<const sim::StepSchedule>(model_.Schedule(step));
  const size_t bytes = sizeof(sim::StepSchedule) +
                       8 * (schedule->collective_ends.size() + schedule->dcn_arrivals.size());
  if (cached_bytes_ + bytes > kMaxCachedBytes) {
    schedules_.clear();
    cached_bytes_ = 0;
  }
  cached_bytes_ += bytes;
  return schedules_[step] = std::move(schedule);
}

absl::StatusOr<GeneratedCapture> CaptureSource::Generate(const EmulatedHost& host, int64_t start_ns,
                                                         int64_t duration_ms,
                                                         size_t max_chunk_bytes, bool summarise,
                                                         bool keep_xspace) {
  if (duration_ms <= 0 || duration_ms > kMaxDurationMs) {
    return absl::InvalidArgumentError(
        absl::StrCat("duration_ms must be 1..", kMaxDurationMs, ", got ", duration_ms));
  }
  sim::PodConfig config = pod_;
  config.host_index = host.index;
  absl::StatusOr<sim::PodModel> model = sim::PodModel::Create(config);
  if (!model.ok()) return model.status();

  sim::SessionWindow window;
  window.true_start_ns = host.clock.ToTrue(start_ns);
  window.true_end_ns = window.true_start_ns + duration_ms * 1'000'000;
  window.counters = counters_;
  window.host_name = host.name;
  // Serialized and read back as the agent reads the workload's file, so the stream is what
  // podprof-agent would send for podprof-simhost's session (same reader, same encoder).
  std::ostringstream bytes;
  absl::StatusOr<sim::WriteResult> written =
      sim::WriteXSpace(*model, host.clock, window, bytes, nullptr,
                       [&](int64_t step) { return model->Step(step, *Schedule(step)); });
  if (!written.ok()) return written.status();
  std::string xspace = bytes.str();
  bytes = std::ostringstream();
  trace::MemorySource source(xspace, host.name);
  trace::ReadOptions read_options;
  read_options.host_name = host.name;
  absl::StatusOr<trace::HostCapture> capture = trace::ReadXSpace(source, read_options);
  if (!capture.ok()) {
    return absl::InternalError(absl::StrCat("generated trace of ", host.name,
                                            " unreadable: ", capture.status().message()));
  }
  const uint64_t xspace_bytes = xspace.size();
  std::string kept;
  if (keep_xspace) kept = std::move(xspace);
  std::string().swap(xspace);

  podprof::v1::HostInfo info;
  info.set_host_name(host.name);
  for (const trace::Chip& c : capture->host.chips) *info.add_chips() = stream::ChipInfoOf(c);
  GeneratedCapture out;
  CollectingSink sink(&out.chunks);
  if (absl::Status s =
          stream::StreamCapture(*capture, info, {}, max_chunk_bytes, &sink, &out.counts,
                                /*columns=*/summarise);
      !s.ok()) {
    return s;
  }
  podprof::v1::CaptureTrailer trailer;
  if (summarise) {
    absl::StatusOr<uint64_t> rows =
        stream::StreamSummary(analysis::SummariseHost(*capture), capture->host.chips,
                              max_chunk_bytes, &sink, &out.counts);
    if (!rows.ok()) return rows.status();
    trailer.set_summary_rows(*rows);
  }
  for (const std::string& w : capture->warnings) trailer.add_warnings(w);
  trailer.set_event_count(out.counts.events);
  trailer.set_kernel_count(out.counts.kernels);
  trailer.set_counter_sample_count(out.counts.counter_samples);
  trailer.set_actual_start_ns(capture->host.profile_start_ns);
  trailer.set_actual_end_ns(capture->host.profile_stop_ns);
  trailer.set_empty_trace(capture->EventCount() == 0);
  trailer.set_xspace_bytes(xspace_bytes);
  out.chunks.push_back(stream::EncodeTrailer(std::move(trailer), max_chunk_bytes));
  out.xspace = std::move(kept);
  return out;
}

}  // namespace podprof::loadgen
