// The store's database file and who may use its connections: one writer thread that runs
// every write in order on the one writing connection, and a small pool of reader connections
// lent out one query at a time. It knows nothing of the tables beyond opening (and migrating)
// them; the store's roles (writer, queries, outbox, retention, health) go through it.
// Thread-safe.
#ifndef PODPROF_STORAGE_DATABASE_H_
#define PODPROF_STORAGE_DATABASE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "storage/segments.h"
#include "storage/sqlite.h"

namespace podprof::storage {

// The name of the thread that does every write (at most 15 characters, as Linux keeps them).
inline constexpr char kWriterThreadName[] = "podprof-store";

struct StoreOptions {
  // SQLite's page limit for the file (PRAGMA max_page_count); 0 = none. Tests use it to
  // simulate a full disk.
  int64_t max_page_count = 0;
  // A database that cannot be written (a read-only mount, a file or folder the service may not
  // write) is opened for queries only, rather than refused: the history stays readable, and
  // every write fails naming why. False: such a database is an error.
  bool read_only_fallback = true;
};

class Database;

// The folder of the segment files beside the database file `path` (storage/segments.h).
inline std::string SegmentFolder(const std::string& path) { return path + ".segments"; }

// A reader connection borrowed from a Database's pool, given back when the lease ends. Movable,
// not copyable; it must not outlive the Database.
class ReaderLease {
 public:
  ReaderLease(ReaderLease&& other) noexcept;
  ReaderLease& operator=(ReaderLease&& other) noexcept;
  ReaderLease(const ReaderLease&) = delete;
  ReaderLease& operator=(const ReaderLease&) = delete;
  ~ReaderLease();

  Connection& operator*() const { return *connection_; }
  Connection* operator->() const { return connection_.get(); }

 private:
  friend class Database;
  ReaderLease(Database* owner, std::unique_ptr<Connection> connection)
      : owner_(owner), connection_(std::move(connection)) {}
  void GiveBack();

  Database* owner_;
  std::unique_ptr<Connection> connection_;
};

class Database {
 public:
  // Opens or creates the file, migrating it to this build's schema; with
  // `options.read_only_fallback`, a file that cannot be written opens for queries only.
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path,
                                                        const StoreOptions& options);
  // Waits for the writer's queue to drain.
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs `task` on the writer thread, after every task queued before it, and waits for it.
  // FailedPrecondition naming why when the database is open for queries only.
  absl::Status OnWriter(std::function<absl::Status(Connection&)> task);
  // Queues `task` for the writer thread without waiting for it (a caller that may give up
  // first owns what the task reports to). Unavailable when the database is closing.
  absl::Status Post(std::function<void(Connection&)> task);
  // A reader connection from the pool, opened when none is idle.
  absl::StatusOr<ReaderLease> Reader();

  const std::string& path() const { return path_; }
  // The files that hold the timelines' and counters' bytes, beside the database file.
  SegmentFiles& segments() const { return *segments_; }
  // Why the database is open for queries only; empty when it is writable.
  const std::string& read_only_reason() const { return read_only_reason_; }
  bool read_only() const { return !read_only_reason_.empty(); }

 private:
  friend class ReaderLease;
  Database(std::string path, std::unique_ptr<Connection> writer,
           std::unique_ptr<SegmentFiles> segments, std::string read_only_reason);
  static absl::StatusOr<std::unique_ptr<Database>> OpenWritable(const std::string& path,
                                                                const StoreOptions& options);
  void WriterLoop();
  void ReturnReader(std::unique_ptr<Connection> c);

  const std::string path_;
  const std::string read_only_reason_;
  const std::unique_ptr<SegmentFiles> segments_;
  std::unique_ptr<Connection> writer_;  // used only on writer_thread_
  std::thread writer_thread_;

  absl::Mutex mu_;
  std::vector<std::function<void(Connection&)>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<Connection>> idle_readers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podprof::storage

#endif  // PODPROF_STORAGE_DATABASE_H_
