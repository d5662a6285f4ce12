#include "ingest/capture_ingest.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "insight/collectives.h"
#include "trace/columns.h"
#include "trace/kernel_stats.h"

namespace podprof::ingest {
namespace {

// Chip keys of collective runs: the host's index in the capture and the chip's index on it.
constexpr int64_t kChipsPerHostKey = 1 << 16;

// The pod's collective waits as rows: per chip and kernel, per kernel, stragglers, the worst.
void CollectiveRows(const insight::CollectiveReport& report, storage::CaptureWrite* w) {
  std::map<int64_t, storage::WaitRollupWrite> by_kernel;
  std::map<int64_t, int64_t> straggler_times;
  for (const auto& [key, wait] : report.waits) {
    storage::WaitWrite row;
    row.host = static_cast<size_t>(key.first / kChipsPerHostKey);
    row.chip = static_cast<int>(key.first % kChipsPerHostKey);
    row.kernel_id = key.second;
    row.wait_ps = wait.wait_ps;
    row.instances = wait.instances;
    row.straggler = wait.straggler;
    w->waits.push_back(std::move(row));
    storage::WaitRollupWrite& k = by_kernel[key.second];
    k.kernel_id = key.second;
    k.wait_ps += wait.wait_ps;
    k.instances += wait.instances;
    if (wait.straggler_times > straggler_times[key.second]) {
      k.straggler = wait.straggler;
      straggler_times[key.second] = wait.straggler_times;
    }
  }
  for (auto& [id, r] : by_kernel) w->wait_rollups.push_back(std::move(r));
  w->stragglers = report.stragglers;
  w->worst = report.worst;
  w->collectives_left_out = report.left_out;
  w->collectives_left_out_example = report.left_out_example;
}

// A chip's statistics as the store keeps them.
storage::StatWrite ToRow(const trace::KernelStats& s) {
  storage::StatWrite row;
  row.chip = s.chip;
  row.kernel = s.kernel;
  row.count = s.count;
  row.total_ps = s.total_ps;
  row.min_ps = s.min_ps;
  row.max_ps = s.max_ps;
  row.sketch = s.sketch.Serialize();
  return row;
}

}  // namespace

void PodAnalysis::Add(const std::vector<int64_t>& kernel_ids, const std::vector<trace::Chip>& chips,
                      const std::vector<trace::KernelStats>& stats,
                      const std::vector<trace::KernelCounter>& counters,
                      const std::vector<insight::CollectiveRun>& runs,
                      const insight::CollectiveNames& names) {
  collectives_.Add(runs);
  absl::MutexLock lock(&mu_);
  names_.Merge(names);
  for (const trace::KernelStats& s : stats) {
    storage::KernelRollupWrite& r = stats_[kernel_ids[s.kernel]];
    r.kernel_id = kernel_ids[s.kernel];
    r.stats.Merge(s);
    r.chips++;
    if (s.chip >= 0 && static_cast<size_t>(s.chip) < chips.size()) {
      const double ps = static_cast<double>(s.total_ps);
      r.peak_tflops_ps += chips[s.chip].peak_tflops * ps;
      r.peak_hbm_gbps_ps += chips[s.chip].peak_hbm_gbps * ps;
    }
  }
  for (const trace::KernelCounter& k : counters) {
    const int64_t id = kernel_ids[k.kernel];
    storage::CounterRollupWrite& r = counters_[{id, k.counter}];
    r.kernel_id = id;
    r.name = k.counter;
    r.cumulative = k.kind == trace::CounterKind::kCumulative;
    r.integral += k.integral;
    r.covered_ps += k.covered_ps;
  }
}

void PodAnalysis::Finish(const std::vector<storage::HostWrite>& hosts, storage::CaptureWrite* w) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, r] : stats_) w->rollups.push_back(std::move(r));
  for (auto& [key, r] : counters_) w->counter_rollups.push_back(std::move(r));
  stats_.clear();
  counters_.clear();
  std::vector<trace::ClockCorrection> clocks(hosts.size());
  std::vector<bool> own_clock(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    own_clock[i] = hosts[i].host_clock;
    clocks[i] = {hosts[i].clock_offset_ns, hosts[i].clock_drift_ppb, hosts[i].clock_mid_ns};
  }
  auto correct = [&](int32_t host, int64_t ns) {
    const size_t h = static_cast<size_t>(host);
    return h < hosts.size() && own_clock[h] ? clocks[h].ApplyNs(ns) : ns;
  };
  CollectiveRows(collectives_.Analyze(names_, correct), w);
  collectives_.Clear();
  names_ = insight::CollectiveNames();
}

