// podprof.v1.Agent.Capture on gRPC's callback API: one reactor per call. The checks that can
// refuse a call run on gRPC's thread and finish it at once; an admitted capture runs on a
// thread of its own, which the reactor starts and joins when gRPC is done with the call. The
// client going away reaches the capture the moment gRPC sees it (OnCancel), so that the
// workload's session is terminated without anything polling for it.
#ifndef PODPROF_AGENT_CAPTURE_CALL_H_
#define PODPROF_AGENT_CAPTURE_CALL_H_

#include <grpcpp/grpcpp.h>

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent.h"
#include "agent/capture_runner.h"
#include "metrics/registry.h"
#include "proto/podprof_agent.pb.h"
#include "security/refusal_log.h"
#include "stream/capture_encoder.h"

namespace podprof::agent {

class CaptureCall final : public grpc::ServerWriteReactor<podprof::v1::CaptureChunk>,
                          private stream::ChunkSink {
 public:
  // Starts the call `context` carries for `request`: refuses it (a caller not in
  // tls.allowed_aggregators, logged to `refusals`; no capture id; another host's capture; the
  // host busy or draining) or starts its capture. `metrics` may be null. Everything given must
  // outlive the call; the reactor deletes itself when gRPC is done with it.
  CaptureCall(Agent* agent, metrics::Registry* metrics, security::RefusalLog* refusals,
              grpc::CallbackServerContext* context, const podprof::v1::CaptureRequest* request);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // Why the call is refused, or OK once the host is claimed for it.
  absl::Status Admit(security::RefusalLog* refusals);
  // The capture thread: runs the capture, releases the host, counts and logs the outcome, and
  // finishes the call.
  void Capture();
  // A chunk to the client, on the capture thread: starts its write and waits for it to
  // complete, so that the chunk stays the caller's and a slow client slows the capture as
  // the synchronous API's Write did. False once a write failed or the client went away.
  bool Write(const podprof::v1::CaptureChunk& chunk) override ABSL_LOCKS_EXCLUDED(mu_);

  Agent* const agent_;
  metrics::Registry* const metrics_;
  grpc::CallbackServerContext* const context_;
  const podprof::v1::CaptureRequest* const request_;
  CaptureCancel cancel_;
  absl::Mutex mu_;
  bool written_ ABSL_GUARDED_BY(mu_) = true;  // no write in flight
  bool writable_ ABSL_GUARDED_BY(mu_) = true;
  std::thread thread_;
};

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_CAPTURE_CALL_H_
