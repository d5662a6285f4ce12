// AggregatorService::ExportCapture: a stored capture, whole or narrowed (export/narrow.h),
// written as Perfetto, Chrome JSON, XProf sessions or a CSV of its events and streamed host by
// host in bounded chunks. Chrome JSON is sized before it is written and refused past its limit.
#include "aggregator/api/export_stream.h"

#include <algorithm>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <streambuf>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "aggregator/api/api_rows.h"
#include "aggregator/api/dcn_reads.h"
#include "aggregator/api/service.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "export/narrow.h"
#include "export/trace_export.h"
#include "export/xspace_export.h"
#include "proto/grpc_status.h"
#include "security/rpc_guard.h"

namespace podprof::aggregator {

namespace {

namespace v1 = podprof::v1;

// An ostream whose bytes go out as ExportChunks of at most kChunkBytes, so an export of any
// size streams with bounded memory. Goes bad when the client is gone, or when the file would
// pass `limit` bytes (0: no limit).
class ChunkStreamBuf : public std::streambuf {
 public:
  static constexpr size_t kChunkBytes = 1 << 20;
  // `estimate`, when not null, is sent on the first chunk that goes out (and then zeroed), so
  // that only the export's first chunk carries it.
  ChunkStreamBuf(const ExportSink* sink, std::string path, uint64_t* estimate, uint64_t limit = 0)
      : sink_(sink), path_(std::move(path)), estimate_(estimate), limit_(limit), buf_(kChunkBytes) {
    setp(buf_.data(), buf_.data() + buf_.size());
  }
  uint64_t bytes() const { return offset_ + static_cast<uint64_t>(pptr() - pbase()); }
  bool over_limit() const { return over_limit_; }

 protected:
  int_type overflow(int_type c) override {
    if (!Send()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return Send() ? 0 : -1; }

 private:
  bool Send() {
    const size_t n = static_cast<size_t>(pptr() - pbase());
    if (n == 0) return ok_;
    if (limit_ != 0 && offset_ + n > limit_) over_limit_ = true;
    ok_ = ok_ && !over_limit_;
    if (ok_) {
      v1::ExportChunk chunk;
      chunk.set_path(path_);
      chunk.set_offset(offset_);
      chunk.set_data(pbase(), n);
      if (estimate_ != nullptr) {
        chunk.set_json_bytes_estimate(*estimate_);
        *estimate_ = 0;
      }
      ok_ = sink_->send(chunk);
    }
    offset_ += n;
    setp(buf_.data(), buf_.data() + buf_.size());
    return ok_;
  }

  const ExportSink* sink_;
  const std::string path_;
  uint64_t* const estimate_;
  const uint64_t limit_;
  std::vector<char> buf_;
  uint64_t offset_ = 0;
  bool ok_ = true;
  bool over_limit_ = false;
};

std::string HostDescription(const storage::HostRow& h) {
  if (h.status != storage::HostOutcome::kComplete) {
    return absl::StrCat(storage::HostOutcomeName(h.status), ": ", h.error);
  }
  return absl::StrCat("clock correction ", h.clock_offset_ns, " ns +- ", h.clock_uncertainty_ns,
                      " ns");
}

std::string Duration(int64_t ns) { return FormatDurationPs(ns * 1000); }

// The request's window: InvalidArgument naming the flag and its value when it selects nothing
// of a capture lasting `length_ns`.
absl::Status CheckWindow(const v1::ExportCaptureRequest& r, const std::string& id,
                         int64_t length_ns) {
  if (r.has_from_ns() && r.from_ns() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--from ", Duration(r.from_ns()), " is before the start of ", id));
  }
  const int64_t from = r.has_from_ns() ? r.from_ns() : 0;
  if (r.has_to_ns() && r.to_ns() <= from) {
    return absl::InvalidArgumentError(
        absl::StrCat("--from ", Duration(from), " is not before --to ", Duration(r.to_ns())));
  }
  if (length_ns > 0 && from >= length_ns) {
    return absl::InvalidArgumentError(absl::StrCat("--from ", Duration(from),
                                                   " is past the end of ", id, ", which lasts ",
                                                   Duration(length_ns)));
  }
  return absl::OkStatus();
}

// The request's narrowing, checked against the capture (its hosts in `row`, its chips in
// `chips`): InvalidArgument naming the flag and the value that selects nothing.
absl::StatusOr<exporter::Narrower> NarrowerOf(const v1::ExportCaptureRequest& r,
                                              const storage::CaptureRow& row,
                                              const std::vector<storage::ChipVolume>& chips) {
  RETURN_IF_ERROR(CheckWindow(r, row.id, row.end_ns - row.start_ns));
  exporter::Selection s;
  if (r.has_from_ns()) s.from_ns = row.start_ns + r.from_ns();
  if (r.has_to_ns()) s.to_ns = row.start_ns + r.to_ns();
  std::vector<std::string> hosts;
  for (const storage::HostRow& h : row.host_rows) hosts.push_back(h.host);
  for (const std::string& h : r.host_names()) {
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--hosts \"", h, "\": ", row.id,
                       " has no such host (its hosts: ", absl::StrJoin(hosts, ", "), ")"));
    }
    s.hosts.insert(h);
  }
  std::set<int> ordinals;  // of the hosts selected
  for (const storage::ChipVolume& c : chips) {
    if (s.hosts.empty() || s.hosts.count(c.host) > 0) ordinals.insert(c.ordinal);
  }
  for (int chip : r.chip_ordinals()) {
    if (ordinals.count(chip) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--chips ", chip, ": no ", s.hosts.empty() ? "" : "selected ", "host of ",
                       row.id, " has that chip (its chips: ", absl::StrJoin(ordinals, ", "), ")"));
    }
    s.chips.insert(chip);
  }
  s.kernel_regex = r.kernel_regex();
  return exporter::Narrower::Create(std::move(s));
}

