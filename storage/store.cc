#include "storage/store.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <future>
#include <regex>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "storage/schema.h"
#include "storage/timeline_codec.h"
#include "trace/kernel_stats.h"

namespace podprof::storage {
namespace {

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

absl::Status CheckRegex(const std::string& re) {
  try {
    std::regex r(re);
  } catch (const std::regex_error& e) {
    return absl::InvalidArgumentError(absl::StrCat("bad kernel regex \"", re, "\": ", e.what()));
  }
  return absl::OkStatus();
}

// Runs `body` in a transaction on `c`; rolls back on failure.
absl::Status Transaction(Connection& c, const std::function<absl::Status()>& body) {
  RETURN_IF_ERROR(c.Exec("BEGIN IMMEDIATE"));
  absl::Status s = body();
  if (s.ok()) s = c.Exec("COMMIT");
  if (!s.ok()) c.Exec("ROLLBACK").IgnoreError();
  return s;
}

// The kernels.id of each definition, inserted where new; `cache` (identity key -> id) spares
// the look-ups of kernels already seen in this call.
absl::StatusOr<std::vector<int64_t>> ResolveKernelsOn(
    Connection& c, const std::vector<trace::KernelDef>& kernels,
    absl::flat_hash_map<std::string, int64_t>* cache) {
  ASSIGN_OR_RETURN(auto ins_kernel,
                   Statement::Prepare(c,
                                      "INSERT OR IGNORE INTO kernels (module, op_name, "
                                      "category, program_id, hlo_hash, flops, bytes_accessed, "
                                      "source) VALUES (?,?,?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(auto get_kernel,
                   Statement::Prepare(c,
                                      "SELECT id FROM kernels WHERE module = ? AND op_name = ? "
                                      "AND category = ? AND program_id = ? AND hlo_hash = ? AND "
                                      "flops = ? AND bytes_accessed = ?"));
  // What a kernel is, filled in where an earlier capture left it empty.
  ASSIGN_OR_RETURN(
      auto upd_identity,
      Statement::Prepare(c,
                         "UPDATE kernels SET "
                         "hlo_text = CASE WHEN hlo_text = '' THEN ?1 ELSE hlo_text END, "
                         "tf_op = CASE WHEN tf_op = '' THEN ?2 ELSE tf_op END, "
                         "source_stack = CASE WHEN source_stack = '' THEN ?3 "
                         "ELSE source_stack END, "
                         "mlir = CASE WHEN mlir = '' THEN ?4 ELSE mlir END "
                         "WHERE id = ?5"));
  std::vector<int64_t> ids;
  ids.reserve(kernels.size());
  for (const trace::KernelDef& k : kernels) {
    std::string key =
        absl::StrCat(k.module, "\x1f", k.name, "\x1f", k.category, "\x1f", k.program_id, "\x1f",
                     k.hlo_hash, "\x1f", k.flops, "\x1f", k.bytes_accessed);
    auto it = cache->find(key);
    if (it != cache->end()) {
      ids.push_back(it->second);
      continue;
    }
    auto bind = [&](Statement& s) {
      s.Reset();
      s.Bind(1, k.module).Bind(2, k.name).Bind(3, k.category);
      s.Bind(4, static_cast<int64_t>(k.program_id)).Bind(5, static_cast<int64_t>(k.hlo_hash));
      s.Bind(6, k.flops).Bind(7, k.bytes_accessed);
    };
    bind(*ins_kernel);
    ins_kernel->Bind(8, k.source);
    RETURN_IF_ERROR(ins_kernel->Run());
    bind(*get_kernel);
    ASSIGN_OR_RETURN(bool got, get_kernel->Step());
    if (!got) return absl::InternalError("kernel row vanished");
    ids.push_back(get_kernel->Int(0));
    cache->emplace(std::move(key), ids.back());
    if (!k.hlo_text.empty() || !k.tf_op.empty() || !k.source_stack.empty() || !k.mlir.empty()) {
      upd_identity->Reset();
      upd_identity->Bind(1, k.hlo_text).Bind(2, k.tf_op).Bind(3, k.source_stack);
      upd_identity->Bind(4, k.mlir).Bind(5, ids.back());
      RETURN_IF_ERROR(upd_identity->Run());
    }
  }
  return ids;
}

// The statements inserting one host's rows, prepared once per capture.
struct HostInserts {
  std::unique_ptr<Statement> ins_host, get_host, ins_ch, ins_chip, ins_stat, ins_kcounter,
      ins_block, ins_counter;
  static absl::StatusOr<HostInserts> Prepare(Connection& c) {
    HostInserts h;
    ASSIGN_OR_RETURN(h.ins_host, Statement::Prepare(c,
                                                    "INSERT OR IGNORE INTO hosts (name) "
                                                    "VALUES (?)"));
    ASSIGN_OR_RETURN(h.get_host, Statement::Prepare(c, "SELECT id FROM hosts WHERE name = ?"));
    ASSIGN_OR_RETURN(h.ins_ch, Statement::Prepare(c,
                                                  "INSERT INTO capture_hosts (capture, host_id, "
                                                  "status, error, clock_offset_ns, "
                                                  "clock_uncertainty_ns, events, bytes, "
                                                  "host_clock, clock_drift_ppb, clock_mid_ns) "
                                                  "VALUES (?,?,?,?,?,?,?,?,?,?,?)"));
    ASSIGN_OR_RETURN(h.ins_chip, Statement::Prepare(c,
                                                    "INSERT INTO chips (capture, host_id, "
                                                    "ordinal, global_id, generation, "
                                                    "device_type, peak_tflops, peak_hbm_gbps) "
                                                    "VALUES (?,?,?,?,?,?,?,?)"));
    ASSIGN_OR_RETURN(h.ins_stat, Statement::Prepare(c,
                                                    "INSERT INTO kernel_stats (capture, chip_id, "
                                                    "kernel_id, count, total_ps, min_ps, max_ps, "
                                                    "sketch) VALUES (?,?,?,?,?,?,?,?)"));
    ASSIGN_OR_RETURN(h.ins_kcounter, Statement::Prepare(c,
                                                        "INSERT INTO kernel_counters (capture, "
                                                        "chip_id, kernel_id, name, cumulative, "
                                                        "integral, covered_ps, executions) "
                                                        "VALUES (?,?,?,?,?,?,?,?)"));
    ASSIGN_OR_RETURN(h.ins_block, Statement::Prepare(c,
                                                     "INSERT INTO timeline_blocks (capture, "
                                                     "chip_id, line, base_ns, events, data) "
                                                     "VALUES (?,?,?,?,?,?)"));
    ASSIGN_OR_RETURN(h.ins_counter, Statement::Prepare(c,
                                                       "INSERT INTO counter_series (capture, "
                                                       "chip_id, name, samples, data) VALUES "
                                                       "(?,?,?,?,?)"));
    return h;
  }
};

// Inserts one host's rows; returns its chips' row ids (by chip index). Widens the capture's
// range of kernel_stats row ids.
absl::StatusOr<std::vector<int64_t>> InsertHost(Connection& c, HostInserts& q, int64_t seq,
                                                const HostWrite& h, int64_t* stats_first,
                                                int64_t* stats_last) {
  q.ins_host->Reset();
  q.ins_host->Bind(1, h.host);
  RETURN_IF_ERROR(q.ins_host->Run());
  q.get_host->Reset();
  q.get_host->Bind(1, h.host);
  ASSIGN_OR_RETURN(bool found, q.get_host->Step());
  if (!found) return absl::InternalError("host row vanished");
  const int64_t host_id = q.get_host->Int(0);
  q.get_host->Reset();
  q.ins_ch->Reset();
  q.ins_ch->Bind(1, seq).Bind(2, host_id).Bind(3, h.status).Bind(4, h.error);
  q.ins_ch->Bind(5, h.clock_offset_ns).Bind(6, h.clock_uncertainty_ns).Bind(7, h.events);
  q.ins_ch->Bind(8, static_cast<int64_t>(h.bytes)).Bind(9, int64_t{h.host_clock});
  q.ins_ch->Bind(10, h.clock_drift_ppb).Bind(11, h.clock_mid_ns);
  RETURN_IF_ERROR(q.ins_ch->Run());
  std::vector<int64_t> chip_ids;
  for (const trace::Chip& chip : h.chips) {
    q.ins_chip->Reset();
    q.ins_chip->Bind(1, seq).Bind(2, host_id).Bind(3, int64_t{chip.ordinal});
    q.ins_chip->Bind(4, chip.global_id).Bind(5, chip.generation).Bind(6, chip.device_type);
    q.ins_chip->Bind(7, chip.peak_tflops).Bind(8, chip.peak_hbm_gbps);
    RETURN_IF_ERROR(q.ins_chip->Run());
    chip_ids.push_back(sqlite3_last_insert_rowid(c.get()));
  }
  auto chip_row = [&](int chip) -> absl::StatusOr<int64_t> {
    if (chip < 0 || static_cast<size_t>(chip) >= chip_ids.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("host ", h.host, ": chip index ", chip, " of ", chip_ids.size()));
    }
    return chip_ids[chip];
  };
  auto kernel_id = [&](uint32_t k) -> absl::StatusOr<int64_t> {
    if (k >= h.kernel_ids.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("host ", h.host, ": kernel index ", k, " of ", h.kernel_ids.size()));
    }
    return h.kernel_ids[k];
  };
  for (const trace::KernelStats& s : h.stats) {
    ASSIGN_OR_RETURN(const int64_t chip, chip_row(s.chip));
    ASSIGN_OR_RETURN(const int64_t kid, kernel_id(s.kernel));
    q.ins_stat->Reset();
    q.ins_stat->Bind(1, seq).Bind(2, chip).Bind(3, kid).Bind(4, s.count);
    q.ins_stat->Bind(5, s.total_ps).Bind(6, s.min_ps).Bind(7, s.max_ps);
    q.ins_stat->BindBlob(8, s.sketch.Serialize());
    RETURN_IF_ERROR(q.ins_stat->Run());
    const int64_t rowid = sqlite3_last_insert_rowid(c.get());
    if (*stats_first < 0) *stats_first = rowid;
    *stats_last = rowid;
  }
  for (const EncodedBlock& b : h.timelines) {
    ASSIGN_OR_RETURN(const int64_t chip, chip_row(b.chip));
    q.ins_block->Reset();
    q.ins_block->Bind(1, seq).Bind(2, chip).Bind(3, b.line).Bind(4, b.base_ns);
    q.ins_block->Bind(5, b.events).BindBlob(6, b.data);
    RETURN_IF_ERROR(q.ins_block->Run());
  }
  for (const trace::KernelCounter& k : h.attributions) {
    ASSIGN_OR_RETURN(const int64_t chip, chip_row(k.chip));
    ASSIGN_OR_RETURN(const int64_t kid, kernel_id(k.kernel));
    q.ins_kcounter->Reset();
    q.ins_kcounter->Bind(1, seq).Bind(2, chip).Bind(3, kid).Bind(4, k.counter);
    q.ins_kcounter->Bind(5, int64_t{k.kind == trace::CounterKind::kCumulative});
    q.ins_kcounter->Bind(6, k.integral).Bind(7, k.covered_ps).Bind(8, k.executions);
    RETURN_IF_ERROR(q.ins_kcounter->Run());
  }
  for (const EncodedSeries& s : h.counters) {
    ASSIGN_OR_RETURN(const int64_t chip, chip_row(s.chip));
    q.ins_counter->Reset();
    q.ins_counter->Bind(1, seq).Bind(2, chip).Bind(3, s.name);
    q.ins_counter->Bind(4, s.samples).BindBlob(5, s.data);
    RETURN_IF_ERROR(q.ins_counter->Run());
  }
  return chip_ids;
}

// The pod's collective waits: per kernel and chip, per kernel, per straggling chip, and the
// worst instances. `chip_ids[h][c]` is the row of chip c of hosts[h].
absl::Status InsertCollectiveRows(Connection& c, int64_t seq, const CaptureWrite& w,
                                  const std::vector<std::vector<int64_t>>& chip_ids) {
  ASSIGN_OR_RETURN(auto ins_wait,
                   Statement::Prepare(c,
                                      "INSERT INTO kernel_waits (capture, chip_id, kernel_id, "
                                      "wait_ps, instances, straggler) VALUES (?,?,?,?,?,?)"));
  for (const WaitWrite& r : w.waits) {
    if (r.host >= chip_ids.size() || r.chip < 0 ||
        static_cast<size_t>(r.chip) >= chip_ids[r.host].size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("collective wait on host ", r.host, " chip ", r.chip, ": no such chip"));
    }
    ins_wait->Reset();
    ins_wait->Bind(1, seq).Bind(2, chip_ids[r.host][r.chip]).Bind(3, r.kernel_id);
    ins_wait->Bind(4, r.wait_ps).Bind(5, r.instances).Bind(6, r.straggler);
    RETURN_IF_ERROR(ins_wait->Run());
  }
  ASSIGN_OR_RETURN(auto ins_wrollup,
                   Statement::Prepare(c,
                                      "INSERT INTO kernel_wait_rollups (capture, kernel_id, "
                                      "wait_ps, instances, straggler) VALUES (?,?,?,?,?)"));
  for (const WaitRollupWrite& r : w.wait_rollups) {
    ins_wrollup->Reset();
    ins_wrollup->Bind(1, seq).Bind(2, r.kernel_id).Bind(3, r.wait_ps).Bind(4, r.instances);
    ins_wrollup->Bind(5, r.straggler);
    RETURN_IF_ERROR(ins_wrollup->Run());
  }
  ASSIGN_OR_RETURN(auto ins_straggler,
                   Statement::Prepare(c,
                                      "INSERT INTO stragglers (capture, host, chip, times_last, "
                                      "instances, caused_ps, lateness_ps, steps) VALUES "
                                      "(?,?,?,?,?,?,?,?)"));
  for (const trace::StragglerRow& r : w.stragglers) {
    ins_straggler->Reset();
    ins_straggler->Bind(1, seq).Bind(2, r.host).Bind(3, int64_t{r.chip_ordinal});
    ins_straggler->Bind(4, r.times_last).Bind(5, r.instances).Bind(6, r.caused_ps);
    ins_straggler->Bind(7, r.lateness_ps).Bind(8, absl::StrJoin(r.steps, ","));
    RETURN_IF_ERROR(ins_straggler->Run());
  }
  ASSIGN_OR_RETURN(auto ins_instance,
                   Statement::Prepare(c,
                                      "INSERT INTO collective_instances (capture, id, kernel, "
                                      "step, straggler_host, straggler_chip, chips, spread_ps, "
                                      "lateness_ps, caused_ps) VALUES (?,?,?,?,?,?,?,?,?,?)"));
  for (const trace::InstanceRow& r : w.worst) {
    ins_instance->Reset();
    ins_instance->Bind(1, seq).Bind(2, static_cast<int64_t>(r.id)).Bind(3, r.kernel_name);
    ins_instance->Bind(4, r.step).Bind(5, r.straggler_host).Bind(6, int64_t{r.straggler_chip});
    ins_instance->Bind(7, int64_t{r.chips}).Bind(8, r.spread_ps).Bind(9, r.lateness_ps);
    ins_instance->Bind(10, r.caused_ps);
    RETURN_IF_ERROR(ins_instance->Run());
  }
  return absl::OkStatus();
}

