// `events` and `counters`: the capture's timelines and counter samples, read one host at a time.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "insight/collectives.h"
#include "sql/tables_internal.h"

namespace podprof::sql::internal {

absl::StatusOr<bool> HostWalk::Next() {
  Release();
  if (next_ >= hosts_.size()) return false;
  RETURN_IF_ERROR(budget_.CheckTime());
  const std::string& name = hosts_[next_++];
  selection_.hosts = {name};
  bool found = false;
  RETURN_IF_ERROR(
      store_.captures->ForEachHost(capture_.id, selection_, [&](storage::StoredHost& h) {
        host_ = std::move(h);
        found = true;
        return absl::OkStatus();
      }));
  if (!found) host_ = storage::StoredHost();
  const int64_t bytes = static_cast<int64_t>(host_.capture.KeptBytes());
  RETURN_IF_ERROR(budget_.Charge(bytes));
  charged_ = bytes;
  return true;
}

void HostWalk::Release() {
  budget_.Charge(-charged_).IgnoreError();  // giving back never fails
  charged_ = 0;
  host_ = storage::StoredHost();
}

std::vector<std::string> HostsOf(const storage::CaptureRow& capture,
                                 const std::optional<std::string>& only) {
  std::vector<std::string> hosts;
  for (const storage::HostRow& h : capture.host_rows) {
    if (!only.has_value() || *only == h.host) hosts.push_back(h.host);
  }
  return hosts;
}

std::string DeviceName(const trace::Chip& chip) {
  const char* kind = chip.kind == trace::DeviceKind::kGpu   ? "GPU"
                     : chip.kind == trace::DeviceKind::kCpu ? "CPU"
                                                            : "TPU";
  return absl::StrCat(kind, ":", chip.ordinal);
}

namespace {

// How often a cursor looks at the clock, in rows it passes over.
constexpr int64_t kTimeCheckRows = 4096;

enum EventColumn {
  kHost,
  kChip,
  kDie,
  kDevice,
  kLine,
  kCategory,
  kKernel,
  kHloOp,
  kModule,
  kProgramId,
  kHloModule,
  kHloFingerprint,
  kHloCategory,
  kStep,
  kStartNs,
  kStartErrorNs,
  kEndNs,
  kDurationNs,
  kDurationPs,
  kSelfTimeNs,
  kCollective,
  kFlops,
  kMemoryAccessed,
  kSourceLine,
  kTfOpName,
};

const std::vector<ColumnDef>& EventColumns() {
  static const std::vector<ColumnDef> columns = {
      {"host", ColumnType::kText, true},
      {"chip", ColumnType::kInteger, true},
      {"die", ColumnType::kInteger},
      {"device", ColumnType::kText},
      {"line", ColumnType::kText, true},
      {"category", ColumnType::kText, true},
      {"kernel", ColumnType::kText, true},
      {"hlo_op", ColumnType::kText, true},
      {"module", ColumnType::kText},
      {"program_id", ColumnType::kInteger},
      {"hlo_module", ColumnType::kText},
      {"hlo_fingerprint", ColumnType::kInteger},
      {"hlo_category", ColumnType::kText},
      {"step", ColumnType::kInteger},
      {"start_ns", ColumnType::kInteger, true},
      {"start_error_ns", ColumnType::kInteger},
      {"end_ns", ColumnType::kInteger},
      {"duration_ns", ColumnType::kInteger},
      {"duration_ps", ColumnType::kInteger},
      {"self_time_ns", ColumnType::kInteger},
      {"collective", ColumnType::kInteger},
      {"flops", ColumnType::kInteger},
      {"memory_accessed", ColumnType::kInteger},
      {"source_line", ColumnType::kText},
      {"tf_op_name", ColumnType::kText},
  };
  return columns;
}

// Each event's time less its direct children's (events inside it on the same line): XProf's
// self time on lines whose events nest.
std::vector<int64_t> SelfTimes(const trace::EventBlock& b) {
  std::vector<int64_t> self(b.duration_ps.begin(), b.duration_ps.end());
  std::vector<size_t> order(b.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return b.start_ps[x] != b.start_ps[y] ? b.start_ps[x] < b.start_ps[y]
                                          : b.duration_ps[x] > b.duration_ps[y];
  });
  std::vector<size_t> open;  // the events holding the current one, innermost last
  for (size_t e : order) {
    const int64_t start = b.start_ps[e], end = start + b.duration_ps[e];
    while (!open.empty() && b.start_ps[open.back()] + b.duration_ps[open.back()] <= start) {
      open.pop_back();
    }
    if (!open.empty() && end <= b.start_ps[open.back()] + b.duration_ps[open.back()]) {
      self[open.back()] -= b.duration_ps[e];
    }
    open.push_back(e);
  }
  return self;
}

class EventsCursor : public Cursor {
 public:
  EventsCursor(const StoreSources& store, const storage::CaptureRow& capture, const Bounds& bounds,
               Budget& budget)
      : budget_(budget),
        walk_(store, capture, HostsOf(capture, bounds.Text(kHost)), Selection(bounds), budget),
        line_(bounds.Text(kLine) ? bounds.Text(kLine) : bounds.Text(kCategory)),
        kernel_(bounds.Text(kKernel) ? bounds.Text(kKernel) : bounds.Text(kHloOp)),
        min_ns_(bounds.Min(kStartNs, INT64_MIN)),
        max_ns_(bounds.Max(kStartNs, INT64_MAX)) {}

