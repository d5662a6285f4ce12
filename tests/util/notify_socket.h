// Reads sd_notify datagrams on a real unix socket, for the daemons' lifecycle tests.
#ifndef PODPROF_TESTS_UTIL_NOTIFY_SOCKET_H_
#define PODPROF_TESTS_UTIL_NOTIFY_SOCKET_H_

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"

namespace podprof::testing {

class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    unlink(path.c_str());
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    timeval tv = {0, 200'000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~NotifySocket() {
    close(fd_);
    unlink(path_.c_str());
  }
  // The messages that arrive within the next `ms` milliseconds (also kept for ReadUntil).
  std::vector<std::string> ReadFor(int ms) {
    std::vector<std::string> got;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
      char buf[4096];
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) continue;
      all_.emplace_back(buf, n);
      got.push_back(all_.back());
    }
    return got;
  }
  // Messages received until `want` shows up in one (or 10 s pass).
  std::vector<std::string> ReadUntil(const std::string& want) {
    for (int i = 0; i < 50; ++i) {
      char buf[4096];
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) continue;
      all_.emplace_back(buf, n);
      if (absl::StrContains(all_.back(), want)) break;
    }
    return all_;
  }

 private:
  std::string path_;
  int fd_;
  std::vector<std::string> all_;
};

}  // namespace podprof::testing

#endif  // PODPROF_TESTS_UTIL_NOTIFY_SOCKET_H_
