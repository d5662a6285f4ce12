#include "security/refusal_log.h"

#include <grpc/support/log.h>

#include <atomic>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace podprof::security {

RefusalLog::RefusalLog(Clock& clock, int64_t window_ns, Sink sink)
    : clock_(clock), window_ns_(window_ns), sink_(std::move(sink)) {
  if (!sink_) sink_ = [](const std::string& line) { PODPROF_LOG(WARNING) << line; };
}

void RefusalLog::Note(absl::string_view peer, absl::string_view reason) {
  const int64_t now = clock_.MonotonicNs();
  std::string line;
  {
    absl::MutexLock lock(&mu_);
    auto it = seen_.find(reason);
    if (it != seen_.end() && now - it->second.logged_ns < window_ns_) {
      ++it->second.suppressed;
      return;
    }
    if (it == seen_.end()) it = seen_.emplace(std::string(reason), Seen{}).first;
    line = absl::StrCat("refused ", peer.empty() ? "a peer" : peer, ": ", reason);
    if (it->second.suppressed > 0) {
      absl::StrAppend(&line, " (and ", it->second.suppressed, " more like it not logged since ",
                      (now - it->second.logged_ns) / 1'000'000'000, " s ago)");
    }
    it->second = Seen{now, 0};
  }
  sink_(line);
}

std::string ExplainHandshakeFailure(absl::string_view message) {
  // The OpenSSL reason strings a podprof deployment meets, and what to look at for each.
  static const std::pair<const char*, const char*> kMeanings[] = {
      {"wrong version number",
       "the other side spoke plaintext (insecure = true on one side only, or a CLI without "
       "--tls-cert/--tls-key/--tls-ca)"},
      {"http request", "the other side spoke plaintext HTTP"},
      {"peer did not return a certificate",
       "the client presented no certificate (mutual TLS needs one from tls.ca)"},
      {"certificate required",
       "the server asked for a client certificate and this daemon had none to give"},
      {"certificate verify failed",
       "the other side's certificate did not verify against tls.ca: signed by another CA, "
       "expired or not yet valid, or without the extended key usage for its role"},
      {"alert certificate expired", "the other side says this daemon's certificate expired"},
      {"alert unknown ca",
       "the other side does not know this daemon's CA (its tls.ca lacks our CA)"},
      {"alert bad certificate", "the other side refused this daemon's certificate"},
      {"alert unsupported certificate",
       "the other side refused this daemon's certificate for its key usage"},
  };
  for (const auto& [words, meaning] : kMeanings) {
    if (absl::StrContains(message, words)) {
      return absl::StrCat("TLS handshake failed: ", meaning, " [", words, "]");
    }
  }
  return absl::StrCat("TLS handshake failed: ", message);
}

namespace {

std::atomic<RefusalLog*> g_refusals{nullptr};

void GrpcLog(gpr_log_func_args* args) {
  absl::string_view message = args->message != nullptr ? args->message : "";
  RefusalLog* refusals = g_refusals.load();
  if (absl::StrContains(message, "Handshake failed with fatal error")) {
    if (refusals == nullptr) return;  // a client reports its own failed dial, better
    // "Handshake failed with fatal error SSL_ERROR_SSL: error:0A00010B:SSL routines::wrong
    // version number." -> the words after the last colon.
    absl::string_view reason = message.substr(message.rfind(':') + 1);
    while (!reason.empty() && (reason.front() == ' ')) reason.remove_prefix(1);
    if (!reason.empty() && reason.back() == '.') reason.remove_suffix(1);
    refusals->Note("", ExplainHandshakeFailure(reason));
    return;
  }
  switch (args->severity) {
    case GPR_LOG_SEVERITY_DEBUG:
      PODPROF_LOG(DEBUG) << "grpc: " << message;
      break;
    case GPR_LOG_SEVERITY_INFO:
      PODPROF_LOG(INFO) << "grpc: " << message;
      break;
    default:
      PODPROF_LOG(ERROR) << "grpc: " << message;
      break;
  }
}

}  // namespace

void RouteGrpcLogs(RefusalLog* refusals) {
  g_refusals.store(refusals);
  gpr_set_log_function(GrpcLog);
}

}  // namespace podprof::security