// Pod-wide roll-ups of kernel statistics and counter attributions.
absl::Status InsertRollups(Connection& c, int64_t seq, const CaptureWrite& w) {
  ASSIGN_OR_RETURN(auto ins_crollup,
                   Statement::Prepare(c,
                                      "INSERT INTO kernel_counter_rollups (capture, kernel_id, "
                                      "name, cumulative, integral, covered_ps) VALUES "
                                      "(?,?,?,?,?,?)"));
  for (const CounterRollupWrite& r : w.counter_rollups) {
    ins_crollup->Reset();
    ins_crollup->Bind(1, seq).Bind(2, r.kernel_id).Bind(3, r.name);
    ins_crollup->Bind(4, int64_t{r.cumulative}).Bind(5, r.integral).Bind(6, r.covered_ps);
    RETURN_IF_ERROR(ins_crollup->Run());
  }
  ASSIGN_OR_RETURN(auto ins_rollup,
                   Statement::Prepare(c,
                                      "INSERT INTO kernel_rollups (capture, kernel_id, "
                                      "count, total_ps, min_ps, max_ps, p50_ps, p99_ps, chips, "
                                      "sketch) VALUES (?,?,?,?,?,?,?,?,?,?)"));
  for (const KernelRollupWrite& r : w.rollups) {
    ins_rollup->Reset();
    ins_rollup->Bind(1, seq).Bind(2, r.kernel_id).Bind(3, r.stats.count);
    ins_rollup->Bind(4, r.stats.total_ps).Bind(5, r.stats.min_ps).Bind(6, r.stats.max_ps);
    ins_rollup->Bind(7, r.stats.QuantilePs(0.5)).Bind(8, r.stats.QuantilePs(0.99));
    ins_rollup->Bind(9, r.chips).BindBlob(10, r.stats.sketch.Serialize());
    RETURN_IF_ERROR(ins_rollup->Run());
  }
  return absl::OkStatus();
}

