#include "analysis/host_summary.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/checked.h"
#include "common/status_macros.h"
#include "insight/attribution.h"

namespace podprof::analysis {

HostSummary SummariseHost(const trace::HostCapture& capture,
                          const std::vector<trace::CounterSeries>& also) {
  HostSummary s;
  s.stats = trace::ComputeKernelStats(capture);
  s.attributions = insight::AttributeCounters(capture, also);
  s.scopes = insight::AttributeScopes(capture);
  std::vector<int64_t> chips(capture.host.chips.size());
  std::iota(chips.begin(), chips.end(), 0);
  std::vector<int64_t> kernels(capture.kernels.size());
  std::iota(kernels.begin(), kernels.end(), 0);
  // The names are the merger's to give (it knows the host's name and the kernels'): a
  // throwaway here.
  insight::CollectiveNames names;
  s.arrivals = insight::CollectiveRuns(capture, -1, chips, kernels, &names);
  return s;
}

void OrderSummary(HostSummary* summary) {
  trace::SortByTotal(&summary->stats);
  std::stable_sort(
      summary->attributions.begin(), summary->attributions.end(),
      [](const trace::KernelCounter& a, const trace::KernelCounter& b) { return a.chip < b.chip; });
  std::stable_sort(
      summary->scopes.begin(), summary->scopes.end(),
      [](const trace::KernelScope& a, const trace::KernelScope& b) { return a.chip < b.chip; });
}

HostAnalyser::HostAnalyser(const std::vector<trace::Chip>& chips,
                           std::vector<trace::CounterSeries> also)
    : chips_(chips), also_(chips.size()), seen_(chips.size()) {
  for (trace::CounterSeries& series : also) {
    for (size_t c = 0; c < chips_.size(); ++c) {
      if (chips_[c].ordinal != series.chip) continue;
      series.chip = static_cast<int>(c);
      also_[c].push_back(std::move(series));
      break;
    }
  }
}

void HostAnalyser::Add(const trace::HostCapture& piece) {
  std::vector<bool> here(chips_.size());
  for (const trace::EventBlock& b : piece.blocks) {
    if (b.chip >= 0 && static_cast<size_t>(b.chip) < here.size()) here[b.chip] = true;
  }
  for (const trace::CounterSeries& s : piece.counters) {
    if (s.chip >= 0 && static_cast<size_t>(s.chip) < here.size()) here[s.chip] = true;
  }
  std::vector<trace::CounterSeries> also;
  for (size_t c = 0; c < here.size(); ++c) {
    if (!here[c]) continue;
    if (seen_[c] && split_.empty()) {
      split_ = absl::StrCat("chip ", chips_[c].ordinal,
                            "'s data came in more than one piece (a SparseCore plane apart from "
                            "its chip's, or a plane larger than the reader's piece budget)");
    }
    seen_[c] = true;
    // Each chip's sampled series go with its one piece, and are then let go.
    for (trace::CounterSeries& s : also_[c]) also.push_back(std::move(s));
    also_[c].clear();
  }
  if (!split_.empty()) return;
  HostSummary s = SummariseHost(piece, also);
  auto append = [](auto& from, auto& to) {
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  };
  append(s.stats, summary_.stats);
  append(s.attributions, summary_.attributions);
  append(s.scopes, summary_.scopes);
  append(s.arrivals, summary_.arrivals);
}

absl::StatusOr<HostSummary> HostAnalyser::Finish() {
  if (!split_.empty()) return absl::FailedPreconditionError(split_);
  OrderSummary(&summary_);
  return std::move(summary_);
}

std::vector<std::pair<uint64_t, int64_t>> CollectiveEnds(const HostSummary& summary,
                                                         const std::vector<trace::Chip>& chips) {
  std::vector<std::pair<uint64_t, int64_t>> all;  // (id, a chip's end), then grouped by id
  all.reserve(summary.arrivals.size());
  for (const insight::CollectiveRun& r : summary.arrivals) {
    const size_t chip = static_cast<size_t>(r.chip_key);
    if (chip < chips.size() && chips[chip].device_type == trace::kCpuDeviceType) continue;
    all.emplace_back(r.id, r.start_ns + r.duration_ns + r.end_carry);
  }
  std::sort(all.begin(), all.end());
  std::vector<std::pair<uint64_t, int64_t>> out;
  for (size_t begin = 0; begin < all.size();) {
    size_t end = begin;
    while (end < all.size() && all[end].first == all[begin].first) ++end;
    // Sorted by end within the id: the median is the middle one.
    out.emplace_back(all[begin].first, all[begin + (end - begin) / 2].second);
    begin = end;
  }
  return out;
}

namespace {

absl::Status CheckIndices(const char* what, size_t row, int64_t chip, uint64_t kernel, size_t chips,
                          size_t kernels) {
  if (chip < 0 || static_cast<size_t>(chip) >= chips) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " row ", row, " names chip index ", chip, " of ", chips));
  }
  if (kernel >= kernels) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " row ", row, " names kernel index ", kernel, " of ", kernels));
  }
  return absl::OkStatus();
}

