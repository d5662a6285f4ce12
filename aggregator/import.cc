// AggregatorService::ImportXSpace: XProf captures uploaded file by file, spooled to disk, read,
// analysed and stored as one capture; a damaged file is reported by name and the rest stored.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <set>

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

// Spools one uploaded file to disk so memory stays bounded by a chunk.
class Spool {
 public:
  explicit Spool(const std::string& dir) {
    path_ = dir + "/podprof-import-XXXXXX";
    fd_ = ::mkstemp(path_.data());
  }
  ~Spool() {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
  }
  bool ok() const { return fd_ >= 0; }
  bool Append(const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    bytes_ += static_cast<int64_t>(data.size());
    return true;
  }
  const std::string& path() const { return path_; }
  int64_t bytes() const { return bytes_; }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t bytes_ = 0;
};

}  // namespace

grpc::Status AggregatorService::ImportXSpace(
    grpc::ServerContext* context, grpc::ServerReader<podprof::v1::ImportXSpaceChunk>* reader,
    podprof::v1::ImportXSpaceResponse* response) {
  if (absl::Status a = Access()->operators.Check(*context, "an operator"); !a.ok()) {
    return Refuse(*context, a);
  }
  std::string dir = limits_.spool_dir;
  if (dir.empty()) dir = std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "/tmp";
  ingest::CaptureInput w;
  w.source = storage::CaptureSource::kImport;
  w.created_ns = clock_->NowNs();
  std::set<std::string> seen;
  std::vector<std::string> errors;

  // Parses the spooled file of one host into the capture, or records why it could not.
  auto finish_file = [&](const std::string& host, Spool& spool) {
    if (!spool.ok()) {
      errors.push_back(absl::StrCat(host, ": cannot spool the upload in ", dir));
      return;
    }
    trace::ReadOptions opts;
    opts.host_name = host;
    absl::StatusOr<trace::HostCapture> cap = trace::ReadXSpaceFile(spool.path(), opts);
    if (!cap.ok()) {
      // The spool path means nothing to the user: name the host's file instead.
      std::string msg(cap.status().message());
      if (msg.rfind(spool.path(), 0) == 0) msg = msg.substr(spool.path().size() + 2);
      errors.push_back(absl::StrCat(host, ".xplane.pb: ", msg));
      return;
    }
    if (cap->EventCount() == 0) {
      errors.push_back(absl::StrCat(host, ".xplane.pb: no device events (not a TPU/GPU capture?)"));
      return;
    }
    ingest::HostInput h;
    h.host = host;  // the file's name, as XProf names hosts
    h.bytes = static_cast<uint64_t>(spool.bytes());
    h.capture = std::move(*cap);
    w.hosts.push_back(std::move(h));
  };

  podprof::v1::ImportXSpaceChunk chunk;
  std::string host;
  std::unique_ptr<Spool> spool;
  bool first = true;
  bool too_big = false;
  while (reader->Read(&chunk)) {
    if (first) {
      w.labels = {chunk.labels().begin(), chunk.labels().end()};
      first = false;
    }
    if (!chunk.host_name().empty() && chunk.host_name() != host) {
      if (spool) finish_file(host, *spool);
      host = chunk.host_name();
      if (!seen.insert(host).second) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("host ", host, " appears twice in one import"));
      }
      spool = std::make_unique<Spool>(dir);
      too_big = false;
    }
    if (!spool) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "the first chunk of an import must name its host");
    }
    if (too_big) continue;
    if (spool->bytes() + static_cast<int64_t>(chunk.data().size()) > limits_.max_file_bytes) {
      errors.push_back(absl::StrCat(host, ".xplane.pb: larger than the import limit of ",
                                    limits_.max_file_bytes, " bytes"));
      too_big = true;
      seen.erase(host);
      continue;
    }
    if (spool->ok() && !spool->Append(chunk.data())) {
      return ToGrpc(ErrnoToStatus(errno, absl::StrCat("spooling the upload of ", host)));
    }
  }
  if (spool && !too_big) finish_file(host, *spool);
  spool.reset();
  for (const std::string& e : errors) response->add_file_errors(e);
  if (w.hosts.empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        errors.empty() ? "the import held no files"
                                       : absl::StrCat("no file could be imported: ", errors[0]));
  }
  // Imports keep the hosts' own clocks; the capture spans their profile windows.
  w.start_ns = INT64_MAX;
  w.end_ns = 0;
  for (const ingest::HostInput& h : w.hosts) {
    w.start_ns = std::min(w.start_ns, h.capture->host.profile_start_ns);
    w.end_ns = std::max(w.end_ns, h.capture->host.profile_stop_ns);
  }
  if (w.start_ns <= 0 || w.start_ns == INT64_MAX) w.start_ns = w.created_ns;
  if (w.end_ns < w.start_ns) w.end_ns = w.start_ns;
  w.state = errors.empty() ? storage::CaptureState::kComplete : storage::CaptureState::kPartial;
  w.id = absl::StrFormat("imp-%d-%04x", w.created_ns / 1'000'000,
                         static_cast<unsigned>(w.created_ns % 65536));
  const size_t imported = w.hosts.size();
  const std::string id = w.id;
  const int64_t start_ns = w.start_ns;
  absl::Status s = ingest::StoreCapture(*store_, std::move(w));
  if (!s.ok()) return ToGrpc(s);
  PODPROF_LOG(INFO) << "imported " << imported << " host(s) as " << id
                    << (errors.empty() ? "" : absl::StrCat(", ", errors.size(), " file(s) failed"));
  response->set_capture_id(id);
  storage::CaptureQuery q;
  q.since_ns = start_ns;
  q.until_ns = start_ns;
  std::string next;
  absl::StatusOr<std::vector<storage::CaptureRow>> rows = store_->ListCaptures(q, &next);
  if (rows.ok()) {
    for (const auto& r : *rows) {
      if (r.id == id) FillSummary(r, response->mutable_summary());
    }
  }
  storage::StatsQuery top;
  top.capture_id = id;
  top.top = 10;
  absl::StatusOr<std::vector<storage::StatRow>> stats = store_->KernelStats(top);
  if (stats.ok()) {
    for (const auto& r : *stats) *response->add_top_kernels() = ToProto(r);
  }
  return grpc::Status::OK;
}

}  // namespace podprof::aggregator
