#include "storage/segment_index.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace podprof::storage::internal {
namespace {

// The table whose rows point into segments of `kind`.
const char* TableOf(const std::string& kind) {
  return kind == kTimelineSegments ? "timeline_blocks" : "counter_series";
}

}  // namespace

absl::StatusOr<int64_t> OpenSegment(Connection& c, int64_t seq, const char* kind) {
  ASSIGN_OR_RETURN(auto find, Statement::Prepare(c,
                                                 "SELECT id FROM segments WHERE capture = ? AND "
                                                 "kind = ? AND sealed_bytes < 0 ORDER BY id "
                                                 "DESC LIMIT 1"));
  find->Bind(1, seq).Bind(2, absl::string_view(kind));
  ASSIGN_OR_RETURN(const bool found, find->Step());
  if (found) return find->Int(0);
  ASSIGN_OR_RETURN(auto ins,
                   Statement::Prepare(c, "INSERT INTO segments (capture, kind) VALUES (?, ?)"));
  ins->Bind(1, seq).Bind(2, absl::string_view(kind));
  RETURN_IF_ERROR(ins->Run());
  return sqlite3_last_insert_rowid(c.get());
}

absl::Status SealSegments(Connection& c, SegmentFiles& files, int64_t seq) {
  ASSIGN_OR_RETURN(auto open, Statement::Prepare(c,
                                                 "SELECT id FROM segments WHERE capture = ? AND "
                                                 "sealed_bytes < 0"));
  ASSIGN_OR_RETURN(auto seal,
                   Statement::Prepare(c, "UPDATE segments SET sealed_bytes = ? WHERE id = ?"));
  open->Bind(1, seq);
  std::vector<int64_t> ids;
  RETURN_IF_ERROR(open->ForEachRow([&](const Statement& row) {
    ids.push_back(row.Int(0));
    return absl::OkStatus();
  }));
  for (const int64_t id : ids) {
    ASSIGN_OR_RETURN(const int64_t bytes, files.Seal(id));
    seal->Reset();
    seal->Bind(1, bytes).Bind(2, id);
    RETURN_IF_ERROR(seal->Run());
  }
  return absl::OkStatus();
}

BlobAt LocateBlob(RowReader& col) {
  BlobAt at;
  at.inline_bytes = col.Blob();
  if (col.NextIsNull()) {
    col.Skip(4);
    return at;
  }
  SegmentRef& ref = at.record.emplace();
  ref.segment = col.Int();
  ref.offset = col.Int();
  ref.bytes = col.Int();
  ref.crc = static_cast<uint32_t>(col.Int());
  return at;
}

absl::StatusOr<std::string> ReadBlob(const BlobAt& at, const SegmentFiles& files) {
  if (!at.record) return at.inline_bytes;
  return files.Read(*at.record);
}

absl::StatusOr<std::string> ReadBlob(RowReader& col, const SegmentFiles& files) {
  return ReadBlob(LocateBlob(col), files);
}