absl::Status CheckStats(const trace::KernelStats& s, size_t row, int64_t max_duration_ps) {
  if (s.count <= 0 || s.min_ps < 0 || s.min_ps > s.max_ps || s.total_ps < s.max_ps ||
      s.sketch.count() != static_cast<uint64_t>(s.count)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "statistics row ", row, " does not add up: count ", s.count, ", min ", s.min_ps,
        " ps, max ", s.max_ps, " ps, total ", s.total_ps, " ps, sketch count ", s.sketch.count()));
  }
  // No execution outlasts the window it was captured in (events of 100 us were sent as an
  // hour each), and the total lies between count x min and count x max: a product that does
  // not fit in 64 bits bounds nothing a real total can reach.
  if (s.max_ps > max_duration_ps) {
    return absl::InvalidArgumentError(
        absl::StrCat("statistics row ", row, " has an execution of ", s.max_ps,
                     " ps, longer than the capture allows (", max_duration_ps, " ps)"));
  }
  const std::optional<int64_t> low = CheckedMul(s.count, s.min_ps);
  const std::optional<int64_t> high = CheckedMul(s.count, s.max_ps);
  if (!low || s.total_ps < *low || (high && s.total_ps > *high)) {
    return absl::InvalidArgumentError(absl::StrCat("statistics row ", row, " totals ", s.total_ps,
                                                   " ps over ", s.count, " executions of ",
                                                   s.min_ps, " to ", s.max_ps, " ps each"));
  }
  if (!s.sketch.WithinValues(static_cast<double>(s.min_ps), static_cast<double>(s.max_ps))) {
    return absl::InvalidArgumentError(absl::StrCat("statistics row ", row,
                                                   "'s sketch holds durations outside its min ",
                                                   s.min_ps, " ps and max ", s.max_ps, " ps"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckSummary(const HostSummary& summary, size_t chips, size_t kernels,
                          int64_t max_duration_ps) {
  // The host's kernel time in all, summed as the pod's roll-ups and the store's SUM() will:
  // a host whose rows alone do not fit in 64 bits would wrap them (two rows of 2^62 ps did).
  int64_t host_total = 0;
  for (size_t i = 0; i < summary.stats.size(); ++i) {
    const trace::KernelStats& s = summary.stats[i];
    if (absl::Status bad = CheckIndices("statistics", i, s.chip, s.kernel, chips, kernels);
        !bad.ok()) {
      return bad;
    }
    if (absl::Status bad = CheckStats(s, i, max_duration_ps); !bad.ok()) return bad;
    const std::optional<int64_t> sum = CheckedAdd(host_total, s.total_ps);
    if (!sum) {
      return absl::InvalidArgumentError(
          absl::StrCat("statistics rows 0..", i, " total more picoseconds than 64 bits hold"));
    }
    host_total = *sum;
  }
  for (size_t i = 0; i < summary.attributions.size(); ++i) {
    const trace::KernelCounter& a = summary.attributions[i];
    if (absl::Status bad = CheckIndices("attribution", i, a.chip, a.kernel, chips, kernels);
        !bad.ok()) {
      return bad;
    }
    // One NaN here failed the whole capture's write (and every host with it).
    if (!std::isfinite(a.integral) || a.covered_ps < 0 || a.executions < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribution row ", i, " (", a.counter, ") is not a measurement: integral ",
                       a.integral, ", covered ", a.covered_ps, " ps, executions ", a.executions));
    }
  }
  for (size_t i = 0; i < summary.scopes.size(); ++i) {
    const trace::KernelScope& s = summary.scopes[i];
    if (absl::Status bad = CheckIndices("scope", i, s.chip, s.kernel, chips, kernels); !bad.ok()) {
      return bad;
    }
    if (s.count < 0 || s.total_ps < 0) {
      return absl::InvalidArgumentError(absl::StrCat("scope row ", i, " (", s.name,
                                                     ") is not a measurement: count ", s.count,
                                                     ", total ", s.total_ps, " ps"));
    }
  }
  for (size_t i = 0; i < summary.arrivals.size(); ++i) {
    const insight::CollectiveRun& r = summary.arrivals[i];
    if (r.kernel_key < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("arrival row ", i, " names kernel index ", r.kernel_key));
    }
    if (absl::Status bad = CheckIndices("arrival", i, r.chip_key,
                                        static_cast<uint64_t>(r.kernel_key), chips, kernels);
        !bad.ok()) {
      return bad;
    }
    // Its end (start + duration + carry) is read for the clock alignment: it must be a time.
    if (r.id == 0 || r.duration_ns < 0 || r.duration_ns > max_duration_ps / 1000 ||
        r.start_ns < 0 || r.start_ns > INT64_MAX - r.duration_ns - 1 || r.end_carry < -1 ||
        r.end_carry > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "arrival row ", i, " is no collective run: id ", r.id, ", start ", r.start_ns,
          " ns, duration ", r.duration_ns, " ns, end carry ", r.end_carry));
    }
  }
  return absl::OkStatus();
}

