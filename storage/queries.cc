// The store's queries: captures, kernel statistics, history, comparisons, insight, timelines.
#include <algorithm>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/pattern.h"
#include "common/status_macros.h"
#include "storage/store.h"
#include "storage/store_internal.h"
#include "trace/columns.h"
#include "trace/kernel_stats.h"
#include "trace/xspace_schema.h"

namespace podprof::storage {
namespace {

using internal::LabelsJson;
using internal::ParseLabels;
using internal::Transaction;

// Reads one StatRow from a query whose columns are: host, chip ordinal, kernel id, module,
// op, category, program id, hlo hash, flops, bytes, count, total, min, max, sketch, chips,
// peak tflops, peak gbps.
absl::StatusOr<StatRow> ReadStatRow(const Statement& s) {
  StatRow r;
  r.host = s.Text(0);
  r.chip = s.IsNull(1) ? -1 : static_cast<int>(s.Int(1));
  r.kernel.id = s.Int(2);
  r.kernel.module = s.Text(3);
  r.kernel.op_name = s.Text(4);
  r.kernel.category = s.Text(5);
  r.kernel.program_id = static_cast<uint64_t>(s.Int(6));
  r.kernel.hlo_hash = static_cast<uint64_t>(s.Int(7));
  r.kernel.flops = s.Int(8);
  r.kernel.bytes_accessed = s.Int(9);
  r.count = s.Int(10);
  r.total_ps = s.Int(11);
  r.min_ps = s.Int(12);
  r.max_ps = s.Int(13);
  ASSIGN_OR_RETURN(r.sketch, trace::DDSketch::Deserialize(s.Blob(14)));
  r.chips = s.Int(15);
  r.peak_tflops = s.Double(16);
  r.peak_hbm_gbps = s.Double(17);
  return r;
}

}  // namespace

namespace {

// A state read back from its stored name; DataLoss naming the column, the text and the capture
// for a name this build does not know (a store written by a newer podprof).
template <typename E>
absl::StatusOr<E> Known(std::optional<E> value, absl::string_view column, const std::string& text,
                        const std::string& capture) {
  if (value) return *value;
  return absl::DataLossError(absl::StrCat(column, " of capture ", capture, " is \"", text,
                                          "\", which this podprof does not know"));
}

}  // namespace

absl::StatusOr<std::vector<CaptureRow>> Store::ListCaptures(const CaptureQuery& q,
                                                            std::string* next_page_token) {
  if (q.until_ns < q.since_ns) {
    return absl::InvalidArgumentError("the time range is inverted (until before since)");
  }
  int64_t token_start = INT64_MAX;
  std::string token_id;
  if (!q.page_token.empty()) {
    std::vector<std::string> parts = absl::StrSplit(q.page_token, absl::MaxSplits(':', 1));
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &token_start)) {
      return absl::InvalidArgumentError(absl::StrCat("bad page token \"", q.page_token, "\""));
    }
    token_id = parts[1];
  }
  PODPROF_WITH_READER(c);
  std::string sql =
      "SELECT c.id, c.start_ns, c.end_ns, c.status, c.labels, c.source, c.events, "
      "c.kernel_count, (SELECT COUNT(*) FROM capture_hosts h WHERE h.capture = c.seq), "
      "c.created_ns, "
      "(SELECT COUNT(*) FROM chips x WHERE x.capture = c.seq), c.options FROM captures c "
      "WHERE c.start_ns >= ?1 AND c.start_ns <= ?2 AND (?3 = '' OR c.status = ?3) AND "
      "(c.start_ns < ?4 OR (c.start_ns = ?4 AND c.id < ?5)) AND (?6 = '' OR c.id = ?6)";
  int param = 7;
  for (size_t i = 0; i < q.labels.size(); ++i) {
    sql += absl::StrCat(" AND json_extract(c.labels, ?", param, ") = ?", param + 1);
    param += 2;
  }
  sql += absl::StrCat(" ORDER BY c.start_ns DESC, c.id DESC LIMIT ?", param);
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(c, sql));
  s->Bind(1, q.since_ns).Bind(2, q.until_ns);
  s->Bind(3, std::string(q.status ? CaptureStateName(*q.status) : "")).Bind(4, token_start);
  s->Bind(5, q.page_token.empty() ? std::string("\xff\xff") : token_id).Bind(6, q.id);
  param = 7;
  for (const auto& [k, v] : q.labels) {
    s->Bind(param, absl::StrCat("$.\"", k, "\"")).Bind(param + 1, v);
    param += 2;
  }
  const int limit = q.limit > 0 ? q.limit : 100;
  s->Bind(param, int64_t{limit} + 1);
  std::vector<CaptureRow> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s->Step());
    if (!row) break;
    CaptureRow r;
    r.id = s->Text(0);
    r.start_ns = s->Int(1);
    r.end_ns = s->Int(2);
    ASSIGN_OR_RETURN(r.status,
                     Known(CaptureStateNamed(s->Text(3)), "captures.status", s->Text(3), r.id));
    r.labels = ParseLabels(s->Text(4));
    ASSIGN_OR_RETURN(r.source,
                     Known(CaptureSourceNamed(s->Text(5)), "captures.source", s->Text(5), r.id));
    r.events = s->Int(6);
    r.kernels = s->Int(7);
    r.hosts = s->Int(8);
    r.created_ns = s->Int(9);
    r.chips = s->Int(10);
    r.options_json = s->Text(11);
    out.push_back(std::move(r));
  }
  next_page_token->clear();
  if (static_cast<int>(out.size()) > limit) {
    out.resize(limit);
    *next_page_token = absl::StrCat(out.back().start_ns, ":", out.back().id);
  }
  ASSIGN_OR_RETURN(auto hosts,
                   Statement::Prepare(c,
                                      "SELECT h.name, x.status, x.error, "
                                      "x.clock_offset_ns, x.clock_uncertainty_ns, "
                                      "x.events, x.host_clock, x.clock_drift_ppb, "
                                      "x.clock_mid_ns FROM capture_hosts x JOIN hosts h "
                                      "ON h.id = x.host_id JOIN captures c ON c.seq = "
                                      "x.capture WHERE c.id = ? "
                                      "ORDER BY h.name"));
  for (CaptureRow& r : out) {
    hosts->Reset();
    hosts->Bind(1, r.id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, hosts->Step());
      if (!row) break;
      HostRow h;
      h.host = hosts->Text(0);
      ASSIGN_OR_RETURN(h.status, Known(HostOutcomeNamed(hosts->Text(1)), "capture_hosts.status",
                                       hosts->Text(1), r.id));
      h.error = hosts->Text(2);
      h.clock_offset_ns = hosts->Int(3);
      h.clock_uncertainty_ns = hosts->Int(4);
      h.events = hosts->Int(5);
      h.host_clock = hosts->Int(6) != 0;
      h.correction = {h.clock_offset_ns, hosts->Double(7), hosts->Int(8)};
      r.host_rows.push_back(std::move(h));
    }
  }
  return out;
}