  absl::StatusOr<bool> Next() override {
    while (true) {
      if (!loaded_) {
        ASSIGN_OR_RETURN(bool more, walk_.Next());
        if (!more) return false;
        StartHost();
      }
      const auto& blocks = walk_.host().capture.blocks;
      if (block_ < blocks.size() && ++event_ < blocks[block_].size()) {
        if (++passed_ % kTimeCheckRows == 0) RETURN_IF_ERROR(budget_.CheckTime());
        if (Wanted(blocks[block_], event_)) return true;
        continue;
      }
      // The next block this query wants, or the next host.
      event_ = static_cast<size_t>(-1);
      self_.clear();
      block_ = block_ < blocks.size() ? block_ + 1 : block_;
      while (block_ < blocks.size() && !WantedBlock(blocks[block_])) ++block_;
      if (block_ >= blocks.size()) loaded_ = false;
    }
  }

  void Column(int column, ColumnSink& out) const override {
    const trace::HostCapture& host = walk_.host().capture;
    const trace::EventBlock& b = host.blocks[block_];
    const size_t i = event_;
    const trace::Chip& chip = host.host.chips[b.chip];
    const trace::KernelDef* k =
        b.kernel[i] < host.kernels.size() ? &host.kernels[b.kernel[i]] : nullptr;
    const int64_t start = b.base_ns + b.start_ps[i] / 1000;
    switch (column) {
      case kHost:
        return out.Text(host.host.name);
      case kChip:
        return out.Int(chip.ordinal);
      case kDie:
        return out.Null();
      case kDevice:
        return out.Text(DeviceName(chip));
      case kLine:
      case kCategory:
        return out.Text(b.line);
      case kKernel:
      case kHloOp:
        return k ? out.Text(k->name) : out.Null();
      case kModule:
        return k ? out.Text(k->module) : out.Null();
      case kProgramId:
        return k ? out.Int(static_cast<int64_t>(k->program_id)) : out.Null();
      case kHloModule:
        return k && !k->module.empty() ? out.Text(absl::StrCat(k->module, "(", k->program_id, ")"))
                                       : out.Null();
      case kHloFingerprint:
        return k && k->hlo_hash ? out.Int(static_cast<int64_t>(k->hlo_hash)) : out.Null();
      case kHloCategory:
        return k ? out.Text(k->category) : out.Null();
      case kStep: {
        const int64_t step = insight::StepAt(steps_[b.chip], start);
        return step >= 0 ? out.Int(step) : out.Null();
      }
      case kStartNs:
        return out.Int(start);
      case kStartErrorNs:
        return out.Int(uncertainty_ns_);
      case kEndNs:
        return out.Int(b.base_ns + (b.start_ps[i] + b.duration_ps[i]) / 1000);
      case kDurationNs:
        return out.Int(b.duration_ps[i] / 1000);
      case kDurationPs:
        return out.Int(b.duration_ps[i]);
      case kSelfTimeNs:
        if (self_.empty()) self_ = SelfTimes(b);
        return out.Int(self_[i] / 1000);
      case kCollective:
        return b.collective[i] ? out.Int(static_cast<int64_t>(b.collective[i])) : out.Null();
      case kFlops:
        return k ? out.Int(k->flops) : out.Null();
      case kMemoryAccessed:
        return k ? out.Int(k->bytes_accessed) : out.Null();
      case kSourceLine:
        return k && !k->source.empty() ? out.Text(k->source) : out.Null();
      case kTfOpName:
        return k && !k->tf_op.empty() ? out.Text(k->tf_op) : out.Null();
      default:
        return out.Null();
    }
  }

