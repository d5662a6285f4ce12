#include "common/clock_probe.h"

#include <netdb.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace podprof {
namespace {

constexpr char kMagic[4] = {'P', 'P', 'C', 'P'};
constexpr uint8_t kVersion = 1;
constexpr uint8_t kProbe = 1, kAnswer = 2;

void PutI64(char* p, int64_t v) {
  uint64_t u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(u >> (8 * i));
}

int64_t GetI64(const char* p) {
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u |= uint64_t{static_cast<uint8_t>(p[i])} << (8 * i);
  return static_cast<int64_t>(u);
}

// How long ago the kernel received the datagram whose control messages `msg` carries, or 0
// when it attached no timestamp. Both readings are CLOCK_REALTIME, the clock the kernel stamps
// with; only their difference is used, and the caller subtracts it from its own Clock, which
// may be a simulated one. This is the one other place that reads an OS clock (see RealClock).
int64_t KernelAgeNs(msghdr* msg) {
  for (cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr; c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS) continue;
    timespec ts, now;
    std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
    clock_gettime(CLOCK_REALTIME, &now);
    const int64_t age =
        (int64_t{now.tv_sec} - ts.tv_sec) * 1'000'000'000 + (int64_t{now.tv_nsec} - ts.tv_nsec);
    // A timestamp from the future or from long ago means the system clock was stepped in
    // between; then the reader's own time is the better guess.
    return age >= 0 && age < 1'000'000'000 ? age : 0;
  }
  return 0;
}

// Receives one datagram into `buf`; returns its size and sets `*age_ns`, or -1 with errno.
ssize_t Receive(int fd, char* buf, size_t size, sockaddr_storage* from, socklen_t* from_len,
                int64_t* age_ns) {
  iovec iov{buf, size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec)) * 2];
  msghdr msg{};
  msg.msg_name = from;
  msg.msg_namelen = from != nullptr ? sizeof(*from) : 0;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);
  if (n < 0) return n;
  if (from_len != nullptr) *from_len = msg.msg_namelen;
  *age_ns = KernelAgeNs(&msg);
  return n;
}

absl::StatusOr<addrinfo*> Resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  std::string name = host;
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);  // "[::1]" as gRPC addresses spell IPv6
  }
  const bool any = host.empty() || host == "0.0.0.0" || name == "::";
  int rc = getaddrinfo(any ? nullptr : name.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", host, ":", port, ": ", gai_strerror(rc)));
  }
  return res;
}

int TimestampedSocket(int family) {
  int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fd;
  int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));  // best effort: see KernelAgeNs
  return fd;
}

