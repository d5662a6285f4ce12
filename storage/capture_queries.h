// The store's reads of captures as such: their rows and states, their hosts rebuilt for
// exports, their timelines, and how much each chip holds. Each read borrows a reader
// connection for its length. Thread-safe.
#ifndef PODPROF_STORAGE_CAPTURE_QUERIES_H_
#define PODPROF_STORAGE_CAPTURE_QUERIES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/database.h"
#include "storage/rows.h"
#include "trace/model.h"

namespace podprof::storage {

class CaptureQueries {
 public:
  explicit CaptureQueries(Database& db) : db_(db) {}
  CaptureQueries(const CaptureQueries&) = delete;
  CaptureQueries& operator=(const CaptureQueries&) = delete;

  // Newest first, hosts included; sets *next_page_token when more match.
  absl::StatusOr<std::vector<CaptureRow>> List(const CaptureQuery& query,
                                               std::string* next_page_token);
  // The capture's row (hosts included); NotFound naming the id.
  absl::StatusOr<CaptureRow> Get(const std::string& capture_id);
  // Stored captures by state (captures.status).
  absl::StatusOr<std::map<std::string, int64_t>> CountsByState();
  // The stored timeline blocks of a capture, decompressed, on the aggregator's clock.
  absl::StatusOr<std::vector<trace::EventBlock>> Timelines(const std::string& capture_id);
  // Calls `fn` for every host of the capture in name order, one host in memory at a time;
  // stops at the first error `fn` returns. NotFound naming the id for an unknown capture.
  absl::Status ForEachHost(const std::string& capture_id,
                           const std::function<absl::Status(StoredHost&)>& fn) {
    return ForEachHost(capture_id, HostSelection(), fn);
  }
  // The same for the hosts and chips `only` selects: hosts left out are not read at all; chips
  // left out stay in their host's chips (indices and ordinals as stored) but none of their
  // timelines or counters is read.
  absl::Status ForEachHost(const std::string& capture_id, const HostSelection& only,
                           const std::function<absl::Status(StoredHost&)>& fn);
  // Every chip of the capture, by host name then ordinal, with how many timeline events and
  // counter samples it holds, counted from the front of each stored blob (nothing else is
  // decompressed). NotFound naming the id for an unknown capture.
  absl::StatusOr<std::vector<ChipVolume>> ChipVolumes(const std::string& capture_id);

 private:
  Database& db_;
};

}  // namespace podprof::storage

#endif  // PODPROF_STORAGE_CAPTURE_QUERIES_H_
