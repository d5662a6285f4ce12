// `collectives`, `kernels` and `telemetry`: what needs the whole pod at once, or is a stored
// row already.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "insight/collectives.h"
#include "sql/tables_internal.h"
#include "trace/ddsketch.h"

namespace podprof::sql::internal {
namespace {

// Rows made whole once per statement and shared by every cursor over them (a join opens the
// inner table once per outer row), each row a struct that `column` reads.
template <typename Row>
class RowsCursor : public Cursor {
 public:
  using ColumnFn = std::function<void(const Row&, int, ColumnSink&)>;
  RowsCursor(std::shared_ptr<const std::vector<Row>> rows, ColumnFn column, Budget& budget)
      : rows_(std::move(rows)), column_(std::move(column)), budget_(budget) {}

  absl::StatusOr<bool> Next() override {
    if ((++at_ & 4095) == 0) RETURN_IF_ERROR(budget_.CheckTime());
    return at_ < rows_->size();
  }
  void Column(int column, ColumnSink& out) const override { column_((*rows_)[at_], column, out); }

 private:
  const std::shared_ptr<const std::vector<Row>> rows_;
  const ColumnFn column_;
  Budget& budget_;
  size_t at_ = static_cast<size_t>(-1);
};

// ---- collectives

struct Arrival {
  uint64_t instance = 0;
  int64_t arrival_ns = 0, duration_ns = 0, step = -1;
  int64_t wait_ns = 0;  // until the instance's last arrival
  int32_t host = 0, chip = 0, kernel = 0, members = 0;
  bool last = false;
};

enum CollectiveColumn {
  kInstance,
  kColKernel,
  kColStep,
  kColHost,
  kColChip,
  kColDevice,
  kArrivalNs,
  kArrivalErrorNs,
  kColDurationNs,
  kColEndNs,
  kWaitNs,
  kLast,
  kMembers,
};

const std::vector<ColumnDef>& CollectiveColumns() {
  static const std::vector<ColumnDef> columns = {
      {"instance", ColumnType::kInteger},    {"kernel", ColumnType::kText},
      {"step", ColumnType::kInteger},        {"host", ColumnType::kText},
      {"chip", ColumnType::kInteger},        {"device", ColumnType::kText},
      {"arrival_ns", ColumnType::kInteger},  {"arrival_error_ns", ColumnType::kInteger},
      {"duration_ns", ColumnType::kInteger}, {"end_ns", ColumnType::kInteger},
      {"wait_ns", ColumnType::kInteger},     {"last", ColumnType::kInteger},
      {"members", ColumnType::kInteger},
  };
  return columns;
}

// The names behind an arrival's numbers.
struct ArrivalNames {
  std::vector<std::string> kernels, hosts;
  std::vector<std::string> device_kinds;  // by host: "TPU", "GPU"
  std::vector<int64_t> uncertainty_ns;    // by host
};

void ArrivalColumn(const ArrivalNames& names, const Arrival& a, int column, ColumnSink& out) {
  switch (column) {
    case kInstance:
      return out.Int(static_cast<int64_t>(a.instance));
    case kColKernel:
      return out.Text(names.kernels[a.kernel]);
    case kColStep:
      return a.step >= 0 ? out.Int(a.step) : out.Null();
    case kColHost:
      return out.Text(names.hosts[a.host]);
    case kColChip:
      return out.Int(a.chip);
    case kColDevice:
      return out.Text(absl::StrCat(names.device_kinds[a.host], ":", a.chip));
    case kArrivalNs:
      return out.Int(a.arrival_ns);
    case kArrivalErrorNs:
      return out.Int(names.uncertainty_ns[a.host]);
    case kColDurationNs:
      return out.Int(a.duration_ns);
    case kColEndNs:
      return out.Int(a.arrival_ns + a.duration_ns);
    case kWaitNs:
      return out.Int(a.wait_ns);
    case kLast:
      return out.Int(a.last ? 1 : 0);
    case kMembers:
      return out.Int(a.members);
    default:
      return out.Null();
  }
}

class CollectivesTable : public Table {
 public:
  CollectivesTable(const StoreSources& store, const storage::CaptureRow& capture)
      : store_(store), capture_(capture) {}
  const std::vector<ColumnDef>& columns() const override { return CollectiveColumns(); }

  absl::StatusOr<std::unique_ptr<Cursor>> Open(const Bounds&, Budget& budget) override {
    if (rows_ == nullptr) RETURN_IF_ERROR(Read(budget));
    auto names = names_;
    return std::make_unique<RowsCursor<Arrival>>(
        rows_,
        [names](const Arrival& a, int column, ColumnSink& out) {
          ArrivalColumn(*names, a, column, out);
        },
        budget);
  }

