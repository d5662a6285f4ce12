// The last guard of every RPC handler: no caller's bytes take a daemon down, whatever a handler
// or a library under it throws on input nobody foresaw (docs/RELIABILITY.md, hostile agents).
// Header-only; its includers link podprof_common (the guard logs).
#ifndef PODPROF_SECURITY_RPC_GUARD_H_
#define PODPROF_SECURITY_RPC_GUARD_H_

#include <grpcpp/grpcpp.h>

#include <exception>
#include <string>

#include "common/logging.h"
#include "common/utf8.h"

namespace podprof {

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

#endif  // PODPROF_SECURITY_RPC_GUARD_H_