absl::Status WriteCaptureRows(Connection& c, const CaptureWrite& w) {
  // The `running` record BeginCapture left, if any, gives way to the whole capture.
  ASSIGN_OR_RETURN(auto del_running,
                   Statement::Prepare(c,
                                      "DELETE FROM captures WHERE id = ? AND status = "
                                      "'running'"));
  del_running->Bind(1, w.id);
  RETURN_IF_ERROR(del_running->Run());
  ASSIGN_OR_RETURN(auto exists, Statement::Prepare(c, "SELECT 1 FROM captures WHERE id = ?"));
  exists->Bind(1, w.id);
  ASSIGN_OR_RETURN(bool dup, exists->Step());
  if (dup) return absl::AlreadyExistsError(absl::StrCat("capture ", w.id, " is already stored"));
  ASSIGN_OR_RETURN(auto ins_capture,
                   Statement::Prepare(c,
                                      "INSERT INTO captures (id, start_ns, end_ns, status, "
                                      "options, labels, created_ns, source) VALUES "
                                      "(?,?,?,?,?,?,?,?)"));
  ins_capture->Bind(1, w.id).Bind(2, w.start_ns).Bind(3, w.end_ns).Bind(4, w.status);
  ins_capture->Bind(5, w.options_json).Bind(6, LabelsJson(w.labels)).Bind(7, w.created_ns);
  ins_capture->Bind(8, w.source);
  RETURN_IF_ERROR(ins_capture->Run());
  const int64_t seq = sqlite3_last_insert_rowid(c.get());

  ASSIGN_OR_RETURN(HostInserts inserts, HostInserts::Prepare(c));
  std::vector<std::vector<int64_t>> chip_ids;
  int64_t events = 0, stats_first = -1, stats_last = -1;
  for (const HostWrite& h : w.hosts) {
    ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                     InsertHost(c, inserts, seq, h, &stats_first, &stats_last));
    chip_ids.push_back(std::move(ids));
    events += h.events;
  }
  RETURN_IF_ERROR(InsertCollectiveRows(c, seq, w, chip_ids));
  RETURN_IF_ERROR(InsertRollups(c, seq, w));
  ASSIGN_OR_RETURN(auto upd, Statement::Prepare(c,
                                                "UPDATE captures SET events = ?, "
                                                "kernel_count = ?, stats_first = ?, "
                                                "stats_last = ? WHERE seq = ?"));
  upd->Bind(1, events).Bind(2, static_cast<int64_t>(w.rollups.size()));
  upd->Bind(3, stats_first < 0 ? int64_t{0} : stats_first).Bind(4, stats_last).Bind(5, seq);
  return upd->Run();
}

// Reads one StatRow from a query whose columns are: host, chip ordinal, kernel id, module,
// op, category, program id, hlo hash, flops, bytes, count, total, min, max, sketch, chips,
// peak tflops, peak gbps.
absl::StatusOr<StatRow> ReadStatRow(const Statement& s) {
  StatRow r;
  r.host = s.Text(0);
  r.chip = s.IsNull(1) ? -1 : static_cast<int>(s.Int(1));
  r.kernel.id = s.Int(2);
  r.kernel.module = s.Text(3);
  r.kernel.op_name = s.Text(4);
  r.kernel.category = s.Text(5);
  r.kernel.program_id = static_cast<uint64_t>(s.Int(6));
  r.kernel.hlo_hash = static_cast<uint64_t>(s.Int(7));
  r.kernel.flops = s.Int(8);
  r.kernel.bytes_accessed = s.Int(9);
  r.count = s.Int(10);
  r.total_ps = s.Int(11);
  r.min_ps = s.Int(12);
  r.max_ps = s.Int(13);
  ASSIGN_OR_RETURN(r.sketch, trace::DDSketch::Deserialize(s.Blob(14)));
  r.chips = s.Int(15);
  r.peak_tflops = s.Double(16);
  r.peak_hbm_gbps = s.Double(17);
  return r;
}

}  // namespace

