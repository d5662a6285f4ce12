// Conversion of errno values into absl::Status.
//
// This is the one place in podprof where an errno becomes a Status: code
// that calls the OS captures errno right after the failing call and passes
// it here, so that every OS error reads the same and carries a code that
// callers can branch on.

#ifndef PODPROF_COMMON_ERRNO_STATUS_H_
#define PODPROF_COMMON_ERRNO_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace podprof {

// Returns a non-OK status for the errno value `err`, with the message
// "<context>: <strerror text> (errno N)" (just "<strerror text> (errno N)"
// when `context` is empty). `context` should say what was being attempted
// and on what, e.g. "open /etc/podprof/agent.toml".
//
// Codes: ENOENT -> NotFound; EACCES, EPERM -> PermissionDenied; ENOSPC,
// EDQUOT -> ResourceExhausted; EEXIST -> AlreadyExists; EINVAL ->
// InvalidArgument; EAGAIN, EINTR, ECONNREFUSED -> Unavailable; ETIMEDOUT ->
// DeadlineExceeded; anything else, including 0, -> Internal. Never returns
// OK: callers only ask after a call has failed. Thread-safe.
absl::Status ErrnoToStatus(int err, absl::string_view context);

}  // namespace podprof

#endif  // PODPROF_COMMON_ERRNO_STATUS_H_
