#include "storage/telemetry_table.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/store_internal.h"

namespace podprof::storage {
namespace {

absl::Status Insert(Connection& c, const std::vector<TelemetryRecord>& rows) {
  ASSIGN_OR_RETURN(internal::HostIds hosts, internal::HostIds::Prepare(c));
  std::map<std::string, int64_t> ids;
  for (const TelemetryRecord& r : rows) {
    if (ids.count(r.host) > 0) continue;
    ASSIGN_OR_RETURN(ids[r.host], hosts.Of(r.host));
  }
  ASSIGN_OR_RETURN(auto ins, Statement::Prepare(c,
                                                "INSERT OR REPLACE INTO telemetry (time_ns, "
                                                "host_id, chip, interval_ns, steps, step_mean_us, "
                                                "step_max_us, duty_cycle, hbm_used_bytes, queued, "
                                                "collectives, collective_mean_us, dcn_transfers, "
                                                "dcn_p50_us, dcn_p99_us) "
                                                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
  for (const TelemetryRecord& r : rows) {
    ins->Reset();
    ins->Bind(1, r.time_ns)
        .Bind(2, ids[r.host])
        .Bind(3, int64_t{r.chip})
        .Bind(4, r.interval_ns)
        .Bind(5, r.steps)
        .Bind(6, r.step_mean_us)
        .Bind(7, r.step_max_us)
        .Bind(8, r.duty_cycle_percent)
        .Bind(9, r.hbm_used_bytes)
        .Bind(10, r.queued)
        .Bind(11, r.collectives)
        .Bind(12, r.collective_mean_us)
        .Bind(13, r.dcn_transfers)
        .Bind(14, r.dcn_latency_p50_us)
        .Bind(15, r.dcn_latency_p99_us);
    RETURN_IF_ERROR(ins->Run());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TelemetryTable::Append(const std::vector<TelemetryRecord>& rows) {
  if (rows.empty()) return absl::OkStatus();
  return db_.OnWriter(
      [&rows](Connection& c) { return internal::Transaction(c, [&] { return Insert(c, rows); }); });
}

absl::StatusOr<std::vector<TelemetryRecord>> TelemetryTable::Read(const TelemetryFilter& filter,
                                                                  bool* truncated) {
  ASSIGN_OR_RETURN(ReaderLease c, db_.Reader());
  std::string sql =
      "SELECT t.time_ns, h.name, t.chip, t.interval_ns, t.steps, t.step_mean_us, t.step_max_us, "
      "t.duty_cycle, t.hbm_used_bytes, t.queued, t.collectives, t.collective_mean_us, "
      "t.dcn_transfers, t.dcn_p50_us, t.dcn_p99_us FROM "
      "telemetry t JOIN hosts h ON h.id = "
      "t.host_id WHERE t.time_ns >= ? AND t.time_ns < ?";
  if (!filter.hosts.empty()) {
    absl::StrAppend(&sql, " AND h.name IN (?");
    for (size_t i = 1; i < filter.hosts.size(); ++i) absl::StrAppend(&sql, ",?");
    absl::StrAppend(&sql, ")");
  }
  // The newest `limit` + 1 rows (the one past the limit says whether any were cut).
  absl::StrAppend(&sql, " ORDER BY t.time_ns DESC, h.name DESC, t.chip DESC LIMIT ?");
  ASSIGN_OR_RETURN(auto q, Statement::Prepare(*c, sql));
  q->Bind(1, filter.since_ns).Bind(2, filter.until_ns);
  int i = 3;
  for (const std::string& h : filter.hosts) q->Bind(i++, h);
  q->Bind(i, filter.limit + 1);
  std::vector<TelemetryRecord> out;
  RETURN_IF_ERROR(q->ForEachRow([&out](const Statement& row) {
    TelemetryRecord& r = out.emplace_back();
    r.time_ns = row.Int(0);
    r.host = row.Text(1);
    r.chip = static_cast<int>(row.Int(2));
    r.interval_ns = row.Int(3);
    r.steps = row.Int(4);
    r.step_mean_us = row.Double(5);
    r.step_max_us = row.Double(6);
    r.duty_cycle_percent = row.Double(7);
    r.hbm_used_bytes = row.Int(8);
    r.queued = row.Int(9);
    r.collectives = row.Int(10);
    r.collective_mean_us = row.Double(11);
    r.dcn_transfers = row.Int(12);
    r.dcn_latency_p50_us = row.Double(13);
    r.dcn_latency_p99_us = row.Double(14);
    return absl::OkStatus();
  }));
  const bool cut = static_cast<int64_t>(out.size()) > filter.limit;
  if (cut) out.pop_back();
  if (truncated != nullptr) *truncated = cut;
  std::reverse(out.begin(), out.end());
  return out;
}

absl::StatusOr<int64_t> TelemetryTable::DeleteBefore(int64_t before_ns) {
  int64_t deleted = 0;
  RETURN_IF_ERROR(db_.OnWriter([before_ns, &deleted](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(auto del, Statement::Prepare(c, "DELETE FROM telemetry WHERE time_ns < ?"));
    RETURN_IF_ERROR(del->Bind(1, before_ns).Run());
    deleted = sqlite3_changes(c.get());
    return absl::OkStatus();
  }));
  return deleted;
}

absl::StatusOr<int64_t> TelemetryTable::Count() {
  ASSIGN_OR_RETURN(ReaderLease c, db_.Reader());
  ASSIGN_OR_RETURN(auto q, Statement::Prepare(*c, "SELECT COUNT(*) FROM telemetry"));
  ASSIGN_OR_RETURN(bool row, q->Step());
  return row ? q->Int(0) : 0;
}

}  // namespace podprof::storage
