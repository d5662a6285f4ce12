#include "aggregator/capture/stream_pool.h"

#include <algorithm>

namespace podprof::aggregator {

namespace v1 = podprof::v1;

struct StreamPool::Call {
  enum Op { kStart, kRead, kFinish };
  Handler* handler = nullptr;
  // Declared before the reader: the reader lives in the call's arena, which the context frees.
  std::shared_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientAsyncReader<v1::CaptureChunk>> reader;
  v1::CaptureChunk chunk;
  grpc::Status status;
  Op op = kStart;
  bool active = false;     // holds one of the max_active slots
  bool cancelled = false;  // the handler refused a chunk
};

StreamPool::StreamPool(int threads, int max_active) : max_active_(std::max(1, max_active)) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

StreamPool::~StreamPool() {
  cq_.Shutdown();
  for (std::thread& t : threads_) t.join();
}

int StreamPool::active() const {
  absl::MutexLock lock(&mu_);
  return active_;
}

int StreamPool::peak_active() const {
  absl::MutexLock lock(&mu_);
  return peak_active_;
}

void StreamPool::Start(v1::Agent::Stub* stub, std::shared_ptr<grpc::ClientContext> context,
                       const v1::CaptureRequest& request, Handler* handler) {
  auto* call = new Call;
  call->handler = handler;
  call->context = std::move(context);
  call->reader = stub->PrepareAsyncCapture(call->context.get(), request, &cq_);
  call->op = Call::kStart;
  call->reader->StartCall(call);
}

void StreamPool::Loop() {
  void* tag = nullptr;
  bool ok = false;
  while (cq_.Next(&tag, &ok)) Handle(static_cast<Call*>(tag), ok);
}

void StreamPool::Read(Call* call) {
  call->op = Call::kRead;
  call->reader->Read(&call->chunk, call);
}

void StreamPool::Finish(Call* call) {
  call->op = Call::kFinish;
  call->reader->Finish(&call->status, call);
}

void StreamPool::Deliver(Call* call) {
  if (!call->cancelled && !call->handler->OnChunk(call->chunk)) {
    call->cancelled = true;
    call->context->TryCancel();
  }
  Read(call);  // after a cancellation it fails at once, and the call finishes
}

void StreamPool::Handle(Call* call, bool ok) {
  switch (call->op) {
    case Call::kStart:
      if (ok) {
        Read(call);
      } else {
        Finish(call);
      }
      return;
    case Call::kRead:
      if (!ok) {
        Finish(call);
        return;
      }
      if (!call->active) {
        absl::MutexLock lock(&mu_);
        if (active_ >= max_active_) {
          parked_.push_back(call);  // its agent waits until a slot frees
          return;
        }
        call->active = true;
        peak_active_ = std::max(peak_active_, ++active_);
      }
      Deliver(call);
      return;
    case Call::kFinish: {
      Call* next = nullptr;
      if (call->active) {
        absl::MutexLock lock(&mu_);
        --active_;
        if (!parked_.empty()) {
          next = parked_.front();
          parked_.pop_front();
          next->active = true;
          peak_active_ = std::max(peak_active_, ++active_);
        }
      }
      call->handler->OnDone(call->status);
      delete call;
      if (next != nullptr) Deliver(next);
      return;
    }
  }
}

}  // namespace podprof::aggregator