double RelativeChange(double baseline, double candidate) {
  if (baseline <= 0 || candidate <= 0) return 0;
  return candidate / baseline - 1;
}

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
  if (read_only()) return Connection::OpenReadOnly(path_);
  return Connection::Open(path_, false);
}

void Store::ReturnReader(std::unique_ptr<Connection> c) {
  absl::MutexLock lock(&mu_);
  if (idle_readers_.size() < 8) idle_readers_.push_back(std::move(c));
}

// Borrows a reader connection for one query.
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

namespace {

std::string KernelKeyOf(const trace::KernelDef& k) {
  return absl::StrCat(k.module, "\x1f", k.name, "\x1f", k.category, "\x1f", k.program_id, "\x1f",
                      k.hlo_hash, "\x1f", k.flops, "\x1f", k.bytes_accessed);
}

// Which of a kernel's texts (hlo, tf_op, source stack, MLIR) are non-empty, as bits.
unsigned TextMask(const trace::KernelDef& k) {
  return (k.hlo_text.empty() ? 0u : 1u) | (k.tf_op.empty() ? 0u : 2u) |
         (k.source_stack.empty() ? 0u : 4u) | (k.mlir.empty() ? 0u : 8u);
}

}  // namespace

absl::StatusOr<std::vector<std::vector<int64_t>>> Store::ResolveKernels(
    const std::vector<const std::vector<trace::KernelDef>*>& hosts) {
  // Kernel rows are never deleted, so ids once known stay right: the hosts of a pod share
  // nearly all their kernels, and after the first host the rest need not visit the writer.
  std::vector<std::vector<int64_t>> out;
  {
    absl::MutexLock lock(&kernel_ids_mu_);
    bool all_known = true;
    for (const std::vector<trace::KernelDef>* kernels : hosts) {
      std::vector<int64_t>& ids = out.emplace_back();
      for (const trace::KernelDef& k : *kernels) {
        auto it = kernel_ids_.find(KernelKeyOf(k));
        // A definition bringing texts the stored row lacks goes to the writer to fill them.
        if (it == kernel_ids_.end() || (TextMask(k) & ~it->second.second) != 0) {
          all_known = false;
          break;
        }
        ids.push_back(it->second.first);
      }
      if (!all_known) break;
    }
    if (all_known) return out;
  }
  out.clear();
  RETURN_IF_ERROR(OnWriter([&](Connection& c) {
    return Transaction(c, [&]() -> absl::Status {
      absl::flat_hash_map<std::string, int64_t> cache;
      for (const std::vector<trace::KernelDef>* kernels : hosts) {
        ASSIGN_OR_RETURN(std::vector<int64_t> ids, ResolveKernelsOn(c, *kernels, &cache));
        out.push_back(std::move(ids));
      }
      return absl::OkStatus();
    });
  }));
  absl::MutexLock lock(&kernel_ids_mu_);
  for (size_t h = 0; h < hosts.size(); ++h) {
    for (size_t i = 0; i < hosts[h]->size(); ++i) {
      auto& entry = kernel_ids_[KernelKeyOf((*hosts[h])[i])];
      entry.first = out[h][i];
      entry.second |= TextMask((*hosts[h])[i]);
    }
  }
  return out;
}

absl::Status Store::WriteCapture(const CaptureWrite& capture) {
  if (capture.id.empty()) return absl::InvalidArgumentError("capture id is empty");
  return OnWriter([&](Connection& c) {
    // Every reference this transaction writes points at a row it wrote itself or looked up:
    // skip the per-row foreign-key lookups. Deletes keep them on, for the cascades.
    RETURN_IF_ERROR(c.Exec("PRAGMA foreign_keys = OFF"));
    absl::Status s = Transaction(c, [&] { return WriteCaptureRows(c, capture); });
    absl::Status on = c.Exec("PRAGMA foreign_keys = ON");
    return s.ok() ? on : s;
  });
}

absl::Status Store::BeginCapture(const CaptureWrite& header) {
  if (header.id.empty()) return absl::InvalidArgumentError("capture id is empty");
  return OnWriter([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(auto ins, Statement::Prepare(c,
                                                  "INSERT INTO captures (id, start_ns, end_ns, "
                                                  "status, options, labels, created_ns, source) "
                                                  "VALUES (?,?,?,'running',?,?,?,?)"));
    ins->Bind(1, header.id).Bind(2, header.start_ns).Bind(3, header.end_ns);
    ins->Bind(4, header.options_json).Bind(5, LabelsJson(header.labels));
    ins->Bind(6, header.created_ns).Bind(7, header.source);
    return ins->Run();
  });
}

absl::StatusOr<int> Store::MarkInterrupted() {
  int marked = 0;
  RETURN_IF_ERROR(OnWriter([&](Connection& c) -> absl::Status {
    RETURN_IF_ERROR(c.Exec("UPDATE captures SET status = 'interrupted' WHERE status = 'running'"));
    marked = sqlite3_changes(c.get());
    return absl::OkStatus();
  }));
  return marked;
}

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

absl::StatusOr<std::vector<CaptureRow>> Store::ListCaptures(const CaptureQuery& q,
                                                            std::string* next_page_token) {
  if (q.until_ns < q.since_ns) {
    return absl::InvalidArgumentError("the time range is inverted (until before since)");
  }
  int64_t token_start = INT64_MAX;
  std::string token_id;
  if (!q.page_token.empty()) {
    std::vector<std::string> parts = absl::StrSplit(q.page_token, absl::MaxSplits(':', 1));
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &token_start)) {
      return absl::InvalidArgumentError(absl::StrCat("bad page token \"", q.page_token, "\""));
    }
    token_id = parts[1];
  }
  PODPROF_WITH_READER(c);
  std::string sql =
      "SELECT c.id, c.start_ns, c.end_ns, c.status, c.labels, c.source, c.events, "
      "c.kernel_count, (SELECT COUNT(*) FROM capture_hosts h WHERE h.capture = c.seq), "
      "c.created_ns, "
      "(SELECT COUNT(*) FROM chips x WHERE x.capture = c.seq) FROM captures c "
      "WHERE c.start_ns >= ?1 AND c.start_ns <= ?2 AND (?3 = '' OR c.status = ?3) AND "
      "(c.start_ns < ?4 OR (c.start_ns = ?4 AND c.id < ?5)) AND (?6 = '' OR c.id = ?6)";
  int param = 7;
  for (size_t i = 0; i < q.labels.size(); ++i) {
    sql += absl::StrCat(" AND json_extract(c.labels, ?", param, ") = ?", param + 1);
    param += 2;
  }
  sql += absl::StrCat(" ORDER BY c.start_ns DESC, c.id DESC LIMIT ?", param);
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(c, sql));
  s->Bind(1, q.since_ns).Bind(2, q.until_ns).Bind(3, q.status).Bind(4, token_start);
  s->Bind(5, q.page_token.empty() ? std::string("\xff\xff") : token_id).Bind(6, q.id);
  param = 7;
  for (const auto& [k, v] : q.labels) {
    s->Bind(param, absl::StrCat("$.\"", k, "\"")).Bind(param + 1, v);
    param += 2;
  }
  const int limit = q.limit > 0 ? q.limit : 100;
  s->Bind(param, int64_t{limit} + 1);
  std::vector<CaptureRow> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s->Step());
    if (!row) break;
    CaptureRow r;
    r.id = s->Text(0);
    r.start_ns = s->Int(1);
    r.end_ns = s->Int(2);
    r.status = s->Text(3);
    r.labels = ParseLabels(s->Text(4));
    r.source = s->Text(5);
    r.events = s->Int(6);
    r.kernels = s->Int(7);
    r.hosts = s->Int(8);
    r.created_ns = s->Int(9);
    r.chips = s->Int(10);
    out.push_back(std::move(r));
  }
  next_page_token->clear();
  if (static_cast<int>(out.size()) > limit) {
    out.resize(limit);
    *next_page_token = absl::StrCat(out.back().start_ns, ":", out.back().id);
  }
  ASSIGN_OR_RETURN(auto hosts,
                   Statement::Prepare(c,
                                      "SELECT h.name, x.status, x.error, "
                                      "x.clock_offset_ns, x.clock_uncertainty_ns, "
                                      "x.events, x.host_clock, x.clock_drift_ppb, "
                                      "x.clock_mid_ns FROM capture_hosts x JOIN hosts h "
                                      "ON h.id = x.host_id JOIN captures c ON c.seq = "
                                      "x.capture WHERE c.id = ? "
                                      "ORDER BY h.name"));
  for (CaptureRow& r : out) {
    hosts->Reset();
    hosts->Bind(1, r.id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, hosts->Step());
      if (!row) break;
      HostRow h;
      h.host = hosts->Text(0);
      h.status = hosts->Text(1);
      h.error = hosts->Text(2);
      h.clock_offset_ns = hosts->Int(3);
      h.clock_uncertainty_ns = hosts->Int(4);
      h.events = hosts->Int(5);
      h.host_clock = hosts->Int(6) != 0;
      h.correction = {h.clock_offset_ns, hosts->Double(7), hosts->Int(8)};
      r.host_rows.push_back(std::move(h));
    }
  }
  return out;
}