// A timestamped UDP socket bound to `host`:`port`; returns it and its bound port.
absl::StatusOr<std::pair<int, int>> BindProbeSocket(const std::string& host, int port) {
  absl::StatusOr<addrinfo*> res = Resolve(host, port, /*passive=*/true);
  if (!res.ok()) return res.status();
  int fd = -1, err = 0;
  for (addrinfo* a = *res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = TimestampedSocket(a->ai_family);
    if (fd >= 0 && bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      err = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(*res);
  if (fd < 0)
    return ErrnoToStatus(err, absl::StrCat("bind clock probe port udp ", host, ":", port));
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return std::make_pair(fd, bound_port);
}

// Reads one datagram from `fd` and, when it is a probe, answers it on `clock`. Returns false
// when there was nothing to read, true otherwise (answered or dropped).
bool AnswerOneProbe(int fd, Clock& clock, std::atomic<uint64_t>* answered) {
  char buf[64];
  sockaddr_storage from{};
  socklen_t from_len = 0;
  int64_t age = 0;
  ssize_t n = Receive(fd, buf, sizeof(buf), &from, &from_len, &age);
  if (n < 0) return false;
  const int64_t t2 = clock.NowNs() - age;
  uint8_t kind = 0;
  ProbeTimes t;
  if (!DecodeClockProbe(buf, static_cast<size_t>(n), &kind, &t) || kind != kProbe) return true;
  std::string answer = EncodeClockProbe(kAnswer, t.t1, t2, 0);
  // t3 as late as possible: the bound is the round trip minus the time spent here.
  PutI64(&answer[24], clock.NowNs());
  // Counted before sending, so a prober that has its answer also sees it counted.
  answered->fetch_add(1, std::memory_order_relaxed);
  sendto(fd, answer.data(), answer.size(), 0, reinterpret_cast<sockaddr*>(&from), from_len);
  return true;
}

}  // namespace

std::string EncodeClockProbe(uint8_t kind, int64_t t1, int64_t t2, int64_t t3) {
  std::string out(kClockProbeSize, '\0');
  std::memcpy(out.data(), kMagic, 4);
  out[4] = static_cast<char>(kVersion);
  out[5] = static_cast<char>(kind);
  PutI64(&out[8], t1);
  PutI64(&out[16], t2);
  PutI64(&out[24], t3);
  return out;
}

bool DecodeClockProbe(const char* data, size_t size, uint8_t* kind, ProbeTimes* times) {
  if (size != kClockProbeSize || std::memcmp(data, kMagic, 4) != 0 ||
      static_cast<uint8_t>(data[4]) != kVersion) {
    return false;
  }
  *kind = static_cast<uint8_t>(data[5]);
  if (*kind != kProbe && *kind != kAnswer) return false;
  times->t1 = GetI64(data + 8);
  times->t2 = GetI64(data + 16);
  times->t3 = GetI64(data + 24);
  return true;
}

absl::StatusOr<std::unique_ptr<ClockProbeResponder>> ClockProbeResponder::Start(
    const std::string& host, int port, Clock& clock) {
  absl::StatusOr<std::pair<int, int>> bound = BindProbeSocket(host, port);
  if (!bound.ok()) return bound.status();
  int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) {
    const int err = errno;
    close(bound->first);
    return ErrnoToStatus(err, "eventfd for the clock probe responder");
  }
  return std::unique_ptr<ClockProbeResponder>(
      new ClockProbeResponder(bound->first, stop_fd, bound->second, clock));
}

ClockProbeResponder::ClockProbeResponder(int fd, int stop_fd, int port, Clock& clock)
    : fd_(fd), stop_fd_(stop_fd), port_(port), clock_(clock) {
  thread_ = std::thread([this] { Loop(); });
}

ClockProbeResponder::~ClockProbeResponder() {
  uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof(one)) < 0) {
    // The eventfd cannot be full after one write; nothing else can go wrong here.
  }
  thread_.join();
  close(fd_);
  close(stop_fd_);
}

void ClockProbeResponder::Loop() {
  while (true) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    AnswerOneProbe(fd_, clock_, &answered_);
  }
}

absl::StatusOr<std::unique_ptr<MultiClockProbeResponder>> MultiClockProbeResponder::Start(
    const std::vector<Endpoint>& endpoints, bool fallback_to_free_port) {
  std::vector<int> fds, ports;
  std::vector<Clock*> clocks;
  auto close_all = [&fds] {
    for (int fd : fds) close(fd);
  };
  for (const Endpoint& e : endpoints) {
    absl::StatusOr<std::pair<int, int>> bound = BindProbeSocket(e.host, e.port);
    if (!bound.ok() && fallback_to_free_port && e.port != 0) bound = BindProbeSocket(e.host, 0);
    if (!bound.ok()) {
      close_all();
      return bound.status();
    }
    fds.push_back(bound->first);
    ports.push_back(bound->second);
    clocks.push_back(e.clock);
  }
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  const int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd < 0 || stop_fd < 0) {
    const int err = errno;
    close_all();
    if (epoll_fd >= 0) close(epoll_fd);
    if (stop_fd >= 0) close(stop_fd);
    return ErrnoToStatus(err, "epoll for the clock probe responder");
  }
  // The event's data is the socket's index; the stop eventfd is the one past the last.
  for (size_t i = 0; i <= fds.size(); ++i) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, i < fds.size() ? fds[i] : stop_fd, &ev) != 0) {
      const int err = errno;
      close_all();
      close(epoll_fd);
      close(stop_fd);
      return ErrnoToStatus(err, "epoll_ctl for the clock probe responder");
    }
  }
  return std::unique_ptr<MultiClockProbeResponder>(new MultiClockProbeResponder(
      epoll_fd, stop_fd, std::move(fds), std::move(clocks), std::move(ports)));
}

