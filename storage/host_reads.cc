// The store's reads for exports: a capture's hosts rebuilt one at a time (all of them, or the
// hosts and chips a narrowed export selects), and how much each chip holds, counted without
// decoding, so that an export can be sized before it is written.
#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/capture_queries.h"
#include "storage/kernel_rows.h"
#include "storage/segment_index.h"
#include "storage/store_internal.h"
#include "trace/columns.h"

namespace podprof::storage {
namespace {

// The statements that rebuild one host of a capture, prepared once for all its hosts.
class HostReader {
 public:
  static absl::StatusOr<HostReader> Prepare(Connection& c, const SegmentFiles& files, int64_t seq) {
    HostReader r(files, seq);
    ASSIGN_OR_RETURN(r.chips_, Statement::Prepare(c,
                                                  "SELECT x.id, x.ordinal, x.global_id, "
                                                  "x.generation, x.device_type, x.peak_tflops, "
                                                  "x.peak_hbm_gbps FROM chips x JOIN hosts h ON "
                                                  "h.id = x.host_id WHERE x.capture = ? AND "
                                                  "h.name = ? ORDER BY x.ordinal"));
    ASSIGN_OR_RETURN(r.blocks_, Statement::Prepare(c, absl::StrCat("SELECT line, base_ns, ",
                                                                   internal::kBlobColumns,
                                                                   " FROM timeline_blocks WHERE "
                                                                   "capture = ? AND chip_id = ? "
                                                                   "ORDER BY rowid")));
    ASSIGN_OR_RETURN(r.map_, Statement::Prepare(c,
                                                "SELECT x.kernel_map FROM capture_hosts x JOIN "
                                                "hosts h ON h.id = x.host_id WHERE x.capture = ? "
                                                "AND h.name = ?"));
    ASSIGN_OR_RETURN(r.counters_,
                     Statement::Prepare(c, absl::StrCat("SELECT name, ", internal::kBlobColumns,
                                                        " FROM counter_series WHERE "
                                                        "capture = ? AND chip_id = ? "
                                                        "ORDER BY rowid")));
    ASSIGN_OR_RETURN(r.kernel_,
                     Statement::Prepare(c, absl::StrCat("SELECT ", internal::kKernelKeyColumns,
                                                        ", k.source, k.hlo_text FROM kernels k "
                                                        "WHERE k.id = ?")));
    return r;
  }

  // The host `h` of the capture (start and end are the capture's), its chips all listed but
  // the timelines and counters read only of those `only` selects (see HostSelection).
  absl::Status Read(const HostRow& h, int64_t start_ns, int64_t end_ns, const HostSelection& only,
                    StoredHost* out) {
    only_ = &only;
    const std::set<int>& chips = only.chip_ordinals;
    out->row = h;
    out->capture.host.name = h.host;
    out->capture.host.profile_start_ns = start_ns;
    out->capture.host.profile_stop_ns = end_ns;
    local_.clear();
    map_->Reset();
    map_->Bind(1, seq_).Bind(2, h.host);
    kernel_map_.clear();
    RETURN_IF_ERROR(map_->ForEachRow([&](const Statement& row) -> absl::Status {
      ASSIGN_OR_RETURN(kernel_map_, trace::DecodeKernelMap(row.Blob(0)));
      return absl::OkStatus();
    }));
    chips_->Reset();
    chips_->Bind(1, seq_).Bind(2, h.host);
    std::vector<int64_t> chip_ids;
    RETURN_IF_ERROR(chips_->ForEachRow([&](const Statement& row) {
      RowReader col(row);
      chip_ids.push_back(col.Int());
      trace::Chip chip;
      chip.ordinal = col.Int32();
      chip.global_id = col.Int();
      chip.generation = col.Text();
      chip.device_type = col.Text();
      chip.peak_tflops = col.Double();
      chip.peak_hbm_gbps = col.Double();
      out->capture.host.chips.push_back(std::move(chip));
      return absl::OkStatus();
    }));
    for (size_t ci = 0; ci < chip_ids.size(); ++ci) {
      if (!chips.empty() && chips.count(out->capture.host.chips[ci].ordinal) == 0) continue;
      RETURN_IF_ERROR(ReadBlocks(chip_ids[ci], static_cast<int>(ci), &out->capture));
      RETURN_IF_ERROR(ReadCounters(chip_ids[ci], static_cast<int>(ci), &out->capture));
    }
    if (h.host_clock && !only.own_clock) trace::ApplyCorrection(h.correction, &out->capture);
    return absl::OkStatus();
  }