absl::StatusOr<std::vector<StatRow>> Store::KernelStats(const StatsQuery& q) {
  RETURN_IF_ERROR(CheckUserPattern("kernel", q.op_regex));
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(const CaptureRef ref, RequireCapture(c, q.capture_id));
  const int64_t seq = ref.seq;
  const bool filtered_by_place = !q.host.empty() || q.chip.has_value();
  std::string sql;
  if (q.group_by == Grouping::kKernel && !filtered_by_place) {
    // The stored roll-up: no sketch merging at query time.
    sql =
        "SELECT '', NULL, k.id, k.module, k.op_name, k.category, k.program_id, k.hlo_hash, "
        "k.flops, k.bytes_accessed, r.count AS cnt, r.total_ps AS total, r.min_ps, r.max_ps, "
        "r.sketch AS sk, r.chips, "
        "COALESCE(r.peak_tflops, (SELECT AVG(peak_tflops) FROM chips WHERE capture = ?1)), "
        "COALESCE(r.peak_hbm_gbps, (SELECT AVG(peak_hbm_gbps) FROM chips WHERE capture = ?1)) "
        "FROM kernel_rollups r JOIN kernels k ON k.id = r.kernel_id WHERE r.capture = ?1 "
        "AND (?2 = '' OR k.op_name REGEXP ?2) AND (?3 = '' OR k.category = ?3)";
  } else {
    const char* host_col =
        q.group_by == Grouping::kChip || q.group_by == Grouping::kHost ? "h.name" : "''";
    const char* chip_col = q.group_by == Grouping::kChip ? "c.ordinal" : "NULL";
    const bool category = q.group_by == Grouping::kCategory;
    sql = absl::StrCat(
        "SELECT ", host_col, ", ", chip_col, ", ",
        category ? "0, '', '', k.category, 0, 0, 0, 0, "
                 : "k.id, k.module, k.op_name, k.category, k.program_id, k.hlo_hash, k.flops, "
                   "k.bytes_accessed, ",
        "SUM(s.count) AS cnt, SUM(s.total_ps) AS total, MIN(s.min_ps), MAX(s.max_ps), "
        "dds_merge(s.sketch) AS sk, "
        "COUNT(DISTINCT s.chip_id), AVG(c.peak_tflops), AVG(c.peak_hbm_gbps) "
        "FROM kernel_stats s JOIN chips c ON c.id = s.chip_id JOIN hosts h ON h.id = c.host_id "
        "JOIN kernels k ON k.id = s.kernel_id WHERE s.rowid BETWEEN ?6 AND ?7 "
        "AND (?2 = '' OR k.op_name REGEXP ?2) AND (?3 = '' OR k.category = ?3) "
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
  // Ties by name keep the order stable.
  sql += absl::StrCat(" ORDER BY ", order, ", 5, 4");
  if (q.top > 0) sql += absl::StrCat(" LIMIT ", q.top);
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(c, sql));
  s->Bind(1, seq).Bind(2, q.op_regex).Bind(3, q.category);
  if (!(q.group_by == Grouping::kKernel && !filtered_by_place)) {
    s->Bind(4, q.host).Bind(5, int64_t{q.chip.value_or(-1)});
    s->Bind(6, ref.stats_first).Bind(7, ref.stats_last);
  }
  std::vector<StatRow> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s->Step());
    if (!row) break;
    ASSIGN_OR_RETURN(StatRow r, ReadStatRow(*s));
    out.push_back(std::move(r));
  }
  return out;
}

