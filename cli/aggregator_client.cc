#include "cli/aggregator_client.h"

#include <chrono>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/report.h"
#include "security/tls.h"

namespace podprof::cli {
namespace {

// Statistics of every kernel of a large capture, one sketch per row, can pass gRPC's 4 MiB
// default; the bound still stops a confused server from exhausting memory.
constexpr int kMaxResponseBytes = 256 << 20;

// Why the TCP connection itself failed, in words, from gRPC's message; "" when the message
// names no such cause (the connection was made and then closed, e.g. at the TLS handshake).
std::string ConnectFailure(const std::string& detail) {
  static const std::pair<const char*, const char*> kCauses[] = {
      {"Connection refused", "connection refused"},
      {"DNS resolution failed", "the name does not resolve"},
      {"Domain name not found", "the name does not resolve"},
      {"No route to host", "no route to host"},
      {"Network is unreachable", "network unreachable"},
      {"Connection timed out", "the connection timed out"},
  };
  for (const auto& [words, cause] : kCauses) {
    if (absl::StrContains(detail, words)) return cause;
  }
  return "";
}

// How to list what exists, for the aggregator's answer that a kernel or a capture it was asked
// for does not exist.
std::string ListingHint(const std::string& not_found) {
  if (absl::StrContains(not_found, "kernel")) {
    return "; `podprof stats CAPTURE` lists a capture's kernels";
  }
  if (absl::StrContains(not_found, "capture")) return "; `podprof captures` lists the captures";
  return "";
}

}  // namespace

std::string AggregatorClient::HandshakeHint(const std::string& detail) const {
  if (tls_) {
    const std::string meaning = security::ExplainTlsDialFailure(detail);
    return meaning.empty() ? "" : absl::StrCat(" (the TLS handshake failed: ", meaning, ")");
  }
  // A TLS server closes a plaintext connection without an answer gRPC could read.
  const bool closed = absl::StrContains(detail, "Socket closed") ||
                      absl::StrContains(detail, "Connection reset") ||
                      absl::StrContains(detail, "Handshake") || absl::StrContains(detail, "SSL");
  if (!closed) return "";
  return " (the connection closed at once: this aggregator likely requires TLS; give "
         "--tls-cert, --tls-key and --tls-ca)";
}

AggregatorClient::AggregatorClient(const AggregatorTarget& target, Clock& clock)
    : address_(target.address),
      timeout_ns_(target.timeout_ns),
      tls_(target.credentials != nullptr),
      clock_(clock) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxResponseBytes);
  channel_ = grpc::CreateCustomChannel(
      address_,
      target.credentials != nullptr ? target.credentials : grpc::InsecureChannelCredentials(),
      args);
  stub_ = v1::Aggregator::NewStub(channel_);
}

void AggregatorClient::SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds(clock_.NowNs() + timeout_ns_))));
}

absl::Status AggregatorClient::Check(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // gRPC's codes are absl's canonical codes, number for number.
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  std::string detail = OneLine(status.error_message());
  if (detail.empty()) detail = absl::StatusCodeToString(code);
  const std::string timeout = FormatDurationPs(timeout_ns_ * 1000);
  // Only an aggregator that answered leaves the channel READY: a refused or lost connection
  // leaves it failing or reconnecting. That tells "unreachable" from the aggregator's own
  // UNAVAILABLE (e.g. while it shuts down).
  const bool connected = channel_->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY;
  if (!connected &&
      (code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded)) {
    // A connection that failed before TLS could start (refused, no route, no answer) says
    // nothing about certificates, even when TLS was asked for; one closed afterwards may.
    std::string cause = code == absl::StatusCode::kDeadlineExceeded
                            ? absl::StrCat("no connection within ", timeout)
                            : ConnectFailure(detail);
    const std::string hint = cause.empty() ? HandshakeHint(detail) : "";
    absl::Status s;
    if (hint.empty()) {
      if (cause.empty()) cause = detail;
      s = absl::UnavailableError(absl::StrCat(
          "no aggregator answers at ", address_, " (", cause,
          "); is podprof-aggregator running there? set --aggregator or $PODPROF_AGGREGATOR"));
    } else {
      s = absl::UnavailableError(
          absl::StrCat("aggregator at ", address_, " unreachable: ", detail, hint));
    }
    s.SetPayload(kUnreachablePayload, absl::Cord("1"));
    return s;
  }
  if (code == absl::StatusCode::kDeadlineExceeded) {
    absl::Status s = absl::DeadlineExceededError(absl::StrCat(
        "aggregator at ", address_, " did not answer within ", timeout, " (see --timeout)"));
    s.SetPayload(kUnreachablePayload, absl::Cord("1"));
    return s;
  }
  if (code == absl::StatusCode::kNotFound) detail += ListingHint(detail);
  return absl::Status(code, detail);
}

}  // namespace podprof::cli