MultiClockProbeResponder::MultiClockProbeResponder(int epoll_fd, int stop_fd, std::vector<int> fds,
                                                   std::vector<Clock*> clocks,
                                                   std::vector<int> ports)
    : epoll_fd_(epoll_fd),
      stop_fd_(stop_fd),
      fds_(std::move(fds)),
      clocks_(std::move(clocks)),
      ports_(std::move(ports)) {
  thread_ = std::thread([this] { Loop(); });
}

MultiClockProbeResponder::~MultiClockProbeResponder() {
  uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof(one)) < 0) {
    // The eventfd cannot be full after one write; nothing else can go wrong here.
  }
  thread_.join();
  for (int fd : fds_) close(fd);
  close(epoll_fd_);
  close(stop_fd_);
}

void MultiClockProbeResponder::Loop() {
  epoll_event events[64];
  while (true) {
    const int n = epoll_wait(epoll_fd_, events, 64, -1);
    if (n < 0 && errno != EINTR) return;
    for (int i = 0; i < n; ++i) {
      const size_t index = events[i].data.u64;
      if (index >= fds_.size()) return;
      // Level-triggered: one datagram per wake-up keeps a flooded socket from starving the
      // others, and the rest are reported again at once.
      AnswerOneProbe(fds_[index], *clocks_[index], &answered_);
    }
  }
}

absl::StatusOr<std::vector<ProbeTimes>> ProbeClock(const std::string& host, int port, int count,
                                                   int64_t timeout_ns, Clock& clock) {
  absl::StatusOr<addrinfo*> res = Resolve(host, port, /*passive=*/false);
  if (!res.ok()) return res.status();
  int fd = -1, err = 0;
  for (addrinfo* a = *res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = TimestampedSocket(a->ai_family);
    // Connected, so the kernel delivers only the agent's answers (and its ICMP refusals).
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      err = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(*res);
  if (fd < 0) return ErrnoToStatus(err, absl::StrCat("clock probe socket to ", host, ":", port));
  std::vector<ProbeTimes> out;
  char buf[64];
  bool refused = false;
  for (int i = 0; i < count && !refused; ++i) {
    const int64_t t1 = clock.NowNs();
    std::string probe = EncodeClockProbe(kProbe, t1, 0, 0);
    if (send(fd, probe.data(), probe.size(), 0) < 0) break;
    const int64_t give_up = clock.MonotonicNs() + timeout_ns;
    while (true) {
      const int64_t left = give_up - clock.MonotonicNs();
      if (left <= 0) break;
      pollfd p{fd, POLLIN, 0};
      int ready = poll(&p, 1, static_cast<int>((left + 999'999) / 1'000'000));
      if (ready <= 0) {
        if (ready < 0 && errno == EINTR) continue;
        break;
      }
      int64_t age = 0;
      ssize_t n = Receive(fd, buf, sizeof(buf), nullptr, nullptr, &age);
      const int64_t t4 = clock.NowNs() - age;
      if (n < 0) {
        refused = errno == ECONNREFUSED;  // nothing listens there: stop the burst
        if (refused || (errno != EAGAIN && errno != EINTR)) break;
        continue;
      }
      uint8_t kind = 0;
      ProbeTimes t;
      // An answer to an earlier probe that timed out is stale: keep waiting for this one.
      if (!DecodeClockProbe(buf, static_cast<size_t>(n), &kind, &t) || kind != kAnswer ||
          t.t1 != t1) {
        continue;
      }
      t.t4 = t4;
      out.push_back(t);
      break;
    }
  }
  close(fd);
  return out;
}

}  // namespace podprof
