#include "storage/store.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <future>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "storage/schema.h"
#include "storage/store_internal.h"

namespace podprof::storage {
namespace internal {

std::string LabelsJson(const std::map<std::string, std::string>& labels) {
  return nlohmann::json(labels).dump();
}

std::map<std::string, std::string> ParseLabels(const std::string& text) {
  std::map<std::string, std::string> out;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) {
      if (v.is_string()) out[k] = v.get<std::string>();
    }
  }
  return out;
}

absl::Status Transaction(Connection& c, const std::function<absl::Status()>& body) {
  RETURN_IF_ERROR(c.Exec("BEGIN IMMEDIATE"));
  absl::Status s = body();
  if (s.ok()) s = c.Exec("COMMIT");
  if (!s.ok()) c.Exec("ROLLBACK").IgnoreError();
  return s;
}

}  // namespace internal

namespace {

// Why SQLite could not write `path` (or create its journal beside it), or "" when it can.
// A file that does not exist yet counts as writable: creating it will say otherwise.
std::string NotWritableReason(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return "";
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  for (const std::filesystem::path& p : {std::filesystem::path(path), dir}) {
    if (access(p.c_str(), W_OK) != 0) {
      const int e = errno;
      return absl::StrCat(p.string(), e == EROFS
                                          ? " is on a read-only file system"
                                          : absl::StrCat(" is not writable: ", std::strerror(e)));
    }
  }
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                                   const StoreOptions& options) {
  std::string why = NotWritableReason(path);
  if (why.empty()) {
    absl::StatusOr<std::unique_ptr<Store>> writable = OpenWritable(path, options);
    const bool read_only_error =
        !writable.ok() && writable.status().code() == absl::StatusCode::kFailedPrecondition &&
        absl::StrContains(writable.status().message(), "read-only");
    if (!read_only_error) return writable;
    why = std::string(writable.status().message());
  }
  if (!options.read_only_fallback) {
    return absl::FailedPreconditionError(absl::StrCat("database ", path, ": ", why));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Connection> reader, Connection::OpenReadOnly(path));
  ASSIGN_OR_RETURN(int version, SchemaVersion(*reader));
  if (version != LatestSchemaVersion()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database ", path, " is read-only (", why, ") and has schema version ", version,
        ", but this podprof needs ", LatestSchemaVersion(), " and cannot migrate it"));
  }
  return std::unique_ptr<Store>(new Store(path, std::move(reader), why));
}

absl::StatusOr<std::unique_ptr<Store>> Store::OpenWritable(const std::string& path,
                                                           const StoreOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<Connection> writer, Connection::Open(path, true));
  if (sqlite3_db_readonly(writer->get(), "main") == 1) {
    // SQLite falls back to reading a file the OS will not let it write.
    return absl::FailedPreconditionError(
        absl::StrCat("database ", path, " opened read-only: the file is read-only"));
  }
  ASSIGN_OR_RETURN(int version, SchemaVersion(*writer));
  if (version == 0) {
    // Must precede the first table for retention to be able to give space back.
    RETURN_IF_ERROR(writer->Exec("PRAGMA auto_vacuum = INCREMENTAL"));
  }
  RETURN_IF_ERROR(writer->Exec("PRAGMA journal_mode = WAL"));
  RETURN_IF_ERROR(Migrate(*writer));
  if (options.max_page_count > 0) {
    RETURN_IF_ERROR(writer->Exec(absl::StrCat("PRAGMA max_page_count = ", options.max_page_count)));
  }
  return std::unique_ptr<Store>(new Store(path, std::move(writer), ""));
}

Store::Store(std::string path, std::unique_ptr<Connection> writer, std::string read_only_reason)
    : path_(std::move(path)),
      read_only_reason_(std::move(read_only_reason)),
      writer_(std::move(writer)) {
  writer_thread_ = std::thread([this] { WriterLoop(); });
}

Store::~Store() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  writer_thread_.join();
}

void Store::WriterLoop() {
  while (true) {
    std::vector<std::function<void(Connection&)>> tasks;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Store* s)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) { return s->stopping_ || !s->queue_.empty(); },
          this));
      if (queue_.empty() && stopping_) return;
      tasks.swap(queue_);
    }
    for (auto& t : tasks) t(*writer_);
  }
}

