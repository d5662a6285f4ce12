#include "fleet/schema.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace podprof::fleet {
namespace {

// Columns every per-kernel table starts with: the kernel's identity across pods (module and
// op name, as SQLite's history joins them), then the capture's start and who it is.
#define PODPROF_KERNEL_KEY                                                                  \
  {"module", "String"}, {"op_name", "String"}, {"start_ns", "UInt64"}, {"pod", "String"}, { \
    "capture_id", "String"                                                                  \
  }
// A merged DDSketch (trace/ddsketch.h): sumMap(bin_index, bin_count) adds sketches.
#define PODPROF_SKETCH \
  {"zero_count", "UInt64"}, {"bin_index", "Array(Int32)"}, { "bin_count", "Array(UInt64)" }

const TableDef kDefs[] = {
    {"kernels",
     {{"module", "String"},
      {"op_name", "String"},
      {"category", "String"},
      {"program_id", "UInt64"},
      {"hlo_hash", "UInt64"},
      {"flops", "Int64"},
      {"bytes_accessed", "Int64"},
      {"pod", "String"},
      {"start_ns", "UInt64"}},
     "(module, op_name, program_id, hlo_hash, pod)",
     true},
    {"kernel_stats",
     {PODPROF_KERNEL_KEY,
      {"host", "String"},
      {"chip", "UInt32"},
      {"category", "String"},
      {"program_id", "UInt64"},
      {"hlo_hash", "UInt64"},
      {"count", "UInt64"},
      {"total_ps", "Int64"},
      {"min_ps", "Int64"},
      {"max_ps", "Int64"},
      PODPROF_SKETCH,
      {"peak_tflops", "Float64"},
      {"peak_hbm_gbps", "Float64"}},
     "(module, op_name, start_ns)"},
    {"kernel_rollups",
     {PODPROF_KERNEL_KEY,
      {"category", "String"},
      {"program_id", "UInt64"},
      {"hlo_hash", "UInt64"},
      {"label_keys", "Array(String)"},
      {"label_values", "Array(String)"},
      {"count", "UInt64"},
      {"total_ps", "Int64"},
      {"min_ps", "Int64"},
      {"max_ps", "Int64"},
      {"chips", "UInt32"},
      {"p50_ps", "Float64"},
      {"p99_ps", "Float64"},
      PODPROF_SKETCH,
      {"bound", "String"},
      {"cause", "String"},
      {"verdict", "String"},
      {"achieved_tflops", "Float64"},
      {"achieved_gbps", "Float64"},
      {"roofline_fraction", "Float64"},
      {"wait_fraction", "Float64"}},
     "(module, op_name, start_ns)"},
    {"counter_rollups",
     {PODPROF_KERNEL_KEY,
      {"counter", "String"},
      {"kind", "String"},
      {"value", "Float64"},
      {"covered_ps", "Int64"}},
     "(module, op_name, start_ns)"},
    {"stragglers",
     {{"pod", "String"},
      {"capture_id", "String"},
      {"start_ns", "UInt64"},
      {"host", "String"},
      {"chip", "UInt32"},
      {"times_last", "UInt64"},
      {"instances", "UInt64"},
      {"caused_ps", "Int64"},
      {"lateness_ps", "Int64"},
      {"steps", "Array(Int64)"},
      // The straggler test (insight/evidence.h), as `podprof stragglers` judges the rows.
      {"expected_last", "Float64", "-1"},  // -1: stored before the chance count was kept
      {"p_value", "Float64", "1"},         // 1: not computed (no excess, or not judged)
      {"significant", "UInt8"}},
     "(pod, start_ns, host, chip)"},
    {"capture_hosts",
     {{"pod", "String"},
      {"capture_id", "String"},
      {"start_ns", "UInt64"},
      {"host", "String"},
      {"state", "String"},
      {"error", "String"},
      {"clock_offset_ns", "Int64"},
      {"clock_uncertainty_ns", "Int64"},
      {"clock_drift_ppb", "Float64"},
      {"events", "UInt64"},
      // The host's slice of a multi-slice job (HostInfo.slice); -1: none known, and rows
      // written before the column.
      {"slice", "Int32", "-1"}},
     "(pod, start_ns, host)"},
    {"captures",
     {{"pod", "String"},
      {"capture_id", "String"},
      {"start_ns", "UInt64"},
      {"end_ns", "UInt64"},
      {"created_ns", "UInt64"},
      {"state", "String"},
      {"source", "String"},
      {"label_keys", "Array(String)"},
      {"label_values", "Array(String)"},
      {"options", "String"},
      {"hosts", "UInt32"},
      {"chips", "UInt32"},
      {"kernels", "UInt32"},
      {"events", "UInt64"}},
     "(pod, start_ns, capture_id)"},
};

#undef PODPROF_KERNEL_KEY
#undef PODPROF_SKETCH

std::string ColumnSql(const Column& c) {
  return c.fill == nullptr ? absl::StrCat(c.name, " ", c.type)
                           : absl::StrCat(c.name, " ", c.type, " DEFAULT ", c.fill);
}

}  // namespace

const TableDef& Definition(Table t) { return kDefs[static_cast<int>(t)]; }

std::string CreateLocal(Table t, const std::string& db) {
  const TableDef& d = Definition(t);
  std::vector<std::string> cols;
  for (const Column& c : d.columns) cols.push_back(absl::StrCat("  ", ColumnSql(c)));
  // Partitions by the month the capture started: retention drops whole months
  // (ALTER TABLE ... DROP PARTITION 202601), the cheapest delete ClickHouse has.
  return absl::StrCat(
      "CREATE TABLE IF NOT EXISTS ", db, ".", d.name, " (\n", absl::StrJoin(cols, ",\n"),
      "\n) ENGINE = ", d.replacing ? "ReplacingMergeTree" : "MergeTree",
      " PARTITION BY toYYYYMM(toDateTime(intDiv(start_ns, 1000000000)))", " ORDER BY ", d.order_by);
}

std::string CreateAll(Table t, const std::string& db, const std::string& cluster) {
  const TableDef& d = Definition(t);
  const std::string engine =
      cluster.empty() ? absl::StrCat("Merge(", db, ", '^", d.name, "$')")
                      : absl::StrCat("Distributed(", cluster, ", ", db, ", ", d.name, ")");
  return absl::StrCat("CREATE TABLE IF NOT EXISTS ", db, ".", d.name, "_all AS ", db, ".", d.name,
                      " ENGINE = ", engine);
}

std::string AddColumn(Table t, const Column& c, const std::string& db) {
  // Appended: INSERTs name their columns, so the order in the table does not matter.
  return absl::StrCat("ALTER TABLE ", db, ".", Definition(t).name, " ADD COLUMN ", ColumnSql(c));
}

std::string DropAll(Table t, const std::string& db) {
  return absl::StrCat("DROP TABLE IF EXISTS ", db, ".", Definition(t).name, "_all");
}

std::string InsertInto(Table t, const std::string& db) {
  const TableDef& d = Definition(t);
  std::vector<std::string> names;
  for (const Column& c : d.columns) names.push_back(c.name);
  return absl::StrCat("INSERT INTO ", db, ".", d.name, " (", absl::StrJoin(names, ", "),
                      ") FORMAT RowBinary");
}

}  // namespace podprof::fleet