 private:
  HostReader(const SegmentFiles& files, int64_t seq) : files_(&files), seq_(seq) {}

  absl::Status ReadBlocks(int64_t chip_id, int chip, trace::HostCapture* capture) {
    if (!only_->timelines) return absl::OkStatus();
    blocks_->Reset();
    blocks_->Bind(1, seq_).Bind(2, chip_id);
    return blocks_->ForEachRow([&](const Statement& row) -> absl::Status {
      trace::EventBlock b;
      b.chip = chip;
      b.line = row.Text(0);
      b.kind = trace::LineKindOfName(b.line);
      // A line not asked for is left in the file: its blob is never even read.
      if (!only_->line_kinds.empty() && only_->line_kinds.count(b.kind) == 0) {
        return absl::OkStatus();
      }
      b.base_ns = row.Int(1);
      RowReader col(row, 2);
      ASSIGN_OR_RETURN(const std::string blob, internal::ReadBlob(col, *files_));
      RETURN_IF_ERROR(trace::DecodeTimeline(blob, &b));
      RETURN_IF_ERROR(trace::MapKernels(kernel_map_, &b));
      // Stored kernel ids become indexes into this host's own kernel definitions.
      for (uint32_t& k : b.kernel) {
        ASSIGN_OR_RETURN(k, LocalKernel(k, capture));
      }
      capture->blocks.push_back(std::move(b));
      return absl::OkStatus();
    });
  }

  absl::Status ReadCounters(int64_t chip_id, int chip, trace::HostCapture* capture) {
    counters_->Reset();
    counters_->Bind(1, seq_).Bind(2, chip_id);
    // The chip's series are decoded together: one may take its times from another, which is
    // then read even when not asked for (trace::DecodeChipCounters). The bytes of the series
    // asked for are read first, and of the others only those their headers name.
    std::vector<trace::CounterSeries> series;
    std::vector<bool> wanted;
    std::vector<internal::BlobAt> unread;  // by series; emptied once read
    absl::flat_hash_set<std::string> named;
    RETURN_IF_ERROR(counters_->ForEachRow([&](const Statement& row) -> absl::Status {
      trace::CounterSeries& s = series.emplace_back();
      s.chip = chip;
      s.name = row.Text(0);
      const auto& names = only_->counter_samples;
      const auto& prefixes = only_->counter_sample_prefixes;
      wanted.push_back(!names.has_value() || names->count(s.name) > 0 ||
                       std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) {
                         return absl::StartsWith(s.name, p);
                       }));
      RowReader col(row, 1);
      unread.push_back(internal::LocateBlob(col));
      if (!wanted.back()) return absl::OkStatus();
      ASSIGN_OR_RETURN(s.encoded, internal::ReadBlob(unread.back(), *files_));
      // A damaged header is DecodeChipCounters' to report, naming the series.
      absl::StatusOr<std::string> reference = trace::CounterReference(s.encoded);
      if (reference.ok() && !reference->empty()) named.insert(*std::move(reference));
      return absl::OkStatus();
    }));
    for (size_t i = 0; i < series.size(); ++i) {
      if (wanted[i] || !named.contains(series[i].name)) continue;
      ASSIGN_OR_RETURN(series[i].encoded, internal::ReadBlob(unread[i], *files_));
    }
    std::vector<trace::CounterSeries*> all;
    for (trace::CounterSeries& s : series) all.push_back(&s);
    size_t failed = 0;
    if (absl::Status d = trace::DecodeChipCounters(all, wanted, &failed); !d.ok()) {
      return absl::Status(d.code(),
                          absl::StrCat("counter ", series[failed].name, ": ", d.message()));
    }
    for (trace::CounterSeries& s : series) {
      std::string().swap(s.encoded);  // listed, without its samples, when not wanted
      capture->counters.push_back(std::move(s));
    }
    return absl::OkStatus();
  }