absl::StatusOr<std::vector<StatRow>> Store::KernelStats(const StatsQuery& q) {
  if (!q.op_regex.empty()) RETURN_IF_ERROR(CheckRegex(q.op_regex));
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(const CaptureRef ref, RequireCapture(c, q.capture_id));
  const int64_t seq = ref.seq;
  const bool filtered_by_place = !q.host.empty() || q.chip.has_value();
  std::string sql;
  if (q.group_by == Grouping::kKernel && !filtered_by_place) {
    // The stored roll-up: no sketch merging at query time.
    sql =
        "SELECT '', NULL, k.id, k.module, k.op_name, k.category, k.program_id, k.hlo_hash, "
        "k.flops, k.bytes_accessed, r.count AS cnt, r.total_ps AS total, r.min_ps, r.max_ps, "
        "r.sketch AS sk, r.chips, "
        "(SELECT AVG(peak_tflops) FROM chips WHERE capture = ?1), "
        "(SELECT AVG(peak_hbm_gbps) FROM chips WHERE capture = ?1) "
        "FROM kernel_rollups r JOIN kernels k ON k.id = r.kernel_id WHERE r.capture = ?1 "
        "AND (?2 = '' OR k.op_name REGEXP ?2) AND (?3 = '' OR k.category = ?3)";
  } else {
    const char* host_col =
        q.group_by == Grouping::kChip || q.group_by == Grouping::kHost ? "h.name" : "''";
    const char* chip_col = q.group_by == Grouping::kChip ? "c.ordinal" : "NULL";
    const bool category = q.group_by == Grouping::kCategory;
    sql = absl::StrCat(
        "SELECT ", host_col, ", ", chip_col, ", ",
        category ? "0, '', '', k.category, 0, 0, 0, 0, "
                 : "k.id, k.module, k.op_name, k.category, k.program_id, k.hlo_hash, k.flops, "
                   "k.bytes_accessed, ",
        "SUM(s.count) AS cnt, SUM(s.total_ps) AS total, MIN(s.min_ps), MAX(s.max_ps), "
        "dds_merge(s.sketch) AS sk, "
        "COUNT(DISTINCT s.chip_id), AVG(c.peak_tflops), AVG(c.peak_hbm_gbps) "
        "FROM kernel_stats s JOIN chips c ON c.id = s.chip_id JOIN hosts h ON h.id = c.host_id "
        "JOIN kernels k ON k.id = s.kernel_id WHERE s.rowid BETWEEN ?6 AND ?7 "
        "AND (?2 = '' OR k.op_name REGEXP ?2) AND (?3 = '' OR k.category = ?3) "
        "AND (?4 = '' OR h.name = ?4) AND (?5 < 0 OR c.ordinal = ?5) GROUP BY ",
        q.group_by == Grouping::kChip   ? "s.chip_id, s.kernel_id"
        : q.group_by == Grouping::kHost ? "c.host_id, s.kernel_id"
        : category                      ? "k.category"
                                        : "s.kernel_id");
  }
  const char* order = q.order == Order::kCount  ? "cnt DESC"
                      : q.order == Order::kMean ? "(total * 1.0 / cnt) DESC"
                      : q.order == Order::kP99  ? "dds_quantile(sk, 0.99) DESC"
                                                : "total DESC";
  // Ties by name keep the order stable.
  sql += absl::StrCat(" ORDER BY ", order, ", 5, 4");
  if (q.top > 0) sql += absl::StrCat(" LIMIT ", q.top);
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(c, sql));
  s->Bind(1, seq).Bind(2, q.op_regex).Bind(3, q.category);
  if (!(q.group_by == Grouping::kKernel && !filtered_by_place)) {
    s->Bind(4, q.host).Bind(5, int64_t{q.chip.value_or(-1)});
    s->Bind(6, ref.stats_first).Bind(7, ref.stats_last);
  }
  std::vector<StatRow> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s->Step());
    if (!row) break;
    ASSIGN_OR_RETURN(StatRow r, ReadStatRow(*s));
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<std::vector<HistorySeries>> Store::KernelHistory(const HistoryQuery& q) {
  if (q.op_regex.empty()) return absl::InvalidArgumentError("a kernel name or regex is required");
  RETURN_IF_ERROR(CheckRegex(q.op_regex));
  if (q.until_ns < q.since_ns) {
    return absl::InvalidArgumentError("the time range is inverted (until before since)");
  }
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(
      auto s,
      Statement::Prepare(
          c,
          "SELECT k.module, k.op_name, k.category, cap.id, cap.start_ns, r.count, "
          "r.total_ps, r.sketch, r.chips, k.flops FROM kernels k "
          "JOIN kernel_rollups r ON r.kernel_id = k.id JOIN captures cap ON cap.seq = r.capture "
          "WHERE k.op_name REGEXP ?1 AND (?2 = '' OR k.module = ?2) AND cap.start_ns >= ?3 AND "
          "cap.start_ns <= ?4 ORDER BY k.module, k.op_name, cap.start_ns, cap.seq"));
  s->Bind(1, q.op_regex).Bind(2, q.module).Bind(3, q.since_ns).Bind(4, q.until_ns);
  std::vector<HistorySeries> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s->Step());
    if (!row) break;
    std::string module = s->Text(0), op = s->Text(1);
    if (out.empty() || out.back().module != module || out.back().op_name != op) {
      if (static_cast<int>(out.size()) >= std::max(1, q.max_kernels)) break;
      out.push_back({module, op, s->Text(2), {}});
    }
    auto& points = out.back().points;
    const std::string capture = s->Text(3);
    // Recompiles give one (module, op) several kernel rows in one capture: merge them.
    if (points.empty() || points.back().capture_id != capture) {
      points.push_back({});
      points.back().capture_id = capture;
      points.back().start_ns = s->Int(4);
    }
    HistoryPoint& p = points.back();
    p.count += s->Int(5);
    p.total_ps += s->Int(6);
    ASSIGN_OR_RETURN(trace::DDSketch sk, trace::DDSketch::Deserialize(s->Blob(7)));
    p.sketch.Merge(sk);
    p.chips = std::max(p.chips, s->Int(8));
    if (p.total_ps > 0) {
      p.achieved_tflops += static_cast<double>(s->Int(9)) * static_cast<double>(s->Int(5)) /
                           static_cast<double>(p.total_ps);
    }
  }
  return out;
}