 private:
  // Every host's collective runs, grouped by instance: a wait is relative to the instance's
  // last arrival, which any host may hold, so no constraint narrows what is read.
  absl::Status Read(Budget& budget) {
    storage::HostSelection only;
    only.line_kinds = {trace::LineKind::kOps, trace::LineKind::kGpuStream, trace::LineKind::kSteps};
    only.counter_samples = std::set<std::string>();
    HostWalk walk(store_, capture_, HostsOf(capture_, std::nullopt), only, budget);
    auto rows = std::make_shared<std::vector<Arrival>>();
    auto names = std::make_shared<ArrivalNames>();
    absl::flat_hash_map<std::string, int32_t> kernel_ids;
    while (true) {
      ASSIGN_OR_RETURN(bool more, walk.Next());
      if (!more) break;
      const trace::HostCapture& host = walk.host().capture;
      const int32_t h = static_cast<int32_t>(names->hosts.size());
      names->hosts.push_back(host.host.name);
      names->uncertainty_ns.push_back(walk.host().row.clock_uncertainty_ns);
      names->device_kinds.push_back(
          host.host.chips.empty() ? "TPU" : DeviceName(host.host.chips[0]).substr(0, 3));
      std::vector<int64_t> chip_keys, kernel_keys;
      for (const trace::Chip& c : host.host.chips) chip_keys.push_back(c.ordinal);
      for (const trace::KernelDef& k : host.kernels) {
        auto [it, fresh] =
            kernel_ids.try_emplace(k.name, static_cast<int32_t>(names->kernels.size()));
        if (fresh) names->kernels.push_back(k.name);
        kernel_keys.push_back(it->second);
      }
      insight::CollectiveNames unused;
      const std::vector<insight::CollectiveRun> runs =
          insight::CollectiveRuns(host, h, chip_keys, kernel_keys, &unused);
      const int64_t bytes = static_cast<int64_t>(runs.size() * sizeof(Arrival));
      // Held until the statement ends, with the budget.
      RETURN_IF_ERROR(budget.Charge(bytes));
      for (const insight::CollectiveRun& r : runs) {
        Arrival a;
        a.instance = r.id;
        a.arrival_ns = r.start_ns;
        a.duration_ns = r.duration_ns;
        a.step = r.step;
        a.host = h;
        a.chip = r.chip_ordinal;
        a.kernel = static_cast<int32_t>(r.kernel_key);
        rows->push_back(a);
      }
    }
    std::sort(rows->begin(), rows->end(), [](const Arrival& x, const Arrival& y) {
      return x.instance != y.instance ? x.instance < y.instance : x.arrival_ns < y.arrival_ns;
    });
    for (size_t i = 0; i < rows->size();) {
      size_t j = i;
      while (j < rows->size() && (*rows)[j].instance == (*rows)[i].instance) ++j;
      const int64_t last = (*rows)[j - 1].arrival_ns;
      for (size_t k = i; k < j; ++k) {
        (*rows)[k].wait_ns = last - (*rows)[k].arrival_ns;
        (*rows)[k].members = static_cast<int32_t>(j - i);
      }
      (*rows)[j - 1].last = true;
      i = j;
    }
    rows_ = std::move(rows);
    names_ = std::move(names);
    return absl::OkStatus();
  }