 private:
  static storage::HostSelection Selection(const Bounds& bounds) {
    storage::HostSelection s;
    if (auto chip = bounds.Int(kChip)) s.chip_ordinals = {static_cast<int>(*chip)};
    s.counter_samples = std::set<std::string>();  // listed, never read
    return s;
  }

  void StartHost() {
    const trace::HostCapture& host = walk_.host().capture;
    steps_ = insight::StepsByChip(host);
    uncertainty_ns_ = walk_.host().row.clock_uncertainty_ns;
    kernel_ok_.assign(host.kernels.size(), !kernel_.has_value());
    if (kernel_) {
      for (size_t k = 0; k < host.kernels.size(); ++k)
        kernel_ok_[k] = host.kernels[k].name == *kernel_;
    }
    block_ = 0;
    event_ = static_cast<size_t>(-1);
    self_.clear();
    while (block_ < host.blocks.size() && !WantedBlock(host.blocks[block_])) ++block_;
    loaded_ = block_ < host.blocks.size();
  }

  bool WantedBlock(const trace::EventBlock& b) const {
    return (!line_ || b.line == *line_) && b.chip >= 0 &&
           static_cast<size_t>(b.chip) < walk_.host().capture.host.chips.size();
  }

  bool Wanted(const trace::EventBlock& b, size_t i) const {
    if (kernel_ && (b.kernel[i] >= kernel_ok_.size() || !kernel_ok_[b.kernel[i]])) return false;
    const int64_t start = b.base_ns + b.start_ps[i] / 1000;
    return start >= min_ns_ && start <= max_ns_;
  }

  Budget& budget_;
  HostWalk walk_;
  const std::optional<std::string> line_, kernel_;
  const int64_t min_ns_, max_ns_;
  bool loaded_ = false;
  size_t block_ = 0, event_ = 0;
  int64_t passed_ = 0;
  std::vector<insight::ChipSteps> steps_;
  int64_t uncertainty_ns_ = 0;
  std::vector<char> kernel_ok_;
  mutable std::vector<int64_t> self_;  // of the current block, made when first asked for
};

enum CounterColumn { kCHost, kCChip, kCDie, kCDevice, kCCounter, kCTimeNs, kCTimeErrorNs, kCValue };

const std::vector<ColumnDef>& CounterColumns() {
  static const std::vector<ColumnDef> columns = {
      {"host", ColumnType::kText, true},       {"chip", ColumnType::kInteger, true},
      {"die", ColumnType::kInteger},           {"device", ColumnType::kText},
      {"counter", ColumnType::kText, true},    {"time_ns", ColumnType::kInteger, true},
      {"time_error_ns", ColumnType::kInteger}, {"value", ColumnType::kReal},
  };
  return columns;
}

// The die of a sampled performance counter's series (`perf/die1_...`); -1 for any other.
int DieOf(const std::string& name) {
  constexpr char kPrefix[] = "perf/die";
  if (!absl::StartsWith(name, kPrefix)) return -1;
  const size_t end = name.find('_', sizeof(kPrefix) - 1);
  int die = -1;
  if (end == std::string::npos ||
      !absl::SimpleAtoi(name.substr(sizeof(kPrefix) - 1, end - (sizeof(kPrefix) - 1)), &die)) {
    return -1;
  }
  return die;
}

class CountersCursor : public Cursor {
 public:
  CountersCursor(const StoreSources& store, const storage::CaptureRow& capture,
                 const Bounds& bounds, Budget& budget)
      : budget_(budget),
        walk_(store, capture, HostsOf(capture, bounds.Text(kCHost)), Selection(bounds), budget),
        counter_(bounds.Text(kCCounter)),
        min_ns_(bounds.Min(kCTimeNs, INT64_MIN)),
        max_ns_(bounds.Max(kCTimeNs, INT64_MAX)) {}