absl::StatusOr<SegmentRecovery> RecoverSegments(Connection& c, SegmentFiles& files) {
  SegmentRecovery out;
  struct Segment {
    int64_t id, seq, sealed_bytes;
    std::string kind, capture, status;
  };
  std::vector<Segment> segments;
  ASSIGN_OR_RETURN(auto all, Statement::Prepare(c,
                                                "SELECT s.id, s.capture, s.sealed_bytes, s.kind, "
                                                "c.id, c.status FROM segments s JOIN captures c "
                                                "ON c.seq = s.capture ORDER BY s.id"));
  RETURN_IF_ERROR(all->ForEachRow([&](const Statement& row) {
    segments.push_back({row.Int(0), row.Int(1), row.Int(2), row.Text(3), row.Text(4), row.Text(5)});
    return absl::OkStatus();
  }));
  ASSIGN_OR_RETURN(auto seal,
                   Statement::Prepare(c, "UPDATE segments SET sealed_bytes = ? WHERE id = ?"));
  ASSIGN_OR_RETURN(auto partial, Statement::Prepare(c,
                                                    "UPDATE captures SET status = 'partial' "
                                                    "WHERE seq = ? AND status = 'complete'"));
  for (const Segment& s : segments) {
    int64_t valid = s.sealed_bytes;
    if (s.sealed_bytes < 0) {
      // Unsealed: its capture was under way when the aggregator stopped.
      ASSIGN_OR_RETURN(const SegmentScan scan, files.Recover(s.id));
      ++out.segments_scanned;
      out.bytes_truncated += scan.file_bytes - scan.valid_bytes;
      valid = scan.valid_bytes;
      seal->Reset();
      seal->Bind(1, valid).Bind(2, s.id);
      RETURN_IF_ERROR(seal->Run());
    } else {
      // Sealed, so whole when its capture committed; only a file lost or cut since is short,
      // and only such a file is scanned.
      ASSIGN_OR_RETURN(const int64_t size, files.FileBytes(s.id));
      if (size >= s.sealed_bytes) continue;
      ASSIGN_OR_RETURN(const SegmentScan scan, files.Recover(s.id));
      if (scan.valid_bytes >= s.sealed_bytes) continue;
      valid = scan.valid_bytes;
      out.bytes_truncated += scan.file_bytes - scan.valid_bytes;
    }
    ASSIGN_OR_RETURN(auto drop, Statement::Prepare(c, absl::StrCat("DELETE FROM ", TableOf(s.kind),
                                                                   " WHERE segment = ? AND "
                                                                   "seg_offset + seg_bytes > ?")));
    drop->Bind(1, s.id).Bind(2, valid);
    RETURN_IF_ERROR(drop->Run());
    const int dropped = sqlite3_changes(c.get());
    if (dropped == 0) continue;
    out.rows_dropped += dropped;
    partial->Reset();
    partial->Bind(1, s.seq);
    RETURN_IF_ERROR(partial->Run());
    out.warnings.push_back(absl::StrCat("capture ", s.capture, ": ", dropped, " ", s.kind,
                                        " records lost with the end of ", files.PathOf(s.id), " (",
                                        valid, " bytes whole), dropped; the capture was ", s.status,
                                        sqlite3_changes(c.get()) > 0 ? ", now partial" : ""));
  }
  ASSIGN_OR_RETURN(out.files_removed, RemoveUnreferencedSegments(c, files));
  return out;
}

absl::StatusOr<int64_t> RemoveUnreferencedSegments(Connection& c, SegmentFiles& files) {
  ASSIGN_OR_RETURN(const std::vector<int64_t> on_disk, files.List());
  if (on_disk.empty()) return 0;
  std::set<int64_t> named;
  ASSIGN_OR_RETURN(auto ids, Statement::Prepare(c, "SELECT id FROM segments"));
  RETURN_IF_ERROR(ids->ForEachRow([&](const Statement& row) {
    named.insert(row.Int(0));
    return absl::OkStatus();
  }));
  int64_t removed = 0;
  for (const int64_t segment : on_disk) {
    if (named.count(segment) > 0) continue;
    RETURN_IF_ERROR(files.Remove(segment));
    ++removed;
  }
  return removed;
}

absl::Status VerifySegments(Connection& c, const SegmentFiles& files) {
  for (const char* table : {"timeline_blocks", "counter_series"}) {
    ASSIGN_OR_RETURN(auto rows, Statement::Prepare(c, absl::StrCat("SELECT c.id, t.", kBlobColumns,
                                                                   " FROM ", table,
                                                                   " t JOIN captures c ON c.seq "
                                                                   "= t.capture WHERE t.segment "
                                                                   "IS NOT NULL")));
    RETURN_IF_ERROR(rows->ForEachRow([&](const Statement& row) -> absl::Status {
      RowReader col(row);
      const std::string capture = col.Text();
      absl::StatusOr<std::string> bytes = ReadBlob(col, files);
      if (!bytes.ok()) {
        return absl::DataLossError(
            absl::StrCat("capture ", capture, ", ", table, ": ", bytes.status().message()));
      }
      return absl::OkStatus();
    }));
  }
  return absl::OkStatus();
}

}  // namespace podprof::storage::internal
