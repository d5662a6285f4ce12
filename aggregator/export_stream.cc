// AggregatorService::ExportCapture: a stored capture written as Perfetto, Chrome JSON or XProf
// sessions, streamed host by host in bounded chunks.
#include <algorithm>
#include <ostream>
#include <streambuf>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "aggregator/service.h"
#include "aggregator/service_internal.h"
#include "common/errno_status.h"
#include "common/logging.h"
#include "export/trace_export.h"
#include "export/xspace_export.h"
#include "ingest/capture_ingest.h"
#include "insight/verdict.h"
#include "proto/grpc_status.h"
#include "trace/kernel_stats.h"
#include "trace/xspace_reader.h"

namespace podprof::aggregator {

namespace {

// An ostream whose bytes go out as ExportChunks of at most kChunkBytes, so an export of any
// size streams with bounded memory. Goes bad when the client is gone.
class ChunkStreamBuf : public std::streambuf {
 public:
  static constexpr size_t kChunkBytes = 1 << 20;
  ChunkStreamBuf(grpc::ServerWriter<podprof::v1::ExportChunk>* writer, std::string path)
      : writer_(writer), path_(std::move(path)), buf_(kChunkBytes) {
    setp(buf_.data(), buf_.data() + buf_.size());
  }
  uint64_t bytes() const { return offset_ + static_cast<uint64_t>(pptr() - pbase()); }

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
    podprof::v1::ExportChunk chunk;
    chunk.set_path(path_);
    chunk.set_offset(offset_);
    chunk.set_data(pbase(), n);
    ok_ = ok_ && writer_->Write(chunk);
    offset_ += n;
    setp(buf_.data(), buf_.data() + buf_.size());
    return ok_;
  }

  grpc::ServerWriter<podprof::v1::ExportChunk>* writer_;
  const std::string path_;
  std::vector<char> buf_;
  uint64_t offset_ = 0;
  bool ok_ = true;
};

std::string HostDescription(const storage::HostRow& h) {
  if (h.status != "complete") return absl::StrCat(h.status, ": ", h.error);
  return absl::StrCat("clock correction ", h.clock_offset_ns, " ns +- ", h.clock_uncertainty_ns,
                      " ns");
}

}  // namespace

grpc::Status AggregatorService::ExportCapture(
    grpc::ServerContext* context, const podprof::v1::ExportCaptureRequest* request,
    grpc::ServerWriter<podprof::v1::ExportChunk>* writer) {
  const auto format = request->format();
  if (format != podprof::v1::EXPORT_FORMAT_PERFETTO &&
      format != podprof::v1::EXPORT_FORMAT_CHROME_JSON &&
      format != podprof::v1::EXPORT_FORMAT_XSPACE_DIR) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("export format ", static_cast<int>(format),
                                     " is not one of perfetto, chrome json, xspace dir"));
  }
  absl::StatusOr<storage::CaptureRow> row = store_->GetCapture(request->capture_id());
  if (!row.ok()) return ToGrpc(row.status());
  if (format == podprof::v1::EXPORT_FORMAT_XSPACE_DIR) {
    // One file per host, each a whole XSpace: only one host's is ever in memory.
    const std::string run = exporter::XprofRunName(row->start_ns);
    uint64_t files = 0;
    absl::Status s = store_->ForEachHost(request->capture_id(), [&](storage::StoredHost& h) {
      if (context->IsCancelled()) return absl::CancelledError("the client went away");
      if (h.capture.host.chips.empty()) return absl::OkStatus();  // a host that failed
      ChunkStreamBuf buf(writer,
                         absl::StrCat("plugins/profile/", run, "/", h.row.host, ".xplane.pb"));
      std::ostream out(&buf);
      if (!exporter::ToXSpace(h.capture).SerializeToOstream(&out) || !out.flush()) {
        return absl::UnavailableError("the client stopped reading");
      }
      ++files;
      return absl::OkStatus();
    });
    if (!s.ok()) return ToGrpc(s);
    PODPROF_LOG(INFO) << "exported " << request->capture_id() << " as an XProf session of " << files
                      << " hosts";
    return grpc::Status::OK;
  }
  const bool perfetto = format == podprof::v1::EXPORT_FORMAT_PERFETTO;
  ChunkStreamBuf buf(writer, absl::StrCat(request->capture_id(), perfetto ? ".pftrace" : ".json"));
  std::ostream out(&buf);
  std::optional<exporter::PerfettoWriter> pw;
  std::optional<exporter::ChromeJsonWriter> cw;
  if (perfetto) {
    pw.emplace(&out);
  } else {
    cw.emplace(&out, row->start_ns);
  }
  // Each kernel's verdict on each chip, for its slices.
  std::map<std::string, exporter::KernelNotes> notes;
  {
    storage::StatsQuery q;
    q.capture_id = request->capture_id();
    q.group_by = storage::Grouping::kChip;
    absl::StatusOr<std::vector<storage::StatRow>> rows = store_->KernelStats(q);
    if (!rows.ok()) return ToGrpc(rows.status());
    absl::StatusOr<std::vector<podprof::v1::KernelInsight>> judged =
        Judge(*store_, q.capture_id, true, *rows, rows->size());
    if (!judged.ok()) return ToGrpc(judged.status());
    for (size_t i = 0; i < judged->size(); ++i) {
      const storage::StatRow& r = (*rows)[i];
      notes[r.host][{r.chip, r.kernel.module, r.kernel.op_name}] = (*judged)[i].verdict_text();
    }
  }
  absl::Status s = store_->ForEachHost(request->capture_id(), [&](storage::StoredHost& h) {
    if (context->IsCancelled()) return absl::CancelledError("the client went away");
    auto host_notes = notes.find(h.row.host);
    const exporter::KernelNotes* n = host_notes == notes.end() ? nullptr : &host_notes->second;
    if (perfetto) {
      pw->AddHost(h.capture, HostDescription(h.row), n);
    } else {
      cw->AddHost(h.capture, HostDescription(h.row), n);
    }
    return out ? absl::OkStatus() : absl::UnavailableError("the client stopped reading");
  });
  if (s.ok()) s = perfetto ? pw->Finish() : cw->Finish();
  if (!s.ok()) return ToGrpc(s);
  const exporter::ExportCounts& n = perfetto ? pw->counts() : cw->counts();
  PODPROF_LOG(INFO) << "exported " << request->capture_id() << " as "
                    << podprof::v1::ExportFormat_Name(format) << ": " << n.hosts << " hosts, "
                    << n.slices << " slices, " << buf.bytes() << " bytes";
  return grpc::Status::OK;
}

}  // namespace podprof::aggregator
