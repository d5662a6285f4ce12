#include "storage/schema.h"

#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace podprof::storage {
namespace {

// Migration N takes a database from version N-1 to N. Append only: never edit a released one.
constexpr const char* kMigrations[] = {
    // 1: the tables.
    R"sql(
CREATE TABLE hosts (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE
);
CREATE TABLE captures (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  start_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL,
  status TEXT NOT NULL,
  options TEXT NOT NULL DEFAULT '{}',
  labels TEXT NOT NULL DEFAULT '{}',
  created_ns INTEGER NOT NULL,
  events INTEGER NOT NULL DEFAULT 0,
  kernel_count INTEGER NOT NULL DEFAULT 0,
  stats_first INTEGER NOT NULL DEFAULT 0,
  stats_last INTEGER NOT NULL DEFAULT -1
);
CREATE INDEX captures_by_start ON captures (start_ns);
CREATE TABLE capture_hosts (
  capture INTEGER NOT NULL REFERENCES captures (seq) ON DELETE CASCADE,
  host_id INTEGER NOT NULL REFERENCES hosts (id),
  status TEXT NOT NULL,
  error TEXT NOT NULL DEFAULT '',
  clock_offset_ns INTEGER NOT NULL DEFAULT 0,
  clock_uncertainty_ns INTEGER NOT NULL DEFAULT 0,
  events INTEGER NOT NULL DEFAULT 0,
  bytes INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (capture, host_id)
) WITHOUT ROWID;
CREATE TABLE chips (
  id INTEGER PRIMARY KEY,
  capture INTEGER NOT NULL REFERENCES captures (seq) ON DELETE CASCADE,
  host_id INTEGER NOT NULL REFERENCES hosts (id),
  ordinal INTEGER NOT NULL,
  global_id INTEGER NOT NULL,
  generation TEXT NOT NULL,
  device_type TEXT NOT NULL,
  peak_tflops REAL NOT NULL,
  peak_hbm_gbps REAL NOT NULL
);
CREATE INDEX chips_by_capture ON chips (capture);
CREATE TABLE kernels (
  id INTEGER PRIMARY KEY,
  module TEXT NOT NULL,
  op_name TEXT NOT NULL,
  category TEXT NOT NULL,
  program_id INTEGER NOT NULL,
  hlo_hash INTEGER NOT NULL,
  flops INTEGER NOT NULL,
  bytes_accessed INTEGER NOT NULL,
  source TEXT NOT NULL,
  UNIQUE (module, op_name, category, program_id, hlo_hash, flops, bytes_accessed)
);
CREATE INDEX kernels_by_name ON kernels (op_name, module);
-- A plain rowid table with no index and no foreign keys: a capture's rows are written as its
-- hosts arrive (or in its last transaction), so they lie within one rowid range, recorded in
-- captures.stats_first and stats_last, which rows of captures written at the same time may
-- share. Queries scan that range for the capture's rows; retention deletes them. Inserting is
-- then an append to one b-tree, as cheap as SQLite gets.
CREATE TABLE kernel_stats (
  capture INTEGER NOT NULL,
  chip_id INTEGER NOT NULL,
  kernel_id INTEGER NOT NULL,
  count INTEGER NOT NULL,
  total_ps INTEGER NOT NULL,
  min_ps INTEGER NOT NULL,
  max_ps INTEGER NOT NULL,
  sketch BLOB NOT NULL
);
CREATE TABLE kernel_rollups (
  capture INTEGER NOT NULL REFERENCES captures (seq) ON DELETE CASCADE,
  kernel_id INTEGER NOT NULL REFERENCES kernels (id),
  count INTEGER NOT NULL,
  total_ps INTEGER NOT NULL,
  min_ps INTEGER NOT NULL,
  max_ps INTEGER NOT NULL,
  p50_ps INTEGER NOT NULL,
  p99_ps INTEGER NOT NULL,
  chips INTEGER NOT NULL,
  sketch BLOB NOT NULL,
  PRIMARY KEY (capture, kernel_id)
) WITHOUT ROWID;
CREATE INDEX rollups_by_kernel ON kernel_rollups (kernel_id, capture);
CREATE TABLE counter_series (
  capture INTEGER NOT NULL REFERENCES captures (seq) ON DELETE CASCADE,
  chip_id INTEGER NOT NULL REFERENCES chips (id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  samples INTEGER NOT NULL,
  data BLOB NOT NULL
);
CREATE INDEX counters_by_capture ON counter_series (capture);
CREATE TABLE timeline_blocks (
  capture INTEGER NOT NULL REFERENCES captures (seq) ON DELETE CASCADE,
  chip_id INTEGER NOT NULL REFERENCES chips (id) ON DELETE CASCADE,
  line TEXT NOT NULL,
  base_ns INTEGER NOT NULL,
  events INTEGER NOT NULL,
  data BLOB NOT NULL
);
CREATE INDEX timelines_by_capture ON timeline_blocks (capture);
)sql",
    // 2: where a capture came from (a pod capture, an import), for listing.
    R"sql(
ALTER TABLE captures ADD COLUMN source TEXT NOT NULL DEFAULT 'capture';
)sql",
    // 3: what each kernel is, the counters attributed to kernels, and who waited for whom
    // at the collectives.
    R"sql(
ALTER TABLE kernels ADD COLUMN hlo_text TEXT NOT NULL DEFAULT '';
ALTER TABLE kernels ADD COLUMN tf_op TEXT NOT NULL DEFAULT '';
ALTER TABLE kernels ADD COLUMN source_stack TEXT NOT NULL DEFAULT '';
ALTER TABLE kernels ADD COLUMN mlir TEXT NOT NULL DEFAULT '';
-- One counter over one kernel's executions on one chip: for a running total `integral` is
-- the increase, for a gauge the integral of its level (value x ps) over `covered_ps`.
CREATE TABLE kernel_counters (
  capture INTEGER NOT NULL REFERENCES captures (seq) ON DELETE CASCADE,
  chip_id INTEGER NOT NULL,
  kernel_id INTEGER NOT NULL,
  name TEXT NOT NULL,
  cumulative INTEGER NOT NULL,
  integral REAL NOT NULL,
  covered_ps INTEGER NOT NULL,
  executions INTEGER NOT NULL
);
CREATE INDEX kernel_counters_by_capture ON kernel_counters (capture);
-- The same summed over every chip of the capture: pod-wide queries read these.
CREATE TABLE kernel_counter_rollups (
  capture INTEGER NOT NULL REFERENCES captures (seq) ON DELETE CASCADE,
  kernel_id INTEGER NOT NULL,
  name TEXT NOT NULL,
  cumulative INTEGER NOT NULL,
  integral REAL NOT NULL,
  covered_ps INTEGER NOT NULL,
  PRIMARY KEY (capture, kernel_id, name)
) WITHOUT ROWID;
-- Time a kernel on a chip spent waiting in collectives for later chips.
CREATE TABLE kernel_waits (
  capture INTEGER NOT NULL REFERENCES captures (seq) ON DELETE CASCADE,
  chip_id INTEGER NOT NULL,
  kernel_id INTEGER NOT NULL,
  wait_ps INTEGER NOT NULL,
  instances INTEGER NOT NULL,
  straggler TEXT NOT NULL
);
CREATE INDEX kernel_waits_by_capture ON kernel_waits (capture);
CREATE TABLE kernel_wait_rollups (
  capture INTEGER NOT NULL REFERENCES captures (seq) ON DELETE CASCADE,
  kernel_id INTEGER NOT NULL,
  wait_ps INTEGER NOT NULL,
  instances INTEGER NOT NULL,
  straggler TEXT NOT NULL,
  PRIMARY KEY (capture, kernel_id)
) WITHOUT ROWID;
CREATE TABLE stragglers (
  capture INTEGER NOT NULL REFERENCES captures (seq) ON DELETE CASCADE,
  host TEXT NOT NULL,
  chip INTEGER NOT NULL,
  times_last INTEGER NOT NULL,
  instances INTEGER NOT NULL,
  caused_ps INTEGER NOT NULL,
  lateness_ps INTEGER NOT NULL,
  steps TEXT NOT NULL
);
CREATE INDEX stragglers_by_capture ON stragglers (capture);
CREATE TABLE collective_instances (
  capture INTEGER NOT NULL REFERENCES captures (seq) ON DELETE CASCADE,
  id INTEGER NOT NULL,
  kernel TEXT NOT NULL,
  step INTEGER NOT NULL,
  straggler_host TEXT NOT NULL,
  straggler_chip INTEGER NOT NULL,
  chips INTEGER NOT NULL,
  spread_ps INTEGER NOT NULL,
  lateness_ps INTEGER NOT NULL,
  caused_ps INTEGER NOT NULL
);
CREATE INDEX collective_instances_by_capture ON collective_instances (capture);
)sql",
    // 4: hosts whose timelines and counters are kept on their own clock, with the correction
    // to the aggregator's clock beside them (applied when read); older rows are corrected.
    R"sql(
