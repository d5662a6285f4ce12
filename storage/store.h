// The kernel-statistics store: one SQLite file (WAL) holding every capture's hosts, chips,
// kernel statistics with their sketches, roll-ups, counters and compressed timelines.
//
// Writes go through one writer thread, one transaction per capture, so a capture becomes
// visible atomically; reads use their own connections and never block the writer. Thread-safe.
#ifndef PODPROF_STORAGE_STORE_H_
#define PODPROF_STORAGE_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "storage/sqlite.h"
#include "trace/analysis_rows.h"
#include "trace/clock_correction.h"
#include "trace/ddsketch.h"
#include "trace/kernel_stats.h"
#include "trace/model.h"

namespace podprof::storage {

struct StoreOptions {
  // SQLite's page limit for the file (PRAGMA max_page_count); 0 = none. Tests use it to
  // simulate a full disk.
  int64_t max_page_count = 0;
  // A database that cannot be written (a read-only mount, a file or folder the service may not
  // write) is opened for queries only, rather than refused: the history stays readable, and
  // every write fails naming why. False: such a database is an error.
  bool read_only_fallback = true;
};

// One timeline as stored: a chip's line, its events encoded by EncodeTimeline.
struct EncodedBlock {
  int chip = 0;  // index into HostWrite::chips
  std::string line;
  int64_t base_ns = 0;  // aggregator clock
  int64_t events = 0;
  std::string data;
};

// One counter series as stored, encoded by EncodeCounters.
struct EncodedSeries {
  int chip = 0;  // index into HostWrite::chips
  std::string name;
  int64_t samples = 0;
  std::string data;
};

// One host's part of a capture, analysed and encoded before the write: the writer only inserts
// these rows (the ingest pipeline, ingest/, makes them).
struct HostWrite {
  std::string host;
  std::string status = "complete";  // complete | failed
  std::string error;
  int64_t clock_offset_ns = 0;
  int64_t clock_uncertainty_ns = 0;
  // With `host_clock`, the timelines and counters below are on the host's own clock and
  // readers put them on the aggregator's with (clock_offset_ns, clock_drift_ppb about
  // clock_mid_ns); without it they are on the aggregator's clock already.
  bool host_clock = false;
  double clock_drift_ppb = 0;
  int64_t clock_mid_ns = 0;
  uint64_t bytes = 0;
  int64_t events = 0;
  std::vector<trace::Chip> chips;
  // The capture's kernel index -> kernels.id, from ResolveKernels.
  std::vector<int64_t> kernel_ids;
  // Per chip and kernel (indices into `chips` and `kernel_ids`).
  std::vector<trace::KernelStats> stats;
  std::vector<trace::KernelCounter> attributions;
  std::vector<EncodedBlock> timelines;
  std::vector<EncodedSeries> counters;
};

// The waiting of one kernel (kernels.id) on one chip (`chip` of hosts[host]) at collectives.
struct WaitWrite {
  size_t host = 0;
  int chip = 0;
  int64_t kernel_id = 0;
  int64_t wait_ps = 0, instances = 0;
  std::string straggler;
};

// Pod-wide roll-ups of one kernel (kernels.id).
struct KernelRollupWrite {
  int64_t kernel_id = 0;
  trace::KernelStats stats;  // merged over every chip
  int64_t chips = 0;
};
struct CounterRollupWrite {
  int64_t kernel_id = 0;
  std::string name;
  bool cumulative = false;
  double integral = 0;
  int64_t covered_ps = 0;
};
struct WaitRollupWrite {
  int64_t kernel_id = 0;
  int64_t wait_ps = 0, instances = 0;
  std::string straggler;
};

struct CaptureWrite {
  std::string id;
  int64_t start_ns = 0;  // aggregator clock
  int64_t end_ns = 0;
  std::string status = "complete";  // complete | partial | failed
  std::map<std::string, std::string> labels;
  std::string options_json = "{}";
  std::string source = "capture";  // capture | import
  int64_t created_ns = 0;
  std::vector<HostWrite> hosts;
  std::vector<KernelRollupWrite> rollups;
  std::vector<CounterRollupWrite> counter_rollups;
  std::vector<WaitWrite> waits;
  std::vector<WaitRollupWrite> wait_rollups;
  std::vector<trace::StragglerRow> stragglers;
  std::vector<trace::InstanceRow> worst;  // worst first
};

struct HostRow {
  std::string host, status, error;
  int64_t clock_offset_ns = 0, clock_uncertainty_ns = 0, events = 0;
  // Whether the host's timelines and counters are stored on its own clock (see HostWrite),
  // and the correction readers apply to them.
  bool host_clock = false;
  trace::ClockCorrection correction;
};

struct CaptureRow {
  std::vector<HostRow> host_rows;
  std::string id;
  int64_t start_ns = 0, end_ns = 0, created_ns = 0;
  std::string status, source;
  std::map<std::string, std::string> labels;
  int64_t hosts = 0, chips = 0, kernels = 0, events = 0;
};

// One host of a stored capture as exports need it: its outcome and correction, and its capture
// rebuilt from the database (chips, the kernel definitions its events use, timelines and
// counters), with times on the aggregator's clock as stored. Failed hosts have no chips.
struct StoredHost {
  HostRow row;
  trace::HostCapture capture;
};

struct CaptureQuery {
  int64_t since_ns = 0;
  int64_t until_ns = INT64_MAX;
  std::string status;  // empty = any
  std::map<std::string, std::string> labels;
  std::string id;  // empty = any
  int limit = 100;
  std::string page_token;
};

enum class Grouping { kKernel, kChip, kHost, kCategory };
enum class Order { kTotal, kMean, kP99, kCount };

struct KernelKey {
  int64_t id = 0;
  std::string module, op_name, category, source;
  uint64_t program_id = 0, hlo_hash = 0;
  int64_t flops = 0, bytes_accessed = 0;
};

struct StatsQuery {
  std::string capture_id;
  Grouping group_by = Grouping::kKernel;
  std::string op_regex;  // ECMAScript, partial match; empty = all
  std::string category;
  std::string host;
  std::optional<int> chip;
  Order order = Order::kTotal;
  int top = 0;  // 0 = all
};

struct StatRow {
  std::string host;  // empty when merged over hosts
  int chip = -1;     // -1 when merged over chips
  KernelKey kernel;  // for kCategory only `category` is set
  int64_t count = 0, total_ps = 0, min_ps = 0, max_ps = 0;
  trace::DDSketch sketch;
  int64_t chips = 0;
  double peak_tflops = 0, peak_hbm_gbps = 0;  // mean over the rows' chips
};

// What a capture's counters and collectives say of one kernel, on one chip or over the pod.
struct KernelInsightRow {
  std::string host;  // empty when merged over the pod
  int chip = -1;     // -1 when merged over chips
  int64_t kernel_id = 0;
  // Gauges: time-weighted mean over the kernel's executions (busy and stall fractions).
  std::map<std::string, double> gauges;
  // Running totals: the increase over its executions (energy in nJ, cycles, bytes).
  std::map<std::string, double> totals;
  int64_t covered_ps = 0;  // the kernel's time the counters covered (the widest series)
  int64_t wait_ps = 0;     // waiting in collectives for later chips
  int64_t wait_instances = 0;
  std::string straggler;  // who it waited for most often
};

// A kernel's identity as stored, with its texts.
struct KernelIdentity {
  KernelKey key;
  std::string hlo_text, tf_op, source_stack, mlir;
};

// Who made the others wait at a capture's collectives, as insight/ found it when the capture
// was stored.
struct StragglerReport {
  std::vector<trace::StragglerRow> chips;     // most waiting caused first
  std::vector<trace::InstanceRow> instances;  // worst first
};

struct HistoryQuery {
  std::string module;  // empty = any
  std::string op_regex;
  int64_t since_ns = 0;
  int64_t until_ns = INT64_MAX;
  int max_kernels = 20;
};

struct HistoryPoint {
  std::string capture_id;
  int64_t start_ns = 0;
  int64_t count = 0, total_ps = 0, chips = 0;
  trace::DDSketch sketch;
  double achieved_tflops = 0;
};

// One kernel identity across recompiles: (module, op name).
struct HistorySeries {
  std::string module, op_name, category;
  std::vector<HistoryPoint> points;
};

struct KernelDeltaRow {
  std::string module, op_name, category;
  std::optional<StatRow> baseline, candidate;
  double mean_change = 0, p50_change = 0, p99_change = 0;
  bool regression = false;
};

struct RetentionPolicy {
  int64_t max_age_ns = 0;         // 0 = keep forever
  int64_t max_bytes = 0;          // 0 = no size cap
  int64_t keep_timelines_ns = 0;  // 0 = as long as the capture
  int batch = 50;                 // captures deleted per transaction
};

struct RetentionResult {
  int64_t captures_deleted = 0;
  int64_t timelines_dropped = 0;
};

class Store {
 public:
  // Opens or creates the database, migrating it to this build's schema.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path,
                                                     const StoreOptions& options = {});
  ~Store();