// A history point and the (capture, kernel) rows merged into it.
struct PointRows {
  size_t series = 0, point = 0;
  int64_t capture_seq = 0, kernel_id = 0;
};

// Adds each point's kernel-profiling counters (kernel_counter_rollups' `perf/...` rows, by their
// key) and its capture's generation (its first chip's).
static absl::Status AddPerfTotals(Connection& c, const std::vector<PointRows>& rows,
                                  std::vector<HistorySeries>* out) {
  ASSIGN_OR_RETURN(auto perf, Statement::Prepare(c,
                                                 "SELECT name, integral, covered_ps FROM "
                                                 "kernel_counter_rollups WHERE capture = ? AND "
                                                 "kernel_id = ? AND name >= 'perf/' AND name < "
                                                 "'perf0'"));
  ASSIGN_OR_RETURN(auto gen, Statement::Prepare(c,
                                                "SELECT generation FROM chips WHERE capture = ? "
                                                "ORDER BY id LIMIT 1"));
  for (const PointRows& r : rows) {
    HistoryPoint& p = (*out)[r.series].points[r.point];
    perf->Reset();
    perf->Bind(1, r.capture_seq).Bind(2, r.kernel_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, perf->Step());
      if (!row) break;
      p.perf_totals[perf->Text(0)] += perf->Double(1);
      p.perf_covered_ps = std::max(p.perf_covered_ps, perf->Int(2));
    }
    if (p.perf_totals.empty() || !p.generation.empty()) continue;
    gen->Reset();
    gen->Bind(1, r.capture_seq);
    ASSIGN_OR_RETURN(bool found, gen->Step());
    if (found) p.generation = gen->Text(0);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<HistorySeries>> Store::KernelHistory(const HistoryQuery& q) {
  if (q.op_regex.empty()) return absl::InvalidArgumentError("a kernel name or regex is required");
  RETURN_IF_ERROR(CheckUserPattern("kernel", q.op_regex));
  if (q.until_ns < q.since_ns) {
    return absl::InvalidArgumentError("the time range is inverted (until before since)");
  }
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(
      auto s,
      Statement::Prepare(
          c,
          "SELECT k.module, k.op_name, k.category, cap.id, cap.start_ns, r.count, "
          "r.total_ps, r.sketch, r.chips, k.flops, k.id, cap.seq FROM kernels k "
          "JOIN kernel_rollups r ON r.kernel_id = k.id JOIN captures cap ON cap.seq = r.capture "
          "WHERE k.op_name REGEXP ?1 AND (?2 = '' OR k.module = ?2) AND cap.start_ns >= ?3 AND "
          "cap.start_ns <= ?4 ORDER BY k.module, k.op_name, cap.start_ns, cap.seq"));
  s->Bind(1, q.op_regex).Bind(2, q.module).Bind(3, q.since_ns).Bind(4, q.until_ns);
  std::vector<HistorySeries> out;
  std::vector<PointRows> rows;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s->Step());
    if (!row) break;
    std::string module = s->Text(0), op = s->Text(1);
    if (out.empty() || out.back().module != module || out.back().op_name != op) {
      if (static_cast<int>(out.size()) >= std::max(1, q.max_kernels)) break;
      out.push_back({module, op, s->Text(2), {}});
    }
    auto& points = out.back().points;
    const std::string capture = s->Text(3);
    // Recompiles give one (module, op) several kernel rows in one capture: merge them.
    if (points.empty() || points.back().capture_id != capture) {
      points.push_back({});
      points.back().capture_id = capture;
      points.back().start_ns = s->Int(4);
    }
    HistoryPoint& p = points.back();
    rows.push_back({out.size() - 1, points.size() - 1, s->Int(11), s->Int(10)});
    p.count += s->Int(5);
    p.total_ps += s->Int(6);
    ASSIGN_OR_RETURN(trace::DDSketch sk, trace::DDSketch::Deserialize(s->Blob(7)));
    p.sketch.Merge(sk);
    p.chips = std::max(p.chips, s->Int(8));
    p.flops_executed += static_cast<double>(s->Int(9)) * static_cast<double>(s->Int(5));
  }
  RETURN_IF_ERROR(AddPerfTotals(c, rows, &out));
  return out;
}