ALTER TABLE capture_hosts ADD COLUMN clock_drift_ppb REAL NOT NULL DEFAULT 0;
ALTER TABLE capture_hosts ADD COLUMN clock_mid_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE capture_hosts ADD COLUMN host_clock INTEGER NOT NULL DEFAULT 0;
)sql",
    // 5: the time each kernel on each chip spent in each named scope inside it (Pallas
    // primitives, source lines, LLO instructions, sync waits; docs/INSIGHT.md).
    R"sql(
CREATE TABLE kernel_scopes (
  capture INTEGER NOT NULL REFERENCES captures (seq) ON DELETE CASCADE,
  chip_id INTEGER NOT NULL,
  kernel_id INTEGER NOT NULL,
  line TEXT NOT NULL,
  name TEXT NOT NULL,
  count INTEGER NOT NULL,
  total_ps INTEGER NOT NULL
);
CREATE INDEX kernel_scopes_by_capture ON kernel_scopes (capture, kernel_id);
)sql",
    // 6: the fleet outbox: captures committed here and not yet replicated to the ClickHouse
    // fleet store (docs/FLEET.md). An entry is written in its capture's own transaction and
    // removed once every table of the fleet holds the capture's rows.
    R"sql(
CREATE TABLE fleet_outbox (
  capture_id TEXT PRIMARY KEY,
  queued_ns INTEGER NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL DEFAULT 'pending',
  error TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
CREATE INDEX fleet_outbox_by_state ON fleet_outbox (state, queued_ns);
)sql",
    // 7: what a claim needs beside the counts. A roll-up's peaks are those of the chips that
    // ran the kernel, weighted by their time there (the capture's mean over every chip put a
    // TPU kernel of a TPU+GPU import at 241% of HBM); NULL on older rows, read as that mean.
    // A straggler row's expected_last is how often it would have been last by chance (the sum
    // of 1/members over the instances it took part in), for the straggler test; NULL before.
    // A capture's collectives_left_out counts instances whose arrivals were not one execution.
    R"sql(