// The store's per-chip counts with each chip's kernel-line events per kernel from `stats`
// (per-chip statistics rows).
std::vector<exporter::ChipVolume> VolumesOf(const std::vector<storage::ChipVolume>& chips,
                                            const std::vector<storage::StatRow>& stats) {
  std::map<std::pair<std::string, int>, exporter::ChipVolume> by_chip;
  for (const storage::ChipVolume& c : chips) {
    exporter::ChipVolume& v = by_chip[{c.host, c.ordinal}];
    v.host = c.host;
    v.ordinal = c.ordinal;
    v.events = static_cast<uint64_t>(c.events);
    v.counter_samples = static_cast<uint64_t>(c.counter_samples);
  }
  for (const storage::StatRow& r : stats) {
    auto it = by_chip.find({r.host, r.chip});
    if (it == by_chip.end()) continue;
    it->second.kernel_events[{r.kernel.module, r.kernel.op_name}] += static_cast<uint64_t>(r.count);
  }
  std::vector<exporter::ChipVolume> out;
  for (auto& [key, v] : by_chip) out.push_back(std::move(v));
  return out;
}

// Each selected kernel's verdict on each selected chip, for its slices, by host.
absl::StatusOr<std::map<std::string, exporter::KernelNotes>> NotesOf(
    const StoreReads& store, const std::string& capture_id, std::vector<storage::StatRow> rows,
    exporter::Narrower& narrower) {
  rows.erase(std::remove_if(rows.begin(), rows.end(),
                            [&](const storage::StatRow& r) {
                              return !narrower.WantsHost(r.host) || !narrower.WantsChip(r.chip) ||
                                     !narrower.WantsKernel(r.kernel.module, r.kernel.op_name);
                            }),
             rows.end());
  ASSIGN_OR_RETURN(std::vector<v1::KernelInsight> judged,
                   Judge(store.insights(), capture_id, true, rows, rows.size()));
  std::map<std::string, exporter::KernelNotes> notes;
  for (size_t i = 0; i < judged.size(); ++i) {
    const storage::StatRow& r = rows[i];
    notes[r.host][{r.chip, r.kernel.module, r.kernel.op_name}] = judged[i].verdict_text();
  }
  return notes;
}

// Whether `format` shows each kernel's verdict on its slices (the viewers' timelines do; XProf
// sessions and the CSV's rows do not).
bool HasVerdicts(v1::ExportFormat format) {
  return format == v1::EXPORT_FORMAT_PERFETTO || format == v1::EXPORT_FORMAT_CHROME_JSON;
}

