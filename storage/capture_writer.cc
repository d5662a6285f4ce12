#include "storage/capture_writer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "storage/kernel_counter_block.h"
#include "storage/kernel_rows.h"
#include "storage/segment_index.h"
#include "storage/store_internal.h"
#include "trace/columns.h"
#include "trace/kernel_stats.h"

namespace podprof::storage {
namespace {

using internal::BindKernelIdentity;
using internal::KernelIdentityKey;
using internal::LabelsJson;
using internal::Transaction;

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
    std::string key = KernelIdentityKey(k);
    auto it = cache->find(key);
    if (it != cache->end()) {
      ids.push_back(it->second);
      continue;
    }
    ins_kernel->Reset();
    BindKernelIdentity(*ins_kernel, 1, k);
    ins_kernel->Bind(8, k.source);
    RETURN_IF_ERROR(ins_kernel->Run());
    get_kernel->Reset();
    BindKernelIdentity(*get_kernel, 1, k);
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
  internal::HostIds hosts;
  std::unique_ptr<Statement> ins_ch, ins_chip, ins_stat, ins_kcounters, ins_scope, ins_block,
      ins_counter;
  static absl::StatusOr<HostInserts> Prepare(Connection& c) {
    HostInserts h;
    ASSIGN_OR_RETURN(h.hosts, internal::HostIds::Prepare(c));
    ASSIGN_OR_RETURN(h.ins_ch, Statement::Prepare(c,
                                                  "INSERT INTO capture_hosts (capture, host_id, "
                                                  "status, error, clock_offset_ns, "
                                                  "clock_uncertainty_ns, events, bytes, "
                                                  "host_clock, clock_drift_ppb, clock_mid_ns, "
                                                  "analysed_by, kernel_map, warnings, slice) "
                                                  "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
    ASSIGN_OR_RETURN(h.ins_chip, Statement::Prepare(c,
                                                    "INSERT INTO chips (capture, host_id, "
                                                    "ordinal, global_id, generation, "
                                                    "device_type, peak_tflops, peak_hbm_gbps) "
                                                    "VALUES (?,?,?,?,?,?,?,?)"));
    ASSIGN_OR_RETURN(h.ins_stat, Statement::Prepare(c,
                                                    "INSERT INTO kernel_stats (capture, chip_id, "
                                                    "kernel_id, count, total_ps, min_ps, max_ps, "
                                                    "sketch) VALUES (?,?,?,?,?,?,?,?)"));
    ASSIGN_OR_RETURN(h.ins_kcounters, Statement::Prepare(c,
                                                         "INSERT INTO kernel_counter_blocks "
                                                         "(capture, host_id, rows, data) "
                                                         "VALUES (?,?,?,?)"));
    ASSIGN_OR_RETURN(h.ins_scope, Statement::Prepare(c,
                                                     "INSERT INTO kernel_scopes (capture, "
                                                     "chip_id, kernel_id, line, name, count, "
                                                     "total_ps) VALUES (?,?,?,?,?,?,?)"));
    ASSIGN_OR_RETURN(h.ins_block, Statement::Prepare(c,
                                                     "INSERT INTO timeline_blocks (capture, "
                                                     "chip_id, line, base_ns, events, data, "
                                                     "segment, seg_offset, seg_bytes, "
                                                     "seg_crc) VALUES (?,?,?,?,?,X'',?,?,?,?)"));
    ASSIGN_OR_RETURN(h.ins_counter, Statement::Prepare(c,
                                                       "INSERT INTO counter_series (capture, "
                                                       "chip_id, name, samples, data, segment, "
                                                       "seg_offset, seg_bytes, seg_crc) VALUES "
                                                       "(?,?,?,?,X'',?,?,?,?)"));
    return h;
  }
};

// A host's chip and kernel indices as row ids, or an error naming the host.
struct RowIds {
  const HostWrite& h;
  const std::vector<int64_t>& chip_ids;

  absl::StatusOr<int64_t> Chip(int chip) const {
    if (chip < 0 || static_cast<size_t>(chip) >= chip_ids.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("host ", h.host, ": chip index ", chip, " of ", chip_ids.size()));
    }
    return chip_ids[chip];
  }
  absl::StatusOr<int64_t> Kernel(uint32_t k) const {
    if (k >= h.kernel_ids.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("host ", h.host, ": kernel index ", k, " of ", h.kernel_ids.size()));
    }
    return h.kernel_ids[k];
  }
};

// Binds where a blob's record lies, from column `first` on.
void BindRef(Statement& s, int first, const SegmentRef& ref) {
  s.Bind(first, ref.segment).Bind(first + 1, ref.offset).Bind(first + 2, ref.bytes);
  s.Bind(first + 3, int64_t{ref.crc});
}

// Inserts a host's chips, timelines, counters and counter attributions (everything but its
// statistics, whose rows keep one contiguous range per capture); returns the chips' row ids.
// The timelines' and counters' bytes are appended to the capture's segments; the caller's
// transaction must sync them (SegmentFiles::Sync or SealSegments) before it commits.
absl::StatusOr<std::vector<int64_t>> InsertHostData(Connection& c, HostInserts& q,
                                                    SegmentFiles& files, int64_t seq,
                                                    int64_t host_id, const HostWrite& h) {
  std::vector<int64_t> chip_ids;
  for (const trace::Chip& chip : h.chips) {
    q.ins_chip->Reset();
    q.ins_chip->Bind(1, seq).Bind(2, host_id).Bind(3, int64_t{chip.ordinal});
    q.ins_chip->Bind(4, chip.global_id).Bind(5, chip.generation).Bind(6, chip.device_type);
    q.ins_chip->Bind(7, chip.peak_tflops).Bind(8, chip.peak_hbm_gbps);
    RETURN_IF_ERROR(q.ins_chip->Run());
    chip_ids.push_back(sqlite3_last_insert_rowid(c.get()));
  }
  const RowIds ids{h, chip_ids};
  int64_t timeline_segment = -1, counter_segment = -1;
  for (const EncodedBlock& b : h.timelines) {
    ASSIGN_OR_RETURN(const int64_t chip, ids.Chip(b.chip));
    if (timeline_segment < 0) {
      ASSIGN_OR_RETURN(timeline_segment,
                       internal::OpenSegment(c, seq, internal::kTimelineSegments));
    }
    ASSIGN_OR_RETURN(const SegmentRef ref, files.Append(timeline_segment, b.data));
    q.ins_block->Reset();
    q.ins_block->Bind(1, seq).Bind(2, chip).Bind(3, b.line).Bind(4, b.base_ns);
    q.ins_block->Bind(5, b.events);
    BindRef(*q.ins_block, 6, ref);
    RETURN_IF_ERROR(q.ins_block->Run());
  }
  for (const EncodedSeries& s : h.counters) {
    ASSIGN_OR_RETURN(const int64_t chip, ids.Chip(s.chip));
    if (counter_segment < 0) {
      ASSIGN_OR_RETURN(counter_segment, internal::OpenSegment(c, seq, internal::kCounterSegments));
    }
    ASSIGN_OR_RETURN(const SegmentRef ref, files.Append(counter_segment, s.data));
    q.ins_counter->Reset();
    q.ins_counter->Bind(1, seq).Bind(2, chip).Bind(3, s.name);
    q.ins_counter->Bind(4, s.samples);
    BindRef(*q.ins_counter, 5, ref);
    RETURN_IF_ERROR(q.ins_counter->Run());
  }
  if (!h.attributions.empty()) {
    ASSIGN_OR_RETURN(const std::string block, internal::EncodeKernelCounterBlock(
                                                  h.host, h.attributions, h.chips, h.kernel_ids));
    q.ins_kcounters->Reset();
    q.ins_kcounters->Bind(1, seq).Bind(2, host_id);
    q.ins_kcounters->Bind(3, static_cast<int64_t>(h.attributions.size()));
    q.ins_kcounters->BindBlob(4, block);
    RETURN_IF_ERROR(q.ins_kcounters->Run());
  }
  for (const trace::KernelScope& k : h.scopes) {
    ASSIGN_OR_RETURN(const int64_t chip, ids.Chip(k.chip));
    ASSIGN_OR_RETURN(const int64_t kid, ids.Kernel(k.kernel));
    q.ins_scope->Reset();
    q.ins_scope->Bind(1, seq).Bind(2, chip).Bind(3, kid).Bind(4, k.line).Bind(5, k.name);
    q.ins_scope->Bind(6, k.count).Bind(7, k.total_ps);
    RETURN_IF_ERROR(q.ins_scope->Run());
  }
  return chip_ids;
}

// A host's warnings as stored: one per line, at most 32 of 1 kB each (an agent sends at most
// that much in its trailer; an import's reader may say more).
std::string JoinWarnings(const std::vector<std::string>& warnings) {
  std::string out;
  for (size_t i = 0; i < warnings.size() && i < 32; ++i) {
    std::string w = warnings[i].substr(0, 1024);
    std::replace(w.begin(), w.end(), '\n', ' ');
    absl::StrAppend(&out, i > 0 ? "\n" : "", w);
  }
  if (warnings.size() > 32) absl::StrAppend(&out, "\n", warnings.size() - 32, " more not kept");
  return out;
}

// The kernel_stats row ids a capture's rows lie within (first > last: none yet).
struct StatRange {
  int64_t first = 0, last = -1;
  void Add(int64_t rowid) {
    if (first > last) first = rowid;
    first = std::min(first, rowid);
    last = std::max(last, rowid);
  }
};

// Inserts the host's per-chip statistics, widening `range`.
absl::Status InsertStats(Connection& c, HostInserts& q, int64_t seq, const HostWrite& h,
                         const std::vector<int64_t>& chip_ids, StatRange* range) {
  const RowIds ids{h, chip_ids};
  for (const StatWrite& s : h.stats) {
    ASSIGN_OR_RETURN(const int64_t chip, ids.Chip(s.chip));
    ASSIGN_OR_RETURN(const int64_t kid, ids.Kernel(s.kernel));
    q.ins_stat->Reset();
    q.ins_stat->Bind(1, seq).Bind(2, chip).Bind(3, kid).Bind(4, s.count);
    q.ins_stat->Bind(5, s.total_ps).Bind(6, s.min_ps).Bind(7, s.max_ps);
    q.ins_stat->BindBlob(8, s.sketch);
    RETURN_IF_ERROR(q.ins_stat->Run());
    range->Add(sqlite3_last_insert_rowid(c.get()));
  }
  return absl::OkStatus();
}

// Widens capture `seq`'s recorded range of kernel_stats row ids by `range`.
absl::Status WidenStatRange(Connection& c, int64_t seq, const StatRange& range) {
  if (range.first > range.last) return absl::OkStatus();
  ASSIGN_OR_RETURN(auto upd, Statement::Prepare(c,
                                                "UPDATE captures SET stats_first = CASE WHEN "
                                                "stats_last < stats_first THEN ?1 ELSE "
                                                "MIN(stats_first, ?1) END, stats_last = "
                                                "MAX(stats_last, ?2) WHERE seq = ?3"));
  upd->Bind(1, range.first).Bind(2, range.last).Bind(3, seq);
  return upd->Run();
}

// Deletes the statistics capture `seq`'s hosts wrote ahead, for a capture that ends without
// its last transaction (failed, interrupted): they were never shown (internal::CaptureRef),
// and a capture that did not finish had none stored before they were written ahead.
absl::Status DropStatsAhead(Connection& c, int64_t seq) {
  ASSIGN_OR_RETURN(auto del, Statement::Prepare(c,
                                                "DELETE FROM kernel_stats WHERE rowid BETWEEN "
                                                "(SELECT stats_first FROM captures WHERE seq = "
                                                "?1) AND (SELECT stats_last FROM captures WHERE "
                                                "seq = ?1) AND capture = ?1"));
  del->Bind(1, seq);
  RETURN_IF_ERROR(del->Run());
  ASSIGN_OR_RETURN(auto reset, Statement::Prepare(c,
                                                  "UPDATE captures SET stats_first = 0, "
                                                  "stats_last = -1 WHERE seq = ?"));
  reset->Bind(1, seq);
  return reset->Run();
}

// Inserts one host's rows; returns its chips' row ids (by chip index). Widens the capture's
// range of kernel_stats row ids.
absl::StatusOr<std::vector<int64_t>> InsertHost(Connection& c, HostInserts& q, SegmentFiles& files,
                                                int64_t seq, const HostWrite& h, StatRange* stats) {
  ASSIGN_OR_RETURN(const int64_t host_id, q.hosts.Of(h.host));
  q.ins_ch->Reset();
  q.ins_ch->Bind(1, seq)
      .Bind(2, host_id)
      .Bind(3, std::string(HostOutcomeName(h.status)))
      .Bind(4, h.error);
  q.ins_ch->Bind(5, h.clock_offset_ns).Bind(6, h.clock_uncertainty_ns).Bind(7, h.events);
  q.ins_ch->Bind(8, static_cast<int64_t>(h.bytes)).Bind(9, int64_t{h.host_clock});
  q.ins_ch->Bind(10, h.clock_drift_ppb).Bind(11, h.clock_mid_ns).Bind(12, h.analysed_by);
  // The map its timelines' kernel numbers need (none for a host that delivered nothing).
  if (h.kernel_ids.empty()) {
    q.ins_ch->BindNull(13);
  } else {
    q.ins_ch->BindBlob(13, trace::EncodeKernelMap(h.kernel_ids));
  }
  q.ins_ch->Bind(14, JoinWarnings(h.warnings)).Bind(15, int64_t{h.slice});
  RETURN_IF_ERROR(q.ins_ch->Run());
  // Chips, timelines, counters and attributions were inserted ahead (WriteHostData), or are
  // inserted now.
  std::vector<int64_t> chip_ids = h.chip_rows;
  if (chip_ids.empty()) {
    ASSIGN_OR_RETURN(chip_ids, InsertHostData(c, q, files, seq, host_id, h));
  }
  // Its statistics too, unless they went ahead with its data (then h.stats is empty).
  RETURN_IF_ERROR(InsertStats(c, q, seq, h, chip_ids, stats));
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
                                      "instances, caused_ps, lateness_ps, steps, "
                                      "expected_last) VALUES (?,?,?,?,?,?,?,?,?)"));
  for (const trace::StragglerRow& r : w.stragglers) {
    ins_straggler->Reset();
    ins_straggler->Bind(1, seq).Bind(2, r.host).Bind(3, int64_t{r.chip_ordinal});
    ins_straggler->Bind(4, r.times_last).Bind(5, r.instances).Bind(6, r.caused_ps);
    ins_straggler->Bind(7, r.lateness_ps).Bind(8, absl::StrJoin(r.steps, ","));
    if (r.expected_last >= 0) {
      ins_straggler->Bind(9, r.expected_last);
    } else {
      ins_straggler->BindNull(9);
    }
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
                                      "sketch, peak_tflops, peak_hbm_gbps) VALUES "
                                      "(?,?,?,?,?,?,?,?,?,?,?,?)"));
  for (const KernelRollupWrite& r : w.rollups) {
    ins_rollup->Reset();
    ins_rollup->Bind(1, seq).Bind(2, r.kernel_id).Bind(3, r.stats.count);
    ins_rollup->Bind(4, r.stats.total_ps).Bind(5, r.stats.min_ps).Bind(6, r.stats.max_ps);
    ins_rollup->Bind(7, r.stats.QuantilePs(0.5)).Bind(8, r.stats.QuantilePs(0.99));
    ins_rollup->Bind(9, r.chips).BindBlob(10, r.stats.sketch.Serialize());
    const double ps = static_cast<double>(r.stats.total_ps);
    ins_rollup->Bind(11, ps > 0 ? r.peak_tflops_ps / ps : 0.0);
    ins_rollup->Bind(12, ps > 0 ? r.peak_hbm_gbps_ps / ps : 0.0);
    RETURN_IF_ERROR(ins_rollup->Run());
  }
  return absl::OkStatus();
}

