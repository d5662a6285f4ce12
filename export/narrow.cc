#include "export/narrow.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "trace/columns.h"

namespace podprof::exporter {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Instant `t_ns` in ps after `base_ns`, saturating: the window's open ends are kMin and kMax,
// and a block's base may be 0 (a capture without a profile start).
int64_t RelativePs(int64_t t_ns, int64_t base_ns) {
  if (t_ns == kMin || t_ns == kMax) return t_ns;
  int64_t d;
  if (__builtin_sub_overflow(t_ns, base_ns, &d)) return t_ns < base_ns ? kMin : kMax;
  if (d > kMax / 1000) return kMax;
  if (d < kMin / 1000) return kMin;
  return d * 1000;
}

// Keeps the events of `b` for which `keep(i)` holds, in order.
template <typename Keep>
void KeepEvents(trace::EventBlock* b, Keep keep) {
  size_t j = 0;
  for (size_t i = 0; i < b->size(); ++i) {
    if (!keep(i)) continue;
    b->start_ps[j] = b->start_ps[i];
    b->duration_ps[j] = b->duration_ps[i];
    b->kernel[j] = b->kernel[i];
    b->collective[j] = b->collective[i];
    ++j;
  }
  b->start_ps.resize(j);
  b->duration_ps.resize(j);
  b->kernel.resize(j);
  b->collective.resize(j);
}

// Where the kept kernels of one chip ran, ns since the epoch, for the scopes inside them.
// Kernels on one line do not overlap, so a scope is inside a kept kernel when the last kernel
// that began at or before it has not ended yet.
class KeptSpans {
 public:
  void Add(int64_t begin_ns, int64_t end_ns) { spans_.emplace_back(begin_ns, end_ns); }
  void Sort() { std::sort(spans_.begin(), spans_.end()); }
  bool Covers(int64_t t_ns) const {
    auto it = std::upper_bound(spans_.begin(), spans_.end(), std::make_pair(t_ns, kMax));
    return it != spans_.begin() && std::prev(it)->second >= t_ns;
  }

 private:
  std::vector<std::pair<int64_t, int64_t>> spans_;
};

// Removes the kernel definitions no event of `capture` uses, renumbering the events' kernels.
void DropUnusedKernels(trace::HostCapture* capture) {
  std::vector<uint32_t> remap(capture->kernels.size(), UINT32_MAX);
  for (const trace::EventBlock& b : capture->blocks) {
    for (uint32_t k : b.kernel) {
      if (k < remap.size()) remap[k] = 0;
    }
  }
  uint32_t next = 0;
  for (size_t k = 0; k < remap.size(); ++k) {
    if (remap[k] == 0) {
      if (next != k) capture->kernels[next] = std::move(capture->kernels[k]);
      remap[k] = next++;
    }
  }
  if (next == capture->kernels.size()) return;
  capture->kernels.resize(next);
  for (trace::EventBlock& b : capture->blocks) {
    for (uint32_t& k : b.kernel) {
      if (k < remap.size()) k = remap[k];
    }
  }
}

// The scaled share `share` of `n`, rounded up: an estimate that errs large.
uint64_t Share(uint64_t n, double share) {
  return static_cast<uint64_t>(std::ceil(static_cast<double>(n) * share));
}

}  // namespace

absl::StatusOr<Narrower> Narrower::Create(Selection selection) {
  if (selection.from_ns >= selection.to_ns) {
    return absl::InvalidArgumentError("the window is empty: --from must be before --to");
  }
  Narrower n(std::move(selection));
  if (!n.selection_.kernel_regex.empty()) {
    ASSIGN_OR_RETURN(UserPattern kernels,
                     CompileUserPattern("--kernels", n.selection_.kernel_regex));
    n.kernels_ = std::move(kernels);
  }
  return n;
}

bool Narrower::KeepsEverything() const {
  return selection_.from_ns == kMin && selection_.to_ns == kMax && selection_.hosts.empty() &&
         selection_.chips.empty() && !kernels_.has_value();
}

bool Narrower::WantsHost(const std::string& host) const {
  return selection_.hosts.empty() || selection_.hosts.count(host) > 0;
}

bool Narrower::WantsChip(int ordinal) const {
  return selection_.chips.empty() || selection_.chips.count(ordinal) > 0;
}

