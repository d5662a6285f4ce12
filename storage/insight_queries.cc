#include "storage/insight_queries.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "storage/kernel_counter_block.h"
#include "storage/store_internal.h"

namespace podprof::storage {
namespace {

// Joins a kernel_scopes row `s` to its chip `ch`, host `h` and the host's outcome: scope rows
// are written with the host's data, ahead of its outcome, and are shown once that is (as
// kernel_counters are).
constexpr char kVisibleScopes[] =
    "JOIN chips ch ON ch.id = s.chip_id JOIN hosts h ON h.id = ch.host_id JOIN capture_hosts o ON "
    "o.capture = s.capture AND o.host_id = ch.host_id";

// The generation of each chip of capture `seq` by (host, ordinal), when `per_chip` (else
// none); `*first` gets the first chip's, what pod-wide figures are judged with. Pod-wide rows
// need only that one: reading every chip (8,960 of a v5p pod) on each pod-wide query was most
// of what the queries made during a pod's ingest cost (docs/SCALE.md).
absl::StatusOr<std::map<std::pair<std::string, int>, std::string>> ChipGenerations(
    Connection& c, int64_t seq, bool per_chip, std::string* first) {
  ASSIGN_OR_RETURN(auto gens,
                   Statement::Prepare(c, per_chip ? "SELECT h.name, ch.ordinal, "
                                                    "ch.generation FROM chips ch JOIN "
                                                    "hosts h ON h.id = ch.host_id WHERE "
                                                    "ch.capture = ? ORDER BY ch.id"
                                                  : "SELECT '', -1, generation FROM chips "
                                                    "WHERE capture = ? ORDER BY id LIMIT 1"));
  gens->Bind(1, seq);
  std::map<std::pair<std::string, int>, std::string> out;
  first->clear();
  bool seen = false;
  RETURN_IF_ERROR(gens->ForEachRow([&](const Statement& row) {
    if (!seen) *first = row.Text(2);
    seen = true;
    if (per_chip) out[{row.Text(0), static_cast<int>(row.Int(1))}] = row.Text(2);
    return absl::OkStatus();
  }));
  return out;
}

// A capture's insight rows as they are gathered: per chip keyed by (host, ordinal, kernel),
// over the pod by the kernel alone (host "", chip -1). Each query below reads rows whose first
// three columns are that key.
class InsightRows {
 public:
  InsightRows(Connection& c, int64_t seq, bool per_chip) : c_(c), seq_(seq), per_chip_(per_chip) {}

  // Counter attributions: per chip from each host's block (and the per-chip rows of captures
  // stored before blocks were), over the pod from the roll-ups written with them.
  absl::Status AddCounters() {
    ASSIGN_OR_RETURN(
        auto s,
        Statement::Prepare(
            c_, per_chip_ ? "SELECT h.name, ch.ordinal, k.kernel_id, k.name, k.cumulative, "
                            "k.integral, k.covered_ps FROM kernel_counters k "
                            "JOIN chips ch ON ch.id = k.chip_id JOIN hosts h ON h.id = ch.host_id "
                            // Written with the host's data, ahead of its outcome: shown once
                            // that is (capture_hosts), like the rest of the capture.
                            "JOIN capture_hosts o ON o.capture = k.capture AND o.host_id = h.id "
                            "WHERE k.capture = ?"
                          : "SELECT '', -1, kernel_id, name, cumulative, integral, covered_ps "
                            "FROM kernel_counter_rollups WHERE capture = ?"));
    s->Bind(1, seq_);
    RETURN_IF_ERROR(s->ForEachRow([&](const Statement& row) {
      RowReader col(row);
      const std::string host = col.Text();
      const int chip = col.Int32();
      const int64_t kernel = col.Int();
      const std::string name = col.Text();
      const bool cumulative = col.Bool();
      const double integral = col.Double();
      Add(RowOf(host, chip, kernel), name, cumulative, integral, col.Int());
      return absl::OkStatus();
    }));
    if (!per_chip_) return absl::OkStatus();
    ASSIGN_OR_RETURN(auto blocks,
                     Statement::Prepare(c_,
                                        "SELECT h.name, b.data FROM kernel_counter_blocks b "
                                        "JOIN hosts h ON h.id = b.host_id JOIN capture_hosts o "
                                        "ON o.capture = b.capture AND o.host_id = b.host_id "
                                        "WHERE b.capture = ?"));
    blocks->Bind(1, seq_);
    return blocks->ForEachRow([&](const Statement& row) -> absl::Status {
      const std::string host = row.Text(0);
      absl::StatusOr<std::vector<internal::StoredKernelCounter>> rows =
          internal::DecodeKernelCounterBlock(row.Blob(1));
      if (!rows.ok()) {
        return absl::DataLossError(absl::StrCat("host ", host, ": ", rows.status().message()));
      }
      for (const internal::StoredKernelCounter& k : *rows) {
        Add(RowOf(host, k.chip_ordinal, k.kernel_id), k.counter, k.cumulative, k.integral,
            k.covered_ps);
      }
      return absl::OkStatus();
    });
  }

