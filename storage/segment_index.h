// What the store's tables say of its segment files (storage/segments.h): a capture's open
// segments, sealing them, reading a row's bytes wherever they lie, and the start-up recovery
// that makes the tables and the files agree after a crash. Internal to storage/.
#ifndef PODPROF_STORAGE_SEGMENT_INDEX_H_
#define PODPROF_STORAGE_SEGMENT_INDEX_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/segments.h"
#include "storage/sqlite.h"

namespace podprof::storage::internal {

// segments.kind: a capture's timelines and its counters are kept in files of their own, so
// that retention's keep_timelines deletes whole files.
inline constexpr char kTimelineSegments[] = "timelines";
inline constexpr char kCounterSegments[] = "counters";

// The columns a blob row is read by, in this order: its inline bytes (older rows), then where
// its record lies (NULL segment for older rows).
inline constexpr char kBlobColumns[] = "data, segment, seg_offset, seg_bytes, seg_crc";

// The segment of `kind` capture `seq` is appending to, its row inserted (in the caller's
// transaction) when it has none yet.
absl::StatusOr<int64_t> OpenSegment(Connection& c, int64_t seq, const char* kind);

// Syncs and seals every segment of capture `seq` still appended to, recording each one's
// length: in the transaction that ends the capture, whose commit then says its bytes are whole.
absl::Status SealSegments(Connection& c, SegmentFiles& files, int64_t seq);

// Where a blob row's bytes lie: its inline `data` for a row from before segments, else its
// record. Read from the row's kBlobColumns alone, so that a reader can choose which to fetch.
struct BlobAt {
  std::string inline_bytes;
  std::optional<SegmentRef> record;
};
// `col` is at the first of kBlobColumns and moves past them.
BlobAt LocateBlob(RowReader& col);
// The bytes, a record's checked against its checksum.
absl::StatusOr<std::string> ReadBlob(const BlobAt& at, const SegmentFiles& files);

// A blob row's bytes: LocateBlob, then ReadBlob.
absl::StatusOr<std::string> ReadBlob(RowReader& col, const SegmentFiles& files);

// What RecoverSegments did.
struct SegmentRecovery {
  int64_t segments_scanned = 0;  // those a crash left unsealed
  int64_t bytes_truncated = 0;   // torn tails cut off
  int64_t rows_dropped = 0;      // rows whose bytes were gone
  int64_t files_removed = 0;     // files no row names (a deleted capture's, a rolled-back write's)
  std::vector<std::string> warnings;  // one per capture that lost rows, naming it
};

// Start-up, on the writer, before any capture runs: every unsealed segment is scanned and its
// torn tail cut; a sealed one shorter than it was sealed is scanned too; rows that point past
// what is left are dropped (a complete capture that lost any becomes partial), with a warning
// naming the capture; files no row names are removed.
absl::StatusOr<SegmentRecovery> RecoverSegments(Connection& c, SegmentFiles& files);

// Deletes the files of segments whose rows are gone (retention deleted their captures or
// timelines). Lists the files before reading the rows: a file is created only after its row
// is committed, so one missing from the rows read afterwards is garbage. Returns how many.
absl::StatusOr<int64_t> RemoveUnreferencedSegments(Connection& c, SegmentFiles& files);

// Every row's record read back and checked: the first problem, naming the capture, or OK.
absl::Status VerifySegments(Connection& c, const SegmentFiles& files);

}  // namespace podprof::storage::internal

#endif  // PODPROF_STORAGE_SEGMENT_INDEX_H_
