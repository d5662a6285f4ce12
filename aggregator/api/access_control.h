// Who may do what on the aggregator beyond passing the TLS handshake: the roles both APIs check
// (the gRPC handlers, service.h, and the HTTP routes, http_api.h), and the holder through which
// a reload replaces them whole.
#ifndef PODPROF_AGGREGATOR_API_ACCESS_CONTROL_H_
#define PODPROF_AGGREGATOR_API_ACCESS_CONTROL_H_

#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "security/tls.h"

namespace podprof::aggregator {

// By default each role is held only by certificates carrying its role URI (security::RoleAcl).
struct AccessControl {
  // Register, Heartbeat, ReportTelemetry.
  security::RoleAcl agents{security::kAgentRole, {}, "tls.allowed_agents", false};
  // StartCapture, CancelCapture, ImportXSpace (and the HTTP API's writes).
  security::RoleAcl operators{security::kOperatorRole, {}, "tls.allowed_operators", false};
};

// The rules in force, shared by both APIs and replaced whole on a reload (tls.allowed_agents,
// tls.allowed_operators). A call checks the rules it started with: Get's answer stays valid
// however often Set runs after it. Thread-safe.
class AccessRules {
 public:
  explicit AccessRules(AccessControl initial = {})
      : current_(std::make_shared<const AccessControl>(std::move(initial))) {}
  AccessRules(const AccessRules&) = delete;
  AccessRules& operator=(const AccessRules&) = delete;

  // The rules now; never null.
  std::shared_ptr<const AccessControl> Get() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return current_;
  }
  // Replaces the rules; calls already checked keep their answer.
  void Set(AccessControl access) ABSL_LOCKS_EXCLUDED(mu_) {
    auto fresh = std::make_shared<const AccessControl>(std::move(access));
    absl::MutexLock lock(&mu_);
    current_ = std::move(fresh);
  }

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const AccessControl> current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_API_ACCESS_CONTROL_H_
