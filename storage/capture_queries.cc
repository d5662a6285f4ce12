// Captures listed (with their hosts), counted by state, and their timelines read back; the
// hosts rebuilt for exports are in host_reads.cc.
#include "storage/capture_queries.h"

#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "storage/segment_index.h"
#include "storage/store_internal.h"
#include "trace/columns.h"

namespace podprof::storage {
namespace {

using internal::Known;
using internal::ParseLabels;

// The listing's statement, its parameters bound: `token_start`/`token_id` are the page token's
// (the last row of the page before), `limit` how many rows to read.
absl::StatusOr<std::unique_ptr<Statement>> PrepareList(Connection& c, const CaptureQuery& q,
                                                       int64_t token_start,
                                                       const std::string& token_id, int limit) {
  std::string sql =
      "SELECT c.id, c.start_ns, c.end_ns, c.status, c.labels, c.source, c.events, "
      "c.kernel_count, (SELECT COUNT(*) FROM capture_hosts h WHERE h.capture = c.seq), "
      "c.created_ns, "
      "(SELECT COUNT(*) FROM chips x WHERE x.capture = c.seq), c.options FROM captures c "
      "WHERE c.start_ns >= ?1 AND c.start_ns <= ?2 AND (?3 = '' OR c.status = ?3) AND "
      "(c.start_ns < ?4 OR (c.start_ns = ?4 AND c.id < ?5)) AND (?6 = '' OR c.id = ?6)";
  int param = 7;
  for (size_t i = 0; i < q.labels.size(); ++i) {
    // json_each's key is the label's own bytes: a JSON path ('$."k"') cannot spell a key that
    // holds a quote, so such a label could never be selected.
    sql += absl::StrCat(" AND EXISTS (SELECT 1 FROM json_each(c.labels) l WHERE l.key = ?", param,
                        " AND l.value = ?", param + 1, ")");
    param += 2;
  }
  sql += absl::StrCat(" ORDER BY c.start_ns DESC, c.id DESC LIMIT ?", param);
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(c, sql));
  s->Bind(1, q.since_ns).Bind(2, q.until_ns);
  s->Bind(3, std::string(q.status ? CaptureStateName(*q.status) : "")).Bind(4, token_start);
  s->Bind(5, q.page_token.empty() ? std::string("\xff\xff") : token_id).Bind(6, q.id);
  param = 7;
  for (const auto& [k, v] : q.labels) {
    s->Bind(param, k).Bind(param + 1, v);
    param += 2;
  }
  s->Bind(param, int64_t{limit});
  return s;
}

// One row of the listing's statement.
absl::StatusOr<CaptureRow> ReadCaptureRow(const Statement& s) {
  RowReader col(s);
  CaptureRow r;
  r.id = col.Text();
  r.start_ns = col.Int();
  r.end_ns = col.Int();
  const std::string status = col.Text();
  ASSIGN_OR_RETURN(r.status, Known(CaptureStateNamed(status), "captures.status", status, r.id));
  r.labels = ParseLabels(col.Text());
  const std::string source = col.Text();
  ASSIGN_OR_RETURN(r.source, Known(CaptureSourceNamed(source), "captures.source", source, r.id));
  r.events = col.Int();
  r.kernels = col.Int();
  r.hosts = col.Int();
  r.created_ns = col.Int();
  r.chips = col.Int();
  r.options_json = col.Text();
  return r;
}

// Fills in each listed capture's hosts.
absl::Status AddHostRows(Connection& c, std::vector<CaptureRow>* rows) {
  ASSIGN_OR_RETURN(auto hosts,
                   Statement::Prepare(c,
                                      "SELECT h.name, x.status, x.error, "
                                      "x.clock_offset_ns, x.clock_uncertainty_ns, "
                                      "x.events, x.host_clock, x.clock_drift_ppb, "
                                      "x.clock_mid_ns, x.analysed_by, x.warnings, x.slice "
                                      "FROM capture_hosts x "
                                      "JOIN hosts h "
                                      "ON h.id = x.host_id JOIN captures c ON c.seq = "
                                      "x.capture WHERE c.id = ? "
                                      "ORDER BY h.name"));
  for (CaptureRow& r : *rows) {
    hosts->Reset();
    hosts->Bind(1, r.id);
    RETURN_IF_ERROR(hosts->ForEachRow([&](const Statement& s) -> absl::Status {
      RowReader col(s);
      HostRow h;
      h.host = col.Text();
      const std::string status = col.Text();
      ASSIGN_OR_RETURN(h.status,
                       Known(HostOutcomeNamed(status), "capture_hosts.status", status, r.id));
      h.error = col.Text();
      h.clock_offset_ns = col.Int();
      h.clock_uncertainty_ns = col.Int();
      h.events = col.Int();
      h.host_clock = col.Bool();
      const double drift_ppb = col.Double();
      h.correction = {h.clock_offset_ns, drift_ppb, col.Int()};
      h.analysed_by = col.Text();
      const std::string warnings = col.Text();
      if (!warnings.empty()) h.warnings = absl::StrSplit(warnings, '\n');
      h.slice = static_cast<int>(col.Int());
      r.host_rows.push_back(std::move(h));
      return absl::OkStatus();
    }));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<CaptureRow>> CaptureQueries::List(const CaptureQuery& q,
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
  ASSIGN_OR_RETURN(ReaderLease c, db_.Reader());
  const int limit = q.limit > 0 ? q.limit : 100;
  // One row more than the page: whether there is a next page.
  ASSIGN_OR_RETURN(auto s, PrepareList(*c, q, token_start, token_id, limit + 1));
  std::vector<CaptureRow> out;
  RETURN_IF_ERROR(s->ForEachRow([&](const Statement& row) -> absl::Status {
    ASSIGN_OR_RETURN(CaptureRow r, ReadCaptureRow(row));
    out.push_back(std::move(r));
    return absl::OkStatus();
  }));
  next_page_token->clear();
  if (static_cast<int>(out.size()) > limit) {
    out.resize(limit);
    *next_page_token = absl::StrCat(out.back().start_ns, ":", out.back().id);
  }
  RETURN_IF_ERROR(AddHostRows(*c, &out));
  return out;
}

absl::StatusOr<CaptureRow> CaptureQueries::Get(const std::string& capture_id) {
  CaptureQuery q;
  q.id = capture_id;
  q.since_ns = INT64_MIN;
  q.limit = 1;
  std::string next;
  ASSIGN_OR_RETURN(std::vector<CaptureRow> rows, List(q, &next));
  if (rows.empty()) return absl::NotFoundError(absl::StrCat("no capture \"", capture_id, "\""));
  return rows.front();
}

absl::StatusOr<std::map<std::string, int64_t>> CaptureQueries::CountsByState() {
  ASSIGN_OR_RETURN(ReaderLease c, db_.Reader());
  ASSIGN_OR_RETURN(auto q, Statement::Prepare(*c,
                                              "SELECT status, count(*) FROM captures "
                                              "GROUP BY status"));
  std::map<std::string, int64_t> out;
  RETURN_IF_ERROR(q->ForEachRow([&](const Statement& row) {
    out[row.Text(0)] = row.Int(1);
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<trace::EventBlock>> CaptureQueries::Timelines(
    const std::string& capture_id) {
  ASSIGN_OR_RETURN(ReaderLease c, db_.Reader());
  ASSIGN_OR_RETURN(const internal::CaptureRef ref, internal::RequireCapture(*c, capture_id));
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(*c,
                                              "SELECT x.ordinal, t.line, t.base_ns, t.data, "
                                              "t.segment, t.seg_offset, t.seg_bytes, t.seg_crc, "
                                              "ch.host_clock, ch.clock_offset_ns, "
                                              "ch.clock_drift_ppb, ch.clock_mid_ns, "
                                              "ch.kernel_map, ch.host_id "
                                              "FROM timeline_blocks t JOIN chips x ON x.id = "
                                              "t.chip_id JOIN capture_hosts ch ON ch.capture = "
                                              "t.capture AND ch.host_id = x.host_id "
                                              "WHERE t.capture = ? ORDER BY t.rowid"));
  s->Bind(1, ref.seq);
  std::vector<trace::EventBlock> out;
  std::map<int64_t, std::vector<int64_t>> maps;
  RETURN_IF_ERROR(s->ForEachRow([&](const Statement& row) -> absl::Status {
    RowReader col(row);
    trace::EventBlock b;
    b.chip = col.Int32();  // the chip's ordinal
    b.line = col.Text();
    b.base_ns = col.Int();
    ASSIGN_OR_RETURN(const std::string blob, internal::ReadBlob(col, db_.segments()));
    RETURN_IF_ERROR(trace::DecodeTimeline(blob, &b));
    const bool host_clock = col.Bool();
    const int64_t offset_ns = col.Int();
    const double drift_ppb = col.Double();
    const int64_t mid_ns = col.Int();
    const std::string map_blob = col.Blob();
    auto [map, fresh] = maps.try_emplace(col.Int());  // by host: its blocks share one map
    if (fresh) {
      ASSIGN_OR_RETURN(map->second, trace::DecodeKernelMap(map_blob));
    }
    RETURN_IF_ERROR(trace::MapKernels(map->second, &b));
    if (host_clock) {
      trace::ApplyCorrection(trace::ClockCorrection{offset_ns, drift_ppb, mid_ns}, &b);
    }
    out.push_back(std::move(b));
    return absl::OkStatus();
  }));
  return out;
}

}  // namespace podprof::storage