  absl::StatusOr<bool> Next() override {
    while (true) {
      if (!loaded_) {
        ASSIGN_OR_RETURN(bool more, walk_.Next());
        if (!more) return false;
        loaded_ = true;
        series_ = 0;
        sample_ = static_cast<size_t>(-1);
        uncertainty_ns_ = walk_.host().row.clock_uncertainty_ns;
      }
      const auto& all = walk_.host().capture.counters;
      if (series_ < all.size()) {
        const trace::CounterSeries& s = all[series_];
        if ((!counter_ || s.name == *counter_) && ++sample_ < s.time_ns.size()) {
          if (++passed_ % kTimeCheckRows == 0) RETURN_IF_ERROR(budget_.CheckTime());
          if (s.time_ns[sample_] >= min_ns_ && s.time_ns[sample_] <= max_ns_) return true;
          continue;
        }
        ++series_;
        sample_ = static_cast<size_t>(-1);
        continue;
      }
      loaded_ = false;
    }
  }

  void Column(int column, ColumnSink& out) const override {
    const trace::HostCapture& host = walk_.host().capture;
    const trace::CounterSeries& s = host.counters[series_];
    switch (column) {
      case kCHost:
        return out.Text(host.host.name);
      case kCChip:
        return out.Int(host.host.chips[s.chip].ordinal);
      case kCDie: {
        const int die = DieOf(s.name);
        return die >= 0 ? out.Int(die) : out.Null();
      }
      case kCDevice:
        return out.Text(DeviceName(host.host.chips[s.chip]));
      case kCCounter:
        return out.Text(s.name);
      case kCTimeNs:
        return out.Int(s.time_ns[sample_]);
      case kCTimeErrorNs:
        return out.Int(uncertainty_ns_);
      case kCValue:
        return out.Real(s.value[sample_]);
      default:
        return out.Null();
    }
  }

 private:
  static storage::HostSelection Selection(const Bounds& bounds) {
    storage::HostSelection s;
    s.timelines = false;
    if (auto chip = bounds.Int(kCChip)) s.chip_ordinals = {static_cast<int>(*chip)};
    if (auto name = bounds.Text(kCCounter)) s.counter_samples = std::set<std::string>{*name};
    return s;
  }

  Budget& budget_;
  HostWalk walk_;
  const std::optional<std::string> counter_;
  const int64_t min_ns_, max_ns_;
  bool loaded_ = false;
  size_t series_ = 0, sample_ = 0;
  int64_t passed_ = 0;
  int64_t uncertainty_ns_ = 0;
};

template <typename C, const std::vector<ColumnDef>& (*kColumns)()>
class HostTable : public Table {
 public:
  HostTable(const StoreSources& store, const storage::CaptureRow& capture)
      : store_(store), capture_(capture) {}
  const std::vector<ColumnDef>& columns() const override { return kColumns(); }
  absl::StatusOr<std::unique_ptr<Cursor>> Open(const Bounds& bounds, Budget& budget) override {
    return std::make_unique<C>(store_, capture_, bounds, budget);
  }

 private:
  const StoreSources store_;
  const storage::CaptureRow& capture_;
};

}  // namespace

std::unique_ptr<Table> MakeEventsTable(const StoreSources& store,
                                       const storage::CaptureRow& capture) {
  return std::make_unique<HostTable<EventsCursor, EventColumns>>(store, capture);
}

std::unique_ptr<Table> MakeCountersTable(const StoreSources& store,
                                         const storage::CaptureRow& capture) {
  return std::make_unique<HostTable<CountersCursor, CounterColumns>>(store, capture);
}

}  // namespace podprof::sql::internal