absl::StatusOr<std::vector<KernelPair>> Store::PairKernels(const std::string& baseline,
                                                           const std::string& candidate,
                                                           const std::string& op_regex) {
  std::map<std::pair<std::string, std::string>, KernelPair> rows;
  for (int side = 0; side < 2; ++side) {
    StatsQuery q;
    q.capture_id = side == 0 ? baseline : candidate;
    q.op_regex = op_regex;
    ASSIGN_OR_RETURN(std::vector<StatRow> stats, KernelStats(q));
    for (StatRow& r : stats) {
      KernelPair& d = rows[{r.kernel.module, r.kernel.op_name}];
      d.module = r.kernel.module;
      d.op_name = r.kernel.op_name;
      d.category = r.kernel.category;
      std::optional<StatRow>& slot = side == 0 ? d.baseline : d.candidate;
      if (slot) {  // Two kernel rows for one (module, op): merge.
        slot->count += r.count;
        slot->total_ps += r.total_ps;
        slot->min_ps = std::min(slot->min_ps, r.min_ps);
        slot->max_ps = std::max(slot->max_ps, r.max_ps);
        slot->sketch.Merge(r.sketch);
      } else {
        slot = std::move(r);
      }
    }
  }
  std::vector<KernelPair> out;
  out.reserve(rows.size());
  for (auto& [key, d] : rows) out.push_back(std::move(d));
  return out;
}

