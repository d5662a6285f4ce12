#include "loadgen/fleet_service.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "analysis/host_summary.h"
#include "common/logging.h"
#include "proto/grpc_status.h"

namespace podprof::loadgen {
namespace {

namespace v1 = podprof::v1;

// As podprof-agent: a start this far in the past when the request arrives is a late start.
constexpr int64_t kLateToleranceNs = 50'000'000;
// The longest a service thread sleeps without looking at its state again.
constexpr int64_t kMaxIdleWaitNs = 1'000'000'000;

}  // namespace

// One Capture call. Owned by itself from Begin() to OnDone() (gRPC holds a raw pointer in
// between) and by the service's queues while it is in them, so a queued stream the client
// cancelled stays valid until its turn comes and is then dropped. Guarded by mu_; gRPC
// operations are started outside it, since gRPC may run a reaction on the calling thread.
class FleetService::CaptureStream final : public grpc::ServerWriteReactor<v1::CaptureChunk>,
                                          public std::enable_shared_from_this<CaptureStream> {
 public:
  CaptureStream(FleetService* service, EmulatedHost* host, const v1::CaptureRequest& request,
                int64_t start_ns)
      : service_(service), host_(host), request_(request), start_ns_(start_ns) {}

  // Takes ownership of itself until OnDone.
  void Begin() { self_ = shared_from_this(); }

  EmulatedHost& host() const { return *host_; }
  const v1::CaptureRequest& request() const { return request_; }
  int64_t start_ns() const { return start_ns_; }

  // Ends the call with `status` unless it is already ending.
  void Fail(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (finishing_) return;
      finishing_ = true;
    }
    Finish(status);
  }

  // Counts the stream in a generation slot; false when the call is already over (then the
  // caller keeps the slot).
  bool TakeSlot() {
    absl::MutexLock lock(&mu_);
    if (finishing_ || done_) return false;
    holds_slot_ = true;
    return true;
  }

  // Starts writing `chunks` (never empty: the trailer is always there).
  void Deliver(std::vector<v1::CaptureChunk> chunks) {
    {
      absl::MutexLock lock(&mu_);
      if (finishing_) return;
      chunks_ = std::move(chunks);
      next_ = 0;
    }
    StartWrite(&chunks_[0]);
  }

  void OnWriteDone(bool ok) override {
    const v1::CaptureChunk* next = nullptr;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      chunks_[next_] = v1::CaptureChunk();  // written: its memory can go
      if (finishing_) return;
      if (!ok) {
        finishing_ = true;
        finish = true;
      } else if (++next_ < chunks_.size()) {
        next = &chunks_[next_];
      } else {
        finishing_ = true;
        finish = true;
        complete_ = true;
      }
    }
    if (next != nullptr) {
      StartWrite(next);
    } else if (finish) {
      Finish(complete_ ? grpc::Status::OK
                       : grpc::Status(grpc::StatusCode::CANCELLED, "the caller went away"));
    }
  }

  void OnCancel() override {
    Fail(grpc::Status(grpc::StatusCode::CANCELLED, "capture cancelled by the caller"));
  }

  void OnDone() override {
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      release = holds_slot_;
      chunks_.clear();
    }
    (complete_ ? service_->delivered_ : service_->failed_).fetch_add(1);
    host_->End();
    if (release) service_->ReleaseSlot();
    std::shared_ptr<CaptureStream> last = std::move(self_);  // may delete this on return
  }

 private:
  FleetService* const service_;
  EmulatedHost* const host_;
  const v1::CaptureRequest request_;
  const int64_t start_ns_;  // the window's start on the host's clock
  std::shared_ptr<CaptureStream> self_;

  absl::Mutex mu_;
  // Guarded by mu_ (chunks_ is written by gRPC between StartWrite and OnWriteDone).
  std::vector<v1::CaptureChunk> chunks_;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool holds_slot_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> complete_{false};
};

