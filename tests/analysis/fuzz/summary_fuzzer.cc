// libFuzzer entry point over a host's summary rows as the aggregator takes them from an agent:
// arbitrary statistics (counts, totals, extremes, sketches from arbitrary bytes),
// attributions and scopes, through analysis::CheckSummary, and, for the summaries it
// accepts, what the aggregator then does with them: put them in order, merge each kernel's
// rows across chips (sketches included), read quantiles and means, add the totals up, and
// rebuild the collective ends. Whatever CheckSummary lets through must merge and read without
// a crash, undefined behaviour or an allocation out of proportion to the rows, and a merged
// quantile must lie within the merged extremes.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>

#include "analysis/host_summary.h"
#include "common/checked.h"
#include "trace/ddsketch.h"

namespace {

using podprof::analysis::HostSummary;

// Takes fixed-size values off the front of the fuzzer's bytes; zeros once they run out.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  template <typename T>
  T Take() {
    T v{};
    const size_t n = std::min<size_t>(sizeof(T), static_cast<size_t>(end_ - p_));
    std::memcpy(&v, p_, n);
    p_ += n;
    return v;
  }
  absl::string_view Slice(size_t n) {
    n = std::min<size_t>(n, static_cast<size_t>(end_ - p_));
    absl::string_view s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  bool done() const { return p_ == end_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// One statistics row: its figures as sent, its sketch either deserialized from the bytes
// (a forged one) or built from a few durations (one that may disagree with the figures).
podprof::trace::KernelStats TakeRow(Bytes& in, size_t chips, size_t kernels) {
  podprof::trace::KernelStats row;
  row.chip = static_cast<int>(in.Take<uint8_t>() % (chips + 1)) - (in.Take<uint8_t>() & 1);
  row.kernel = in.Take<uint16_t>() % (kernels + 1);
  row.count = in.Take<int64_t>();
  row.total_ps = in.Take<int64_t>();
  row.min_ps = in.Take<int64_t>();
  row.max_ps = in.Take<int64_t>();
  const uint8_t how = in.Take<uint8_t>();
  if (how & 1) {
    absl::StatusOr<podprof::trace::DDSketch> s =
        podprof::trace::DDSketch::Deserialize(in.Slice(in.Take<uint8_t>()));
    if (s.ok()) row.sketch = *std::move(s);
  } else {
    for (int i = 0; i < (how >> 1) % 8; ++i)
      row.sketch.Add(static_cast<double>(in.Take<int64_t>()));
  }
  return row;
}

HostSummary TakeSummary(Bytes& in, size_t chips, size_t kernels) {
  HostSummary s;
  for (int rows = in.Take<uint8_t>() % 12; rows > 0 && !in.done(); --rows) {
    s.stats.push_back(TakeRow(in, chips, kernels));
  }
  for (int rows = in.Take<uint8_t>() % 6; rows > 0 && !in.done(); --rows) {
    podprof::trace::KernelCounter c;
    c.chip = in.Take<uint8_t>() % (chips + 1);
    c.kernel = in.Take<uint16_t>() % (kernels + 1);
    c.counter = "perf/cycles";
    c.integral = in.Take<double>();
    c.covered_ps = in.Take<int64_t>();
    c.executions = in.Take<int64_t>();
    s.attributions.push_back(c);
  }
  for (int rows = in.Take<uint8_t>() % 6; rows > 0 && !in.done(); --rows) {
    podprof::trace::KernelScope c;
    c.chip = in.Take<uint8_t>() % (chips + 1);
    c.kernel = in.Take<uint16_t>() % (kernels + 1);
    c.line = "Source code";
    c.name = "k.py:1";
    c.count = in.Take<int64_t>();
    c.total_ps = in.Take<int64_t>();
    s.scopes.push_back(c);
  }
  for (int rows = in.Take<uint8_t>() % 6; rows > 0 && !in.done(); --rows) {
    podprof::insight::CollectiveRun r;
    r.id = in.Take<uint8_t>();
    r.start_ns = in.Take<int64_t>();
    r.duration_ns = in.Take<int64_t>();
    r.chip_key = in.Take<uint8_t>() % (chips + 1);
    r.kernel_key = in.Take<uint16_t>() % (kernels + 1);
    r.end_carry = in.Take<int8_t>();
    s.arrivals.push_back(r);
  }
  return s;
}

// What the aggregator does with an accepted summary, checked as it goes.
void UseAccepted(HostSummary s, size_t chips) {
  podprof::analysis::OrderSummary(&s);
  std::map<uint32_t, podprof::trace::KernelStats> pod;  // kernel -> across chips
  int64_t total = 0;
  for (const podprof::trace::KernelStats& row : s.stats) {
    total = podprof::SaturatingAdd(total, row.total_ps);
    auto [it, fresh] = pod.try_emplace(row.kernel, row);
    if (!fresh) it->second.Merge(row);
  }
  for (const auto& [kernel, merged] : pod) {
    for (double q : {0.0, 0.5, 0.99, 1.0}) {
      const int64_t v = merged.QuantilePs(q);
      if (v < merged.min_ps || v > merged.max_ps) __builtin_trap();
    }
    if (!std::isfinite(merged.mean_ps())) __builtin_trap();
  }
  for (const podprof::trace::KernelCounter& c : s.attributions) {
    if (!std::isfinite(c.Value())) __builtin_trap();
  }
  std::vector<podprof::trace::Chip> chip_list(chips);
  (void)podprof::analysis::CollectiveEnds(s, chip_list);
  (void)total;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  const size_t chips = 1 + in.Take<uint8_t>() % 8;
  const size_t kernels = 1 + in.Take<uint8_t>() % 16;
  // A live capture's bound (its window and a minute), or none (an import).
  const int64_t max_duration_ps =
      (in.Take<uint8_t>() & 1) ? int64_t{61'000'000'000'000} : podprof::analysis::kAnyDurationPs;
  HostSummary s = TakeSummary(in, chips, kernels);
  if (!podprof::analysis::CheckSummary(s, chips, kernels, max_duration_ps).ok()) return 0;
  UseAccepted(std::move(s), chips);
  return 0;
}