absl::StatusOr<std::vector<trace::EventBlock>> Store::Timelines(const std::string& capture_id) {
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(const CaptureRef ref, RequireCapture(c, capture_id));
  const int64_t seq = ref.seq;
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(c,
                                              "SELECT x.ordinal, t.line, t.base_ns, t.data, "
                                              "ch.host_clock, ch.clock_offset_ns, "
                                              "ch.clock_drift_ppb, ch.clock_mid_ns "
                                              "FROM timeline_blocks t JOIN chips x ON x.id = "
                                              "t.chip_id JOIN capture_hosts ch ON ch.capture = "
                                              "t.capture AND ch.host_id = x.host_id "
                                              "WHERE t.capture = ? ORDER BY t.rowid"));
  s->Bind(1, seq);
  std::vector<trace::EventBlock> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s->Step());
    if (!row) break;
    trace::EventBlock b;
    b.chip = static_cast<int>(s->Int(0));  // the chip's ordinal
    b.line = s->Text(1);
    b.base_ns = s->Int(2);
    RETURN_IF_ERROR(trace::DecodeTimeline(s->Blob(3), &b));
    if (s->Int(4) != 0) {
      trace::ApplyCorrection(trace::ClockCorrection{s->Int(5), s->Double(6), s->Int(7)}, &b);
    }
    out.push_back(std::move(b));
  }
  return out;
}

absl::StatusOr<CaptureRow> Store::GetCapture(const std::string& capture_id) {
  CaptureQuery q;
  q.id = capture_id;
  q.since_ns = INT64_MIN;
  q.limit = 1;
  std::string next;
  ASSIGN_OR_RETURN(std::vector<CaptureRow> rows, ListCaptures(q, &next));
  if (rows.empty()) return absl::NotFoundError(absl::StrCat("no capture \"", capture_id, "\""));
  return rows.front();
}

// Joins a kernel_scopes row `s` to its chip `ch`, host `h` and the host's outcome: scope rows
// are written with the host's data, ahead of its outcome, and are shown once that is (as
// kernel_counters are).
static constexpr char kVisibleScopes[] =
    "JOIN chips ch ON ch.id = s.chip_id JOIN hosts h ON h.id = ch.host_id JOIN capture_hosts o ON "
    "o.capture = s.capture AND o.host_id = ch.host_id";

// The generation of each chip of capture `seq` by (host, ordinal); `*first` gets the first
// chip's, what pod-wide figures are judged with.
static absl::StatusOr<std::map<std::pair<std::string, int>, std::string>> ChipGenerations(
    Connection& c, int64_t seq, std::string* first) {
  ASSIGN_OR_RETURN(auto gens, Statement::Prepare(c,
                                                 "SELECT h.name, ch.ordinal, ch.generation FROM "
                                                 "chips ch JOIN hosts h ON h.id = ch.host_id "
                                                 "WHERE ch.capture = ? ORDER BY ch.id"));
  gens->Bind(1, seq);
  std::map<std::pair<std::string, int>, std::string> out;
  first->clear();
  while (true) {
    ASSIGN_OR_RETURN(bool more, gens->Step());
    if (!more) break;
    if (out.empty()) *first = gens->Text(2);
    out[{gens->Text(0), static_cast<int>(gens->Int(1))}] = gens->Text(2);
  }
  return out;
}

