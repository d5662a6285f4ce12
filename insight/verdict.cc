#include "insight/verdict.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace podprof::insight {
namespace {

// A collective that waits half its time or more is waiting, not communicating. (Chips a few
// percent apart in speed already wait a third of a short collective's time.)
constexpr double kWaitShare = 0.5;
// Stall gauges adding up to this share or more: the kernel is stalled.
constexpr double kStallShare = 0.3;
// Kernels shorter than this, reaching under kOverheadRoofline of their roofline time, are
// dominated by launch and fixed costs.
constexpr double kOverheadMeanPs = 5e6;
constexpr double kOverheadRoofline = 0.25;

// To a tenth, as the tables print the same figures: a verdict saying 70% beside a column
// saying 70.1% reads as two measurements.
std::string Percent(double f) { return absl::StrFormat("%.1f%%", 100 * f); }

}  // namespace

const char* BoundName(Bound b) {
  switch (b) {
    case Bound::kCompute:
      return "compute bound";
    case Bound::kMemory:
      return "memory bound";
    case Bound::kStalled:
      return "stalled";
    case Bound::kCollectiveWait:
      return "collective wait";
    case Bound::kCommunication:
      return "communication";
    case Bound::kOverhead:
      return "launch/overhead bound";
    case Bound::kAsyncWait:
      return "async wait";
    case Bound::kThrottled:
      return "throttled";
    case Bound::kUnitBound:
      return "unit bound";
    case Bound::kUnknown:
      break;
  }
  return "unknown";
}