ALTER TABLE kernel_rollups ADD COLUMN peak_tflops REAL;
ALTER TABLE kernel_rollups ADD COLUMN peak_hbm_gbps REAL;
ALTER TABLE stragglers ADD COLUMN expected_last REAL;
ALTER TABLE captures ADD COLUMN collectives_left_out INTEGER NOT NULL DEFAULT 0;
ALTER TABLE captures ADD COLUMN collectives_left_out_example TEXT NOT NULL DEFAULT '';
)sql",
    // 8: who analysed each host's capture: 'agent' (its own summary, merged here) or
    // 'aggregator' (an import, or an agent too old to analyse); '' on older rows and for hosts
    // that delivered nothing. The host's kernel map: its timeline blocks are stored as its agent
    // encoded them, kernels numbered by the host (index + 1), and the map turns those numbers
    // into kernels.id (varints, by index); NULL on older rows, whose blocks hold kernels.id.
    R"sql(
ALTER TABLE capture_hosts ADD COLUMN analysed_by TEXT NOT NULL DEFAULT '';
ALTER TABLE capture_hosts ADD COLUMN kernel_map BLOB;
)sql",
    // 9: always-on telemetry (docs/RECORDER.md): one row per chip per stored interval, with its
    // own retention ([telemetry] retention). Keyed by time first, so that retention deletes a
    // prefix and a window of the pod reads one range. -1 where the runtime reported nothing.
    // And each host's warnings (a snapshot's runtime status among them), one per line.
    R"sql(
CREATE TABLE telemetry (
  time_ns INTEGER NOT NULL,
  host_id INTEGER NOT NULL REFERENCES hosts (id),
  chip INTEGER NOT NULL,
  interval_ns INTEGER NOT NULL,
  steps INTEGER NOT NULL,
  step_mean_us REAL NOT NULL,
  step_max_us REAL NOT NULL,
  duty_cycle REAL NOT NULL,
  hbm_used_bytes INTEGER NOT NULL,
  queued INTEGER NOT NULL,
  collectives INTEGER NOT NULL,
  collective_mean_us REAL NOT NULL,
  PRIMARY KEY (time_ns, host_id, chip)
) WITHOUT ROWID;
ALTER TABLE capture_hosts ADD COLUMN warnings TEXT NOT NULL DEFAULT '';
)sql",
    // 10: the slice of a multi-slice job each host was in; -1 (every older row): none known.
    R"sql(
