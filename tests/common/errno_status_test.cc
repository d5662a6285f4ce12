#include "common/errno_status.h"

#include <cerrno>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace podprof {
namespace {

TEST(ErrnoToStatusTest, MapsCodes) {
  struct Case {
    int err;
    absl::StatusCode code;
  };
  const Case kCases[] = {
      {ENOENT, absl::StatusCode::kNotFound},
      {EACCES, absl::StatusCode::kPermissionDenied},
      {EPERM, absl::StatusCode::kPermissionDenied},
      {ENOSPC, absl::StatusCode::kResourceExhausted},
      {EDQUOT, absl::StatusCode::kResourceExhausted},
      {EEXIST, absl::StatusCode::kAlreadyExists},
      {EINVAL, absl::StatusCode::kInvalidArgument},
      {EAGAIN, absl::StatusCode::kUnavailable},
      {EINTR, absl::StatusCode::kUnavailable},
      {ECONNREFUSED, absl::StatusCode::kUnavailable},
      {ETIMEDOUT, absl::StatusCode::kDeadlineExceeded},
      {EIO, absl::StatusCode::kInternal},
      {0, absl::StatusCode::kInternal},
  };
  for (const Case& c : kCases) {
    EXPECT_EQ(ErrnoToStatus(c.err, "op").code(), c.code) << c.err;
  }
}

TEST(ErrnoToStatusTest, MessageHasContextTextAndNumber) {
  EXPECT_EQ(ErrnoToStatus(ENOENT, "open /etc/x.toml").message(),
            "open /etc/x.toml: No such file or directory (errno 2)");
  EXPECT_EQ(ErrnoToStatus(EACCES, "").message(), "Permission denied (errno 13)");
}

}  // namespace
}  // namespace podprof