absl::StatusOr<std::vector<KernelInsightRow>> Store::KernelInsights(const std::string& capture_id,
                                                                    bool per_chip) {
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(CaptureRef ref, RequireCapture(c, capture_id));
  // Per chip the key is (host, ordinal, kernel); over the pod it is the kernel alone.
  std::map<std::tuple<std::string, int, int64_t>, KernelInsightRow> rows;
  auto row = [&](const std::string& host, int chip, int64_t kernel) -> KernelInsightRow& {
    KernelInsightRow& r = rows[{host, chip, kernel}];
    r.host = host;
    r.chip = chip;
    r.kernel_id = kernel;
    return r;
  };
  // Per chip from the per-chip rows; over the pod from the roll-ups written with them.
  ASSIGN_OR_RETURN(
      auto counters,
      Statement::Prepare(
          c, per_chip ? "SELECT h.name, ch.ordinal, k.kernel_id, k.name, k.cumulative, "
                        "k.integral, k.covered_ps FROM kernel_counters k "
                        "JOIN chips ch ON ch.id = k.chip_id JOIN hosts h ON h.id = ch.host_id "
                        // Written with the host's data, ahead of its outcome: shown once
                        // that is (capture_hosts), like the rest of the capture.
                        "JOIN capture_hosts o ON o.capture = k.capture AND o.host_id = h.id "
                        "WHERE k.capture = ?"
                      : "SELECT '', -1, kernel_id, name, cumulative, integral, covered_ps FROM "
                        "kernel_counter_rollups WHERE capture = ?"));
  counters->Bind(1, ref.seq);
  while (true) {
    ASSIGN_OR_RETURN(bool more, counters->Step());
    if (!more) break;
    KernelInsightRow& r =
        row(counters->Text(0), static_cast<int>(counters->Int(1)), counters->Int(2));
    const double integral = counters->Double(5);
    const int64_t covered = counters->Int(6);
    if (counters->Int(4) != 0) {
      r.totals[counters->Text(3)] = integral;
    } else if (covered > 0) {
      r.gauges[counters->Text(3)] = integral / static_cast<double>(covered);
    }
    r.covered_ps = std::max(r.covered_ps, covered);
  }
  std::string first_generation;
  ASSIGN_OR_RETURN(auto generations, ChipGenerations(c, ref.seq, &first_generation));
  // Time in SyncWait scopes per (chip, kernel), or per kernel over the pod.
  ASSIGN_OR_RETURN(
      auto syncs,
      Statement::Prepare(
          c, absl::StrCat(per_chip ? "SELECT h.name, ch.ordinal" : "SELECT '', -1",
                          ", s.kernel_id, SUM(s.total_ps) FROM kernel_scopes s ", kVisibleScopes,
                          " WHERE s.capture = ?1 AND s.line = ?2 AND s.name = ?3 GROUP BY ",
                          per_chip ? "s.chip_id, s.kernel_id" : "s.kernel_id")));
  syncs->Bind(1, ref.seq).Bind(2, std::string(trace::xspace::kSyncFlagLine)).Bind(3, "SyncWait");
  while (true) {
    ASSIGN_OR_RETURN(bool more, syncs->Step());
    if (!more) break;
    row(syncs->Text(0), static_cast<int>(syncs->Int(1)), syncs->Int(2)).sync_wait_ps =
        syncs->Int(3);
  }
  ASSIGN_OR_RETURN(
      auto waits,
      Statement::Prepare(
          c, per_chip ? "SELECT h.name, ch.ordinal, w.kernel_id, w.wait_ps, w.instances, "
                        "w.straggler FROM kernel_waits w JOIN chips ch ON ch.id = w.chip_id "
                        "JOIN hosts h ON h.id = ch.host_id WHERE w.capture = ?"
                      : "SELECT '', -1, kernel_id, wait_ps, instances, straggler FROM "
                        "kernel_wait_rollups WHERE capture = ?"));
  waits->Bind(1, ref.seq);
  while (true) {
    ASSIGN_OR_RETURN(bool more, waits->Step());
    if (!more) break;
    KernelInsightRow& r = row(waits->Text(0), static_cast<int>(waits->Int(1)), waits->Int(2));
    r.wait_ps = waits->Int(3);
    r.wait_instances = waits->Int(4);
    r.straggler = waits->Text(5);
  }
  std::vector<KernelInsightRow> out;
  out.reserve(rows.size());
  for (auto& [key, r] : rows) {
    auto g = generations.find({r.host, r.chip});
    r.generation = g != generations.end() ? g->second : first_generation;
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<std::vector<KernelScopeRow>> Store::KernelScopes(const std::string& capture_id,
                                                                int64_t kernel_id) {
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(CaptureRef ref, RequireCapture(c, capture_id));
  ASSIGN_OR_RETURN(
      auto q,
      Statement::Prepare(c, absl::StrCat("SELECT s.line, s.name, SUM(s.count), SUM(s.total_ps) "
                                         "AS t FROM kernel_scopes s ",
                                         kVisibleScopes,
                                         " WHERE s.capture = ? AND s.kernel_id = ? GROUP BY "
                                         "s.line, s.name ORDER BY t DESC, s.line, s.name")));
  q->Bind(1, ref.seq).Bind(2, kernel_id);
  std::vector<KernelScopeRow> out;
  while (true) {
    ASSIGN_OR_RETURN(bool more, q->Step());
    if (!more) break;
    KernelScopeRow r;
    r.line = q->Text(0);
    r.name = q->Text(1);
    r.count = q->Int(2);
    r.total_ps = q->Int(3);
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<StragglerReport> Store::Stragglers(const std::string& capture_id) {
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(CaptureRef ref, RequireCapture(c, capture_id));
  StragglerReport report;
  ASSIGN_OR_RETURN(auto chips, Statement::Prepare(c,
                                                  "SELECT host, chip, times_last, instances, "
                                                  "caused_ps, lateness_ps, steps, expected_last "
                                                  "FROM stragglers WHERE capture = ? ORDER BY "
                                                  "caused_ps DESC, host, chip"));
  chips->Bind(1, ref.seq);
  while (true) {
    ASSIGN_OR_RETURN(bool more, chips->Step());
    if (!more) break;
    trace::StragglerRow r;
    r.host = chips->Text(0);
    r.chip_ordinal = static_cast<int>(chips->Int(1));
    r.times_last = chips->Int(2);
    r.instances = chips->Int(3);
    r.caused_ps = chips->Int(4);
    r.lateness_ps = chips->Int(5);
    for (absl::string_view step : absl::StrSplit(chips->Text(6), ',', absl::SkipEmpty())) {
      int64_t n;
      if (absl::SimpleAtoi(step, &n)) r.steps.push_back(n);
    }
    r.expected_last = chips->IsNull(7) ? -1 : chips->Double(7);
    report.chips.push_back(std::move(r));
  }
  ASSIGN_OR_RETURN(auto inst, Statement::Prepare(c,
                                                 "SELECT id, kernel, step, straggler_host, "
                                                 "straggler_chip, chips, spread_ps, lateness_ps, "
                                                 "caused_ps FROM collective_instances WHERE "
                                                 "capture = ? ORDER BY caused_ps DESC"));
  inst->Bind(1, ref.seq);
  while (true) {
    ASSIGN_OR_RETURN(bool more, inst->Step());
    if (!more) break;
    trace::InstanceRow r;
    r.id = static_cast<uint64_t>(inst->Int(0));
    r.kernel_name = inst->Text(1);
    r.step = inst->Int(2);
    r.straggler_host = inst->Text(3);
    r.straggler_chip = static_cast<int>(inst->Int(4));
    r.chips = static_cast<int>(inst->Int(5));
    r.spread_ps = inst->Int(6);
    r.lateness_ps = inst->Int(7);
    r.caused_ps = inst->Int(8);
    report.instances.push_back(std::move(r));
  }
  ASSIGN_OR_RETURN(auto left, Statement::Prepare(c,
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

absl::StatusOr<std::vector<KernelIdentity>> Store::FindKernels(const std::string& op_name,
                                                               const std::string& module) {
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(c,
                                              "SELECT id, module, op_name, category, program_id, "
                                              "hlo_hash, flops, bytes_accessed, source, "
                                              "hlo_text, tf_op, source_stack, mlir FROM kernels "
                                              "WHERE op_name = ? AND (? = '' OR module = ?) "
                                              "ORDER BY id DESC LIMIT 50"));
  s->Bind(1, op_name).Bind(2, module).Bind(3, module);
  std::vector<KernelIdentity> out;
  while (true) {
    ASSIGN_OR_RETURN(bool more, s->Step());
    if (!more) break;
    KernelIdentity k;
    k.key.id = s->Int(0);
    k.key.module = s->Text(1);
    k.key.op_name = s->Text(2);
    k.key.category = s->Text(3);
    k.key.program_id = static_cast<uint64_t>(s->Int(4));
    k.key.hlo_hash = static_cast<uint64_t>(s->Int(5));
    k.key.flops = s->Int(6);
    k.key.bytes_accessed = s->Int(7);
    k.key.source = s->Text(8);
    k.hlo_text = s->Text(9);
    k.tf_op = s->Text(10);
    k.source_stack = s->Text(11);
    k.mlir = s->Text(12);
    out.push_back(std::move(k));
  }
  return out;
}

absl::StatusOr<std::string> Store::LatestCaptureWith(int64_t kernel_id) {
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(c,
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

absl::StatusOr<std::map<std::string, int64_t>> Store::CaptureCounts() {
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(auto q, Statement::Prepare(c,
                                              "SELECT status, count(*) FROM captures "
                                              "GROUP BY status"));
  std::map<std::string, int64_t> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    out[q->Text(0)] = q->Int(1);
  }
  return out;
}

}  // namespace podprof::storage
