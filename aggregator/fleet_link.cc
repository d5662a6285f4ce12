#include "aggregator/fleet_link.h"

#include <filesystem>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/process.h"
#include "common/status_macros.h"

namespace podprof::aggregator {
namespace {

// The systemd credential (LoadCredential=clickhouse-password:...) the unit may pass.
constexpr char kCredential[] = "clickhouse-password";

// From fleet.password_file, else the systemd credential, else none. Never a flag: command
// lines are visible to every user of the host.
absl::StatusOr<std::string> Password(const AggregatorConfig::Fleet& f) {
  std::string path = f.password_file;
  if (path.empty()) {
    path = CredentialPath(kCredential);
    if (path.empty() || !std::filesystem::exists(path)) return std::string();
  }
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet.password_file ", path, ": ", text.status().message()));
  }
  return std::string(absl::StripTrailingAsciiWhitespace(*text));
}

}  // namespace

absl::StatusOr<std::unique_ptr<fleet::Replicator>> StartFleet(const AggregatorConfig& config,
                                                              storage::Store& store, Clock& clock) {
  const AggregatorConfig::Fleet& f = config.fleet;
  if (f.clickhouse_url.empty()) return nullptr;
  fleet::ClickHouseOptions ch;
  ch.url = f.clickhouse_url;
  ch.user = f.user;
  ch.timeout_ns = f.timeout_ns;
  ASSIGN_OR_RETURN(ch.password, Password(f));
  absl::StatusOr<fleet::ClickHouse> client = fleet::ClickHouse::Create(ch);
  if (!client.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet.clickhouse_url: ", client.status().message()));
  }
  if (store.read_only()) {
    return absl::FailedPreconditionError(
        "the fleet store needs a writable database for its backlog");
  }
  fleet::ReplicatorOptions o;
  o.pod = f.pod.empty() ? LocalHostName() : f.pod;
  o.database = f.database;
  o.cluster = f.cluster;
  o.batch_captures = static_cast<int>(f.batch_size);
  o.flush_interval_ns = f.flush_interval_ns;
  o.backlog_limit = f.backlog_limit;
  auto r = std::make_unique<fleet::Replicator>(store, *std::move(client), std::move(o), clock);
  PODPROF_LOG(INFO) << "fleet: replicating pod '" << r->options().pod << "' to "
                    << r->clickhouse().url() << " (database " << f.database << ", user " << f.user
                    << ")";
  if (f.backfill_ns > 0) {
    absl::StatusOr<int64_t> queued = store.outbox().QueueStored(clock.NowNs() - f.backfill_ns);
    if (queued.ok()) {
      PODPROF_LOG(INFO) << "fleet: backfill queued " << *queued
                        << " stored captures (those ClickHouse holds are skipped)";
    } else {
      PODPROF_LOG(ERROR) << "fleet: backfill: " << queued.status().message();
    }
  }
  r->Start();
  return r;
}

}  // namespace podprof::aggregator
