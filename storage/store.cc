// Opening the store: the database, then its roles over it.
#include "storage/store.h"

#include <utility>

#include "common/status_macros.h"

namespace podprof::storage {

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                                   const StoreOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::Open(path, options));
  return std::unique_ptr<Store>(new Store(std::move(db)));
}

Store::Store(std::unique_ptr<Database> db)
    : db_(std::move(db)),
      outbox_(*db_),
      writer_(*db_, outbox_),
      captures_(*db_),
      kernels_(*db_),
      insights_(*db_),
      telemetry_(*db_) {}

Store::~Store() = default;

}  // namespace podprof::storage
