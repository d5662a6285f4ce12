// A client of the aggregator's API (podprof.v1.Aggregator, proto/podprof_aggregator.proto)
// with the CLI's conventions: a deadline on every call and failures as one-line Statuses that
// tell "could not reach it" from "it answered with an error". Used by every command that talks
// to an aggregator; everything here runs on the calling thread.
#ifndef PODPROF_CLI_AGGREGATOR_CLIENT_H_
#define PODPROF_CLI_AGGREGATOR_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/clock.h"
#include "grpcpp/grpcpp.h"
#include "proto/podprof_aggregator.grpc.pb.h"

namespace podprof::cli {

// Marks a Status from AggregatorClient::Check that means the aggregator could not be reached
// or did not answer in time (as opposed to an error it answered with).
inline constexpr char kUnreachablePayload[] = "podprof/unreachable";

// Where the aggregator listens and how long each call may take.
struct AggregatorTarget {
  // `host:port` of the aggregator's gRPC service.
  std::string address = "localhost:7100";
  // Deadline of each call, ns from its start; for `import` it covers the whole upload.
  int64_t timeout_ns = int64_t{30} * 1'000'000'000;
  // Mutual TLS towards the aggregator (security::ChannelCredentials); null = plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
};

// A client of podprof.v1.Aggregator with the CLI's conventions: the target's credentials, a
// deadline on every call, and failures reported as one-line Statuses that say whether the
// aggregator could not be reached or answered with an error. Used from one thread.
class AggregatorClient {
 public:
  // Creates a channel to `target.address`; it connects on the first call, so construction
  // cannot fail. `clock` supplies the deadlines and "now" for relative times; it must
  // outlive the client.
  AggregatorClient(const AggregatorTarget& target, Clock& clock);

  AggregatorClient(const AggregatorClient&) = delete;
  AggregatorClient& operator=(const AggregatorClient&) = delete;

  v1::Aggregator::StubInterface& stub() { return *stub_; }
  Clock& clock() { return clock_; }

  // Sets the deadline of a call that starts now.
  void SetDeadline(grpc::ClientContext& context);

  // Returns OK for OK. Otherwise a Status with the same code and a one-line message: for a
  // connection that failed (UNAVAILABLE, or DEADLINE_EXCEEDED before any connection)
  // "no aggregator answers at ADDR (<cause>); is podprof-aggregator running there? ..."
  // (cause: connection refused, the name does not resolve, no connection within <timeout>,
  // ...), or "aggregator at ADDR unreachable: <detail> (<hint>)" when the connection closed
  // during the TLS handshake (plaintext to a TLS aggregator, or a certificate it refused); for
  // a call that outlived its deadline "aggregator at ADDR did not answer within <timeout>";
  // else the aggregator's own message, for NOT_FOUND followed by how to list what exists
  // ("; `podprof captures` lists the captures"). The first two carry kUnreachablePayload.
  absl::Status Check(const grpc::Status& status);

  // Makes the unary call `method` with the deadline and returns Check of its outcome.
  template <typename Request, typename Response>
  absl::Status Call(grpc::Status (v1::Aggregator::StubInterface::*method)(grpc::ClientContext*,
                                                                          const Request&,
                                                                          Response*),
                    const Request& request, Response* response) {
    grpc::ClientContext context;
    SetDeadline(context);
    return Check((stub_.get()->*method)(&context, request, response));
  }

 private:
  // Why a connection that closed at the handshake may have closed, or "".
  std::string HandshakeHint(const std::string& detail) const;

  const std::string address_;
  const int64_t timeout_ns_;
  const bool tls_;
  Clock& clock_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Aggregator::StubInterface> stub_;
};

}  // namespace podprof::cli

#endif  // PODPROF_CLI_AGGREGATOR_CLIENT_H_