  // Time in the scopes `sync` names per (chip, kernel), or per kernel over the pod.
  absl::Status AddSyncWaits(const ScopeName& sync) {
    ASSIGN_OR_RETURN(
        auto s,
        Statement::Prepare(
            c_,
            absl::StrCat(per_chip_ ? "SELECT h.name, ch.ordinal" : "SELECT '', -1",
                         ", s.kernel_id, CAST(TOTAL(s.total_ps) AS INTEGER) FROM kernel_scopes s ",
                         kVisibleScopes,
                         " WHERE s.capture = ?1 AND s.line = ?2 AND s.name = ?3 "
                         "GROUP BY ",
                         per_chip_ ? "s.chip_id, s.kernel_id" : "s.kernel_id")));
    s->Bind(1, seq_).Bind(2, sync.line).Bind(3, sync.name);
    return s->ForEachRow([&](const Statement& row) {
      RowOf(row).sync_wait_ps = row.Int(3);
      return absl::OkStatus();
    });
  }

  // Waiting in collectives.
  absl::Status AddWaits() {
    ASSIGN_OR_RETURN(
        auto s,
        Statement::Prepare(
            c_, per_chip_ ? "SELECT h.name, ch.ordinal, w.kernel_id, w.wait_ps, w.instances, "
                            "w.straggler FROM kernel_waits w JOIN chips ch ON ch.id = w.chip_id "
                            "JOIN hosts h ON h.id = ch.host_id WHERE w.capture = ?"
                          : "SELECT '', -1, kernel_id, wait_ps, instances, straggler FROM "
                            "kernel_wait_rollups WHERE capture = ?"));
    s->Bind(1, seq_);
    return s->ForEachRow([&](const Statement& row) {
      RowReader col(row, 3);
      KernelInsightRow& r = RowOf(row);
      r.wait_ps = col.Int();
      r.wait_instances = col.Int();
      r.straggler = col.Text();
      return absl::OkStatus();
    });
  }

  // The rows in key order, each with its chip's generation (over the pod, `first`'s).
  std::vector<KernelInsightRow> Take(
      const std::map<std::pair<std::string, int>, std::string>& generations,
      const std::string& first) {
    std::vector<KernelInsightRow> out;
    out.reserve(rows_.size());
    for (auto& [key, r] : rows_) {
      auto g = generations.find({r.host, r.chip});
      r.generation = g != generations.end() ? g->second : first;
      out.push_back(std::move(r));
    }
    return out;
  }

 private:
  // The row of the key in `row`'s first three columns (host, chip ordinal, kernel id).
  KernelInsightRow& RowOf(const Statement& row) {
    RowReader col(row);
    const std::string host = col.Text();
    const int chip = col.Int32();
    return RowOf(host, chip, col.Int());
  }
  KernelInsightRow& RowOf(const std::string& host, int chip, int64_t kernel) {
    KernelInsightRow& r = rows_[{host, chip, kernel}];
    r.host = host;
    r.chip = chip;
    r.kernel_id = kernel;
    return r;
  }

  // One counter's attribution to `r`'s kernel.
  static void Add(KernelInsightRow& r, const std::string& name, bool cumulative, double integral,
                  int64_t covered) {
    if (cumulative) {
      r.totals[name] = integral;
    } else {
      r.gauge_integrals[name] = {integral, covered};
    }
    r.covered_ps = std::max(r.covered_ps, covered);
  }