// Whether the capture ran cross-slice (DCN) host transfers, from its kernels' categories (as
// insight::ParseDcnInstruction tells them): only then is it read a second time for their flows.
bool HasDcnOps(const std::vector<storage::StatRow>& stats) {
  return std::any_of(stats.begin(), stats.end(), [](const storage::StatRow& r) {
    return absl::StrContains(r.kernel.category, "host send") ||
           absl::StrContains(r.kernel.category, "host recv");
  });
}

// The hosts to read, as the store takes them.
storage::HostSelection StoreSelection(const exporter::Narrower& narrower) {
  storage::HostSelection only;
  only.hosts = narrower.selection().hosts;
  only.chip_ordinals = narrower.selection().chips;
  return only;
}

// A host's name as the name of its file: a byte other than a letter, digit, '-', '_' or '.' as
// '_', and a leading '.' too. Registration refuses such names, but imports and captures stored
// before it did may hold any ("../../x", "a/b"), and the file must stay in its folder.
std::string HostFileName(const std::string& host) {
  std::string out = host.empty() ? "_" : host;
  for (char& c : out) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      c = '_';
    }
  }
  if (out.front() == '.') out.front() = '_';
  return out;
}

// One file per host, each an XSpace written a plane at a time: beside the host's capture, only
// one chip's XPlane is ever in memory (a whole host's XSpace, held by 32 downloads at once, took
// the aggregator from 0.3 to 1.6 GB).
absl::Status WriteXSpaces(const StoreReads& store, const ExportSink& sink,
                          const storage::CaptureRow& row, exporter::Narrower& narrower,
                          uint64_t* estimate) {
  const std::string run = exporter::XprofRunName(row.start_ns);
  uint64_t files = 0;
  storage::HostSelection only = StoreSelection(narrower);
  // The host-transfer ops' program is rebuilt from their HLO texts (export/megascale_planes.h).
  only.kernel_texts = true;
  RETURN_IF_ERROR(store.captures().ForEachHost(row.id, only, [&](storage::StoredHost& h) {
    if (sink.cancelled()) return absl::CancelledError("the client went away");
    if (h.capture.host.chips.empty()) return absl::OkStatus();  // a host that failed
    RETURN_IF_ERROR(narrower.Apply(&h.capture));
    narrower.DropUnselectedChips(&h.capture);                   // no empty device planes for them
    if (h.capture.host.chips.empty()) return absl::OkStatus();  // none of the chips selected
    // Its size first, for a reader that needs it up front: a tar download can then stream the
    // file rather than hold it whole to learn its size (one plane at a time either way).
    const std::string path =
        absl::StrCat("plugins/profile/", run, "/", HostFileName(h.row.host), ".xplane.pb");
    if (sink.file_size) {
      if (!sink.file_size(path, exporter::XSpaceByteSize(h.capture))) {
        return absl::UnavailableError("the client stopped reading");
      }
    }
    ChunkStreamBuf buf(&sink, path, estimate);
    std::ostream out(&buf);
    if (!exporter::WriteXSpace(h.capture, &out) || !out.flush()) {
      return absl::UnavailableError("the client stopped reading");
    }
    ++files;
    return absl::OkStatus();
  }));
  PODPROF_LOG(INFO) << "exported " << row.id << " as an XProf session of " << files << " hosts";
  return absl::OkStatus();
}

// A merged-timeline format's writer: each adds a host at a time, then finishes.
using TimelineWriter =
    std::variant<exporter::PerfettoWriter, exporter::ChromeJsonWriter, exporter::CsvWriter>;

// The writer of `format` (one of the merged-timeline formats) on `out`.
void StartTimeline(v1::ExportFormat format, int64_t origin_ns, std::ostream* out,
                   std::optional<TimelineWriter>* writer) {
  if (format == v1::EXPORT_FORMAT_PERFETTO) {
    writer->emplace(std::in_place_type<exporter::PerfettoWriter>, out);
  } else if (format == v1::EXPORT_FORMAT_CHROME_JSON) {
    writer->emplace(std::in_place_type<exporter::ChromeJsonWriter>, out, origin_ns);
  } else {
    writer->emplace(std::in_place_type<exporter::CsvWriter>, out);
  }
}

const char* TimelineFileSuffix(v1::ExportFormat format) {
  if (format == v1::EXPORT_FORMAT_PERFETTO) return ".pftrace";
  return format == v1::EXPORT_FORMAT_CHROME_JSON ? ".json" : ".csv";
}

