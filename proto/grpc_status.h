// Status conversions at the gRPC boundary: the one place absl::Status becomes grpc::Status
// (RPC handlers only), the guard that turns an exception leaving a handler into one, and
// deadlines taken from podprof's Clock. Its includers link podprof_common (the guard logs).
#ifndef PODPROF_PROTO_GRPC_STATUS_H_
#define PODPROF_PROTO_GRPC_STATUS_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/logging.h"
#include "common/utf8.h"

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

// The last guard of an RPC handler: runs `body` (returning grpc::Status) and returns its status,
// or INTERNAL naming the exception it let out, logged with `method`. Handlers return errors as
// statuses; an exception escaping one (a bug, or a library throwing on input nobody foresaw)
// would otherwise reach gRPC's thread and std::terminate the daemon. Every RPC method body runs
// inside it:
//   return GuardRpc("Aggregator.ListCaptures", [&] { return Answer(..., resp); });
template <typename Body>
grpc::Status GuardRpc(const char* method, Body&& body) noexcept {
  std::string what;
  try {
    return body();
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  std::string line = EscapeForTerminal(what);
  PODPROF_LOG(ERROR) << method << " failed: " << line;
  return grpc::Status(grpc::StatusCode::INTERNAL,
                      std::string(method) + " failed: " + EscapeInvalidUtf8(what));
}

}  // namespace podprof

#endif  // PODPROF_PROTO_GRPC_STATUS_H_