  const StoreSources store_;
  const storage::CaptureRow& capture_;
  std::shared_ptr<const std::vector<Arrival>> rows_;
  std::shared_ptr<const ArrivalNames> names_;
};

// ---- kernels

struct KernelRow {
  storage::StatRow stat;
  double p50_ps = 0, p99_ps = 0;
};

enum KernelColumn {
  kKHost,
  kKChip,
  kKKernel,
  kKHloOp,
  kKModule,
  kKProgramId,
  kKHloCategory,
  kKHloFingerprint,
  kKCount,
  kKTotalNs,
  kKMeanNs,
  kKMinNs,
  kKMaxNs,
  kKP50Ns,
  kKP99Ns,
  kKFlops,
  kKMemoryAccessed,
  kKSourceLine,
};

const std::vector<ColumnDef>& KernelColumns() {
  static const std::vector<ColumnDef> columns = {
      {"host", ColumnType::kText},
      {"chip", ColumnType::kInteger},
      {"kernel", ColumnType::kText},
      {"hlo_op", ColumnType::kText},
      {"module", ColumnType::kText},
      {"program_id", ColumnType::kInteger},
      {"hlo_category", ColumnType::kText},
      {"hlo_fingerprint", ColumnType::kInteger},
      {"count", ColumnType::kInteger},
      {"total_ns", ColumnType::kReal},
      {"mean_ns", ColumnType::kReal},
      {"min_ns", ColumnType::kReal},
      {"max_ns", ColumnType::kReal},
      {"p50_ns", ColumnType::kReal},
      {"p99_ns", ColumnType::kReal},
      {"flops", ColumnType::kInteger},
      {"memory_accessed", ColumnType::kInteger},
      {"source_line", ColumnType::kText},
  };
  return columns;
}

void KernelColumnOf(const KernelRow& r, int column, ColumnSink& out) {
  const storage::StatRow& s = r.stat;
  switch (column) {
    case kKHost:
      return out.Text(s.host);
    case kKChip:
      return out.Int(s.chip);
    case kKKernel:
    case kKHloOp:
      return out.Text(s.kernel.op_name);
    case kKModule:
      return out.Text(s.kernel.module);
    case kKProgramId:
      return out.Int(static_cast<int64_t>(s.kernel.program_id));
    case kKHloCategory:
      return out.Text(s.kernel.category);
    case kKHloFingerprint:
      return s.kernel.hlo_hash ? out.Int(static_cast<int64_t>(s.kernel.hlo_hash)) : out.Null();
    case kKCount:
      return out.Int(s.count);
    case kKTotalNs:
      return out.Real(static_cast<double>(s.total_ps) / 1e3);
    case kKMeanNs:
      return s.count ? out.Real(static_cast<double>(s.total_ps) / 1e3 / s.count) : out.Null();
    case kKMinNs:
      return out.Real(static_cast<double>(s.min_ps) / 1e3);
    case kKMaxNs:
      return out.Real(static_cast<double>(s.max_ps) / 1e3);
    case kKP50Ns:
      return out.Real(r.p50_ps / 1e3);
    case kKP99Ns:
      return out.Real(r.p99_ps / 1e3);
    case kKFlops:
      return out.Int(s.kernel.flops);
    case kKMemoryAccessed:
      return out.Int(s.kernel.bytes_accessed);
    case kKSourceLine:
      return s.kernel.source.empty() ? out.Null() : out.Text(s.kernel.source);
    default:
      return out.Null();
  }
}

// Rows read whole from the store when first opened: the per-chip statistics and the telemetry
// are small next to the timelines.
template <typename Row>
class StoredRowsTable : public Table {
 public:
  using Reader = std::function<absl::StatusOr<std::vector<Row>>()>;
  StoredRowsTable(const std::vector<ColumnDef>& columns, Reader read,
                  void (*column)(const Row&, int, ColumnSink&))
      : columns_(columns), read_(std::move(read)), column_(column) {}
  const std::vector<ColumnDef>& columns() const override { return columns_; }
  absl::StatusOr<std::unique_ptr<Cursor>> Open(const Bounds&, Budget& budget) override {
    if (rows_ == nullptr) {
      ASSIGN_OR_RETURN(std::vector<Row> rows, read_());
      const int64_t bytes = static_cast<int64_t>(rows.size() * (sizeof(Row) + 64));
      RETURN_IF_ERROR(budget.Charge(bytes));  // held until the statement ends
      rows_ = std::make_shared<const std::vector<Row>>(std::move(rows));
    }
    return std::make_unique<RowsCursor<Row>>(rows_, column_, budget);
  }

