// What the XProf facade (ProfilerProxy) lets a caller ask of the workload. On loopback the
// facade is plaintext with no authentication, so every local user can call it; these checks are
// what keep such a caller from running a session of any length, from making the workload (which
// often runs with more rights than the caller) write anywhere, and from ending podprof's own
// captures. The rules:
//
// - A session lasts at least 1 ms and at most limits.max_capture_duration; it may start at most
//   that far in the future.
// - It is written under `<spool>/xprof` (the spool is the agent's temp_dir, else $TMPDIR, else
//   /tmp) or under one of [xprof] allowed_roots: the session directory
//   (`<repository_root>/<session_id>`, and opts.repository_path when set) must resolve inside one
//   after lexical normalisation and after following the symbolic links that exist now
//   (weakly_canonical). An empty repository_root means `<spool>/xprof`. Session ids must be one
//   path component, host names (the output file's name) must hold no '/'.
//
// The check is of the path as it resolves when the call arrives: someone who can write inside an
// allowed root can still swap a directory for a link before the workload writes. Allowed roots
// must therefore be writable only by users trusted with what the workload may write.
#ifndef PODPROF_AGENT_XPROF_BOUNDS_H_
#define PODPROF_AGENT_XPROF_BOUNDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/profiler_service.pb.h"

namespace podprof::agent {

// The limits as the agent's configuration gives them at the time of a call.
struct XprofBounds {
  // limits.max_capture_duration, ns.
  int64_t max_duration_ns = 300'000'000'000;
  // The agent's spool (RunnerLimits::temp_dir); sessions go to `<spool_dir>/xprof` by default.
  std::string spool_dir = "/tmp";
  // [xprof] allowed_roots: more directories sessions may be written under (absolute paths).
  std::vector<std::string> allowed_roots;
};

// `<spool_dir>/xprof`: where an XProf session without a repository_root is written.
std::string XprofSpoolRoot(const std::string& spool_dir);

// OK when `duration_ms` is at most max_duration_ns (compared as ms, so no product overflows);
// otherwise INVALID_ARGUMENT naming `field` and the limit. Zero passes: callers that need a
// length check that themselves.
absl::Status CheckXprofDuration(uint64_t duration_ms, const XprofBounds& bounds,
                                const std::string& field);

// Checks a Profile request against `bounds` at agent time `now_ns` and rewrites an empty
// repository_root to XprofSpoolRoot(bounds.spool_dir). OK, or INVALID_ARGUMENT naming the field,
// the value and the limit (for a path: the allowed roots).
absl::Status BoundProfileRequest(const XprofBounds& bounds, int64_t now_ns,
                                 tensorflow::ProfileRequest* request);

// OK when `path` (absolute) resolves inside one of the allowed roots of `bounds`; otherwise
// INVALID_ARGUMENT naming `field`, the path and the roots.
absl::Status CheckInsideXprofRoots(const XprofBounds& bounds, const std::string& field,
                                   const std::string& path);

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_XPROF_BOUNDS_H_
