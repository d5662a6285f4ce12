// The store's segment files: the bytes of timeline blocks and counter series, written once.
//
// SQLite wrote every blob twice (each page into the write-ahead log, then the checkpoint
// copied it into the database), and that cost more than receiving it (docs/SCALE.md). The
// blobs now go, as they arrived, into files of their own beside the database, and SQLite keeps
// only where each one lies (SCHEMA.md: segments, and the rows of timeline_blocks and
// counter_series). The files are designed as a log is:
// - a file is only ever appended to, then sealed; each is one capture's timelines or counters,
//   so retention deletes whole files;
// - each record carries its length and CRC-32C, so a torn tail is found and cut at start-up;
// - the rows that point at records are committed only after their bytes are durable
//   (`Sync`, one fdatasync a batch), so no committed row points at bytes a crash took.
//
// A file is `<dir>/<segments.id, 12 digits>.seg`: a 16-byte header, then records of an 8-byte
// header (length, then CRC-32C of the payload, both little-endian uint32) and the payload.
// Thread-safe: appends, syncs and seals from the database's writer thread, reads from any.
#ifndef PODPROF_STORAGE_SEGMENTS_H_
#define PODPROF_STORAGE_SEGMENTS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace podprof::storage {

// The first bytes of every segment file.
inline constexpr absl::string_view kSegmentMagic = "podprof-segment1";
// A record's header: payload length, payload CRC-32C.
inline constexpr int64_t kRecordHeaderBytes = 8;
// The most one record may hold: a blob is at most a chunk's worth (a few MB); a length past
// this in a record header is damage, not data.
inline constexpr int64_t kMaxRecordBytes = int64_t{1} << 30;

// Where a blob's bytes lie: its payload's offset in segment `segment` and its checksum.
struct SegmentRef {
  int64_t segment = 0;
  int64_t offset = 0;
  int64_t bytes = 0;
  uint32_t crc = 0;
};

// What a scan of a segment found (Recover).
struct SegmentScan {
  bool exists = false;
  int64_t file_bytes = 0;   // before any truncation
  int64_t valid_bytes = 0;  // the header and every whole record with a right checksum
  int64_t records = 0;
};

class SegmentFiles {
 public:
  // The folder `dir`, created when missing unless `read_only`.
  static absl::StatusOr<std::unique_ptr<SegmentFiles>> Open(const std::string& dir, bool read_only);
  ~SegmentFiles();
  SegmentFiles(const SegmentFiles&) = delete;
  SegmentFiles& operator=(const SegmentFiles&) = delete;

  const std::string& dir() const { return dir_; }
  std::string PathOf(int64_t segment) const;

  // Appends `payload` as one record of `segment` (its file created, with its header, when it
  // does not exist yet). Not durable until Sync. ResourceExhausted naming the file when the
  // disk is full; what was half written is cut off again.
  absl::StatusOr<SegmentRef> Append(int64_t segment, absl::string_view payload);
  // Makes every record appended since the last Sync durable: one fdatasync per file written.
  absl::Status Sync();
  // Syncs `segment` and closes it for appending; returns its length. A later Append opens it
  // again (a capture whose last write failed and is retried).
  absl::StatusOr<int64_t> Seal(int64_t segment);

  // The payload `ref` points at. DataLoss naming the file when it is missing, shorter than
  // the record or the checksum differs: never bytes that are not the ones written.
  absl::StatusOr<std::string> Read(const SegmentRef& ref) const;

  // Scans `segment`'s records from its start and cuts the file after the last whole one with
  // a right checksum (a tail a crash tore). For start-up, before any append.
  absl::StatusOr<SegmentScan> Recover(int64_t segment);
  // The length of `segment`'s file; -1 when it has none.
  absl::StatusOr<int64_t> FileBytes(int64_t segment) const;
  // The segments that have a file.
  absl::StatusOr<std::vector<int64_t>> List() const;
  // Deletes `segment`'s file (none is fine).
  absl::Status Remove(int64_t segment);
  // The bytes the files take.
  absl::StatusOr<int64_t> DiskBytes() const;

 private:
  struct OpenFile {
    int fd = -1;
    int64_t size = 0;
  };
  SegmentFiles(std::string dir, bool read_only) : dir_(std::move(dir)), read_only_(read_only) {}
  absl::StatusOr<OpenFile*> OpenForAppend(int64_t segment) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  const bool read_only_;
  mutable absl::Mutex mu_;
  std::map<int64_t, OpenFile> open_ ABSL_GUARDED_BY(mu_);
  std::set<int64_t> unsynced_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podprof::storage

#endif  // PODPROF_STORAGE_SEGMENTS_H_