 private:
  const std::vector<ColumnDef>& columns_;
  const Reader read_;
  void (*const column_)(const Row&, int, ColumnSink&);
  std::shared_ptr<const std::vector<Row>> rows_;
};

// ---- telemetry

enum TelemetryColumn {
  kTHost,
  kTChip,
  kTTimeNs,
  kTIntervalNs,
  kTSteps,
  kTStepMeanUs,
  kTStepMaxUs,
  kTDutyCycle,
  kTHbmUsedBytes,
  kTQueued,
  kTCollectives,
  kTCollectiveMeanUs,
  kTDcnTransfers,
  kTDcnP50Us,
  kTDcnP99Us,
};

const std::vector<ColumnDef>& TelemetryColumns() {
  static const std::vector<ColumnDef> columns = {
      {"host", ColumnType::kText},
      {"chip", ColumnType::kInteger},
      {"time_ns", ColumnType::kInteger},
      {"interval_ns", ColumnType::kInteger},
      {"steps", ColumnType::kInteger},
      {"step_mean_us", ColumnType::kReal},
      {"step_max_us", ColumnType::kReal},
      {"duty_cycle", ColumnType::kReal},
      {"hbm_used_bytes", ColumnType::kInteger},
      {"queued", ColumnType::kInteger},
      {"collectives", ColumnType::kInteger},
      {"collective_mean_us", ColumnType::kReal},
      {"dcn_transfers", ColumnType::kInteger},
      {"dcn_p50_us", ColumnType::kReal},
      {"dcn_p99_us", ColumnType::kReal},
  };
  return columns;
}

// -1 is the store's "not reported".
void RealOrNull(double v, ColumnSink& out) { v < 0 ? out.Null() : out.Real(v); }
void IntOrNull(int64_t v, ColumnSink& out) { v < 0 ? out.Null() : out.Int(v); }

void TelemetryColumnOf(const storage::TelemetryRecord& r, int column, ColumnSink& out) {
  switch (column) {
    case kTHost:
      return out.Text(r.host);
    case kTChip:
      return out.Int(r.chip);
    case kTTimeNs:
      return out.Int(r.time_ns);
    case kTIntervalNs:
      return out.Int(r.interval_ns);
    case kTSteps:
      return out.Int(r.steps);
    case kTStepMeanUs:
      return RealOrNull(r.step_mean_us, out);
    case kTStepMaxUs:
      return RealOrNull(r.step_max_us, out);
    case kTDutyCycle:
      return RealOrNull(r.duty_cycle_percent, out);
    case kTHbmUsedBytes:
      return IntOrNull(r.hbm_used_bytes, out);
    case kTQueued:
      return IntOrNull(r.queued, out);
    case kTCollectives:
      return out.Int(r.collectives);
    case kTCollectiveMeanUs:
      return RealOrNull(r.collective_mean_us, out);
    case kTDcnTransfers:
      return out.Int(r.dcn_transfers);
    case kTDcnP50Us:
      return RealOrNull(r.dcn_latency_p50_us, out);
    case kTDcnP99Us:
      return RealOrNull(r.dcn_latency_p99_us, out);
    default:
      return out.Null();
  }
}

// Telemetry intervals this long at most end after the capture and still overlap it.
constexpr int64_t kLongestIntervalNs = 600'000'000'000;

}  // namespace

std::unique_ptr<Table> MakeCollectivesTable(const StoreSources& store,
                                            const storage::CaptureRow& capture) {
  return std::make_unique<CollectivesTable>(store, capture);
}

std::unique_ptr<Table> MakeKernelsTable(const StoreSources& store,
                                        const storage::CaptureRow& capture) {
  storage::KernelQueries* kernels = store.kernels;
  const std::string id = capture.id;
  return std::make_unique<StoredRowsTable<KernelRow>>(
      KernelColumns(),
      [kernels, id]() -> absl::StatusOr<std::vector<KernelRow>> {
        storage::StatsQuery q;
        q.capture_id = id;
        q.group_by = storage::Grouping::kChip;
        ASSIGN_OR_RETURN(std::vector<storage::StatRow> stats, kernels->Stats(q));
        std::vector<KernelRow> rows;
        rows.reserve(stats.size());
        for (storage::StatRow& s : stats) {
          KernelRow r;
          r.p50_ps = s.sketch.Quantile(0.5);
          r.p99_ps = s.sketch.Quantile(0.99);
          r.stat = std::move(s);
          r.stat.sketch = trace::DDSketch();
          rows.push_back(std::move(r));
        }
        return rows;
      },
      &KernelColumnOf);
}

std::unique_ptr<Table> MakeTelemetryTable(const StoreSources& store,
                                          const storage::CaptureRow& capture) {
  storage::TelemetryTable* telemetry = store.telemetry;
  const int64_t start = capture.start_ns, end = capture.end_ns;
  const std::vector<std::string> hosts = HostsOf(capture, std::nullopt);
  return std::make_unique<StoredRowsTable<storage::TelemetryRecord>>(
      TelemetryColumns(),
      [telemetry, start, end, hosts]() -> absl::StatusOr<std::vector<storage::TelemetryRecord>> {
        storage::TelemetryFilter f;
        f.since_ns = start;
        f.until_ns = end + kLongestIntervalNs;
        f.hosts = hosts;
        ASSIGN_OR_RETURN(std::vector<storage::TelemetryRecord> rows, telemetry->Read(f));
        // The intervals that overlap the capture's window.
        rows.erase(std::remove_if(rows.begin(), rows.end(),
                                  [&](const storage::TelemetryRecord& r) {
                                    return r.time_ns - r.interval_ns > end;
                                  }),
                   rows.end());
        return rows;
      },
      &TelemetryColumnOf);
}

}  // namespace podprof::sql::internal
