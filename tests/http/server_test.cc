// The HTTP server over real loopback sockets: routes and their parameters, limits, and HTTPS
// with client certificates whose names reach the handler.
#include "http/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "tests/util/curl.h"
#include "tests/util/files.h"
#include "tests/util/status_matchers.h"

namespace podprof::http {
namespace {

using testing::Curl;

// Writes say what they send (http/guard.h refuses any other POST).
const std::string kJson = "-H 'Content-Type: application/json' ";

std::shared_ptr<Router> TestRouter() {
  auto r = std::make_shared<Router>();
  r->Add("GET", "/api/v1/captures/{id}/kernels", [](const Request& q) {
    return Response::Text(
        200, absl::StrCat(q.params.at("id"), " by=", q.query.count("by") ? q.query.at("by") : "-",
                          " who=", q.identities.empty() ? "-" : q.identities[0]));
  });
  r->Add("POST", "/echo", [](const Request& q) { return Response::Text(200, q.body); });
  r->Add("GET", "/missing",
         [](const Request&) { return Response::Error(absl::NotFoundError("no capture \"x\"")); });
  return r;
}

TEST(HttpServerTest, RoutesParametersAndErrors) {
  RealClock clock;
  ServerOptions o;
  o.max_request_bytes = 1024;
  auto server = Server::Start(o, TestRouter(), clock);
  ASSERT_OK(server);
  const std::string base = absl::StrCat("http://127.0.0.1:", (*server)->port());
  testing::CurlResult g = Curl("'" + base + "/api/v1/captures/cap%201/kernels?by=chip&x=1'");
  EXPECT_EQ(g.status, 200);
  EXPECT_EQ(g.body, "cap 1 by=chip who=-");
  g = Curl(base + "/missing");
  EXPECT_EQ(g.status, 404);
  EXPECT_EQ(g.body, "{\"error\": \"no capture \\\"x\\\"\"}\n");
  EXPECT_EQ(Curl(base + "/nothing/here").status, 404);
  EXPECT_EQ(Curl(kJson + "-X DELETE " + base + "/echo").status, 405);
  EXPECT_EQ(Curl(kJson + "--data-binary hello " + base + "/echo").body, "hello");
  const std::string big = ::testing::TempDir() + "/http_test_big";
  { std::ofstream(big) << std::string(5000, 'x'); }
  EXPECT_EQ(Curl(kJson + "--data-binary @" + big + " " + base + "/echo").status, 413);
}

// Issue #54: an exception a handler lets out is the server's last guard's, a 500 naming it,
// not std::terminate (on the old code this test process died at the first request).
TEST(HttpServerTest, AHandlerThatThrowsGetsA500AndTheServerStaysUp) {
  FakeClock clock(1'800'000'000'000'000'000);  // nothing here waits on time
  auto r = TestRouter();
  r->Add("GET", "/throws", [](const Request&) -> Response {
    throw std::runtime_error("type_error.302: type must be string, but is number");
  });
  r->Add("GET", "/throws-int", [](const Request&) -> Response { throw 7; });
  r->Add("GET", "/stream-throws", [](const Request&) {
    Response res;
    res.stream = [](StreamWriter& w) {
      w.Write("data: 1\n\n");
      throw std::runtime_error("a stream's bug");
    };
    return res;
  });
  auto server = Server::Start(ServerOptions(), r, clock);
  ASSERT_OK(server);
  const std::string base = absl::StrCat("http://127.0.0.1:", (*server)->port());
  testing::CurlResult g = Curl(base + "/throws");
  EXPECT_EQ(g.status, 500);
  EXPECT_TRUE(absl::StrContains(g.body, "type_error.302: type must be string")) << g.body;
  g = Curl(base + "/throws-int");
  EXPECT_EQ(g.status, 500);
  EXPECT_TRUE(absl::StrContains(g.body, "not a std::exception")) << g.body;
  Curl(base + "/stream-throws");
  // A path that is not UTF-8 comes back in the error escaped, so the body is still JSON.
  g = Curl(base + "/nothing%FF");
  EXPECT_EQ(g.status, 404);
  EXPECT_TRUE(absl::StrContains(g.body, R"(nothing\\xFF)")) << g.body;
  EXPECT_EQ(Curl(base + "/api/v1/captures/c/kernels").status, 200);  // still serving
}

// Text bodies go gzip-compressed to a client that accepts it, and as they are otherwise.
TEST(HttpServerTest, TextIsCompressedForClientsThatAcceptGzip) {
  RealClock clock;
  ServerOptions o;
  o.max_request_bytes = 1 << 20;
  auto server = Server::Start(o, TestRouter(), clock);
  ASSERT_OK(server);
  const std::string url = absl::StrCat("http://127.0.0.1:", (*server)->port(), "/echo");
  const std::string body = ::testing::TempDir() + "/http_test_body";
  std::string text;
  for (int i = 0; i < 2000; ++i) absl::StrAppend(&text, i, ",");
  { std::ofstream(body) << text; }
  const std::string headers = ::testing::TempDir() + "/http_test_headers";
  // --compressed: curl asks for gzip and decompresses; the headers say what travelled.
  testing::CurlResult gz =
      Curl(kJson + "--compressed -D " + headers + " --data-binary @" + body + " " + url);
  EXPECT_EQ(gz.body, text);
  EXPECT_TRUE(absl::StrContains(testing::ReadTestFile(headers), "Content-Encoding: gzip"));
  testing::CurlResult plain = Curl(kJson + "-D " + headers + " --data-binary @" + body + " " + url);
  EXPECT_EQ(plain.body, text);
  EXPECT_FALSE(absl::StrContains(testing::ReadTestFile(headers), "Content-Encoding"));
}

TEST(HttpServerTest, ClientsOverTheirRateAreToldToWait) {
  RealClock clock;
  ServerOptions o;
  o.max_requests_per_second = 5;  // a burst of 10
  auto server = Server::Start(o, TestRouter(), clock);
  ASSERT_OK(server);
  const std::string url = absl::StrCat("http://127.0.0.1:", (*server)->port(), "/missing");
  int refused = 0;
  for (int i = 0; i < 30; ++i) refused += Curl(url).status == 429 ? 1 : 0;
  EXPECT_GT(refused, 10);
}

TEST(HttpServerTest, AnAddressInUseIsNamed) {
  RealClock clock;
  auto first = Server::Start({}, TestRouter(), clock);
  ASSERT_OK(first);
  ServerOptions o;
  o.listen = absl::StrCat("127.0.0.1:", (*first)->port());
  auto second = Server::Start(o, TestRouter(), clock);
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(absl::StrContains(second.status().message(), o.listen + " (http.listen)"))
      << second.status();
}

// Server-sent events: the headers and each write arrive as they happen; past max_streams a
// client is told to come back; Stop ends the streams and returns.
TEST(HttpServerTest, StreamsArriveLiveAndEndWhenTheServerStops) {
  auto r = std::make_shared<Router>();
  r->Add("GET", "/events", [](const Request&) {
    Response res;
    res.content_type = "text/event-stream";
    res.stream = [](StreamWriter& w) {
      w.Write("event: tick\ndata: 1\n\n");
      while (!w.stopping()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    };
    return res;
  });
  RealClock clock;
  ServerOptions o;
  o.max_streams = 1;
  auto server = Server::Start(o, r, clock);
  ASSERT_OK(server);
  const std::string url = absl::StrCat("http://127.0.0.1:", (*server)->port(), "/events");
  const std::string out = ::testing::TempDir() + "/sse_" + std::to_string(getpid());
  ASSERT_EQ(std::system(("curl -s -N --max-time 20 -D " + out + ".head " + url + " > " + out +
                         " 2>/dev/null &")
                            .c_str()),
            0);
  auto arrived = [&] {
    std::error_code ec;
    return std::filesystem::file_size(out, ec) > 0 && !ec;
  };
  for (int i = 0; i < 100 && !arrived(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(testing::ReadTestFile(out), "event: tick\ndata: 1\n\n");
  EXPECT_TRUE(
      absl::StrContains(testing::ReadTestFile(out + ".head"), "Content-Type: text/event-stream"));
  EXPECT_EQ(Curl(url).status, 503);  // the one stream allowed is taken
  const auto t0 = std::chrono::steady_clock::now();
  (*server)->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

// HTTPS: the daemon's certificate, and only clients with a certificate of its CA, whose names
// reach the handler (for roles).
TEST(HttpServerTest, HttpsAdmitsOnlyTheCasClientsAndNamesThem) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("https_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const std::string make = std::string(PODPROF_SOURCE_DIR) + "/scripts/make-certs.sh --dir " +
                           dir.string() + " --days 2 ";
  for (const char* what :
       {"--ca ca ca", "--ca ca aggregator agg 127.0.0.1", "--ca ca operator ops-alice",
        "--ca other ca", "--ca other operator mallory"}) {
    ASSERT_EQ(std::system((make + what + " >/dev/null 2>&1").c_str()), 0) << what;
  }
  auto f = [&](const std::string& name) { return (dir / name).string(); };
  ServerOptions o;
  o.tls = true;
  o.material = {testing::ReadTestFile(f("agg.crt")),
                testing::ReadTestFile(f("agg.key")),
                testing::ReadTestFile(f("ca.crt")),
                f("agg.crt"),
                f("agg.key"),
                f("ca.crt")};
  RealClock clock;
  auto server = Server::Start(o, TestRouter(), clock);
  ASSERT_OK(server);
  const std::string url =
      absl::StrCat("'https://127.0.0.1:", (*server)->port(), "/api/v1/captures/c1/kernels'");
  const std::string trust = " --cacert " + f("ca.crt") + " ";
  testing::CurlResult alice =
      Curl(trust + "--cert " + f("ops-alice.crt") + " --key " + f("ops-alice.key") + " " + url);
  EXPECT_EQ(alice.status, 200);
  EXPECT_EQ(alice.body, "c1 by=- who=ops-alice");
  EXPECT_NE(Curl(trust + url).status, 200);  // no certificate
  EXPECT_NE(
      Curl(trust + "--cert " + f("mallory.crt") + " --key " + f("mallory.key") + " " + url).status,
      200);                                                                // another CA's
  EXPECT_NE(Curl(url.substr(0, 1) + "http" + url.substr(6)).status, 200);  // plain HTTP
  fs::remove_all(dir);
}

// What a browser on a hostile page can make it send is refused before a handler runs.
TEST(HttpServerTest, TheGuardRefusesRebindingAndCrossSiteWrites) {
  RealClock clock;
  auto server = Server::Start(ServerOptions(), TestRouter(), clock);
  ASSERT_OK(server);
  const std::string base = absl::StrCat("http://127.0.0.1:", (*server)->port());
  EXPECT_EQ(Curl("-H 'Host: evil.example' " + base + "/api/v1/captures/c/kernels").status, 421);
  EXPECT_EQ(Curl("-H 'Host: localhost' " + base + "/api/v1/captures/c/kernels").status, 200);
  EXPECT_EQ(Curl("-H 'Content-Type: text/plain' --data-binary x " + base + "/echo").status, 415);
  EXPECT_EQ(
      Curl(kJson + "-H 'Origin: http://127.0.0.1:1' --data-binary x " + base + "/echo").status,
      403);
  EXPECT_EQ(Curl("-H 'Sec-Fetch-Site: cross-site' -H 'Sec-Fetch-Mode: no-cors' " + base +
                 "/api/v1/captures/c/kernels")
                .status,
            403);
  EXPECT_EQ(Curl(kJson + "-H 'Origin: " + base + "' --data-binary x " + base + "/echo").body, "x");
}

// A TCP connection to 127.0.0.1:`port` from `source` (another loopback address is another
// client); -1 when it cannot connect.
int ConnectFrom(const char* source, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, source, &a.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return close(fd), -1;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return close(fd), -1;
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Sends a GET of `path` on `fd` and reads until the status line is in; the status, or -1.
int SendGet(int fd, const std::string& path) {
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) return -1;
  std::string got;
  char buf[512];
  while (got.find("\r\n") == std::string::npos) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return -1;
    got.append(buf, static_cast<size_t>(n));
  }
  return got.size() > 12 ? std::stoi(got.substr(9, 3)) : -1;
}

// Streams that write forever until their writes fail, counting how many have ended.
std::shared_ptr<Router> StreamingRouter(std::atomic<int>* ended) {
  auto r = std::make_shared<Router>();
  r->Add("GET", "/stream", [ended](const Request&) {
    Response res;
    res.content_type = "application/octet-stream";
    res.stream = [ended](StreamWriter& w) {
      const std::string chunk(64 * 1024, 'x');
      while (!w.stopping() && w.Write(chunk)) {
      }
      ++*ended;
    };
    return res;
  });
  r->Add("GET", "/ping", [](const Request&) { return Response::Text(200, "pong"); });
  return r;
}

// 32 downloads that were never read held every stream slot for good: now a client that stops
// reading loses its stream at the write deadline, and its slot is free again.
TEST(HttpServerTest, AStreamNobodyReadsEndsAtTheWriteDeadline) {
  RealClock clock;
  std::atomic<int> ended{0};
  ServerOptions o;
  o.write_timeout_ns = 300'000'000;
  auto server = Server::Start(o, StreamingRouter(&ended), clock);
  ASSERT_OK(server);
  const int port = (*server)->port();
  const int fd = ConnectFrom("127.0.0.1", port);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(SendGet(fd, "/stream"), 200);  // and then read no more
  const auto start = std::chrono::steady_clock::now();
  while (ended == 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(ended, 1) << "the stream still holds its slot";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  close(fd);
}

// One client's streams are capped, so another client still gets one; and a server with
// streams held open stops promptly.
TEST(HttpServerTest, OneClientCannotTakeEveryStream) {
  RealClock clock;
  std::atomic<int> ended{0};
  ServerOptions o;
  o.max_streams = 4;
  o.max_streams_per_client = 2;
  auto server = Server::Start(o, StreamingRouter(&ended), clock);
  ASSERT_OK(server);
  const int port = (*server)->port();
  std::vector<int> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(ConnectFrom("127.0.0.1", port));
    EXPECT_EQ(SendGet(held.back(), "/stream"), 200);
  }
  held.push_back(ConnectFrom("127.0.0.1", port));
  EXPECT_EQ(SendGet(held.back(), "/stream"), 503);
  held.push_back(ConnectFrom("127.0.0.2", port));  // another client
  EXPECT_EQ(SendGet(held.back(), "/stream"), 200);
  const auto start = std::chrono::steady_clock::now();
  (*server)->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_EQ(ended, 3);
  for (int fd : held) close(fd);
}

// Connections are capped per address: one address opening many cannot lock others out.
TEST(HttpServerTest, ConnectionsPastTheCapOfAnAddressAreClosed) {
  RealClock clock;
  std::atomic<int> ended{0};
  ServerOptions o;
  o.max_connections_per_address = 3;
  auto server = Server::Start(o, StreamingRouter(&ended), clock);
  ASSERT_OK(server);
  const int port = (*server)->port();
  // Three kept-alive connections, each known to be accepted because it was answered.
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(ConnectFrom("127.0.0.1", port));
    ASSERT_EQ(SendGet(idle.back(), "/ping"), 200);
  }
  const int over = ConnectFrom("127.0.0.1", port);
  EXPECT_EQ(SendGet(over, "/ping"), -1);  // closed at once
  close(over);
  const int other = ConnectFrom("127.0.0.2", port);
  EXPECT_EQ(SendGet(other, "/ping"), 200);
  close(other);
  close(idle[0]);
  // A slot freed is a slot again, once the server has seen the close.
  bool served = false;
  for (int i = 0; i < 500 && !served; ++i) {
    const int again = ConnectFrom("127.0.0.1", port);
    served = SendGet(again, "/ping") == 200;
    close(again);
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(served);
  for (size_t i = 1; i < idle.size(); ++i) close(idle[i]);
}

}  // namespace
}  // namespace podprof::http