  // The index into `capture`'s kernels of stored kernel `id`, added on first use.
  absl::StatusOr<uint32_t> LocalKernel(uint32_t id, trace::HostCapture* capture) {
    auto [it, fresh] = local_.try_emplace(id, static_cast<uint32_t>(capture->kernels.size()));
    if (!fresh) return it->second;
    kernel_->Reset();
    kernel_->Bind(1, static_cast<int64_t>(id));
    ASSIGN_OR_RETURN(bool found, kernel_->Step());
    trace::KernelDef d;
    if (found) {
      RowReader col(*kernel_);
      const KernelKey key = internal::ReadKernelKey(col);
      d = internal::KernelDefOf(key, col.Text());
      if (only_->kernel_texts) d.hlo_text = col.Text();
    }
    capture->kernels.push_back(std::move(d));
    return it->second;
  }

  const SegmentFiles* files_;
  int64_t seq_;
  const HostSelection* only_ = nullptr;  // of the Read in progress
  std::unique_ptr<Statement> chips_, map_, blocks_, counters_, kernel_;
  std::vector<int64_t> kernel_map_;     // of the host being read (empty: stored kernels.id)
  std::map<uint32_t, uint32_t> local_;  // kernels.id -> index into the host's kernels
};

}  // namespace

absl::Status CaptureQueries::ForEachHost(const std::string& capture_id, const HostSelection& only,
                                         const std::function<absl::Status(StoredHost&)>& fn) {
  ASSIGN_OR_RETURN(CaptureRow row, Get(capture_id));
  ASSIGN_OR_RETURN(ReaderLease c, db_.Reader());
  ASSIGN_OR_RETURN(const internal::CaptureRef ref, internal::RequireCapture(*c, capture_id));
  ASSIGN_OR_RETURN(HostReader reader, HostReader::Prepare(*c, db_.segments(), ref.seq));
  for (const HostRow& h : row.host_rows) {
    if (!only.hosts.empty() && only.hosts.count(h.host) == 0) continue;
    StoredHost out;
    RETURN_IF_ERROR(reader.Read(h, row.start_ns, row.end_ns, only, &out));
    RETURN_IF_ERROR(fn(out));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ChipVolume>> CaptureQueries::ChipVolumes(const std::string& capture_id) {
  ASSIGN_OR_RETURN(ReaderLease c, db_.Reader());
  ASSIGN_OR_RETURN(const internal::CaptureRef ref, internal::RequireCapture(*c, capture_id));
  ASSIGN_OR_RETURN(auto chips, Statement::Prepare(*c,
                                                  "SELECT x.id, h.name, x.ordinal FROM chips x "
                                                  "JOIN hosts h ON h.id = x.host_id WHERE "
                                                  "x.capture = ? ORDER BY h.name, x.ordinal"));
  // Each row keeps its blob's count beside it, checked against the blob's own on ingest
  // (CheckTimeline, CheckCounters): no bytes are read.
  ASSIGN_OR_RETURN(auto blocks, Statement::Prepare(*c,
                                                   "SELECT TOTAL(events) FROM timeline_blocks "
                                                   "WHERE capture = ? AND chip_id = ?"));
  ASSIGN_OR_RETURN(auto counters, Statement::Prepare(*c,
                                                     "SELECT TOTAL(samples) FROM counter_series "
                                                     "WHERE capture = ? AND chip_id = ?"));
  auto sum = [&](Statement& s, int64_t chip_id) -> absl::StatusOr<int64_t> {
    s.Reset();
    s.Bind(1, ref.seq).Bind(2, chip_id);
    ASSIGN_OR_RETURN(const bool row, s.Step());
    return row ? static_cast<int64_t>(s.Double(0)) : 0;
  };
  chips->Bind(1, ref.seq);
  std::vector<ChipVolume> out;
  RETURN_IF_ERROR(chips->ForEachRow([&](const Statement& row) -> absl::Status {
    ChipVolume v;
    v.host = row.Text(1);
    v.ordinal = static_cast<int>(row.Int(2));
    ASSIGN_OR_RETURN(v.events, sum(*blocks, row.Int(0)));
    ASSIGN_OR_RETURN(v.counter_samples, sum(*counters, row.Int(0)));
    out.push_back(std::move(v));
    return absl::OkStatus();
  }));
  return out;
}

}  // namespace podprof::storage