absl::Status WriteCaptureRows(Connection& c, SegmentFiles& files, const CaptureWrite& w) {
  // The `running` record BeginCapture left, if any, becomes the whole capture (its hosts' data
  // may already be under it, from WriteHostData).
  ASSIGN_OR_RETURN(auto running, Statement::Prepare(c,
                                                    "SELECT seq FROM captures WHERE id = ? AND "
                                                    "status = 'running'"));
  running->Bind(1, w.id);
  ASSIGN_OR_RETURN(bool was_running, running->Step());
  int64_t seq = was_running ? running->Int(0) : 0;
  if (!was_running) {
    ASSIGN_OR_RETURN(auto exists, Statement::Prepare(c, "SELECT 1 FROM captures WHERE id = ?"));
    exists->Bind(1, w.id);
    ASSIGN_OR_RETURN(bool dup, exists->Step());
    if (dup) return absl::AlreadyExistsError(absl::StrCat("capture ", w.id, " is already stored"));
  }
  ASSIGN_OR_RETURN(
      auto put_capture,
      Statement::Prepare(c, was_running ? "UPDATE captures SET id = ?1, start_ns = ?2, "
                                          "end_ns = ?3, status = ?4, options = ?5, labels = "
                                          "?6, created_ns = ?7, source = ?8 WHERE seq = ?9"
                                        : "INSERT INTO captures (id, start_ns, end_ns, "
                                          "status, options, labels, created_ns, source) "
                                          "VALUES (?1,?2,?3,?4,?5,?6,?7,?8)"));
  put_capture->Bind(1, w.id).Bind(2, w.start_ns).Bind(3, w.end_ns);
  put_capture->Bind(4, std::string(CaptureStateName(w.state)));
  put_capture->Bind(5, w.options_json).Bind(6, LabelsJson(w.labels)).Bind(7, w.created_ns);
  put_capture->Bind(8, std::string(CaptureSourceName(w.source)));
  if (was_running) put_capture->Bind(9, seq);
  RETURN_IF_ERROR(put_capture->Run());
  if (!was_running) seq = sqlite3_last_insert_rowid(c.get());

  ASSIGN_OR_RETURN(HostInserts inserts, HostInserts::Prepare(c));
  std::vector<std::vector<int64_t>> chip_ids;
  int64_t events = 0;
  StatRange stats;
  for (const HostWrite& h : w.hosts) {
    ASSIGN_OR_RETURN(std::vector<int64_t> ids, InsertHost(c, inserts, files, seq, h, &stats));
    chip_ids.push_back(std::move(ids));
    events += h.events;
  }
  RETURN_IF_ERROR(InsertCollectiveRows(c, seq, w, chip_ids));
  RETURN_IF_ERROR(InsertRollups(c, seq, w));
  ASSIGN_OR_RETURN(auto upd, Statement::Prepare(c,
                                                "UPDATE captures SET events = ?, "
                                                "kernel_count = ?, collectives_left_out = ?, "
                                                "collectives_left_out_example = ? WHERE seq = ?"));
  upd->Bind(1, events).Bind(2, static_cast<int64_t>(w.rollups.size()));
  upd->Bind(3, w.collectives_left_out).Bind(4, w.collectives_left_out_example).Bind(5, seq);
  RETURN_IF_ERROR(upd->Run());
  // With the range of the statistics written ahead (WriteHostData), if any.
  RETURN_IF_ERROR(WidenStatRange(c, seq, stats));
  // Its bytes durable and its files sealed before the commit that makes it whole.
  return internal::SealSegments(c, files, seq);
}