absl::StatusOr<std::vector<KernelDeltaRow>> Store::Compare(const std::string& baseline,
                                                           const std::string& candidate,
                                                           const std::string& op_regex,
                                                           double threshold) {
  std::map<std::pair<std::string, std::string>, KernelDeltaRow> rows;
  for (int side = 0; side < 2; ++side) {
    StatsQuery q;
    q.capture_id = side == 0 ? baseline : candidate;
    q.op_regex = op_regex;
    ASSIGN_OR_RETURN(std::vector<StatRow> stats, KernelStats(q));
    for (StatRow& r : stats) {
      KernelDeltaRow& d = rows[{r.kernel.module, r.kernel.op_name}];
      d.module = r.kernel.module;
      d.op_name = r.kernel.op_name;
      d.category = r.kernel.category;
      std::optional<StatRow>& slot = side == 0 ? d.baseline : d.candidate;
      if (slot) {  // Two kernel rows for one (module, op): merge.
        slot->count += r.count;
        slot->total_ps += r.total_ps;
        slot->min_ps = std::min(slot->min_ps, r.min_ps);
        slot->max_ps = std::max(slot->max_ps, r.max_ps);
        slot->sketch.Merge(r.sketch);
      } else {
        slot = std::move(r);
      }
    }
  }
  // Noise: the sketch's own error is 2 x 0.54%; a shift must also leave the baseline's
  // spread (its p90) to count.
  const double floor = std::max(threshold, 2 * trace::DDSketch::kRelativeError);
  std::vector<KernelDeltaRow> out;
  for (auto& [key, d] : rows) {
    if (d.baseline && d.candidate) {
      const auto mean = [](const StatRow& r) {
        return r.count > 0 ? static_cast<double>(r.total_ps) / r.count : 0.0;
      };
      d.mean_change = RelativeChange(mean(*d.baseline), mean(*d.candidate));
      const double b50 = d.baseline->sketch.Quantile(0.5), c50 = d.candidate->sketch.Quantile(0.5);
      d.p50_change = RelativeChange(b50, c50);
      d.p99_change =
          RelativeChange(d.baseline->sketch.Quantile(0.99), d.candidate->sketch.Quantile(0.99));
      d.regression = d.p50_change > floor && c50 > d.baseline->sketch.Quantile(0.9);
    }
    out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(), [](const KernelDeltaRow& a, const KernelDeltaRow& b) {
    auto total = [](const KernelDeltaRow& d) {
      return std::max(d.baseline ? d.baseline->total_ps : 0,
                      d.candidate ? d.candidate->total_ps : 0);
    };
    return std::make_tuple(!a.regression, -total(a), a.op_name) <
           std::make_tuple(!b.regression, -total(b), b.op_name);
  });
  return out;
}

absl::StatusOr<std::vector<trace::EventBlock>> Store::Timelines(const std::string& capture_id) {
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(const CaptureRef ref, RequireCapture(c, capture_id));
  const int64_t seq = ref.seq;
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(c,
                                              "SELECT x.ordinal, t.line, t.base_ns, t.data, "
                                              "ch.host_clock, ch.clock_offset_ns, "
                                              "ch.clock_drift_ppb, ch.clock_mid_ns "
                                              "FROM timeline_blocks t JOIN chips x ON x.id = "
                                              "t.chip_id JOIN capture_hosts ch ON ch.capture = "
                                              "t.capture AND ch.host_id = x.host_id "
                                              "WHERE t.capture = ? ORDER BY t.rowid"));
  s->Bind(1, seq);
  std::vector<trace::EventBlock> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s->Step());
    if (!row) break;
    trace::EventBlock b;
    b.chip = static_cast<int>(s->Int(0));  // the chip's ordinal
    b.line = s->Text(1);
    b.base_ns = s->Int(2);
    RETURN_IF_ERROR(DecodeTimeline(s->Blob(3), &b));
    if (s->Int(4) != 0) {
      trace::ApplyCorrection(trace::ClockCorrection{s->Int(5), s->Double(6), s->Int(7)}, &b);
    }
    out.push_back(std::move(b));
  }
  return out;
}

absl::StatusOr<CaptureRow> Store::GetCapture(const std::string& capture_id) {
  CaptureQuery q;
  q.id = capture_id;
  q.since_ns = INT64_MIN;
  q.limit = 1;
  std::string next;
  ASSIGN_OR_RETURN(std::vector<CaptureRow> rows, ListCaptures(q, &next));
  if (rows.empty()) return absl::NotFoundError(absl::StrCat("no capture \"", capture_id, "\""));
  return rows.front();
}

