#include "fleet/capture_rows.h"

#include <map>
#include <utility>

#include "common/status_macros.h"
#include "fleet/row_binary.h"
#include "trace/chip_catalog.h"
#include "trace/xspace_schema.h"

namespace podprof::fleet {
namespace {

uint64_t Unsigned(int64_t v) { return v < 0 ? 0 : static_cast<uint64_t>(v); }

// The per-kernel tables' first columns (PODPROF_KERNEL_KEY in schema.cc).
void KernelKey(RowBinary& w, const storage::KernelKey& k, const std::string& pod,
               const storage::CaptureRow& c) {
  w.Str(k.module).Str(k.op_name).U64(Unsigned(c.start_ns)).Str(pod).Str(c.id);
}

void Sketch(RowBinary& w, const trace::DDSketch& s) {
  std::vector<int32_t> index;
  std::vector<uint64_t> count;
  s.Bins(&index, &count);
  w.U64(s.zero_count()).FixedArray(index).FixedArray(count);
}

void Labels(RowBinary& w, const storage::CaptureRow& c) {
  std::vector<std::string> keys, values;
  for (const auto& [k, v] : c.labels) {
    keys.push_back(k);
    values.push_back(v);
  }
  w.StrArray(keys).StrArray(values);
}

int64_t Kernels(RowBinary& w, const std::string& pod, const FleetCapture& f) {
  for (const FleetKernel& k : f.kernels) {
    const storage::KernelKey& key = k.stats.kernel;
    w.Str(key.module).Str(key.op_name).Str(key.category).U64(key.program_id).U64(key.hlo_hash);
    w.I64(key.flops).I64(key.bytes_accessed).Str(pod).U64(Unsigned(f.capture.start_ns));
  }
  return static_cast<int64_t>(f.kernels.size());
}

int64_t ChipStats(RowBinary& w, const std::string& pod, const FleetCapture& f) {
  for (const storage::StatRow& r : f.chip_stats) {
    KernelKey(w, r.kernel, pod, f.capture);
    w.Str(r.host).U32(static_cast<uint32_t>(r.chip)).Str(r.kernel.category);
    w.U64(r.kernel.program_id).U64(r.kernel.hlo_hash).U64(Unsigned(r.count));
    w.I64(r.total_ps).I64(r.min_ps).I64(r.max_ps);
    Sketch(w, r.sketch);
    w.F64(r.peak_tflops).F64(r.peak_hbm_gbps);
  }
  return static_cast<int64_t>(f.chip_stats.size());
}

int64_t Rollups(RowBinary& w, const std::string& pod, const FleetCapture& f) {
  for (const FleetKernel& k : f.kernels) {
    const storage::StatRow& r = k.stats;
    KernelKey(w, r.kernel, pod, f.capture);
    w.Str(r.kernel.category).U64(r.kernel.program_id).U64(r.kernel.hlo_hash);
    Labels(w, f.capture);
    w.U64(Unsigned(r.count)).I64(r.total_ps).I64(r.min_ps).I64(r.max_ps);
    w.U32(static_cast<uint32_t>(r.chips)).F64(r.sketch.Quantile(0.5)).F64(r.sketch.Quantile(0.99));
    Sketch(w, r.sketch);
    const insight::Verdict& v = k.verdict;
    w.Str(insight::BoundName(v.bound)).Str(v.cause).Str(v.text);
    w.F64(v.achieved_tflops).F64(v.achieved_gbps).F64(v.roofline_fraction).F64(v.wait_fraction);
  }
  return static_cast<int64_t>(f.kernels.size());
}

int64_t Counters(RowBinary& w, const std::string& pod, const FleetCapture& f) {
  std::map<int64_t, const storage::KernelKey*> keys;
  for (const FleetKernel& k : f.kernels) keys[k.stats.kernel.id] = &k.stats.kernel;
  int64_t rows = 0;
  for (const storage::KernelInsightRow& in : f.counters) {
    auto key = keys.find(in.kernel_id);
    if (key == keys.end()) continue;
    const std::map<std::string, double> gauges = insight::GaugeMeans(in.gauge_integrals);
    for (const auto* values : {&gauges, &in.totals}) {
      const char* kind = values == &gauges ? "gauge" : "total";
      for (const auto& [name, value] : *values) {
        KernelKey(w, *key->second, pod, f.capture);
        w.Str(name).Str(kind).F64(value).I64(in.covered_ps);
        ++rows;
      }
    }
  }
  return rows;
}

int64_t Stragglers(RowBinary& w, const std::string& pod, const FleetCapture& f) {
  const insight::StragglerVerdict& v = f.straggler_verdict;
  for (size_t i = 0; i < f.stragglers.size(); ++i) {
    const trace::StragglerRow& s = f.stragglers[i];
    w.Str(pod).Str(f.capture.id).U64(Unsigned(f.capture.start_ns)).Str(s.host);
    w.U32(static_cast<uint32_t>(s.chip_ordinal)).U64(Unsigned(s.times_last));
    w.U64(Unsigned(s.instances)).I64(s.caused_ps).I64(s.lateness_ps).FixedArray(s.steps);
    // Rows stored before the chance count was kept are not judged: -1, p 1, not significant
    // (also when the verdict is missing: a FleetCapture not made by ReadFleetCapture).
    const bool judged = v.judged && s.expected_last >= 0 && i < v.significant.size();
    w.F64(judged ? s.expected_last : -1).F64(judged ? v.p_values[i] : 1);
    w.U8(judged && v.significant[i] ? 1 : 0);
  }
  return static_cast<int64_t>(f.stragglers.size());
}

int64_t Hosts(RowBinary& w, const std::string& pod, const FleetCapture& f) {
  for (const storage::HostRow& h : f.capture.host_rows) {
    w.Str(pod)
        .Str(f.capture.id)
        .U64(Unsigned(f.capture.start_ns))
        .Str(h.host)
        .Str(storage::HostOutcomeName(h.status));
    w.Str(h.error).I64(h.clock_offset_ns).I64(h.clock_uncertainty_ns);
    w.F64(h.correction.drift_ppb).U64(Unsigned(h.events)).Fixed(int32_t{h.slice});
  }
  return static_cast<int64_t>(f.capture.host_rows.size());
}

int64_t Capture(RowBinary& w, const std::string& pod, const FleetCapture& f) {
  const storage::CaptureRow& c = f.capture;
  w.Str(pod).Str(c.id).U64(Unsigned(c.start_ns)).U64(Unsigned(c.end_ns));
  w.U64(Unsigned(c.created_ns)).Str(storage::CaptureStateName(c.status));
  w.Str(storage::CaptureSourceName(c.source));
  Labels(w, c);
  w.Str(c.options_json).U32(static_cast<uint32_t>(c.hosts)).U32(static_cast<uint32_t>(c.chips));
  w.U32(static_cast<uint32_t>(c.kernels)).U64(Unsigned(c.events));
  return 1;
}

}  // namespace

storage::ScopeName SyncWaitScope() {
  return {std::string(trace::xspace::kSyncFlagLine), std::string(trace::xspace::kSyncWaitEvent)};
}

insight::KernelFacts FactsOf(const storage::StatRow& r, const storage::KernelInsightRow* in) {
  insight::KernelFacts f;
  f.category = r.kernel.category;
  f.flops = r.kernel.flops;
  f.bytes_accessed = r.kernel.bytes_accessed;
  f.count = r.count;
  f.total_ps = r.total_ps;
  f.peak_tflops = r.peak_tflops;
  f.peak_hbm_gbps = r.peak_hbm_gbps;
  if (in != nullptr) {
    f.gauges = insight::GaugeMeans(in->gauge_integrals);
    f.totals = in->totals;
    f.covered_ps = in->covered_ps;
    f.sync_wait_ps = in->sync_wait_ps;
    f.generation = trace::FindGenerationByName(in->generation);
    f.wait_ps = in->wait_ps;
    f.straggler = in->straggler;
    f.collective = in->wait_instances > 0;
  }
  return f;
}

absl::StatusOr<FleetCapture> ReadFleetCapture(storage::Store& store, const std::string& id) {
  FleetCapture f;
  ASSIGN_OR_RETURN(f.capture, store.captures().Get(id));
  storage::StatsQuery q;
  q.capture_id = id;
  q.group_by = storage::Grouping::kChip;
  ASSIGN_OR_RETURN(f.chip_stats, store.kernels().Stats(q));
  q.group_by = storage::Grouping::kKernel;
  ASSIGN_OR_RETURN(std::vector<storage::StatRow> pod, store.kernels().Stats(q));
  ASSIGN_OR_RETURN(f.counters,
                   store.insights().KernelInsights(id, /*per_chip=*/false, SyncWaitScope()));
  std::map<int64_t, const storage::KernelInsightRow*> by_kernel;
  for (const storage::KernelInsightRow& in : f.counters) by_kernel[in.kernel_id] = &in;
  for (storage::StatRow& r : pod) {
    auto in = by_kernel.find(r.kernel.id);
    insight::Verdict v = insight::Decide(FactsOf(r, in == by_kernel.end() ? nullptr : in->second));
    f.kernels.push_back({std::move(r), std::move(v)});
  }
  ASSIGN_OR_RETURN(storage::StragglerReport stragglers, store.insights().Stragglers(id));
  f.stragglers = std::move(stragglers.chips);
  f.straggler_verdict = insight::JudgeStragglers(f.stragglers);
  return f;
}

int64_t EncodeRows(Table t, const std::string& pod,
                   const std::vector<const FleetCapture*>& captures, std::string* out) {
  RowBinary w(out);
  int64_t rows = 0;
  for (const FleetCapture* f : captures) {
    switch (t) {
      case Table::kKernels:
        rows += Kernels(w, pod, *f);
        break;
      case Table::kKernelStats:
        rows += ChipStats(w, pod, *f);
        break;
      case Table::kKernelRollups:
        rows += Rollups(w, pod, *f);
        break;
      case Table::kCounterRollups:
        rows += Counters(w, pod, *f);
        break;
      case Table::kStragglers:
        rows += Stragglers(w, pod, *f);
        break;
      case Table::kCaptureHosts:
        rows += Hosts(w, pod, *f);
        break;
      case Table::kCaptures:
        rows += Capture(w, pod, *f);
        break;
    }
  }
  return rows;
}

}  // namespace podprof::fleet