bool Narrower::WantsKernel(const std::string& module, const std::string& name) {
  if (!kernels_.has_value()) return true;
  auto [it, fresh] = kernel_matches_.try_emplace({module, name}, false);
  if (fresh) {
    it->second = kernels_->Search(name) || (!module.empty() && kernels_->Search(module));
  }
  return it->second;
}

std::vector<char> Narrower::KernelsKept(const trace::HostCapture& capture) {
  std::vector<char> keep(capture.kernels.size(), 1);
  if (!kernels_.has_value()) return keep;
  for (size_t k = 0; k < keep.size(); ++k) {
    keep[k] = WantsKernel(capture.kernels[k].module, capture.kernels[k].name);
  }
  return keep;
}

absl::Status Narrower::Apply(trace::HostCapture* capture) {
  if (KeepsEverything()) return absl::OkStatus();
  auto chip_wanted = [&](int chip) {
    const bool known = chip >= 0 && chip < static_cast<int>(capture->host.chips.size());
    return WantsChip(known ? capture->host.chips[chip].ordinal : chip);
  };
  auto& blocks = capture->blocks;
  blocks.erase(std::remove_if(blocks.begin(), blocks.end(),
                              [&](const trace::EventBlock& b) { return !chip_wanted(b.chip); }),
               blocks.end());
  auto& counters = capture->counters;
  counters.erase(
      std::remove_if(counters.begin(), counters.end(),
                     [&](const trace::CounterSeries& s) { return !chip_wanted(s.chip); }),
      counters.end());
  NarrowEvents(capture);
  blocks.erase(std::remove_if(blocks.begin(), blocks.end(),
                              [](const trace::EventBlock& b) { return b.size() == 0; }),
               blocks.end());
  RETURN_IF_ERROR(NarrowCounters(capture));
  DropUnusedKernels(capture);
  return absl::OkStatus();
}

void Narrower::NarrowEvents(trace::HostCapture* capture) {
  const std::vector<char> kernel_kept = KernelsKept(*capture);
  // Outside the window: begins at or after its end, or ends at or before its start (an
  // instant at its start is inside).
  auto outside = [this](const trace::EventBlock& b, size_t i) {
    const int64_t lo = RelativePs(selection_.from_ns, b.base_ns);
    const int64_t hi = RelativePs(selection_.to_ns, b.base_ns);
    const int64_t start = b.start_ps[i], end = start + std::max<int64_t>(b.duration_ps[i], 0);
    return start >= hi || (end <= lo && start < lo);
  };
  std::map<int, KeptSpans> spans;  // per chip: where kept kernels ran, for their scopes
  for (trace::EventBlock& b : capture->blocks) {
    if (b.kind == trace::LineKind::kScopes) continue;
    const bool kernel_line = trace::IsKernelLine(b.kind);
    KeepEvents(&b, [&](size_t i) {
      if (outside(b, i)) return false;
      if (!kernel_line) return true;
      const uint32_t k = b.kernel[i];
      const bool kept = k >= kernel_kept.size() || kernel_kept[k] != 0;
      if (kept && kernels_.has_value()) {
        const int64_t start = b.start_ps[i], dur = std::max<int64_t>(b.duration_ps[i], 0);
        spans[b.chip].Add(b.base_ns + start / 1000, b.base_ns + (start + dur + 999) / 1000);
      }
      return kept;
    });
  }
  for (auto& [chip, s] : spans) s.Sort();
  for (trace::EventBlock& b : capture->blocks) {
    if (b.kind != trace::LineKind::kScopes) continue;
    const KeptSpans* in = kernels_.has_value() ? &spans[b.chip] : nullptr;
    KeepEvents(&b, [&](size_t i) {
      return !outside(b, i) && (in == nullptr || in->Covers(b.base_ns + b.start_ps[i] / 1000));
    });
  }
}