  // The stored ids of kernel definitions (kernels.id), one list per host: inserted where new
  // (with their texts, filled in where an earlier capture left them empty), in one short
  // transaction on the writer thread. Kernel rows are identities shared by captures, so
  // resolving them before the capture itself is stored leaves nothing wrong behind.
  absl::StatusOr<std::vector<std::vector<int64_t>>> ResolveKernels(
      const std::vector<const std::vector<trace::KernelDef>*>& hosts);
  // Inserts a whole capture, analysed and encoded beforehand, in one transaction on the writer
  // thread; blocks until committed. AlreadyExists for a duplicate id; ResourceExhausted when
  // the disk is full (nothing of the capture is stored, reads go on).
  absl::Status WriteCapture(const CaptureWrite& capture);
  // Records a capture as `running` before its window (its id, times, labels and options),
  // so that a crash of the aggregator leaves a trace of it; WriteCapture replaces the record.
  absl::Status BeginCapture(const CaptureWrite& header);
  // Marks every capture still `running` as `interrupted`: called once at start-up, when no
  // capture of this process can be running yet. Returns how many were marked.
  absl::StatusOr<int> MarkInterrupted();
  // Deletes by age and size (oldest first, in bounded batches), timelines earlier.
  absl::StatusOr<RetentionResult> ApplyRetention(const RetentionPolicy& policy, int64_t now_ns);