  Connection& c_;
  const int64_t seq_;
  const bool per_chip_;
  std::map<std::tuple<std::string, int, int64_t>, KernelInsightRow> rows_;
};

}  // namespace

absl::StatusOr<std::vector<KernelInsightRow>> InsightQueries::KernelInsights(
    const std::string& capture_id, bool per_chip, const ScopeName& sync_scope) {
  ASSIGN_OR_RETURN(ReaderLease c, db_.Reader());
  ASSIGN_OR_RETURN(const internal::CaptureRef ref, internal::RequireCapture(*c, capture_id));
  InsightRows rows(*c, ref.seq, per_chip);
  RETURN_IF_ERROR(rows.AddCounters());
  std::string first_generation;
  ASSIGN_OR_RETURN(auto generations, ChipGenerations(*c, ref.seq, per_chip, &first_generation));
  RETURN_IF_ERROR(rows.AddSyncWaits(sync_scope));
  RETURN_IF_ERROR(rows.AddWaits());
  return rows.Take(generations, first_generation);
}

absl::StatusOr<std::vector<KernelScopeRow>> InsightQueries::KernelScopes(
    const std::string& capture_id, int64_t kernel_id) {
  ASSIGN_OR_RETURN(ReaderLease c, db_.Reader());
  ASSIGN_OR_RETURN(const internal::CaptureRef ref, internal::RequireCapture(*c, capture_id));
  ASSIGN_OR_RETURN(
      auto q, Statement::Prepare(
                  *c, absl::StrCat(
                          "SELECT s.line, s.name, SUM(s.count), CAST(TOTAL(s.total_ps) AS INTEGER) "
                          "AS t FROM kernel_scopes s ",
                          kVisibleScopes,
                          " WHERE s.capture = ? AND s.kernel_id = ? GROUP BY "
                          "s.line, s.name ORDER BY t DESC, s.line, s.name")));
  q->Bind(1, ref.seq).Bind(2, kernel_id);
  std::vector<KernelScopeRow> out;
  RETURN_IF_ERROR(q->ForEachRow([&](const Statement& row) {
    RowReader col(row);
    KernelScopeRow r;
    r.line = col.Text();
    r.name = col.Text();
    r.count = col.Int();
    r.total_ps = col.Int();
    out.push_back(std::move(r));
    return absl::OkStatus();
  }));
  return out;
}

namespace {

// The chips that arrived last at the capture's collectives, most waiting caused first.
absl::Status ReadStragglerChips(Connection& c, int64_t seq, StragglerReport* report) {
  ASSIGN_OR_RETURN(auto chips, Statement::Prepare(c,
                                                  "SELECT host, chip, times_last, instances, "
                                                  "caused_ps, lateness_ps, steps, expected_last "
                                                  "FROM stragglers WHERE capture = ? ORDER BY "
                                                  "caused_ps DESC, host, chip"));
  chips->Bind(1, seq);
  return chips->ForEachRow([&](const Statement& row) {
    RowReader col(row);
    trace::StragglerRow r;
    r.host = col.Text();
    r.chip_ordinal = col.Int32();
    r.times_last = col.Int();
    r.instances = col.Int();
    r.caused_ps = col.Int();
    r.lateness_ps = col.Int();
    for (absl::string_view step : absl::StrSplit(col.Text(), ',', absl::SkipEmpty())) {
      int64_t n;
      if (absl::SimpleAtoi(step, &n)) r.steps.push_back(n);
    }
    r.expected_last = col.NextIsNull() ? -1 : col.Double();
    report->chips.push_back(std::move(r));
    return absl::OkStatus();
  });
}

// The capture's worst collective instances, worst first.
absl::Status ReadWorstInstances(Connection& c, int64_t seq, StragglerReport* report) {
  ASSIGN_OR_RETURN(auto inst, Statement::Prepare(c,
                                                 "SELECT id, kernel, step, straggler_host, "
                                                 "straggler_chip, chips, spread_ps, lateness_ps, "
                                                 "caused_ps FROM collective_instances WHERE "
                                                 "capture = ? ORDER BY caused_ps DESC"));
  inst->Bind(1, seq);
  return inst->ForEachRow([&](const Statement& row) {
    RowReader col(row);
    trace::InstanceRow r;
    r.id = col.Uint64();
    r.kernel_name = col.Text();
    r.step = col.Int();
    r.straggler_host = col.Text();
    r.straggler_chip = col.Int32();
    r.chips = col.Int32();
    r.spread_ps = col.Int();
    r.lateness_ps = col.Int();
    r.caused_ps = col.Int();
    report->instances.push_back(std::move(r));
    return absl::OkStatus();
  });
}

}  // namespace

absl::StatusOr<StragglerReport> InsightQueries::Stragglers(const std::string& capture_id) {
  ASSIGN_OR_RETURN(ReaderLease c, db_.Reader());
  ASSIGN_OR_RETURN(const internal::CaptureRef ref, internal::RequireCapture(*c, capture_id));
  StragglerReport report;
  RETURN_IF_ERROR(ReadStragglerChips(*c, ref.seq, &report));
  RETURN_IF_ERROR(ReadWorstInstances(*c, ref.seq, &report));
  ASSIGN_OR_RETURN(auto left, Statement::Prepare(*c,
                                                 "SELECT collectives_left_out, "
                                                 "collectives_left_out_example FROM captures "
                                                 "WHERE seq = ?"));
  left->Bind(1, ref.seq);
  ASSIGN_OR_RETURN(bool found, left->Step());
  if (found) {
    report.left_out = left->Int(0);
    report.left_out_example = left->Text(1);
  }
  return report;
}

}  // namespace podprof::storage