absl::Status Store::OnWriter(std::function<absl::Status(Connection&)> task) {
  if (read_only()) {
    return absl::FailedPreconditionError(absl::StrCat("nothing can be stored: the database ", path_,
                                                      " is open for queries only (",
                                                      read_only_reason_, ")"));
  }
  std::promise<absl::Status> done;
  std::future<absl::Status> result = done.get_future();
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("the store is closing");
    queue_.push_back([&](Connection& c) { done.set_value(task(c)); });
  }
  return result.get();
}

absl::StatusOr<std::unique_ptr<Connection>> Store::TakeReader() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_readers_.empty()) {
      std::unique_ptr<Connection> c = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return c;
    }
  }
  absl::StatusOr<std::unique_ptr<Connection>> c =
      read_only() ? Connection::OpenReadOnly(path_) : Connection::Open(path_, false);
  if (!c.ok()) return c;
  // Readers map the file (up to 1 GiB) rather than read it a page per call: reading a pod's
  // timelines (exports, the web timeline) is otherwise mostly system calls.
  RETURN_IF_ERROR((*c)->Exec("PRAGMA mmap_size = 1073741824"));
  return c;
}

void Store::ReturnReader(std::unique_ptr<Connection> c) {
  absl::MutexLock lock(&mu_);
  if (idle_readers_.size() < 8) idle_readers_.push_back(std::move(c));
}

// Borrows a reader connection for one query.
absl::Status Store::HealthCheck(int64_t timeout_ns) {
  if (read_only()) {
    // No writer to check: healthy while the file answers a query.
    PODPROF_WITH_READER(c);
    return c.Exec("SELECT count(*) FROM captures");
  }
  // Shared with the task: the caller may give up before the writer gets to it.
  auto done = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> result = done->get_future();
  const int lock_ms = static_cast<int>(std::clamp<int64_t>(timeout_ns / 2'000'000, 1, 5000));
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("the store is closing");
    queue_.push_back([done, lock_ms](Connection& c) {
      sqlite3_busy_timeout(c.get(), lock_ms);
      absl::Status s = c.Exec("BEGIN IMMEDIATE");
      if (s.ok()) s = c.Exec("ROLLBACK");
      sqlite3_busy_timeout(c.get(), 5000);
      if (!s.ok()) {
        s = absl::UnavailableError(
            absl::StrCat("the database's write lock is held elsewhere: ", s.message()));
      }
      done->set_value(s);
    });
  }
  if (result.wait_for(std::chrono::nanoseconds(timeout_ns)) != std::future_status::ready) {
    return absl::DeadlineExceededError(
        absl::StrCat("the store's writer did not answer within ", timeout_ns / 1'000'000, " ms"));
  }
  return result.get();
}

absl::StatusOr<Store::CaptureRef> Store::RequireCapture(Connection& c, const std::string& id) {
  ASSIGN_OR_RETURN(
      auto s,
      Statement::Prepare(c, "SELECT seq, stats_first, stats_last FROM captures WHERE id = ?"));
  s->Bind(1, id);
  ASSIGN_OR_RETURN(bool found, s->Step());
  if (!found) return absl::NotFoundError(absl::StrCat("no capture with id \"", id, "\""));
  return CaptureRef{s->Int(0), s->Int(1), s->Int(2)};
}

absl::StatusOr<int64_t> Store::UsedBytes() {
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(
      auto s, Statement::Prepare(
                  c,
                  "SELECT (SELECT page_count FROM pragma_page_count()) - (SELECT freelist_count "
                  "FROM pragma_freelist_count()), (SELECT page_size FROM pragma_page_size())"));
  ASSIGN_OR_RETURN(bool row, s->Step());
  return row ? s->Int(0) * s->Int(1) : 0;
}

absl::Status Store::CheckIntegrity() {
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(c, "PRAGMA integrity_check"));
  ASSIGN_OR_RETURN(bool row, s->Step());
  if (!row || s->Text(0) != "ok") {
    return absl::DataLossError(
        absl::StrCat("integrity check of ", path_, ": ", row ? s->Text(0) : "no answer"));
  }
  return absl::OkStatus();
}

}  // namespace podprof::storage