absl::Status Store::ForEachHost(const std::string& capture_id,
                                const std::function<absl::Status(StoredHost&)>& fn) {
  ASSIGN_OR_RETURN(CaptureRow row, GetCapture(capture_id));
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(const CaptureRef ref, RequireCapture(c, capture_id));
  ASSIGN_OR_RETURN(auto chips, Statement::Prepare(c,
                                                  "SELECT x.id, x.ordinal, x.global_id, "
                                                  "x.generation, x.device_type, x.peak_tflops, "
                                                  "x.peak_hbm_gbps FROM chips x JOIN hosts h ON "
                                                  "h.id = x.host_id WHERE x.capture = ? AND "
                                                  "h.name = ? ORDER BY x.ordinal"));
  ASSIGN_OR_RETURN(auto blocks, Statement::Prepare(c,
                                                   "SELECT line, base_ns, data FROM "
                                                   "timeline_blocks WHERE capture = ? AND "
                                                   "chip_id = ? ORDER BY rowid"));
  ASSIGN_OR_RETURN(auto counters, Statement::Prepare(c,
                                                     "SELECT name, data FROM counter_series "
                                                     "WHERE capture = ? AND chip_id = ? ORDER "
                                                     "BY rowid"));
  ASSIGN_OR_RETURN(auto kernel, Statement::Prepare(c,
                                                   "SELECT module, op_name, category, "
                                                   "program_id, hlo_hash, flops, "
                                                   "bytes_accessed, source FROM kernels WHERE "
                                                   "id = ?"));
  for (const HostRow& h : row.host_rows) {
    StoredHost out;
    out.row = h;
    out.capture.host.name = h.host;
    out.capture.host.profile_start_ns = row.start_ns;
    out.capture.host.profile_stop_ns = row.end_ns;
    std::map<uint32_t, uint32_t> local;  // kernels.id -> index into capture.kernels
    chips->Reset();
    chips->Bind(1, ref.seq).Bind(2, h.host);
    std::vector<int64_t> chip_ids;
    while (true) {
      ASSIGN_OR_RETURN(bool more, chips->Step());
      if (!more) break;
      chip_ids.push_back(chips->Int(0));
      trace::Chip chip;
      chip.ordinal = static_cast<int>(chips->Int(1));
      chip.global_id = chips->Int(2);
      chip.generation = chips->Text(3);
      chip.device_type = chips->Text(4);
      chip.peak_tflops = chips->Double(5);
      chip.peak_hbm_gbps = chips->Double(6);
      out.capture.host.chips.push_back(std::move(chip));
    }
    for (size_t ci = 0; ci < chip_ids.size(); ++ci) {
      blocks->Reset();
      blocks->Bind(1, ref.seq).Bind(2, chip_ids[ci]);
      while (true) {
        ASSIGN_OR_RETURN(bool more, blocks->Step());
        if (!more) break;
        trace::EventBlock b;
        b.chip = static_cast<int>(ci);
        b.line = blocks->Text(0);
        b.kind = trace::LineKindOfName(b.line);
        b.base_ns = blocks->Int(1);
        RETURN_IF_ERROR(DecodeTimeline(blocks->Blob(2), &b));
        // Stored kernel ids become indexes into this host's own kernel definitions.
        for (uint32_t& k : b.kernel) {
          auto [it, fresh] =
              local.try_emplace(k, static_cast<uint32_t>(out.capture.kernels.size()));
          if (fresh) {
            kernel->Reset();
            kernel->Bind(1, static_cast<int64_t>(k));
            ASSIGN_OR_RETURN(bool found, kernel->Step());
            trace::KernelDef d;
            if (found) {
              d.module = kernel->Text(0);
              d.name = kernel->Text(1);
              d.category = kernel->Text(2);
              d.program_id = static_cast<uint64_t>(kernel->Int(3));
              d.hlo_hash = static_cast<uint64_t>(kernel->Int(4));
              d.flops = kernel->Int(5);
              d.bytes_accessed = kernel->Int(6);
              d.source = kernel->Text(7);
            }
            out.capture.kernels.push_back(std::move(d));
          }
          k = it->second;
        }
        out.capture.blocks.push_back(std::move(b));
      }
      counters->Reset();
      counters->Bind(1, ref.seq).Bind(2, chip_ids[ci]);
      while (true) {
        ASSIGN_OR_RETURN(bool more, counters->Step());
        if (!more) break;
        ASSIGN_OR_RETURN(trace::CounterSeries series, DecodeCounters(counters->Blob(1)));
        series.chip = static_cast<int>(ci);
        series.name = counters->Text(0);
        out.capture.counters.push_back(std::move(series));
      }
    }
    if (h.host_clock) trace::ApplyCorrection(h.correction, &out.capture);
    RETURN_IF_ERROR(fn(out));
  }
  return absl::OkStatus();
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

absl::StatusOr<RetentionResult> Store::ApplyRetention(const RetentionPolicy& p, int64_t now_ns) {
  RetentionResult result;
  const int batch = std::max(1, p.batch);
  // Each batch is its own transaction: a long retention pass never holds the writer for long.
  auto delete_batch = [&](const std::string& select_ids, int64_t bound, const char* what,
                          int limit) -> absl::StatusOr<int64_t> {
    int64_t n = 0;
    absl::Status s = OnWriter([&](Connection& c) {
      return Transaction(c, [&]() -> absl::Status {
        const std::string ids = absl::StrCat("(", select_ids, " LIMIT ", limit, ")");
        if (absl::StrContains(what, "FROM captures")) {
          // Per-chip statistics have no cascade (see the schema): delete their rowid ranges.
          ASSIGN_OR_RETURN(auto del, Statement::Prepare(c,
                                                        "DELETE FROM kernel_stats WHERE rowid "
                                                        "BETWEEN ?1 AND ?2"));
          ASSIGN_OR_RETURN(auto ranges,
                           Statement::Prepare(c, absl::StrCat("SELECT stats_first, stats_last "
                                                              "FROM captures WHERE id IN ",
                                                              ids)));
          ranges->Bind(1, bound);
          while (true) {
            ASSIGN_OR_RETURN(bool row, ranges->Step());
            if (!row) break;
            del->Reset();
            del->Bind(1, ranges->Int(0)).Bind(2, ranges->Int(1));
            RETURN_IF_ERROR(del->Run());
          }
        }
        ASSIGN_OR_RETURN(auto st, Statement::Prepare(c, absl::StrCat(what, " ", ids)));
        st->Bind(1, bound);
        RETURN_IF_ERROR(st->Run());
        n = sqlite3_changes(c.get());
        return absl::OkStatus();
      });
    });
    if (!s.ok()) return s;
    return n;
  };
  if (p.keep_timelines_ns > 0) {
    while (true) {
      ASSIGN_OR_RETURN(int64_t n,
                       delete_batch("SELECT DISTINCT t.capture FROM timeline_blocks t JOIN "
                                    "captures c ON c.seq = t.capture WHERE c.start_ns < ?1",
                                    now_ns - p.keep_timelines_ns,
                                    "DELETE FROM timeline_blocks WHERE capture IN", batch));
      if (n == 0) break;
      result.timelines_dropped += n;
    }
  }
  if (p.max_age_ns > 0) {
    while (true) {
      ASSIGN_OR_RETURN(
          int64_t n,
          delete_batch("SELECT id FROM captures WHERE start_ns < ?1 ORDER BY start_ns",
                       now_ns - p.max_age_ns, "DELETE FROM captures WHERE id IN", batch));
      if (n == 0) break;
      result.captures_deleted += n;
    }
  }
  if (p.max_bytes > 0) {
    while (true) {
      RETURN_IF_ERROR(OnWriter([](Connection& c) { return c.Exec("PRAGMA incremental_vacuum"); }));
      ASSIGN_OR_RETURN(int64_t used, UsedBytes());
      if (used <= p.max_bytes) break;
      // Oldest first, one capture at a time: the size test runs between deletions.
      ASSIGN_OR_RETURN(int64_t n,
                       delete_batch("SELECT id FROM captures WHERE ?1 = ?1 ORDER BY start_ns", 0,
                                    "DELETE FROM captures WHERE id IN", 1));
      if (n == 0) break;
      result.captures_deleted += n;
    }
  }
  RETURN_IF_ERROR(OnWriter([](Connection& c) { return c.Exec("PRAGMA incremental_vacuum"); }));
  return result;
}

absl::StatusOr<std::vector<KernelInsightRow>> Store::KernelInsights(const std::string& capture_id,
                                                                    bool per_chip) {
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(CaptureRef ref, RequireCapture(c, capture_id));
  // Per chip the key is (host, ordinal, kernel); over the pod it is the kernel alone.
  std::map<std::tuple<std::string, int, int64_t>, KernelInsightRow> rows;
  auto row = [&](const std::string& host, int chip, int64_t kernel) -> KernelInsightRow& {
    KernelInsightRow& r = rows[{host, chip, kernel}];
    r.host = host;
    r.chip = chip;
    r.kernel_id = kernel;
    return r;
  };
  // Per chip from the per-chip rows; over the pod from the roll-ups written with them.
  ASSIGN_OR_RETURN(
      auto counters,
      Statement::Prepare(
          c, per_chip ? "SELECT h.name, ch.ordinal, k.kernel_id, k.name, k.cumulative, "
                        "k.integral, k.covered_ps FROM kernel_counters k "
                        "JOIN chips ch ON ch.id = k.chip_id JOIN hosts h ON h.id = ch.host_id "
                        "WHERE k.capture = ?"
                      : "SELECT '', -1, kernel_id, name, cumulative, integral, covered_ps FROM "
                        "kernel_counter_rollups WHERE capture = ?"));
  counters->Bind(1, ref.seq);
  while (true) {
    ASSIGN_OR_RETURN(bool more, counters->Step());
    if (!more) break;
    KernelInsightRow& r =
        row(counters->Text(0), static_cast<int>(counters->Int(1)), counters->Int(2));
    const double integral = counters->Double(5);
    const int64_t covered = counters->Int(6);
    if (counters->Int(4) != 0) {
      r.totals[counters->Text(3)] = integral;
    } else if (covered > 0) {
      r.gauges[counters->Text(3)] = integral / static_cast<double>(covered);
    }
    r.covered_ps = std::max(r.covered_ps, covered);
  }
  ASSIGN_OR_RETURN(
      auto waits,
      Statement::Prepare(
          c, per_chip ? "SELECT h.name, ch.ordinal, w.kernel_id, w.wait_ps, w.instances, "
                        "w.straggler FROM kernel_waits w JOIN chips ch ON ch.id = w.chip_id "
                        "JOIN hosts h ON h.id = ch.host_id WHERE w.capture = ?"
                      : "SELECT '', -1, kernel_id, wait_ps, instances, straggler FROM "
                        "kernel_wait_rollups WHERE capture = ?"));
  waits->Bind(1, ref.seq);
  while (true) {
    ASSIGN_OR_RETURN(bool more, waits->Step());
    if (!more) break;
    KernelInsightRow& r = row(waits->Text(0), static_cast<int>(waits->Int(1)), waits->Int(2));
    r.wait_ps = waits->Int(3);
    r.wait_instances = waits->Int(4);
    r.straggler = waits->Text(5);
  }
  std::vector<KernelInsightRow> out;
  out.reserve(rows.size());
  for (auto& [key, r] : rows) out.push_back(std::move(r));
  return out;
}

absl::StatusOr<StragglerReport> Store::Stragglers(const std::string& capture_id) {
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(CaptureRef ref, RequireCapture(c, capture_id));
  StragglerReport report;
  ASSIGN_OR_RETURN(auto chips, Statement::Prepare(c,
                                                  "SELECT host, chip, times_last, instances, "
                                                  "caused_ps, lateness_ps, steps FROM stragglers "
                                                  "WHERE capture = ? ORDER BY caused_ps DESC"));
  chips->Bind(1, ref.seq);
  while (true) {
    ASSIGN_OR_RETURN(bool more, chips->Step());
    if (!more) break;
    trace::StragglerRow r;
    r.host = chips->Text(0);
    r.chip_ordinal = static_cast<int>(chips->Int(1));
    r.times_last = chips->Int(2);
    r.instances = chips->Int(3);
    r.caused_ps = chips->Int(4);
    r.lateness_ps = chips->Int(5);
    for (absl::string_view step : absl::StrSplit(chips->Text(6), ',', absl::SkipEmpty())) {
      int64_t n;
      if (absl::SimpleAtoi(step, &n)) r.steps.push_back(n);
    }
    report.chips.push_back(std::move(r));
  }
  ASSIGN_OR_RETURN(auto inst, Statement::Prepare(c,
                                                 "SELECT id, kernel, step, straggler_host, "
                                                 "straggler_chip, chips, spread_ps, lateness_ps, "
                                                 "caused_ps FROM collective_instances WHERE "
                                                 "capture = ? ORDER BY caused_ps DESC"));
  inst->Bind(1, ref.seq);
  while (true) {
    ASSIGN_OR_RETURN(bool more, inst->Step());
    if (!more) break;
    trace::InstanceRow r;
    r.id = static_cast<uint64_t>(inst->Int(0));
    r.kernel_name = inst->Text(1);
    r.step = inst->Int(2);
    r.straggler_host = inst->Text(3);
    r.straggler_chip = static_cast<int>(inst->Int(4));
    r.chips = static_cast<int>(inst->Int(5));
    r.spread_ps = inst->Int(6);
    r.lateness_ps = inst->Int(7);
    r.caused_ps = inst->Int(8);
    report.instances.push_back(std::move(r));
  }
  return report;
}

absl::StatusOr<std::vector<KernelIdentity>> Store::FindKernels(const std::string& op_name,
                                                               const std::string& module) {
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(c,
                                              "SELECT id, module, op_name, category, program_id, "
                                              "hlo_hash, flops, bytes_accessed, source, "
                                              "hlo_text, tf_op, source_stack, mlir FROM kernels "
                                              "WHERE op_name = ? AND (? = '' OR module = ?) "
                                              "ORDER BY id DESC LIMIT 50"));
  s->Bind(1, op_name).Bind(2, module).Bind(3, module);
  std::vector<KernelIdentity> out;
  while (true) {
    ASSIGN_OR_RETURN(bool more, s->Step());
    if (!more) break;
    KernelIdentity k;
    k.key.id = s->Int(0);
    k.key.module = s->Text(1);
    k.key.op_name = s->Text(2);
    k.key.category = s->Text(3);
    k.key.program_id = static_cast<uint64_t>(s->Int(4));
    k.key.hlo_hash = static_cast<uint64_t>(s->Int(5));
    k.key.flops = s->Int(6);
    k.key.bytes_accessed = s->Int(7);
    k.key.source = s->Text(8);
    k.hlo_text = s->Text(9);
    k.tf_op = s->Text(10);
    k.source_stack = s->Text(11);
    k.mlir = s->Text(12);
    out.push_back(std::move(k));
  }
  return out;
}

absl::StatusOr<std::string> Store::LatestCaptureWith(int64_t kernel_id) {
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(c,
                                              "SELECT c.id FROM kernel_rollups r JOIN captures c "
                                              "ON c.seq = r.capture WHERE r.kernel_id = ? "
                                              "ORDER BY c.start_ns DESC LIMIT 1"));
  s->Bind(1, kernel_id);
  ASSIGN_OR_RETURN(bool found, s->Step());
  if (!found) {
    return absl::NotFoundError(absl::StrCat("no stored capture holds kernel ", kernel_id));
  }
  return s->Text(0);
}

}  // namespace podprof::storage