bool IsCollectiveCategory(const std::string& category) {
  for (const char* c : {"all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                        "collective-permute", "collective-broadcast"}) {
    if (absl::StrContains(category, c)) return true;
  }
  return false;
}

namespace {

// A share over 100% is not a measurement: the inputs that made it are wrong. Such shares are
// refused (left at 0, which prints "-") with a note naming those inputs, and a wait longer
// than the kernel ran is left out before anything is decided from it.
std::string RefuseImpossible(KernelFacts* f) {
  std::string note;
  if (f->total_ps > 0 && f->wait_ps > f->total_ps) {
    note = absl::StrCat("; its collective waits (", f->wait_ps / 1000000, " us) exceed its own ",
                        "time (", f->total_ps / 1000000, " us), so the capture's collective ids ",
                        "join different executions: waits not shown");
    f->wait_ps = 0;
    f->straggler.clear();
  }
  return note;
}

std::string RefuseOverPeak(Verdict* v, const KernelFacts& f) {
  constexpr double kOver = 1 + 1e-9;
  std::string note;
  if (v->bandwidth_fraction > kOver) {
    note = absl::StrFormat(
        "; %.1f GB/s is over the chip's %.1f GB/s HBM peak: its bytes_accessed (%d) or the "
        "chip's peak_hbm_bw_gigabytes_per_second is wrong, %%HBM not shown",
        v->achieved_gbps, f.peak_hbm_gbps, f.bytes_accessed);
    v->bandwidth_fraction = 0;
  }
  if (v->compute_fraction > kOver) {
    absl::StrAppend(&note, absl::StrFormat("; %.2f TFLOP/s is over the chip's %.2f TFLOP/s peak: "
                                           "its flops (%d) or the chip's peak is wrong, %%PEAK "
                                           "not shown",
                                           v->achieved_tflops, f.peak_tflops, f.flops));
    v->compute_fraction = 0;
  }
  if (v->roofline_fraction > kOver) v->roofline_fraction = 0;
  return note;
}

// What the rules read besides the verdict's own figures.
struct Measured {
  double mean_ps = 0, roofline_s = 0, worst_stall = 0;
};

// The verdict's figures from the facts: rates, fractions of peak and of the roofline, waits,
// stalls.
Measured Measure(const KernelFacts& f, Verdict* out) {
  Verdict& v = *out;
  Measured m;
  const double seconds = static_cast<double>(f.total_ps) * 1e-12;
  m.mean_ps = f.count > 0 ? static_cast<double>(f.total_ps) / f.count : 0;
  const double flops = static_cast<double>(f.flops) * f.count;
  const double bytes = static_cast<double>(f.bytes_accessed) * f.count;
  if (f.bytes_accessed > 0) v.intensity = static_cast<double>(f.flops) / f.bytes_accessed;
  if (f.peak_hbm_gbps > 0) v.ridge = f.peak_tflops * 1e12 / (f.peak_hbm_gbps * 1e9);
  if (seconds > 0) {
    v.achieved_tflops = flops / seconds / 1e12;
    v.achieved_gbps = bytes / seconds / 1e9;
  }
  if (f.peak_tflops > 0) v.compute_fraction = v.achieved_tflops / f.peak_tflops;
  if (f.peak_hbm_gbps > 0) v.bandwidth_fraction = v.achieved_gbps / f.peak_hbm_gbps;
  if (f.peak_tflops > 0 && f.peak_hbm_gbps > 0) {
    m.roofline_s = std::max(flops / (f.peak_tflops * 1e12), bytes / (f.peak_hbm_gbps * 1e9));
  }
  if (seconds > 0) v.roofline_fraction = m.roofline_s / seconds;
  if (f.total_ps > 0) v.wait_fraction = static_cast<double>(f.wait_ps) / f.total_ps;
  v.has_counters = !f.gauges.empty() || !f.totals.empty();
  for (const auto& [name, mean] : f.gauges) {
    if (!absl::StartsWith(name, "stall")) continue;
    v.stall_fraction += mean;
    if (mean > m.worst_stall) {
      m.worst_stall = mean;
      v.dominant_stall = name;
    }
  }
  return m;
}

// Decide's rules, on facts already cleared of impossible waits: the first that applies names
// the kernel's bound. Long: it is the list of rules in the order they are tried, which split
// across functions could no longer be read top to bottom.
Verdict DecideFrom(const KernelFacts& f) {
  Verdict v;
  const Measured m = Measure(f, &v);
  const double mean_ps = m.mean_ps, roofline_s = m.roofline_s, worst_stall = m.worst_stall;
  const bool collective = f.collective || IsCollectiveCategory(f.category);
  if (collective) {
    if (v.wait_fraction >= kWaitShare) {
      v.bound = Bound::kCollectiveWait;
      v.text = absl::StrCat("collective wait: ", Percent(v.wait_fraction),
                            " of its time waiting for a later chip",
                            f.straggler.empty() ? "" : absl::StrCat(", most often ", f.straggler));
    } else {
      v.bound = Bound::kCommunication;
      v.text = absl::StrCat("communication: moving data between chips (", Percent(v.wait_fraction),
                            " waiting)");
    }
    return v;
  }
  if (absl::EndsWith(f.category, "-start") || absl::EndsWith(f.category, "-done")) {
    // The transfer happens between the two halves: neither half's own time says anything of
    // the roofline.
    v.bound = Bound::kAsyncWait;
    v.achieved_tflops = v.achieved_gbps = v.compute_fraction = v.bandwidth_fraction = 0;
    v.roofline_fraction = 0;
    v.text = absl::EndsWith(f.category, "-done")
                 ? "async wait: the done half of an asynchronous copy, waiting for its transfer"
                 : "async wait: the start half of an asynchronous copy, issuing its transfer";
    return v;
  }
  v.profile = ProfileFromCounters(f.generation, f.totals, f.covered_ps, f.sync_wait_ps, f.total_ps);
  const bool memory_bound =
      f.bytes_accessed > 0 && v.ridge > 0 && v.intensity < v.ridge && f.peak_tflops > 0;
  if (ProfileCause cause = CauseOf(v.profile, memory_bound, f.flops > 0); !cause.name.empty()) {
    v.bound = cause.name == "throttled"                 ? Bound::kThrottled
              : cause.name == "MXU idle waiting on HBM" ? Bound::kStalled
                                                        : Bound::kUnitBound;
    v.text = std::move(cause.text);
    v.cause = std::move(cause.name);
    return v;
  }
  if (v.stall_fraction >= kStallShare) {
    v.bound = Bound::kStalled;
    v.text = absl::StrCat("stalled: ", Percent(v.stall_fraction), " of its time on stalls, mostly ",
                          v.dominant_stall, " (", Percent(worst_stall), ")");
    return v;
  }
  if (mean_ps > 0 && mean_ps < kOverheadMeanPs &&
      (roofline_s == 0 || v.roofline_fraction < kOverheadRoofline)) {
    v.bound = Bound::kOverhead;
    v.text = absl::StrFormat(
        "launch/overhead bound: %.1f us a run, %s of it needed by its work", mean_ps / 1e6,
        roofline_s > 0 ? Percent(v.roofline_fraction) : std::string("none known"));
    return v;
  }
  if ((f.flops > 0 || f.bytes_accessed > 0) && v.ridge > 0) {
    const bool compute = f.bytes_accessed == 0 || v.intensity >= v.ridge;
    v.bound = compute ? Bound::kCompute : Bound::kMemory;
    v.text = compute ? absl::StrFormat(
                           "compute bound: %.0f flop/byte over a ridge of %.0f, at "
                           "%s of peak compute",
                           v.intensity, v.ridge, Percent(v.compute_fraction))
                     : absl::StrFormat(
                           "memory bound: %.1f flop/byte under a ridge of %.0f, at "
                           "%s of peak HBM bandwidth",
                           v.intensity, v.ridge, Percent(v.bandwidth_fraction));
    // One MXU figure, the one the tables show, with its source (report/kernel_rows.cc).
    auto counted = v.profile.units.find("mxu");
    auto gauge = f.gauges.find("mxu_busy");
    if (compute && counted != v.profile.units.end()) {
      absl::StrAppend(&v.text, absl::StrFormat(", MXU busy %.1f%% (performance counters)",
                                               100 * counted->second));
    } else if (compute && gauge != f.gauges.end()) {
      absl::StrAppend(&v.text,
                      absl::StrFormat(", MXU busy %.1f%% (mxu_busy gauge)", 100 * gauge->second));
    }
    return v;
  }
  v.text = v.has_counters ? "unknown: no cost model for it, and its counters show no stall"
                          : "unknown: no cost model and no counters for it";
  return v;
}

}  // namespace

Verdict Decide(const KernelFacts& facts) {
  KernelFacts f = facts;
  const std::string refused = RefuseImpossible(&f);
  Verdict v = DecideFrom(f);
  const bool unit_bound = v.bound == Bound::kUnitBound;
  absl::StrAppend(&v.text, OnTheLineNote(v.profile, unit_bound), refused, RefuseOverPeak(&v, f));
  return v;
}

std::optional<double> GaugeMean(double integral, int64_t covered_ps) {
  if (covered_ps <= 0) return std::nullopt;
  return integral / static_cast<double>(covered_ps);
}

std::map<std::string, double> GaugeMeans(
    const std::map<std::string, std::pair<double, int64_t>>& integrals) {
  std::map<std::string, double> out;
  for (const auto& [name, g] : integrals) {
    if (std::optional<double> mean = GaugeMean(g.first, g.second)) out[name] = *mean;
  }
  return out;
}

}  // namespace podprof::insight