const char* TimelineFormatName(v1::ExportFormat format) {
  if (format == v1::EXPORT_FORMAT_PERFETTO) return "Perfetto";
  return format == v1::EXPORT_FORMAT_CHROME_JSON ? "Chrome JSON" : "CSV";
}

// The merged timeline as Perfetto, Chrome JSON (refused once it passes `json_limit` bytes) or
// CSV; Perfetto's with `flows` between its hosts.
absl::Status WriteTimeline(const StoreReads& store, const ExportSink& sink,
                           const storage::CaptureRow& row, v1::ExportFormat format,
                           exporter::Narrower& narrower,
                           const std::map<std::string, exporter::KernelNotes>& notes,
                           uint64_t* estimate, uint64_t json_limit, DcnFlows flows) {
  const bool json = format == v1::EXPORT_FORMAT_CHROME_JSON;
  ChunkStreamBuf buf(&sink, absl::StrCat(row.id, TimelineFileSuffix(format)), estimate,
                     json ? json_limit : 0);
  std::ostream out(&buf);
  std::optional<TimelineWriter> writer;
  StartTimeline(format, row.start_ns, &out, &writer);
  // Past the bound, each host's description says which transfers have their arrow.
  std::string flows_note;
  if (flows.flows.size() < flows.transfers) {
    flows_note = absl::StrCat("; DCN flows for the ", flows.flows.size(), " longest waits of the ",
                              flows.transfers, " paired transfers");
    PODPROF_LOG(INFO) << "export of " << row.id << flows_note;
  }
  if (auto* perfetto = std::get_if<exporter::PerfettoWriter>(&*writer)) {
    perfetto->SetHostFlows(std::move(flows.flows));
  }
  auto over_limit = [&] {
    return absl::FailedPreconditionError(absl::StrCat(
        "the Chrome JSON of ", row.id, " passed the ", exporter::HumanBytes(json_limit),
        " limit (--max-size) while being written: viewers cannot load it; export --format "
        "perfetto, or narrow it with --from/--to, --hosts, --chips or --kernels"));
  };
  storage::HostSelection only = StoreSelection(narrower);
  // A table has no counter samples: they stay compressed in the store.
  if (format == v1::EXPORT_FORMAT_CSV) only.counter_samples.emplace();
  RETURN_IF_ERROR(store.captures().ForEachHost(row.id, only, [&](storage::StoredHost& h) {
    if (sink.cancelled()) return absl::CancelledError("the client went away");
    RETURN_IF_ERROR(narrower.Apply(&h.capture));
    auto host_notes = notes.find(h.row.host);
    const exporter::KernelNotes* n = host_notes == notes.end() ? nullptr : &host_notes->second;
    std::visit(
        [&](auto& w) {
          if constexpr (std::is_same_v<std::decay_t<decltype(w)>, exporter::CsvWriter>) {
            w.AddHost(h.capture);
          } else {
            w.AddHost(h.capture, HostDescription(h.row) + flows_note, n);
          }
        },
        *writer);
    if (buf.over_limit()) return over_limit();
    return out ? absl::OkStatus() : absl::UnavailableError("the client stopped reading");
  }));
  absl::Status s = std::visit([](auto& w) { return w.Finish(); }, *writer);
  if (buf.over_limit()) return over_limit();
  RETURN_IF_ERROR(s);
  const exporter::ExportCounts n = std::visit([](const auto& w) { return w.counts(); }, *writer);
  PODPROF_LOG(INFO) << "exported " << row.id << " as " << TimelineFormatName(format) << ": "
                    << n.hosts << " hosts, " << n.slices << " slices, " << n.counter_samples
                    << " counter samples, " << n.host_flows << " DCN flows, " << buf.bytes()
                    << " bytes";
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExportPlan> PlanExport(const StoreReads& store,
                                      const v1::ExportCaptureRequest& request) {
  const auto format = request.format();
  if (format != v1::EXPORT_FORMAT_PERFETTO && format != v1::EXPORT_FORMAT_CHROME_JSON &&
      format != v1::EXPORT_FORMAT_XSPACE_DIR && format != v1::EXPORT_FORMAT_CSV) {
    return absl::InvalidArgumentError(
        absl::StrCat("export format ", static_cast<int>(format),
                     " is not one of perfetto, chrome json, xspace dir, csv"));
  }
  ExportPlan plan;
  plan.request = request;
  ASSIGN_OR_RETURN(plan.row, store.captures().Get(request.capture_id()));
  ASSIGN_OR_RETURN(std::vector<storage::ChipVolume> chips,
                   store.captures().ChipVolumes(plan.row.id));
  ASSIGN_OR_RETURN(exporter::Narrower narrower, NarrowerOf(request, plan.row, chips));
  plan.narrower = std::make_unique<exporter::Narrower>(std::move(narrower));

  // Per-chip statistics: each kernel's verdict on its slices (the viewers' timelines), and (for
  // --kernels) how many events each kernel has, to size the export.
  if (HasVerdicts(format) || !request.kernel_regex().empty()) {
    storage::StatsQuery q;
    q.capture_id = plan.row.id;
    q.group_by = storage::Grouping::kChip;
    ASSIGN_OR_RETURN(plan.stats, store.kernels().Stats(q));
  }
  plan.estimate = exporter::EstimateChromeJson(VolumesOf(chips, plan.stats), plan.row.start_ns,
                                               plan.row.end_ns, *plan.narrower)
                      .bytes;
  plan.json_limit =
      request.max_json_bytes() != 0 ? request.max_json_bytes() : exporter::kDefaultMaxJsonBytes;
  if (format == v1::EXPORT_FORMAT_CHROME_JSON && plan.estimate > plan.json_limit) {
    PODPROF_LOG(INFO) << "refused the Chrome JSON export of " << plan.row.id << ": about "
                      << plan.estimate << " bytes, over " << plan.json_limit;
    return absl::FailedPreconditionError(
        exporter::JsonTooLargeMessage(plan.row.id, plan.estimate, plan.json_limit));
  }
  return plan;
}

absl::Status WriteExport(const StoreReads& store, ExportPlan& plan, const ExportSink& sink) {
  if (plan.request.format() == v1::EXPORT_FORMAT_XSPACE_DIR) {
    return WriteXSpaces(store, sink, plan.row, *plan.narrower, &plan.estimate);
  }
  // Perfetto draws an arrow from each cross-slice send to its receive: the DCN analysis' pairs.
  DcnFlows flows;
  if (plan.request.format() == v1::EXPORT_FORMAT_PERFETTO && HasDcnOps(plan.stats)) {
    ASSIGN_OR_RETURN(flows, ReadDcnFlows(store, plan.row.id, StoreSelection(*plan.narrower)));
  }
  std::map<std::string, exporter::KernelNotes> notes;
  if (HasVerdicts(plan.request.format())) {
    ASSIGN_OR_RETURN(notes, NotesOf(store, plan.row.id, std::move(plan.stats), *plan.narrower));
  }
  return WriteTimeline(store, sink, plan.row, plan.request.format(), *plan.narrower, notes,
                       &plan.estimate, plan.json_limit, std::move(flows));
}

grpc::Status AggregatorService::ExportCapture(grpc::ServerContext* context,
                                              const v1::ExportCaptureRequest* request,
                                              grpc::ServerWriter<v1::ExportChunk>* writer) {
  return GuardRpc("Aggregator.ExportCapture", [&]() -> grpc::Status {
    absl::StatusOr<StreamSlots::Ticket> slot = long_calls_.Take(ClientOf(*context));
    if (!slot.ok()) return ToGrpc(slot.status());
    absl::StatusOr<ExportPlan> plan = PlanExport(reads_, *request);
    if (!plan.ok()) return ToGrpc(plan.status());
    // A chunk its client leaves untaken past the limit cancels the call: the chunk and the
    // thread are let go (64 unread exports of one client held 695 MiB).
    ClientWaitWatchdog watchdog(context, *clock_, kExportWriteLimitNs);
    ExportSink sink;
    sink.send = [writer, &watchdog](const v1::ExportChunk& c) {
      watchdog.Arm();
      const bool sent = writer->Write(c);
      watchdog.Disarm();
      return sent;
    };
    sink.cancelled = [context] { return context->IsCancelled(); };
    absl::Status written = WriteExport(reads_, *plan, sink);
    if (watchdog.fired()) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          "the client left an export chunk untaken for 20 s");
    }
    return ToGrpc(written);
  });
}

}  // namespace podprof::aggregator
