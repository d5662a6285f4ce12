#include "common/errno_status.h"

#include <string.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace podprof {
namespace {

// strerror_r comes in two flavours depending on feature macros: the GNU one
// returns the text (possibly not in `buf`), the XSI one fills `buf` and
// returns an int. Overloading on the result type handles both without
// preprocessor guesses; strerror() itself is not thread-safe.
[[maybe_unused]] const char* StrerrorResult(const char* gnu_result, const char* /*buf*/) {
  return gnu_result;
}
[[maybe_unused]] const char* StrerrorResult(int xsi_result, const char* buf) {
  return xsi_result == 0 ? buf : "Unknown error";
}

absl::StatusCode CodeForErrno(int err) {
  switch (err) {
    case ENOENT:
      return absl::StatusCode::kNotFound;
    case EACCES:
    case EPERM:
      return absl::StatusCode::kPermissionDenied;
    case ENOSPC:
    case EDQUOT:
      return absl::StatusCode::kResourceExhausted;
    case EEXIST:
      return absl::StatusCode::kAlreadyExists;
    case EINVAL:
      return absl::StatusCode::kInvalidArgument;
    case EAGAIN:
#if EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
    case EINTR:
    case ECONNREFUSED:
      return absl::StatusCode::kUnavailable;
    case ETIMEDOUT:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status ErrnoToStatus(int err, absl::string_view context) {
  char buf[256];
  const char* text =
      err == 0 ? "no error recorded" : StrerrorResult(strerror_r(err, buf, sizeof(buf)), buf);
  std::string message = absl::StrCat(text, " (errno ", err, ")");
  if (!context.empty()) message = absl::StrCat(context, ": ", message);
  return absl::Status(CodeForErrno(err), message);
}

}  // namespace podprof