absl::StatusOr<AnalysedHost> MergeHost(storage::CaptureWriter& writer, size_t index,
                                       trace::HostCapture& cap, analysis::HostSummary summary,
                                       PodAnalysis* pod) {
  AnalysedHost r;
  ASSIGN_OR_RETURN(std::vector<std::vector<int64_t>> ids, writer.ResolveKernels({&cap.kernels}));
  storage::HostWrite& w = r.write;
  w.kernel_ids = std::move(ids.front());
  w.events = static_cast<int64_t>(cap.EventCount());
  w.chips = cap.host.chips;
  w.attributions = std::move(summary.attributions);
  w.scopes = std::move(summary.scopes);
  w.stats.reserve(summary.stats.size());
  for (const trace::KernelStats& s : summary.stats) w.stats.push_back(ToRow(s));
  // Timelines are stored with the host's own kernel numbers, read through its kernel map
  // (HostWrite::kernel_ids): a block its agent encoded is stored as it arrived, undecoded.
  const std::vector<int64_t> numbers = trace::HostKernelNumbers(cap.kernels.size());
  for (trace::EventBlock& b : cap.blocks) {
    if (b.size() == 0 && b.encoded_events > 0) {
      w.timelines.push_back({b.chip, b.line, b.base_ns, b.encoded_events, std::move(b.encoded)});
      continue;
    }
    if (b.size() == 0) continue;
    w.timelines.push_back({b.chip, b.line, b.base_ns, static_cast<int64_t>(b.size()),
                           trace::EncodeTimeline(b, numbers)});
  }
  // A series that came encoded (trace/columns.h) is stored as it arrived (moved, not copied);
  // left undecoded when the agent analysed it, its count is read off the encoding's front.
  for (trace::CounterSeries& s : cap.counters) {
    if (s.encoded.empty()) {
      w.counters.push_back(
          {s.chip, s.name, static_cast<int64_t>(s.value.size()), trace::EncodeCounters(s)});
      continue;
    }
    uint64_t samples = s.value.size();
    if (samples == 0) {
      ASSIGN_OR_RETURN(samples, trace::EncodedCount(s.encoded, s.name));
    }
    w.counters.push_back({s.chip, s.name, static_cast<int64_t>(samples), std::move(s.encoded)});
  }
  // The arrivals, numbered by the host's chips and kernels, get the pod's numbers: the host's
  // place in the capture, its chips under it, the store's kernel ids.
  insight::CollectiveNames names;
  const int32_t host = static_cast<int32_t>(index);
  names.hosts.resize(index + 1);
  names.hosts[index] = cap.host.name;
  for (insight::CollectiveRun& run : summary.arrivals) {
    const size_t kernel = static_cast<size_t>(run.kernel_key);
    run.host = host;
    run.chip_ordinal = cap.host.chips[run.chip_key].ordinal;
    run.chip_key += static_cast<int64_t>(index) * kChipsPerHostKey;
    run.kernel_key = w.kernel_ids[kernel];
    if (!names.kernels.contains(run.kernel_key)) {
      names.kernels.emplace(run.kernel_key, cap.kernels[kernel].name);
    }
  }
  pod->Add(w.kernel_ids, cap.host.chips, summary.stats, w.attributions, summary.arrivals, names);
  return r;
}

absl::StatusOr<AnalysedHost> AnalyseHost(storage::CaptureWriter& writer, size_t index,
                                         trace::HostCapture& cap, PodAnalysis* pod) {
  ASSIGN_OR_RETURN(AnalysedHost h,
                   MergeHost(writer, index, cap, analysis::SummariseHost(cap), pod));
  h.write.analysed_by = "aggregator";
  h.write.warnings = cap.warnings;
  return h;
}

void SetHostClock(const trace::ClockCorrection& c, AnalysedHost* host) {
  host->write.host_clock = true;
  host->write.clock_offset_ns = c.offset_ns;
  host->write.clock_drift_ppb = c.drift_ppb;
  host->write.clock_mid_ns = c.mid_ns;
}

absl::Status WriteAnalysed(storage::CaptureWriter& writer, storage::CaptureWrite w,
                           std::vector<AnalysedHost> hosts, PodAnalysis* pod) {
  w.hosts.clear();
  for (AnalysedHost& h : hosts) w.hosts.push_back(std::move(h.write));
  hosts.clear();
  const auto begin = std::chrono::steady_clock::now();
  const size_t arrivals = pod->arrivals(), arrival_bytes = pod->arrival_bytes();
  pod->Finish(w.hosts, &w);
  const auto analysed = std::chrono::steady_clock::now();
  absl::Status written = writer.WriteCapture(w);
  const auto end = std::chrono::steady_clock::now();
  auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  PODPROF_LOG(INFO) << "capture " << w.id << ": the pod's roll-ups and collectives in "
                    << ms(analysed - begin) << " ms, its last rows written in "
                    << ms(end - analysed) << " ms (" << arrivals << " collective arrivals in "
                    << arrival_bytes / 1'000'000 << " MB)";
  return written;
}

absl::Status StoreCapture(storage::CaptureWriter& writer, CaptureInput input) {
  std::vector<AnalysedHost> hosts;
  // A pod capture has every host on the aggregator's clock. Imported hosts keep their own
  // clocks, which agree only as well as NTP made them: compare arrivals within a host there.
  PodAnalysis pod(input.source == storage::CaptureSource::kImport);
  for (size_t i = 0; i < input.hosts.size(); ++i) {
    HostInput& in = input.hosts[i];
    AnalysedHost h;
    if (in.capture) {
      ASSIGN_OR_RETURN(h, AnalyseHost(writer, i, *in.capture, &pod));
      in.capture.reset();
    }
    h.write.host = in.host;
    h.write.status = in.status;
    h.write.error = in.error;
    h.write.clock_offset_ns = in.clock_offset_ns;
    h.write.clock_uncertainty_ns = in.clock_uncertainty_ns;
    h.write.bytes = in.bytes;
    h.write.slice = in.slice;
    hosts.push_back(std::move(h));
  }
  storage::CaptureWrite w;
  w.id = input.id;
  w.start_ns = input.start_ns;
  w.end_ns = input.end_ns;
  w.state = input.state;
  w.labels = std::move(input.labels);
  w.options_json = input.options_json;
  w.source = input.source;
  w.created_ns = input.created_ns;
  return WriteAnalysed(writer, std::move(w), std::move(hosts), &pod);
}

}  // namespace podprof::ingest
