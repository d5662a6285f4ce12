#include "storage/database.h"

#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <future>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/schema.h"

namespace podprof::storage {
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

// The most idle readers the pool keeps; more are closed when given back.
constexpr size_t kIdleReaders = 8;

}  // namespace

ReaderLease::ReaderLease(ReaderLease&& other) noexcept
    : owner_(other.owner_), connection_(std::move(other.connection_)) {}

ReaderLease& ReaderLease::operator=(ReaderLease&& other) noexcept {
  if (this != &other) {
    GiveBack();
    owner_ = other.owner_;
    connection_ = std::move(other.connection_);
  }
  return *this;
}

ReaderLease::~ReaderLease() { GiveBack(); }

void ReaderLease::GiveBack() {
  if (connection_ != nullptr) owner_->ReturnReader(std::move(connection_));
}

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path,
                                                         const StoreOptions& options) {
  std::string why = NotWritableReason(path);
  if (why.empty()) {
    absl::StatusOr<std::unique_ptr<Database>> writable = OpenWritable(path, options);
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
  ASSIGN_OR_RETURN(std::unique_ptr<SegmentFiles> segments,
                   SegmentFiles::Open(SegmentFolder(path), /*read_only=*/true));
  return std::unique_ptr<Database>(new Database(path, std::move(reader), std::move(segments), why));
}

absl::StatusOr<std::unique_ptr<Database>> Database::OpenWritable(const std::string& path,
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
  ASSIGN_OR_RETURN(std::unique_ptr<SegmentFiles> segments,
                   SegmentFiles::Open(SegmentFolder(path), /*read_only=*/false));
  return std::unique_ptr<Database>(new Database(path, std::move(writer), std::move(segments), ""));
}

Database::Database(std::string path, std::unique_ptr<Connection> writer,
                   std::unique_ptr<SegmentFiles> segments, std::string read_only_reason)
    : path_(std::move(path)),
      read_only_reason_(std::move(read_only_reason)),
      segments_(std::move(segments)),
      writer_(std::move(writer)) {
  writer_thread_ = std::thread([this] { WriterLoop(); });
}

Database::~Database() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  writer_thread_.join();
}

void Database::WriterLoop() {
  // Named, so that what storing costs the daemon can be told apart (top -H, the benchmarks).
  pthread_setname_np(pthread_self(), kWriterThreadName);
  while (true) {
    std::vector<std::function<void(Connection&)>> tasks;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Database* d)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->mu_) { return d->stopping_ || !d->queue_.empty(); },
          this));
      if (queue_.empty() && stopping_) return;
      tasks.swap(queue_);
    }
    for (auto& t : tasks) t(*writer_);
  }
}

absl::Status Database::Post(std::function<void(Connection&)> task) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the store is closing");
  queue_.push_back(std::move(task));
  return absl::OkStatus();
}

absl::Status Database::OnWriter(std::function<absl::Status(Connection&)> task) {
  if (read_only()) {
    return absl::FailedPreconditionError(absl::StrCat("nothing can be stored: the database ", path_,
                                                      " is open for queries only (",
                                                      read_only_reason_, ")"));
  }
  std::promise<absl::Status> done;
  std::future<absl::Status> result = done.get_future();
  RETURN_IF_ERROR(Post([&](Connection& c) { done.set_value(task(c)); }));
  return result.get();
}

absl::StatusOr<ReaderLease> Database::Reader() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_readers_.empty()) {
      std::unique_ptr<Connection> c = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return ReaderLease(this, std::move(c));
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Connection> c,
                   read_only() ? Connection::OpenReadOnly(path_) : Connection::Open(path_, false));
  // Readers map the file (up to 1 GiB) rather than read it a page per call: reading a pod's
  // timelines (exports, the web timeline) is otherwise mostly system calls.
  RETURN_IF_ERROR(c->Exec("PRAGMA mmap_size = 1073741824"));
  return ReaderLease(this, std::move(c));
}

void Database::ReturnReader(std::unique_ptr<Connection> c) {
  absl::MutexLock lock(&mu_);
  if (idle_readers_.size() < kIdleReaders) idle_readers_.push_back(std::move(c));
}

}  // namespace podprof::storage
