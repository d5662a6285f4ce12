// Status conversions at the gRPC boundary: the one place absl::Status becomes grpc::Status
// (RPC handlers only), and deadlines taken from podprof's Clock. The guard that turns an
// exception leaving a handler into a status is security/rpc_guard.h.
#ifndef PODPROF_PROTO_GRPC_STATUS_H_
#define PODPROF_PROTO_GRPC_STATUS_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace podprof {

// Keeps the code (absl's codes are gRPC's) and the message.
inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// The absl::Status for a gRPC status: the same code and message.
inline absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

// The wall-clock instant `from_now_ns` after `now_ns` (a Clock reading), as gRPC deadlines
// and Server::Shutdown want it.
inline std::chrono::system_clock::time_point DeadlineAt(int64_t now_ns, int64_t from_now_ns) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds(now_ns + from_now_ns)));
}

}  // namespace podprof

#endif  // PODPROF_PROTO_GRPC_STATUS_H_