FleetService::FleetService(std::vector<EmulatedHost*> hosts, CaptureSource& source, Clock& truth,
                           FleetLimits limits)
    : hosts_(std::move(hosts)), source_(source), truth_(truth), limits_(limits) {
  threads_.emplace_back([this] { SchedulerLoop(); });
  for (int i = 0; i < std::max(1, limits_.generator_threads); ++i) {
    threads_.emplace_back([this] { GeneratorLoop(); });
  }
}

FleetService::~FleetService() { Stop(); }

void FleetService::Attach(std::vector<v1::HostInfo> infos) {
  absl::MutexLock lock(&mu_);
  infos_ = std::move(infos);
  for (size_t i = 0; i < hosts_.size(); ++i) {
    by_name_[hosts_[i]->name] = static_cast<int>(i);
    by_port_[hosts_[i]->port] = static_cast<int>(i);
  }
}

void FleetService::Stop() {
  std::vector<std::shared_ptr<CaptureStream>> pending;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    changed_.SignalAll();
    for (auto& [at, s] : windows_) pending.push_back(std::move(s));
    for (auto& s : ready_) pending.push_back(std::move(s));
    windows_.clear();
    ready_.clear();
  }
  for (auto& s : pending) {
    s->Fail(grpc::Status(grpc::StatusCode::UNAVAILABLE, "podprof-loadgen is shutting down"));
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

int FleetService::FindHost(const std::string& name, grpc::string_ref authority) {
  absl::MutexLock lock(&mu_);
  if (!name.empty()) {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? -1 : it->second;
  }
  const std::string a(authority.data(), authority.size());
  int port = 0;
  const size_t colon = a.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(a.substr(colon + 1), &port)) return -1;
  auto it = by_port_.find(port);
  return it == by_port_.end() ? -1 : it->second;
}

grpc::ServerWriteReactor<v1::CaptureChunk>* FleetService::Capture(
    grpc::CallbackServerContext* context, const v1::CaptureRequest* request) {
  const int i = FindHost(request->host_name(), context->ExperimentalGetAuthority());
  EmulatedHost* host = i >= 0 ? hosts_[i] : nullptr;
  const int64_t now = host != nullptr ? host->clock.NowNs() : 0;
  const int64_t start_ns = request->start_ns() > 0 ? request->start_ns() : now;
  grpc::Status refused;
  if (host == nullptr) {
    refused = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                           absl::StrCat("this podprof-loadgen emulates no host \"",
                                        request->host_name(), "\" at this address"));
  } else if (request->duration_ms() == 0 || request->duration_ms() > 300'000) {
    refused =
        grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                     absl::StrCat("duration_ms must be 1..300000, got ", request->duration_ms()));
  } else if (!request->snapshot() && now > start_ns + kLateToleranceNs) {
    // A snapshot's window has passed: the emulated host's recorder is always armed, and its
    // window, generated like any other, is streamed at once.
    refused =
        grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                     absl::StrCat("late start: the start instant passed ",
                                  (now - start_ns) / 1'000'000, " ms before the request arrived"));
  } else if (start_ns - now > limits_.max_start_ahead_ns) {
    refused = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                           "start_ns is too far ahead of this host's clock");
  } else if (absl::Status busy = host->Begin(request->capture_id()); !busy.ok()) {
    refused = ToGrpc(busy);
  }
  if (!refused.ok()) {
    // Finished at once, and unlike a CaptureStream it releases no host: it claimed none.
    class Refusal final : public grpc::ServerWriteReactor<v1::CaptureChunk> {
     public:
      explicit Refusal(const grpc::Status& s) { Finish(s); }
      void OnDone() override { delete this; }
    };
    failed_.fetch_add(1);
    return new Refusal(refused);
  }
  auto stream = std::make_shared<CaptureStream>(this, host, *request, start_ns);
  stream->Begin();
  const int64_t window_end_true =
      host->clock.ToTrue(start_ns + static_cast<int64_t>(request->duration_ms()) * 1'000'000);
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      windows_.emplace(window_end_true, stream);
      changed_.SignalAll();
      return stream.get();
    }
  }
  stream->Fail(grpc::Status(grpc::StatusCode::UNAVAILABLE, "podprof-loadgen is shutting down"));
  return stream.get();
}

