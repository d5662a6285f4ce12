// podprof-fault-proxy: a bad network link on loopback, for tests on machines without network
// namespaces or the netem qdisc. Forwards TCP and UDP arriving on one port number to a target
// port, with a delay each way, jitter, loss and cuts read from a control file the test
// rewrites while it runs.
//
//   podprof-fault-proxy --control FILE --ready-file FILE
//
// The control file holds `target_port delay_us jitter_us loss_percent cut` (cut 0 or 1),
// re-read every 20 ms, each new setting copied to FILE.applied once in force; until it names a
// target, connections are refused and datagrams dropped. UDP
// datagrams are dropped with the loss probability. TCP cannot lose bytes above the transport, so
// loss there is what a lossy link does to a TCP stream: a chunk held back for a retransmission
// timeout (200 ms). While cut, nothing is forwarded either way; TCP data waits, UDP datagrams are
// dropped. The ready file gets {"port": P}.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Link {
  std::atomic<int> target_port{0};
  std::atomic<int64_t> delay_us{0}, jitter_us{0};
  std::atomic<double> loss{0};
  std::atomic<bool> cut{false};
};

Link g_link;
std::mutex g_rng_mu;
std::mt19937_64 g_rng(42);

// One way's delay, with jitter, and whether this packet is "lost".
std::pair<Clock::duration, bool> Draw() {
  std::lock_guard<std::mutex> l(g_rng_mu);
  int64_t us = g_link.delay_us;
  const int64_t j = g_link.jitter_us;
  if (j > 0) us += std::uniform_int_distribution<int64_t>(-j, j)(g_rng);
  const bool lost = std::uniform_real_distribution<double>(0, 1)(g_rng) < g_link.loss;
  return {std::chrono::microseconds(std::max<int64_t>(us, 0)), lost};
}

