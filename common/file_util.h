// Whole-file reads: the one place podprof turns a path into its bytes.
#ifndef PODPROF_COMMON_FILE_UTIL_H_
#define PODPROF_COMMON_FILE_UTIL_H_

#include <string>

#include "absl/status/statusor.h"

namespace podprof {

// Returns the bytes of the file at `path`, read to its end (so files whose size the kernel
// does not know, as under /proc, read whole too). Errors come from ErrnoToStatus (NotFound,
// PermissionDenied, ...) and name the path and the OS error, e.g.
//   read /etc/podprof/agent.toml: No such file or directory (errno 2)
// Thread-safe.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Where systemd put credential `name` for this unit (LoadCredential=): the file `name` in
// $CREDENTIALS_DIRECTORY, or "" outside a unit that has credentials.
std::string CredentialPath(const std::string& name);

}  // namespace podprof

#endif  // PODPROF_COMMON_FILE_UTIL_H_
