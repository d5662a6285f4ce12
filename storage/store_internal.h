// What the store's source files share and nothing outside storage/ may use.
#ifndef PODPROF_STORAGE_STORE_INTERNAL_H_
#define PODPROF_STORAGE_STORE_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "storage/sqlite.h"

namespace podprof::storage::internal {

// Labels as the JSON object kept in captures.labels, and back (a damaged text reads as none).
std::string LabelsJson(const std::map<std::string, std::string>& labels);
std::map<std::string, std::string> ParseLabels(const std::string& text);
// Runs `body` in a transaction on `c`; rolls back on failure.
absl::Status Transaction(Connection& c, const std::function<absl::Status()>& body);

// hosts.id by name, a name not stored yet inserted: the statements prepared once per
// transaction, for every writer that names hosts (captures, telemetry).
class HostIds {
 public:
  static absl::StatusOr<HostIds> Prepare(Connection& c);
  absl::StatusOr<int64_t> Of(const std::string& name);

 private:
  std::unique_ptr<Statement> insert_, select_;
};

// A stored capture's row number and the rowid range of its per-chip statistics.
struct CaptureRef {
  // The capture's rows of kernel_stats lie within [stats_first, stats_last] (rows of other
  // captures written at the same time may too); none (first > last) while it runs: the rows
  // its hosts wrote ahead (CaptureWriter::WriteHostData) show once it is whole.
  int64_t seq, stats_first, stats_last;
};
// NotFound naming the id if there is no such capture.
absl::StatusOr<CaptureRef> RequireCapture(Connection& c, const std::string& id);

// A state read back from its stored name; DataLoss naming the column, the text and the capture
// for a name this build does not know (a store written by a newer podprof).
template <typename E>
absl::StatusOr<E> Known(std::optional<E> value, absl::string_view column, const std::string& text,
                        const std::string& capture) {
  if (value) return *value;
  return absl::DataLossError(absl::StrCat(column, " of capture ", capture, " is \"", text,
                                          "\", which this podprof does not know"));
}

}  // namespace podprof::storage::internal

#endif  // PODPROF_STORAGE_STORE_INTERNAL_H_
