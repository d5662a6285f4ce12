#include "storage/kernel_queries.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checked.h"
#include "common/pattern.h"
#include "common/status_macros.h"
#include "storage/kernel_rows.h"
#include "storage/store_internal.h"
#include "trace/ddsketch.h"

namespace podprof::storage {
namespace {

using internal::kKernelKeyColumns;

// Reads one StatRow from a query whose columns are: host, chip ordinal, the kernel key
// (kKernelKeyColumns), count, total, min, max, sketch, chips, peak tflops, peak gbps.
absl::StatusOr<StatRow> ReadStatRow(const Statement& s) {
  RowReader col(s);
  StatRow r;
  r.host = col.Text();
  const bool merged_chips = col.NextIsNull();
  const int chip = col.Int32();
  r.chip = merged_chips ? -1 : chip;
  r.kernel = internal::ReadKernelKey(col);
  r.count = col.Int();
  r.total_ps = col.Int();
  r.min_ps = col.Int();
  r.max_ps = col.Int();
  ASSIGN_OR_RETURN(r.sketch, trace::DDSketch::Deserialize(col.Blob()));
  r.chips = col.Int();
  r.peak_tflops = col.Double();
  r.peak_hbm_gbps = col.Double();
  return r;
}

// Whether a statistics query reads the stored roll-ups (no sketch merging at query time).
bool FromRollups(const StatsQuery& q) {
  return q.group_by == Grouping::kKernel && q.host.empty() && !q.chip.has_value();
}

// The statistics query's SQL: ?1 is the capture's seq, ?2 the op regex, ?3 the category; over
// the per-chip rows also ?4 the host, ?5 the chip ordinal and ?6..?7 the capture's rowid range.
std::string StatsSql(const StatsQuery& q) {
  std::string sql;
  if (FromRollups(q)) {
    sql = absl::StrCat(
        "SELECT '', NULL, ", kKernelKeyColumns,
        ", r.count AS cnt, r.total_ps AS total, r.min_ps, r.max_ps, "
        "r.sketch AS sk, r.chips, "
        "COALESCE(r.peak_tflops, (SELECT AVG(peak_tflops) FROM chips WHERE capture = ?1)), "
        "COALESCE(r.peak_hbm_gbps, (SELECT AVG(peak_hbm_gbps) FROM chips WHERE capture = ?1)) "
        "FROM kernel_rollups r JOIN kernels k ON k.id = r.kernel_id WHERE r.capture = ?1 "
        "AND (?2 = '' OR k.op_name REGEXP ?2) AND (?3 = '' OR k.category = ?3)");
  } else {
    const char* host_col =
        q.group_by == Grouping::kChip || q.group_by == Grouping::kHost ? "h.name" : "''";
    const char* chip_col = q.group_by == Grouping::kChip ? "c.ordinal" : "NULL";
    const bool category = q.group_by == Grouping::kCategory;
    // Totals are summed as TOTAL() (a double) cast back: SUM() fails the whole query with
    // "integer overflow" once a pod's history passes 2^63 ps, and the cast holds at the
    // int64's end instead. Exact to the ps up to 2^53 ps (2.5 hours of kernel time).
    sql = absl::StrCat(
        "SELECT ", host_col, ", ", chip_col, ", ",
        category ? "0, '', '', k.category, 0, 0, 0, 0" : kKernelKeyColumns,
        ", SUM(s.count) AS cnt, CAST(TOTAL(s.total_ps) AS INTEGER) AS total, MIN(s.min_ps), "
        "MAX(s.max_ps), "
        "dds_merge(s.sketch) AS sk, "
        "COUNT(DISTINCT s.chip_id), AVG(c.peak_tflops), AVG(c.peak_hbm_gbps) "
        "FROM kernel_stats s JOIN chips c ON c.id = s.chip_id JOIN hosts h ON h.id = c.host_id "
        "JOIN kernels k ON k.id = s.kernel_id WHERE s.rowid BETWEEN ?6 AND ?7 "
        "AND s.capture = ?1 AND (?2 = '' OR k.op_name REGEXP ?2) AND (?3 = '' OR k.category = ?3) "
        "AND (?4 = '' OR h.name = ?4) AND (?5 < 0 OR c.ordinal = ?5) GROUP BY ",
        q.group_by == Grouping::kChip   ? "s.chip_id, s.kernel_id"
        : q.group_by == Grouping::kHost ? "c.host_id, s.kernel_id"
        : category                      ? "k.category"
                                        : "s.kernel_id");
  }
  const char* order = q.order == Order::kCount  ? "cnt DESC"
                      : q.order == Order::kMean ? "(total * 1.0 / cnt) DESC"
                      : q.order == Order::kP99  ? "dds_quantile(sk, 0.99) DESC"
                                                : "total DESC";
  // Ties by name (op, then module) keep the order stable.
  sql += absl::StrCat(" ORDER BY ", order, ", 5, 4");
  if (q.top > 0) sql += absl::StrCat(" LIMIT ", q.top);
  return sql;
}

// A history point and the (capture, kernel) rows merged into it.
struct PointRows {
  size_t series = 0, point = 0;
  int64_t capture_seq = 0, kernel_id = 0;
};

// Adds each point's kernel-profiling counters (kernel_counter_rollups' `perf/...` rows, by their
// key), its busy gauges (`..._busy`, the figures `podprof stats` falls back on) and its
// capture's generation (its first chip's).
absl::Status AddPerfTotals(Connection& c, const std::vector<PointRows>& rows,
                           std::vector<HistorySeries>* out) {
  ASSIGN_OR_RETURN(auto perf,
                   Statement::Prepare(c,
                                      "SELECT name, integral, covered_ps FROM "
                                      "kernel_counter_rollups WHERE capture = ? AND "
                                      "kernel_id = ? AND ((name >= 'perf/' AND name < 'perf0') "
                                      "OR (cumulative = 0 AND name LIKE '%\\_busy' ESCAPE "
                                      "'\\'))"));
  ASSIGN_OR_RETURN(auto gen, Statement::Prepare(c,
                                                "SELECT generation FROM chips WHERE capture = ? "
                                                "ORDER BY id LIMIT 1"));
  for (const PointRows& r : rows) {
    HistoryPoint& p = (*out)[r.series].points[r.point];
    perf->Reset();
    perf->Bind(1, r.capture_seq).Bind(2, r.kernel_id);
    RETURN_IF_ERROR(perf->ForEachRow([&](const Statement& row) {
      const std::string name = row.Text(0);
      if (absl::StartsWith(name, "perf/")) {
        p.perf_totals[name] += row.Double(1);
        p.perf_covered_ps = std::max(p.perf_covered_ps, row.Int(2));
      } else {
        // Recompiles merged into the point: their integrals and covered times add up.
        auto& [integral, covered] = p.busy_gauges[name];
        integral += row.Double(1);
        covered = SaturatingAdd(covered, row.Int(2));
      }
      return absl::OkStatus();
    }));
    if (p.perf_totals.empty() || !p.generation.empty()) continue;
    gen->Reset();
    gen->Bind(1, r.capture_seq);
    ASSIGN_OR_RETURN(bool found, gen->Step());
    if (found) p.generation = gen->Text(0);
  }
  return absl::OkStatus();
}

// Adds one row of the history query to its series (the last of `out`, or a new one); false
// when a new series would pass `max_kernels`.
absl::StatusOr<bool> AddHistoryRow(const Statement& s, int max_kernels,
                                   std::vector<HistorySeries>* out, std::vector<PointRows>* rows) {
  std::string module = s.Text(0), op = s.Text(1);
  if (out->empty() || out->back().module != module || out->back().op_name != op) {
    if (static_cast<int>(out->size()) >= std::max(1, max_kernels)) return false;
    out->push_back({module, op, s.Text(2), {}});
  }
  auto& points = out->back().points;
  const std::string capture = s.Text(3);
  // Recompiles give one (module, op) several kernel rows in one capture: merge them.
  if (points.empty() || points.back().capture_id != capture) {
    points.push_back({});
    points.back().capture_id = capture;
    points.back().start_ns = s.Int(4);
  }
  HistoryPoint& p = points.back();
  rows->push_back({out->size() - 1, points.size() - 1, s.Int(11), s.Int(10)});
  p.count = SaturatingAdd(p.count, s.Int(5));
  p.total_ps = SaturatingAdd(p.total_ps, s.Int(6));
  ASSIGN_OR_RETURN(trace::DDSketch sk, trace::DDSketch::Deserialize(s.Blob(7)));
  p.sketch.Merge(sk);
  p.chips = std::max(p.chips, s.Int(8));
  p.flops_executed += static_cast<double>(s.Int(9)) * static_cast<double>(s.Int(5));
  return true;
}

// Adds `r` to a pair's side: two kernel rows of one (module, op) merge.
void AddToSide(StatRow r, std::optional<StatRow>* slot) {
  if (!slot->has_value()) {
    *slot = std::move(r);
    return;
  }
  StatRow& s = **slot;
  s.count = SaturatingAdd(s.count, r.count);
  s.total_ps = SaturatingAdd(s.total_ps, r.total_ps);
  s.min_ps = std::min(s.min_ps, r.min_ps);
  s.max_ps = std::max(s.max_ps, r.max_ps);
  s.sketch.Merge(r.sketch);
}

}  // namespace

absl::StatusOr<std::vector<StatRow>> KernelQueries::Stats(const StatsQuery& q) {
  RETURN_IF_ERROR(CheckUserPattern("kernel", q.op_regex));
  ASSIGN_OR_RETURN(ReaderLease c, db_.Reader());
  ASSIGN_OR_RETURN(const internal::CaptureRef ref, internal::RequireCapture(*c, q.capture_id));
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(*c, StatsSql(q)));
  s->Bind(1, ref.seq).Bind(2, q.op_regex).Bind(3, q.category);
  if (!FromRollups(q)) {
    s->Bind(4, q.host).Bind(5, int64_t{q.chip.value_or(-1)});
    s->Bind(6, ref.stats_first).Bind(7, ref.stats_last);
  }
  std::vector<StatRow> out;
  RETURN_IF_ERROR(s->ForEachRow([&](const Statement& row) -> absl::Status {
    ASSIGN_OR_RETURN(StatRow r, ReadStatRow(row));
    out.push_back(std::move(r));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<HistorySeries>> KernelQueries::History(const HistoryQuery& q) {
  if (q.op_regex.empty()) return absl::InvalidArgumentError("a kernel name or regex is required");
  RETURN_IF_ERROR(CheckUserPattern("kernel", q.op_regex));
  if (q.until_ns < q.since_ns) {
    return absl::InvalidArgumentError("the time range is inverted (until before since)");
  }
  ASSIGN_OR_RETURN(ReaderLease c, db_.Reader());
  ASSIGN_OR_RETURN(
      auto s,
      Statement::Prepare(
          *c,
          "SELECT k.module, k.op_name, k.category, cap.id, cap.start_ns, r.count, "
          "r.total_ps, r.sketch, r.chips, k.flops, k.id, cap.seq FROM kernels k "
          "JOIN kernel_rollups r ON r.kernel_id = k.id JOIN captures cap ON cap.seq = r.capture "
          "WHERE k.op_name REGEXP ?1 AND (?2 = '' OR k.module = ?2) AND cap.start_ns >= ?3 AND "
          "cap.start_ns <= ?4 ORDER BY k.module, k.op_name, cap.start_ns, cap.seq"));
  s->Bind(1, q.op_regex).Bind(2, q.module).Bind(3, q.since_ns).Bind(4, q.until_ns);
  std::vector<HistorySeries> out;
  std::vector<PointRows> rows;
  RETURN_IF_ERROR(s->ForEachRowWhile(
      [&](const Statement& row) { return AddHistoryRow(row, q.max_kernels, &out, &rows); }));
  RETURN_IF_ERROR(AddPerfTotals(*c, rows, &out));
  return out;
}

absl::StatusOr<std::vector<KernelPair>> KernelQueries::Pair(const std::string& baseline,
                                                            const std::string& candidate,
                                                            const std::string& op_regex) {
  std::map<std::pair<std::string, std::string>, KernelPair> rows;
  for (int side = 0; side < 2; ++side) {
    StatsQuery q;
    q.capture_id = side == 0 ? baseline : candidate;
    q.op_regex = op_regex;
    ASSIGN_OR_RETURN(std::vector<StatRow> stats, Stats(q));
    for (StatRow& r : stats) {
      KernelPair& d = rows[{r.kernel.module, r.kernel.op_name}];
      d.module = r.kernel.module;
      d.op_name = r.kernel.op_name;
      d.category = r.kernel.category;
      AddToSide(std::move(r), side == 0 ? &d.baseline : &d.candidate);
    }
  }
  std::vector<KernelPair> out;
  out.reserve(rows.size());
  for (auto& [key, d] : rows) out.push_back(std::move(d));
  return out;
}

absl::StatusOr<std::vector<KernelIdentity>> KernelQueries::Find(const std::string& op_name,
                                                                const std::string& module) {
  ASSIGN_OR_RETURN(ReaderLease c, db_.Reader());
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(
                               *c, absl::StrCat("SELECT ", kKernelKeyColumns,
                                                ", k.source, k.hlo_text, k.tf_op, "
                                                "k.source_stack, k.mlir FROM kernels k "
                                                "WHERE k.op_name = ? AND (? = '' OR k.module = ?) "
                                                "ORDER BY k.id DESC LIMIT 50")));
  s->Bind(1, op_name).Bind(2, module).Bind(3, module);
  std::vector<KernelIdentity> out;
  RETURN_IF_ERROR(s->ForEachRow([&](const Statement& row) {
    RowReader col(row);
    KernelIdentity k;
    k.key = internal::ReadKernelKey(col);
    k.key.source = col.Text();
    k.hlo_text = col.Text();
    k.tf_op = col.Text();
    k.source_stack = col.Text();
    k.mlir = col.Text();
    out.push_back(std::move(k));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::string> KernelQueries::LatestCaptureWith(int64_t kernel_id) {
  ASSIGN_OR_RETURN(ReaderLease c, db_.Reader());
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(*c,
                                              "SELECT c.id FROM kernel_rollups r JOIN captures c "
                                              "ON c.seq = r.capture WHERE r.kernel_id = ? "
                                              "ORDER BY c.start_ns DESC LIMIT 1"));
  s->Bind(1, kernel_id);
  ASSIGN_OR_RETURN(bool found, s->Step());
  if (!found) {
    return absl::NotFoundError(absl::StrCat("no stored capture holds kernel ", kernel_id));
  }
  return s->Text(0);
}

absl::StatusOr<bool> KernelQueries::RanCategory(const std::string& capture_id,
                                                const std::string& prefix) {
  ASSIGN_OR_RETURN(ReaderLease c, db_.Reader());
  // substr, not LIKE: a prefix holding % or _ is taken as it is.
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(*c,
                                              "SELECT 1 FROM kernel_rollups r JOIN captures c "
                                              "ON c.seq = r.capture JOIN kernels k ON k.id = "
                                              "r.kernel_id WHERE c.id = ?1 AND "
                                              "substr(k.category, 1, length(?2)) = ?2 LIMIT 1"));
  s->Bind(1, capture_id).Bind(2, prefix);
  return s->Step();
}

}  // namespace podprof::storage
