// What the store's source files share and nothing outside storage/ may use.
#ifndef PODPROF_STORAGE_STORE_INTERNAL_H_
#define PODPROF_STORAGE_STORE_INTERNAL_H_

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "storage/sqlite.h"

namespace podprof::storage::internal {

// Labels as the JSON object kept in captures.labels, and back (a damaged text reads as none).
std::string LabelsJson(const std::map<std::string, std::string>& labels);
std::map<std::string, std::string> ParseLabels(const std::string& text);
// Runs `body` in a transaction on `c`; rolls back on failure.
absl::Status Transaction(Connection& c, const std::function<absl::Status()>& body);

}  // namespace podprof::storage::internal

// In a Store member: `name` is a reader connection taken from the pool and given back when the
// scope ends.
#define PODPROF_WITH_READER(name)                                           \
  ASSIGN_OR_RETURN(std::unique_ptr<Connection> name##_owned, TakeReader()); \
  Connection& name = *name##_owned;                                         \
  struct name##Return {                                                     \
    Store* s;                                                               \
    std::unique_ptr<Connection>* c;                                         \
    ~name##Return() { s->ReturnReader(std::move(*c)); }                     \
  } name##_return {                                                         \
    this, &name##_owned                                                     \
  }

#endif  // PODPROF_STORAGE_STORE_INTERNAL_H_