  // Newest first; sets *next_page_token when more match.
  absl::StatusOr<std::vector<CaptureRow>> ListCaptures(const CaptureQuery& query,
                                                       std::string* next_page_token);
  // NotFound for an unknown capture; InvalidArgument for a bad regex.
  absl::StatusOr<std::vector<StatRow>> KernelStats(const StatsQuery& query);
  absl::StatusOr<std::vector<HistorySeries>> KernelHistory(const HistoryQuery& query);
  // Counter attributions and collective waits of a capture's kernels, per chip (`per_chip`)
  // or merged over the pod, keyed by (host, chip, kernel id) as in StatRow. NotFound naming
  // the id for an unknown capture.
  absl::StatusOr<std::vector<KernelInsightRow>> KernelInsights(const std::string& capture_id,
                                                               bool per_chip);
  // Who made the others wait at the capture's collectives. NotFound for an unknown capture.
  absl::StatusOr<StragglerReport> Stragglers(const std::string& capture_id);
  // Kernels whose op name is `op_name` (exactly), most recently stored first; with `module`
  // non-empty, only that module's.
  absl::StatusOr<std::vector<KernelIdentity>> FindKernels(const std::string& op_name,
                                                          const std::string& module);
  // The newest capture holding kernel `kernel_id`; NotFound when none does.
  absl::StatusOr<std::string> LatestCaptureWith(int64_t kernel_id);
  // Per kernel (module, op) in either capture; regression when the median moved beyond
  // `threshold` and beyond the baseline's own p90 (see SCHEMA.md).
  absl::StatusOr<std::vector<KernelDeltaRow>> Compare(const std::string& baseline,
                                                      const std::string& candidate,
                                                      const std::string& op_regex,
                                                      double threshold);
  // Calls `fn` for every host of the capture in name order, one host in memory at a time;
  // stops at the first error `fn` returns. NotFound naming the id for an unknown capture.
  absl::Status ForEachHost(const std::string& capture_id,
                           const std::function<absl::Status(StoredHost&)>& fn);
  // The capture's row (hosts included); NotFound naming the id.
  absl::StatusOr<CaptureRow> GetCapture(const std::string& capture_id);
  // The stored timeline blocks of a capture, decompressed (for exports and tests).
  absl::StatusOr<std::vector<trace::EventBlock>> Timelines(const std::string& capture_id);

  // Bytes of the database in use (pages not on the free list).
  absl::StatusOr<int64_t> UsedBytes();
  // PRAGMA integrity_check == "ok".
  absl::Status CheckIntegrity();
  // For a service watchdog: the writer thread takes the database's write lock and lets it go
  // within `timeout_ns`. Fails when the writer is stuck (a long write, a wedged disk) or
  // another process holds the lock, naming which.
  absl::Status HealthCheck(int64_t timeout_ns);
  const std::string& path() const { return path_; }
  // Why the database is open for queries only; empty when it is writable.
  const std::string& read_only_reason() const { return read_only_reason_; }
  bool read_only() const { return !read_only_reason_.empty(); }

 private:
  Store(std::string path, std::unique_ptr<Connection> writer, std::string read_only_reason);
  static absl::StatusOr<std::unique_ptr<Store>> OpenWritable(const std::string& path,
                                                             const StoreOptions& options);
  // Runs `task` on the writer thread and waits for it.
  absl::Status OnWriter(std::function<absl::Status(Connection&)> task);
  void WriterLoop();
  absl::StatusOr<std::unique_ptr<Connection>> TakeReader();
  void ReturnReader(std::unique_ptr<Connection> c);
  // A stored capture's row number and the rowid range of its per-chip statistics.
  struct CaptureRef {
    int64_t seq, stats_first, stats_last;
  };
  // NotFound naming the id if there is no such capture.
  absl::StatusOr<CaptureRef> RequireCapture(Connection& c, const std::string& id);

  const std::string path_;
  const std::string read_only_reason_;
  std::unique_ptr<Connection> writer_;  // used only on writer_thread_
  std::thread writer_thread_;

  absl::Mutex mu_;
  // Guarded by mu_.
  std::vector<std::function<void(Connection&)>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<Connection>> idle_readers_ ABSL_GUARDED_BY(mu_);
  // Kernel identity key -> (kernels.id, which texts the row holds), for ResolveKernels.
  absl::Mutex kernel_ids_mu_;
  absl::flat_hash_map<std::string, std::pair<int64_t, unsigned>> kernel_ids_
      ABSL_GUARDED_BY(kernel_ids_mu_);
};

// The change of `candidate` over `baseline`, as a fraction (0.1 = 10% slower); 0 if either is 0.
double RelativeChange(double baseline, double candidate);

}  // namespace podprof::storage

#endif  // PODPROF_STORAGE_STORE_H_