// Rereads the control file every 20 ms. Each new setting, once in force, is copied to
// FILE.applied, so that a test waits for the link it asked for instead of for the poll.
void WatchControl(const std::string& path) {
  std::string applied;
  while (true) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    std::istringstream fields(line);
    int64_t delay = 0, jitter = 0, cut = 0;
    int target = 0;
    double loss = 0;
    if (line != applied && fields >> target >> delay >> jitter >> loss >> cut) {
      g_link.target_port = target;
      g_link.delay_us = delay;
      g_link.jitter_us = jitter;
      g_link.loss = loss / 100.0;
      g_link.cut = cut != 0;
      applied = line;
      std::ofstream(path + ".applied.tmp") << line << "\n";
      std::rename((path + ".applied.tmp").c_str(), (path + ".applied").c_str());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// One direction of a TCP connection: reads as it comes, writes each chunk once its delivery
// time has come, in order (a later chunk never overtakes an earlier one, as in TCP).
void Pump(int from, int to) {
  struct Chunk {
    Clock::time_point due;
    std::string bytes;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Chunk> queue;
  bool eof = false;
  std::thread writer([&] {
    std::unique_lock<std::mutex> l(mu);
    while (true) {
      cv.wait(l, [&] { return eof || !queue.empty(); });
      if (queue.empty()) break;
      Chunk c = std::move(queue.front());
      queue.pop_front();
      l.unlock();
      std::this_thread::sleep_until(c.due);
      while (g_link.cut) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      size_t off = 0;
      while (off < c.bytes.size()) {
        ssize_t n = send(to, c.bytes.data() + off, c.bytes.size() - off, MSG_NOSIGNAL);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      l.lock();
      if (off < c.bytes.size()) break;
    }
    shutdown(to, SHUT_WR);
  });
  Clock::time_point last_due{};
  char buf[65536];
  while (true) {
    ssize_t n = recv(from, buf, sizeof(buf), 0);
    if (n <= 0) break;
    auto [delay, lost] = Draw();
    Clock::time_point due = Clock::now() + delay;
    if (lost) due += std::chrono::milliseconds(200);
    due = std::max(due, last_due);
    last_due = due;
    std::lock_guard<std::mutex> l(mu);
    queue.push_back({due, std::string(buf, static_cast<size_t>(n))});
    cv.notify_one();
  }
  {
    std::lock_guard<std::mutex> l(mu);
    eof = true;
    cv.notify_one();
  }
  writer.join();
}

void ServeTcp(int listener) {
  while (true) {
    int client = accept(listener, nullptr, nullptr);
    if (client < 0) continue;
    std::thread([client] {
      int upstream = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in t = Loopback(g_link.target_port);
      if (connect(upstream, reinterpret_cast<sockaddr*>(&t), sizeof(t)) != 0) {
        close(client);
        close(upstream);
        return;
      }
      int one = 1;
      setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      std::thread back([&] { Pump(upstream, client); });
      Pump(client, upstream);
      back.join();
      close(client);
      close(upstream);
    }).detach();
  }
}

// UDP: each client address gets its own upstream socket, so answers find their way back.
void ServeUdp(int front) {
  struct Datagram {
    Clock::time_point due;
    int fd;
    sockaddr_in to;
    std::string bytes;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::multimap<Clock::time_point, Datagram> pending;
  auto schedule = [&](int fd, sockaddr_in to, std::string bytes) {
    auto [delay, lost] = Draw();
    if (lost || g_link.cut) return;
    std::lock_guard<std::mutex> l(mu);
    Clock::time_point due = Clock::now() + delay;
    pending.emplace(due, Datagram{due, fd, to, std::move(bytes)});
    cv.notify_one();
  };
  std::thread sender([&] {
    std::unique_lock<std::mutex> l(mu);
    while (true) {
      if (pending.empty()) {
        cv.wait(l);
        continue;
      }
      auto first = pending.begin();
      if (Clock::now() < first->first) {
        cv.wait_until(l, first->first);
        continue;
      }
      Datagram d = std::move(first->second);
      pending.erase(first);
      l.unlock();
      sendto(d.fd, d.bytes.data(), d.bytes.size(), 0, reinterpret_cast<sockaddr*>(&d.to),
             sizeof(d.to));
      l.lock();
    }
  });
  std::map<std::pair<uint32_t, uint16_t>, int> upstream;  // client -> socket
  std::map<int, sockaddr_in> client_of;
  char buf[2048];
  while (true) {
    std::vector<pollfd> fds = {{front, POLLIN, 0}};
    for (const auto& [fd, c] : client_of) fds.push_back({fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), 1000) <= 0) continue;
    for (const pollfd& p : fds) {
      if (!(p.revents & POLLIN)) continue;
      sockaddr_in from{};
      socklen_t len = sizeof(from);
      ssize_t n = recvfrom(p.fd, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &len);
      if (n < 0) continue;
      if (p.fd == front) {
        auto key = std::make_pair(from.sin_addr.s_addr, from.sin_port);
        auto it = upstream.find(key);
        if (it == upstream.end()) {
          int fd = socket(AF_INET, SOCK_DGRAM, 0);
          it = upstream.emplace(key, fd).first;
          client_of[fd] = from;
        }
        if (g_link.target_port == 0) continue;
        schedule(it->second, Loopback(g_link.target_port),
                 std::string(buf, static_cast<size_t>(n)));
      } else {
        // An answer from the target goes back out of the front socket to its client.
        schedule(front, client_of[p.fd], std::string(buf, static_cast<size_t>(n)));
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string control, ready;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    const std::string key = a.substr(0, eq);
    std::string value;
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    }
    if (key == "--control") control = value;
    if (key == "--ready-file") ready = value;
  }
  if (control.empty() || ready.empty()) {
    std::fprintf(stderr, "usage: podprof-fault-proxy --control FILE --ready-file FILE\n");
    return 2;
  }
  // One port number for both protocols, as the agent's clock probes expect.
  int tcp = -1, udp = -1, port = 0;
  for (int attempt = 0; attempt < 50 && udp < 0; ++attempt) {
    if (tcp >= 0) close(tcp);
    tcp = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a = Loopback(0);
    if (bind(tcp, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) continue;
    socklen_t len = sizeof(a);
    getsockname(tcp, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in b = Loopback(port);
    if (bind(u, reinterpret_cast<sockaddr*>(&b), sizeof(b)) == 0) {
      udp = u;
    } else {
      close(u);
    }
  }
  if (udp < 0 || listen(tcp, 64) != 0) {
    std::perror("podprof-fault-proxy: bind");
    return 1;
  }
  std::thread(WatchControl, control).detach();
  std::thread(ServeUdp, udp).detach();
  {
    std::ofstream out(ready + ".tmp");
    out << "{\"port\": " << port << "}\n";
  }
  std::rename((ready + ".tmp").c_str(), ready.c_str());
  ServeTcp(tcp);
  return 0;
}