absl::Status Narrower::NarrowCounters(trace::HostCapture* capture) const {
  if (selection_.from_ns == kMin && selection_.to_ns == kMax) return absl::OkStatus();
  RETURN_IF_ERROR(trace::DecodeEncodedSeries(capture));
  for (trace::CounterSeries& s : capture->counters) {
    size_t j = 0;
    for (size_t i = 0; i < s.time_ns.size(); ++i) {
      if (s.time_ns[i] < selection_.from_ns || s.time_ns[i] >= selection_.to_ns) continue;
      s.time_ns[j] = s.time_ns[i];
      s.value[j] = s.value[i];
      ++j;
    }
    s.time_ns.resize(j);
    s.value.resize(j);
    s.encoded.clear();  // it held the samples before narrowing
  }
  auto& counters = capture->counters;
  counters.erase(std::remove_if(counters.begin(), counters.end(),
                                [](const trace::CounterSeries& s) { return s.value.empty(); }),
                 counters.end());
  return absl::OkStatus();
}

void Narrower::DropUnselectedChips(trace::HostCapture* capture) const {
  if (selection_.chips.empty()) return;
  std::vector<trace::Chip>& chips = capture->host.chips;
  std::vector<int> remap(chips.size(), -1);
  size_t next = 0;
  for (size_t i = 0; i < chips.size(); ++i) {
    if (!WantsChip(chips[i].ordinal)) continue;
    remap[i] = static_cast<int>(next);
    if (next != i) chips[next] = std::move(chips[i]);
    ++next;
  }
  chips.resize(next);
  auto renumber = [&](int chip) {
    return chip >= 0 && chip < static_cast<int>(remap.size()) ? remap[chip] : chip;
  };
  for (trace::EventBlock& b : capture->blocks) b.chip = renumber(b.chip);
  for (trace::CounterSeries& s : capture->counters) s.chip = renumber(s.chip);
}

JsonEstimate EstimateChromeJson(const std::vector<ChipVolume>& volumes, int64_t capture_start_ns,
                                int64_t capture_end_ns, Narrower& narrower) {
  const Selection& sel = narrower.selection();
  double share = 1;
  if (capture_end_ns > capture_start_ns) {
    const int64_t from = std::max(sel.from_ns, capture_start_ns);
    const int64_t to = std::min(sel.to_ns, capture_end_ns);
    share = to > from ? static_cast<double>(to - from) /
                            static_cast<double>(capture_end_ns - capture_start_ns)
                      : 0;
  }
  JsonEstimate e;
  uint64_t chips = 0;
  for (const ChipVolume& v : volumes) {
    if (!narrower.WantsHost(v.host) || !narrower.WantsChip(v.ordinal)) continue;
    ++chips;
    uint64_t events = v.events;
    if (!sel.kernel_regex.empty()) {
      // Kernel-line events of the kernels selected, plus every other line's (scopes of the
      // kernels left out included: the estimate errs large).
      uint64_t all = 0, kept = 0;
      for (const auto& [kernel, n] : v.kernel_events) {
        all += n;
        if (narrower.WantsKernel(kernel.first, kernel.second)) kept += n;
      }
      events = (events > all ? events - all : 0) + kept;
    }
    e.events += Share(events, share);
    e.counter_samples += Share(v.counter_samples, share);
  }
  // The metadata of each chip's tracks (names, sort order) is a few hundred bytes.
  e.bytes =
      e.events * kJsonBytesPerEvent + e.counter_samples * kJsonBytesPerCounterSample + chips * 1000;
  return e;
}

std::string JsonTooLargeMessage(const std::string& capture_id, uint64_t estimate_bytes,
                                uint64_t limit_bytes) {
  return absl::StrCat("the Chrome JSON of ", capture_id, " would be about ",
                      HumanBytes(estimate_bytes), ", over the ", HumanBytes(limit_bytes),
                      " limit (--max-size): viewers cannot load it; export --format perfetto, "
                      "or narrow it with --from/--to, --hosts, --chips or --kernels");
}

std::string HumanBytes(uint64_t bytes) {
  if (bytes < 1000) return absl::StrCat(bytes, " B");
  const char* units[] = {"kB", "MB", "GB", "TB", "PB"};
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  // "256 MB" for a round limit, "3.7 GB" for an estimate.
  const bool whole = v >= 100 || std::fabs(v - std::round(v)) < 0.05;
  // Two calls, not one with a chosen format: StrFormat checks its format at compile time.
  return whole ? absl::StrFormat("%.0f %s", v, units[u]) : absl::StrFormat("%.1f %s", v, units[u]);
}

}  // namespace podprof::exporter
