#include "agent/workload_channel.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "proto/grpc_status.h"

namespace podprof::agent {

std::shared_ptr<grpc::Channel> NewWorkloadChannel(const std::string& address, bool own_connections,
                                                  int max_receive_bytes) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(max_receive_bytes);
  if (own_connections) {
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    // Tries again every 100-250 ms, not after 1 s: within the reconnection's deadline, a
    // profiler that is starting to listen is found as soon as it does.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 250);
  } else {
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5'000);
  }
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> ReconnectWorkload(const std::string& address,
                                                                 grpc::Channel* shared,
                                                                 Clock& clock, int64_t deadline_ns,
                                                                 int max_receive_bytes) {
  std::shared_ptr<grpc::Channel> fresh =
      NewWorkloadChannel(address, /*own_connections=*/true, max_receive_bytes);
  if (!fresh->WaitForConnected(DeadlineAt(clock.NowNs(), deadline_ns))) {
    return absl::UnavailableError(absl::StrCat("a fresh connection to ", address,
                                               " did not succeed within ", deadline_ns / 1'000'000,
                                               " ms"));
  }
  if (shared != nullptr) grpc::experimental::ChannelResetConnectionBackoff(shared);
  return fresh;
}

}  // namespace podprof::agent
