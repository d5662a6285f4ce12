#include "fleet/replicator.h"

#include <algorithm>
#include <future>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace podprof::fleet {

Replicator::Replicator(storage::Store& store, ClickHouse clickhouse, ReplicatorOptions options,
                       Clock& clock)
    : store_(store),
      clickhouse_(std::move(clickhouse)),
      options_(std::move(options)),
      clock_(clock) {
  store_.outbox().QueueForFleet(options_.backlog_limit);
}

Replicator::~Replicator() { Stop(); }

absl::Status Replicator::Prepare() {
  const std::string& db = options_.database;
  if (absl::Status s = clickhouse_.Ping(); !s.ok()) {
    if (absl::IsPermissionDenied(s)) {
      return absl::PermissionDeniedError(
          absl::StrCat("[fleet] user '", clickhouse_.user(), "' and its password: ", s.message()));
    }
    // The client says "ClickHouse at URL: what"; the setting names the URL already.
    absl::string_view what = s.message();
    absl::ConsumePrefix(&what, absl::StrCat("ClickHouse at ", clickhouse_.url(), ": "));
    return absl::Status(s.code(), absl::StrCat("cannot reach ClickHouse (", options_.url_setting,
                                               " = ", clickhouse_.url(), "): ", what));
  }
  ASSIGN_OR_RETURN(std::string found,
                   clickhouse_.Query(absl::StrCat("SELECT count() FROM system.databases "
                                                  "WHERE name = ",
                                                  Quote(db))));
  if (absl::StripAsciiWhitespace(found) != "1") {
    return absl::NotFoundError(absl::StrCat("[fleet] database '", db, "' does not exist on ",
                                            clickhouse_.url(), ": create it (CREATE DATABASE ", db,
                                            ") or name another"));
  }
  for (Table t : kTables) {
    if (absl::Status s = PrepareTable(t); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("[fleet] user '", clickhouse_.user(),
                                                 "' creating or upgrading the fleet's tables in '",
                                                 db, "': ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Replicator::Columns> Replicator::ColumnsOf(Table t) {
  const std::string name = Definition(t).name;
  ASSIGN_OR_RETURN(
      std::string answer,
      clickhouse_.Query(absl::StrCat(
          "SELECT table, name FROM system.columns WHERE database = ", Quote(options_.database),
          " AND table IN (", Quote(name), ", ", Quote(name + "_all"), ") FORMAT TabSeparatedRaw")));
  Columns out;
  for (absl::string_view line : absl::StrSplit(answer, '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> row = absl::StrSplit(line, absl::MaxSplits('\t', 1));
    (row.first == name ? out.local : out.all).insert(std::move(row.second));
  }
  return out;
}

absl::Status Replicator::PrepareTable(Table t) {
  const std::string& db = options_.database;
  RETURN_IF_ERROR(clickhouse_.Query(CreateLocal(t, db)).status());
  RETURN_IF_ERROR(clickhouse_.Query(CreateAll(t, db, options_.cluster)).status());
  // Tables an older podprof created lack the columns added since: CREATE TABLE IF NOT EXISTS
  // left them as they were.
  ASSIGN_OR_RETURN(Columns have, ColumnsOf(t));
  bool all_lacks = false;
  for (const Column& c : Definition(t).columns) {
    if (!have.local.contains(c.name)) {
      if (absl::Status s = clickhouse_.Query(AddColumn(t, c, db)).status(); !s.ok()) {
        // Another aggregator on this server may have added it first: 18.16 has no
        // ADD COLUMN IF NOT EXISTS.
        ASSIGN_OR_RETURN(have, ColumnsOf(t));
        if (!have.local.contains(c.name)) return s;
      } else {
        PODPROF_LOG(INFO) << "fleet: added column " << c.name << " to " << db << "."
                          << Definition(t).name << " (created by an older podprof)";
      }
    }
    all_lacks |= !have.all.contains(c.name);
  }
  if (!all_lacks) return absl::OkStatus();
  // A Merge or Distributed table keeps the columns its table had when it was made, and holds
  // no data: made again, it shows the new ones.
  RETURN_IF_ERROR(clickhouse_.Query(DropAll(t, db)).status());
  RETURN_IF_ERROR(clickhouse_.Query(CreateAll(t, db, options_.cluster)).status());
  PODPROF_LOG(INFO) << "fleet: made " << db << "." << Definition(t).name
                    << "_all again to show its table's new columns";
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Replicator::Present(
    Table t, const std::vector<const FleetCapture*>& captures) {
  std::vector<std::string> ids, starts;
  for (const FleetCapture* f : captures) {
    ids.push_back(Quote(f->capture.id));
    starts.push_back(absl::StrCat(std::max<int64_t>(f->capture.start_ns, 0)));
  }
  // start_ns narrows the read to the few granules of those captures (it is in every
  // table's sort key).
  ASSIGN_OR_RETURN(
      std::string answer,
      clickhouse_.Query(absl::StrCat(
          "SELECT DISTINCT capture_id FROM ", options_.database, ".", Definition(t).name,
          " WHERE pod = ", Quote(options_.pod), " AND start_ns IN (", absl::StrJoin(starts, ","),
          ") AND capture_id IN (", absl::StrJoin(ids, ","), ") FORMAT TabSeparatedRaw")));
  return std::vector<std::string>(absl::StrSplit(answer, '\n', absl::SkipEmpty()));
}

absl::Status Replicator::InsertTable(Table t, std::vector<const FleetCapture*>& captures,
                                     std::vector<std::pair<std::string, std::string>>* rejected) {
  std::vector<const FleetCapture*> send;
  if (Definition(t).replacing) {
    send = captures;  // repeats collapse by design
  } else {
    ASSIGN_OR_RETURN(std::vector<std::string> present, Present(t, captures));
    for (const FleetCapture* f : captures) {
      if (std::find(present.begin(), present.end(), f->capture.id) == present.end()) {
        send.push_back(f);
      }
    }
  }
  std::string rows;
  if (EncodeRows(t, options_.pod, send, &rows) == 0) return absl::OkStatus();
  const std::string insert = InsertInto(t, options_.database);
  absl::Status s = clickhouse_.Insert(insert, rows);
  if (!absl::IsInvalidArgument(s)) return s;
  // ClickHouse refused the data: find whose, capture by capture, and let the rest through.
  for (const FleetCapture* f : send) {
    rows.clear();
    if (EncodeRows(t, options_.pod, {f}, &rows) == 0) continue;
    absl::Status one = clickhouse_.Insert(insert, rows);
    if (absl::IsInvalidArgument(one)) {
      rejected->emplace_back(f->capture.id,
                             absl::StrCat("table ", Definition(t).name, ": ", one.message()));
      captures.erase(std::find(captures.begin(), captures.end(), f));
    } else if (!one.ok()) {
      return one;
    }
  }
  return absl::OkStatus();
}

Replicator::Batch Replicator::ReadBatch(std::vector<std::string> ids) {
  Batch b;
  b.ids = std::move(ids);
  for (const std::string& id : b.ids) {
    absl::StatusOr<FleetCapture> f = ReadFleetCapture(store_, id);
    if (absl::IsNotFound(f.status())) {
      b.gone.push_back(id);
    } else if (!f.ok()) {
      b.status = f.status();
      return b;
    } else {
      b.captures.push_back(*std::move(f));
    }
  }
  return b;
}

absl::StatusOr<int> Replicator::ReplicateBatch() {
  // Two batches' worth: this one, and the next to read while ClickHouse takes this one.
  ASSIGN_OR_RETURN(std::vector<std::string> pending,
                   store_.outbox().Pending(2 * options_.batch_captures));
  if (pending.empty()) return 0;
  const auto split = pending.begin() + std::min<size_t>(pending.size(), options_.batch_captures);
  std::vector<std::string> ids(pending.begin(), split), next_ids(split, pending.end());
  Batch b;
  if (next_.valid()) b = next_.get();
  if (b.ids != ids || !b.status.ok()) b = ReadBatch(ids);
  RETURN_IF_ERROR(b.status);
  if (!next_ids.empty()) {
    next_ = std::async(std::launch::async,
                       [this, next_ids]() mutable { return ReadBatch(std::move(next_ids)); });
  }
  for (const std::string& id : b.gone) {
    PODPROF_LOG(WARNING) << "fleet: capture " << id
                         << " was deleted here (retention) before it reached ClickHouse";
  }
  std::vector<const FleetCapture*> batch;
  for (const FleetCapture& f : b.captures) batch.push_back(&f);
  std::vector<std::pair<std::string, std::string>> rejected;
  for (Table t : kTables) {
    if (absl::Status s = InsertTable(t, batch, &rejected); !s.ok()) {
      std::vector<std::string> ids;
      for (const FleetCapture* f : batch) ids.push_back(f->capture.id);
      store_.outbox().AttemptFailed(ids, std::string(s.message())).IgnoreError();
      return s;
    }
  }
  for (const auto& [id, why] : rejected) {
    PODPROF_LOG(ERROR) << "fleet: ClickHouse refused capture " << id << ": " << why
                       << " (it stays here; the others go on)";
    RETURN_IF_ERROR(store_.outbox().Rejected(id, why));
  }
  std::vector<std::string> done = b.gone;
  for (const FleetCapture* f : batch) done.push_back(f->capture.id);
  RETURN_IF_ERROR(store_.outbox().Replicated(done));
  absl::MutexLock lock(&mu_);
  replicated_ += static_cast<int64_t>(batch.size());
  last_success_ns_ = clock_.NowNs();
  last_error_.clear();
  return static_cast<int>(ids.size());
}

void Replicator::NoteFailure(const absl::Status& s) {
  absl::MutexLock lock(&mu_);
  if (last_error_ != s.message()) {
    // Once per distinct failure: a ClickHouse down for an hour is one line, not thousands.
    PODPROF_LOG(WARNING) << "fleet: " << s.message() << "; captures wait in the backlog";
  }
  last_error_ = std::string(s.message());
}

void Replicator::WarnOfBacklog() {
  absl::StatusOr<storage::FleetBacklog> b = store_.outbox().Backlog();
  if (!b.ok()) return;
  const int64_t limit = options_.backlog_limit;
  if (!warned_full_ && b->pending * 10 >= limit * 9) {
    PODPROF_LOG(WARNING) << "fleet: the backlog holds " << b->pending << " of at most " << limit
                         << " captures; past it new captures are kept here only";
    warned_full_ = true;
  } else if (warned_full_ && b->pending * 10 < limit * 8) {
    warned_full_ = false;
  }
  if (b->not_queued > warned_not_queued_) {
    PODPROF_LOG(ERROR) << "fleet: the backlog is full: " << b->not_queued - warned_not_queued_
                       << " more captures were stored here but will not reach ClickHouse";
    warned_not_queued_ = b->not_queued;
  }
}

// One drain: prepare the tables if needed, send a batch; again at once while batches come full,
// after the flush interval otherwise, backing off (doubling, to max_backoff) while failing.
std::optional<int64_t> Replicator::Tick() {
  absl::Status s = prepared_ ? absl::OkStatus() : Prepare();
  prepared_ = s.ok();
  absl::StatusOr<int> sent = 0;
  if (prepared_) {
    sent = ReplicateBatch();
    s = sent.status();
    // Credentials or the database gone while running: check the settings again.
    if (absl::IsPermissionDenied(s) || absl::IsNotFound(s)) prepared_ = false;
  }
  if (!s.ok()) {
    NoteFailure(s);
    wait_ns_ = std::min(wait_ns_ * 2, options_.max_backoff_ns);
  } else {
    wait_ns_ = options_.flush_interval_ns;
    if (*sent == options_.batch_captures) return clock_.NowNs();  // more is waiting
  }
  // Between drains only: a drain shrinks the backlog, and each look reads the outbox.
  WarnOfBacklog();
  return clock_.NowNs() + wait_ns_;
}

void Replicator::Start() {
  if (thread_ != nullptr) return;
  wait_ns_ = options_.flush_interval_ns;
  thread_ = std::make_unique<PeriodicThread>(clock_, clock_.NowNs(), [this] { return Tick(); });
}

void Replicator::Stop() {
  if (thread_ != nullptr) thread_->Stop();
}

ReplicatorStatus Replicator::Status() {
  ReplicatorStatus out;
  absl::StatusOr<storage::FleetBacklog> b = store_.outbox().Backlog();
  if (b.ok()) out.backlog = *std::move(b);
  absl::MutexLock lock(&mu_);
  out.replicated = replicated_;
  out.last_success_ns = last_success_ns_;
  out.last_error = last_error_;
  return out;
}

}  // namespace podprof::fleet