ALTER TABLE capture_hosts ADD COLUMN slice INTEGER NOT NULL DEFAULT -1;
)sql",
    // 11: a multi-slice host's DCN transfers per stored interval and their latency's p50 (the
    // transfer-weighted mean of the samples') and p99 (the samples' largest), us; 0 and -1 on
    // older rows and for hosts without DCN.
    R"sql(
ALTER TABLE telemetry ADD COLUMN dcn_transfers INTEGER NOT NULL DEFAULT 0;
ALTER TABLE telemetry ADD COLUMN dcn_p50_us REAL NOT NULL DEFAULT -1;
ALTER TABLE telemetry ADD COLUMN dcn_p99_us REAL NOT NULL DEFAULT -1;
)sql",
    // 12: timelines and counters written once (storage/segments.h): their bytes in segment
    // files, one per capture and kind, a row of `segments` each (sealed_bytes -1 while still
    // appended to); a row points at its record (segment, offset of the payload, length,
    // CRC-32C) and keeps an empty `data`. Older rows keep their bytes in `data`, segment NULL,
    // and are read as before: nothing is moved.
    R"sql(
CREATE TABLE segments (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  capture INTEGER NOT NULL REFERENCES captures (seq) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  sealed_bytes INTEGER NOT NULL DEFAULT -1
);
CREATE INDEX segments_by_capture ON segments (capture);
ALTER TABLE timeline_blocks ADD COLUMN segment INTEGER;
ALTER TABLE timeline_blocks ADD COLUMN seg_offset INTEGER;
ALTER TABLE timeline_blocks ADD COLUMN seg_bytes INTEGER;
ALTER TABLE timeline_blocks ADD COLUMN seg_crc INTEGER;
ALTER TABLE counter_series ADD COLUMN segment INTEGER;
ALTER TABLE counter_series ADD COLUMN seg_offset INTEGER;
ALTER TABLE counter_series ADD COLUMN seg_bytes INTEGER;
ALTER TABLE counter_series ADD COLUMN seg_crc INTEGER;
)sql",
    // 13: a host's counter attributions as one blob (storage/kernel_counter_block.h), written
    // with its data ahead of its outcome, instead of a kernel_counters row each (about 1,100 a
    // v5p host: most of the writer's inserts and of the file). Older captures keep their rows,
    // read as before; nothing is moved.
    R"sql(
CREATE TABLE kernel_counter_blocks (
  capture INTEGER NOT NULL REFERENCES captures (seq) ON DELETE CASCADE,
  host_id INTEGER NOT NULL REFERENCES hosts (id),
  rows INTEGER NOT NULL,
  data BLOB NOT NULL
);
CREATE INDEX kernel_counter_blocks_by_capture ON kernel_counter_blocks (capture);
)sql",
};

}  // namespace

int LatestSchemaVersion() { return static_cast<int>(std::size(kMigrations)); }

absl::StatusOr<int> SchemaVersion(Connection& db) {
  ASSIGN_OR_RETURN(auto stmt, Statement::Prepare(db, "PRAGMA user_version"));
  ASSIGN_OR_RETURN(bool row, stmt->Step());
  return row ? static_cast<int>(stmt->Int(0)) : 0;
}

absl::Status Migrate(Connection& db, int target) {
  if (target < 0) target = LatestSchemaVersion();
  ASSIGN_OR_RETURN(int version, SchemaVersion(db));
  if (version > LatestSchemaVersion()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database ", db.path(), " has schema version ", version, ", newer than this podprof (",
        LatestSchemaVersion(), "): upgrade podprof or use another file"));
  }
  for (int v = version + 1; v <= target; ++v) {
    RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
    absl::Status s = db.Exec(kMigrations[v - 1]);
    if (s.ok()) s = db.Exec(absl::StrCat("PRAGMA user_version = ", v));
    if (!s.ok()) {
      db.Exec("ROLLBACK").IgnoreError();
      return absl::Status(s.code(),
                          absl::StrCat("migration to schema version ", v, ": ", s.message()));
    }
    RETURN_IF_ERROR(db.Exec("COMMIT"));
  }
  return absl::OkStatus();
}

}  // namespace podprof::storage