int FleetService::HostCalled(grpc::CallbackServerContext* context,
                             grpc::ServerUnaryReactor* reactor) {
  const int i = FindHost("", context->ExperimentalGetAuthority());
  if (i < 0) {
    reactor->Finish(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                 "this podprof-loadgen emulates no host at this address"));
  }
  return i;
}

grpc::ServerUnaryReactor* FleetService::Ping(grpc::CallbackServerContext* context,
                                             const v1::PingRequest* request,
                                             v1::PingResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const int i = HostCalled(context, reactor);
  if (i < 0) return reactor;
  Clock& clock = hosts_[i]->clock;
  response->set_client_send_ns(request->client_send_ns());
  response->set_agent_receive_ns(clock.NowNs());
  response->set_agent_send_ns(clock.NowNs());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* FleetService::Info(grpc::CallbackServerContext* context,
                                             const v1::InfoRequest* /*request*/,
                                             v1::InfoResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const int i = HostCalled(context, reactor);
  if (i < 0) return reactor;
  EmulatedHost& host = *hosts_[i];
  {
    absl::MutexLock lock(&mu_);
    *response->mutable_host() = infos_[i];
  }
  response->set_agent_start_ns(host.start_ns);
  {
    absl::MutexLock lock(&host.mu);
    response->set_active_capture_id(host.active_capture);
  }
  // An emulated clock is disciplined by construction: its error is what the loadgen gave it.
  response->mutable_clock_source()->set_synchronized(true);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

void FleetService::SchedulerLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    const int64_t now = truth_.NowNs();
    bool moved = false;
    while (!windows_.empty() && windows_.begin()->first <= now) {
      ready_.push_back(std::move(windows_.begin()->second));
      windows_.erase(windows_.begin());
      moved = true;
    }
    if (moved) {
      changed_.SignalAll();
      continue;
    }
    const int64_t wait =
        windows_.empty() ? kMaxIdleWaitNs : std::min(kMaxIdleWaitNs, windows_.begin()->first - now);
    // Woken early by a new capture (whose window may end sooner) or by Stop().
    changed_.WaitWithTimeout(&mu_, absl::Nanoseconds(wait));
  }
}

void FleetService::GeneratorLoop() {
  while (true) {
    std::shared_ptr<CaptureStream> stream;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && (ready_.empty() || streaming_ >= limits_.max_streaming)) {
        changed_.WaitWithTimeout(&mu_, absl::Nanoseconds(kMaxIdleWaitNs));
      }
      if (stopping_) return;
      stream = std::move(ready_.front());
      ready_.pop_front();
      ++streaming_;
    }
    if (!stream->TakeSlot()) {
      ReleaseSlot();  // cancelled while it waited
      continue;
    }
    const size_t chunk_limit =
        stream::NegotiateChunkBytes(limits_.max_chunk_bytes, stream->request().max_chunk_bytes());
    absl::StatusOr<GeneratedCapture> capture = source_.Generate(
        stream->host(), stream->start_ns(), static_cast<int64_t>(stream->request().duration_ms()),
        chunk_limit, stream->request().analysis_version() == analysis::kAnalysisVersion);
    if (!capture.ok()) {
      PODPROF_LOG(ERROR) << stream->host().name << ": " << capture.status().message();
      stream->Fail(ToGrpc(capture.status()));
      continue;
    }
    stream->Deliver(std::move(capture->chunks));
  }
}

void FleetService::ReleaseSlot() {
  absl::MutexLock lock(&mu_);
  --streaming_;
  changed_.SignalAll();
}

}  // namespace podprof::loadgen