void StreamTally::CountEncoded(int chip, int64_t events) {
  if (chip < 0) return;
  const size_t c = static_cast<size_t>(chip);
  if (chip_events.size() <= c) chip_events.resize(c + 1);
  chip_events[c] += events;
  all_decoded = false;
}

void StreamTally::Count(int chip, const std::vector<uint32_t>& kernels,
                        const std::vector<uint64_t>& collective_ids) {
  if (chip < 0) return;
  const size_t c = static_cast<size_t>(chip);
  if (chip_events.size() <= c) chip_events.resize(c + 1);
  chip_events[c] += static_cast<int64_t>(kernels.size());
  if (kernel_events.size() <= c) kernel_events.resize(c + 1);
  if (collectives.size() <= c) collectives.resize(c + 1);
  std::vector<int64_t>& row = kernel_events[c];
  for (uint32_t k : kernels) {
    if (row.size() <= k) row.resize(k + size_t{1});
    ++row[k];
  }
  for (uint64_t id : collective_ids) collectives[c] += id != 0;
}

namespace {

// Each chip's executions in the statistics against the stream's.
absl::Status VerifyChipTotals(const HostSummary& summary, const StreamTally& tally) {
  std::vector<int64_t> counted(tally.chip_events.size());
  for (const trace::KernelStats& s : summary.stats) {
    const size_t chip = static_cast<size_t>(s.chip);
    if (chip >= counted.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "its statistics count executions on chip index ", chip, ", whose stream has none"));
    }
    counted[chip] += s.count;
  }
  for (size_t chip = 0; chip < counted.size(); ++chip) {
    if (counted[chip] != tally.chip_events[chip]) {
      return absl::InvalidArgumentError(
          absl::StrCat("its statistics count ", counted[chip], " executions on chip index ", chip,
                       " but the stream holds ", tally.chip_events[chip]));
    }
  }
  return absl::OkStatus();
}

// Each kernel's executions on each chip, and each chip's collective runs (decoded streams).
absl::Status VerifyKernels(const HostSummary& summary, const StreamTally& tally) {
  auto events = [&](size_t chip, size_t kernel) -> int64_t {
    if (chip >= tally.kernel_events.size() || kernel >= tally.kernel_events[chip].size()) return 0;
    return tally.kernel_events[chip][kernel];
  };
  for (const trace::KernelStats& s : summary.stats) {
    const size_t chip = static_cast<size_t>(s.chip);
    if (events(chip, s.kernel) != s.count) {
      return absl::InvalidArgumentError(
          absl::StrCat("its statistics count ", s.count, " executions of kernel id ", s.kernel + 1,
                       " on chip index ", chip, " but the stream holds ", events(chip, s.kernel)));
    }
  }
  std::vector<int64_t> arrivals(tally.collectives.size());
  for (const insight::CollectiveRun& r : summary.arrivals) {
    const size_t chip = static_cast<size_t>(r.chip_key);
    if (chip >= arrivals.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("it has arrivals on chip index ", chip, ", which ran no collective"));
    }
    ++arrivals[chip];
  }
  for (size_t chip = 0; chip < arrivals.size(); ++chip) {
    if (arrivals[chip] != tally.collectives[chip]) {
      return absl::InvalidArgumentError(
          absl::StrCat("it has ", arrivals[chip], " collective arrivals on chip index ", chip,
                       " but the stream holds ", tally.collectives[chip]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifySummary(const HostSummary& summary, const StreamTally& tally) {
  RETURN_IF_ERROR(VerifyChipTotals(summary, tally));
  return tally.all_decoded ? VerifyKernels(summary, tally) : absl::OkStatus();
}

}  // namespace podprof::analysis
