// Replication to the ClickHouse fleet store against ClickHouse's own client, measured in the
// same run on a clickhouse-server this benchmark starts (harness/clickhouse_server.h).
//
//   bench_fleet [--captures 1000] [--chips 1024] [--kernels 20] [--backlog 100]
//
// 1. Stores bench_store's history (captures x chips x kernels per-chip rows) in SQLite with
//    every capture queued for the fleet, then drains that backlog through fleet::Replicator
//    (reading the store, judging verdicts, encoding RowBinary, HTTP): rows/s over every table,
//    and the time the first `backlog` captures took.
// 2. The same rows, written to one RowBinary file per table beforehand, inserted by
//    `clickhouse-client` into a second database: rows/s.
// 3. One kernel's history over every capture through `podprof fleet history` (the binary),
//    best of 5 (target < 200 ms).
// Last line: fleet_insert_over_client=<replicator rows/s over client rows/s> (target >= 0.7).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "bench/bench_util.h"
#include "bench/store_data.h"
#include "common/clock.h"
#include "fleet/capture_rows.h"
#include "fleet/replicator.h"
#include "harness/clickhouse_server.h"
#include "storage/store.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;

constexpr char kUsage[] =
    "usage: bench_fleet [--captures 1000] [--chips 1024] [--kernels 20] [--backlog 100]\n";

double Seconds(Clock& clock, int64_t since) { return (clock.MonotonicNs() - since) / 1e9; }

// Every table's rows of every capture, one RowBinary file per table; returns the rows.
int64_t WriteFiles(storage::Store& store, int captures, const fs::path& dir) {
  std::ofstream files[std::size(fleet::kTables)];
  for (fleet::Table t : fleet::kTables) {
    files[static_cast<int>(t)].open(dir / fleet::Definition(t).name, std::ios::binary);
  }
  int64_t rows = 0;
  std::string buf;
  for (int c = 0; c < captures; ++c) {
    absl::StatusOr<fleet::FleetCapture> f =
        fleet::ReadFleetCapture(store, "cap-" + std::to_string(c));
    if (!f.ok()) return -1;
    for (fleet::Table t : fleet::kTables) {
      buf.clear();
      rows += fleet::EncodeRows(t, "bench", {&*f}, &buf);
      files[static_cast<int>(t)] << buf;
    }
  }
  return rows;
}

// Long: the benchmark's steps in the order it prints them, each a few lines over the same servers.
int Run(int argc, char** argv) {
  int captures = 1000, chips = 1024, kernels = 20, backlog = 100;
  if (int rc = bench::ParseFlags(argc, argv, kUsage,
                                 {{"--captures", [&](const char* v) { captures = std::atoi(v); }},
                                  {"--chips", [&](const char* v) { chips = std::atoi(v); }},
                                  {"--kernels", [&](const char* v) { kernels = std::atoi(v); }},
                                  {"--backlog", [&](const char* v) { backlog = std::atoi(v); }}});
      rc >= 0) {
    return rc;
  }
  if (!testing::HaveClickHouse()) {
    std::fprintf(stderr, "bench_fleet: clickhouse-server is not installed\n");
    return 1;
  }
  RealClock clock;
  const fs::path dir = fs::temp_directory_path() / ("bench_fleet_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  testing::ClickHouseServer ch(dir / "ch", testing::FreePorts());
  if (!ch.started().ok()) {
    std::fprintf(stderr, "bench_fleet: %s\n", std::string(ch.started().message()).c_str());
    return 1;
  }
  ch.Sql("CREATE DATABASE podprof");
  ch.Sql("CREATE DATABASE baseline");

  auto store = storage::Store::Open((dir / "pod.db").string());
  if (!store.ok()) return 1;
  (*store)->outbox().QueueForFleet(captures + 1);
  std::fprintf(stderr, "storing %d captures of %d chips x %d kernels...\n", captures, chips,
               kernels);
  for (int c = 0; c < captures; ++c) {
    if (!ingest::StoreCapture((*store)->writer(), HistoryCapture(c, chips, kernels)).ok()) return 1;
  }

  // 1. The replicator drains the backlog.
  fleet::ReplicatorOptions o;
  o.pod = "bench";
  fleet::Replicator replicator(**store, ch.Client(), o, clock);
  if (absl::Status s = replicator.Prepare(); !s.ok()) {
    std::fprintf(stderr, "bench_fleet: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  int64_t t0 = clock.MonotonicNs();
  double first_backlog_s = 0;
  for (int done = 0;;) {
    absl::StatusOr<int> n = replicator.ReplicateBatch();
    if (!n.ok()) {
      std::fprintf(stderr, "bench_fleet: %s\n", std::string(n.status().message()).c_str());
      return 1;
    }
    if (*n == 0) break;
    done += *n;
    if (first_backlog_s == 0 && done >= backlog) first_backlog_s = Seconds(clock, t0);
  }
  const double replicate_s = Seconds(clock, t0);

  // 2. clickhouse-client inserts the same rows from files.
  const int64_t read_start = clock.MonotonicNs();
  const int64_t rows = WriteFiles(**store, captures, dir);
  const double read_s = Seconds(clock, read_start);
  if (rows <= 0) return 1;
  double client_s = 0;
  for (fleet::Table t : fleet::kTables) {
    ch.Sql(fleet::CreateLocal(t, "baseline"));
    if (fs::file_size(dir / fleet::Definition(t).name) == 0) continue;  // no such rows
    const std::string cmd = absl::StrCat(
        "clickhouse-client --port ", ch.ports().tcp, " --query '", fleet::InsertInto(t, "baseline"),
        "' --max_insert_block_size=1000000000 < ", (dir / fleet::Definition(t).name).string());
    const int64_t start = clock.MonotonicNs();
    if (std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr, "bench_fleet: %s failed\n", cmd.c_str());
      return 1;
    }
    client_s += Seconds(clock, start);
  }

  // 3. One kernel's history through the CLI.
  double best_history = 1e300;
  for (int rep = 0; rep < 5; ++rep) {
    const std::string cmd = absl::StrCat(PODPROF_BIN_DIR, "/podprof fleet history '^fusion\\.7$' ",
                                         "--since 36500d --format json --clickhouse ", ch.url(),
                                         " > ", (dir / "history.json").string());
    const int64_t start = clock.MonotonicNs();
    if (std::system(cmd.c_str()) != 0) return 1;
    best_history = std::min(best_history, Seconds(clock, start) * 1e3);
  }
  const double ours = rows / replicate_s, theirs = rows / client_s;
  std::printf(
      "replicate %lld rows (%d captures x %d chips x %d kernels, 7 tables): %.0f rows/s "
      "(%.1f s); clickhouse-client from files: %.0f rows/s (%.1f s)\n",
      static_cast<long long>(rows), captures, chips, kernels, ours, replicate_s, theirs, client_s);
  std::printf("of which reading the store and encoding the rows (timed again alone): %.1f s\n",
              read_s);
  std::printf("drain a backlog of %d captures: %.2f s\n", backlog, first_backlog_s);
  std::printf("podprof fleet history of one kernel over %d captures: %.1f ms (target < 200 ms)\n",
              captures, best_history);
  fs::remove_all(dir);
  std::printf("fleet_insert_over_client=%.2f\n", ours / theirs);
  return 0;
}

}  // namespace
}  // namespace podprof

int main(int argc, char** argv) { return podprof::Run(argc, argv); }