// Which of a kernel's texts (hlo, tf_op, source stack, MLIR) are non-empty, as bits.
unsigned TextMask(const trace::KernelDef& k) {
  return (k.hlo_text.empty() ? 0u : 1u) | (k.tf_op.empty() ? 0u : 2u) |
         (k.source_stack.empty() ? 0u : 4u) | (k.mlir.empty() ? 0u : 8u);
}

}  // namespace

absl::StatusOr<std::vector<std::vector<int64_t>>> CaptureWriter::ResolveKernels(
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
        auto it = kernel_ids_.find(KernelIdentityKey(k));
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
  RETURN_IF_ERROR(db_.OnWriter([&](Connection& c) {
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
      auto& entry = kernel_ids_[KernelIdentityKey((*hosts[h])[i])];
      entry.first = out[h][i];
      entry.second |= TextMask((*hosts[h])[i]);
    }
  }
  return out;
}

absl::Status CaptureWriter::WriteCapture(const CaptureWrite& capture) {
  if (capture.id.empty()) return absl::InvalidArgumentError("capture id is empty");
  return db_.OnWriter([&](Connection& c) {
    // Every reference this transaction writes points at a row it wrote itself or looked up:
    // skip the per-row foreign-key lookups. Deletes keep them on, for the cascades.
    RETURN_IF_ERROR(c.Exec("PRAGMA foreign_keys = OFF"));
    absl::Status s = Transaction(c, [&]() -> absl::Status {
      RETURN_IF_ERROR(WriteCaptureRows(c, db_.segments(), capture));
      return outbox_.QueueInTransaction(c, capture.id, capture.created_ns);
    });
    absl::Status on = c.Exec("PRAGMA foreign_keys = ON");
    if (s.ok()) {
      ++captures_;
      for (const HostWrite& h : capture.hosts) {
        events_ += h.events;
        bytes_ += static_cast<int64_t>(h.bytes);
      }
    }
    return s.ok() ? on : s;
  });
}

absl::Status CaptureWriter::WriteHostData(const std::string& capture_id, HostWrite* host) {
  if (host->host.empty()) return absl::InvalidArgumentError("host data without a host name");
  RETURN_IF_ERROR(db_.OnWriter([&](Connection& c) {
    return Transaction(c, [&]() -> absl::Status {
      ASSIGN_OR_RETURN(auto running, Statement::Prepare(c,
                                                        "SELECT seq FROM captures WHERE id = ? "
                                                        "AND status = 'running'"));
      running->Bind(1, capture_id);
      ASSIGN_OR_RETURN(bool found, running->Step());
      if (!found) {
        return absl::FailedPreconditionError(absl::StrCat("capture ", capture_id,
                                                          " is not running: host ", host->host,
                                                          "'s data has nowhere to go"));
      }
      const int64_t seq = running->Int(0);
      ASSIGN_OR_RETURN(HostInserts q, HostInserts::Prepare(c));
      ASSIGN_OR_RETURN(const int64_t host_id, q.hosts.Of(host->host));
      ASSIGN_OR_RETURN(host->chip_rows, InsertHostData(c, q, db_.segments(), seq, host_id, *host));
      // Its statistics, which the capture's range (widened in the same transaction) makes
      // visible only once the capture is whole: the pod's last transaction then writes a
      // row a host, not 35 kernels x 4 chips of them (0.5-0.9 s of a v5p pod's landing).
      StatRange stats;
      RETURN_IF_ERROR(InsertStats(c, q, seq, *host, host->chip_rows, &stats));
      RETURN_IF_ERROR(WidenStatRange(c, seq, stats));
      // The rows commit only once the bytes they point at are durable.
      return db_.segments().Sync();
    });
  }));
  std::vector<StatWrite>().swap(host->stats);
  std::vector<EncodedBlock>().swap(host->timelines);
  std::vector<EncodedSeries>().swap(host->counters);
  std::vector<trace::KernelCounter>().swap(host->attributions);
  std::vector<trace::KernelScope>().swap(host->scopes);
  return absl::OkStatus();
}

absl::Status CaptureWriter::BeginCapture(const CaptureWrite& header) {
  if (header.id.empty()) return absl::InvalidArgumentError("capture id is empty");
  return db_.OnWriter([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(auto ins, Statement::Prepare(c,
                                                  "INSERT INTO captures (id, start_ns, end_ns, "
                                                  "status, options, labels, created_ns, source) "
                                                  "VALUES (?,?,?,'running',?,?,?,?)"));
    ins->Bind(1, header.id).Bind(2, header.start_ns).Bind(3, header.end_ns);
    ins->Bind(4, header.options_json).Bind(5, LabelsJson(header.labels));
    ins->Bind(6, header.created_ns).Bind(7, std::string(CaptureSourceName(header.source)));
    return ins->Run();
  });
}

absl::Status CaptureWriter::EndFailed(const std::string& id) {
  return db_.OnWriter([&](Connection& c) -> absl::Status {
    return Transaction(c, [&]() -> absl::Status {
      ASSIGN_OR_RETURN(auto running, Statement::Prepare(c,
                                                        "SELECT seq FROM captures WHERE id = ? "
                                                        "AND status = 'running'"));
      running->Bind(1, id);
      ASSIGN_OR_RETURN(const bool found, running->Step());
      if (!found) return absl::OkStatus();
      const int64_t seq = running->Int(0);
      ASSIGN_OR_RETURN(auto up, Statement::Prepare(c,
                                                   "UPDATE captures SET status = 'failed' WHERE "
                                                   "seq = ?"));
      up->Bind(1, seq);
      RETURN_IF_ERROR(up->Run());
      RETURN_IF_ERROR(DropStatsAhead(c, seq));
      // The hosts' data written ahead stays, and its files are whole: sealed.
      return internal::SealSegments(c, db_.segments(), seq);
    });
  });
}

absl::StatusOr<CaptureWriter::Recovery> CaptureWriter::Recover() {
  Recovery out;
  RETURN_IF_ERROR(db_.OnWriter([&](Connection& c) -> absl::Status {
    return Transaction(c, [&]() -> absl::Status {
      ASSIGN_OR_RETURN(auto running, Statement::Prepare(c,
                                                        "SELECT seq FROM captures WHERE status = "
                                                        "'running'"));
      std::vector<int64_t> seqs;
      RETURN_IF_ERROR(running->ForEachRow([&](const Statement& row) {
        seqs.push_back(row.Int(0));
        return absl::OkStatus();
      }));
      for (int64_t seq : seqs) RETURN_IF_ERROR(DropStatsAhead(c, seq));
      RETURN_IF_ERROR(
          c.Exec("UPDATE captures SET status = 'interrupted' WHERE status = 'running'"));
      out.interrupted = sqlite3_changes(c.get());
      ASSIGN_OR_RETURN(internal::SegmentRecovery r, internal::RecoverSegments(c, db_.segments()));
      out.bytes_truncated = r.bytes_truncated;
      out.rows_dropped = r.rows_dropped;
      out.files_removed = r.files_removed;
      out.warnings = std::move(r.warnings);
      return absl::OkStatus();
    });
  }));
  return out;
}

}  // namespace podprof::storage
