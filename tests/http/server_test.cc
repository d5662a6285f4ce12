// The HTTP server over real loopback sockets: routes and their parameters, limits, and HTTPS
// with client certificates whose names reach the handler.
#include "http/server.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "tests/util/curl.h"
#include "tests/util/files.h"

namespace podprof::http {
namespace {

using testing::Curl;

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
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string base = absl::StrCat("http://127.0.0.1:", (*server)->port());
  testing::CurlResult g = Curl("'" + base + "/api/v1/captures/cap%201/kernels?by=chip&x=1'");
  EXPECT_EQ(g.status, 200);
  EXPECT_EQ(g.body, "cap 1 by=chip who=-");
  g = Curl(base + "/missing");
  EXPECT_EQ(g.status, 404);
  EXPECT_EQ(g.body, "{\"error\": \"no capture \\\"x\\\"\"}\n");
  EXPECT_EQ(Curl(base + "/nothing/here").status, 404);
  EXPECT_EQ(Curl("-X DELETE " + base + "/echo").status, 405);
  EXPECT_EQ(Curl("--data-binary hello " + base + "/echo").body, "hello");
  const std::string big = ::testing::TempDir() + "/http_test_big";
  { std::ofstream(big) << std::string(5000, 'x'); }
  EXPECT_EQ(Curl("--data-binary @" + big + " " + base + "/echo").status, 413);
}

// Text bodies go gzip-compressed to a client that accepts it, and as they are otherwise.
TEST(HttpServerTest, TextIsCompressedForClientsThatAcceptGzip) {
  RealClock clock;
  ServerOptions o;
  o.max_request_bytes = 1 << 20;
  auto server = Server::Start(o, TestRouter(), clock);
  ASSERT_TRUE(server.ok());
  const std::string url = absl::StrCat("http://127.0.0.1:", (*server)->port(), "/echo");
  const std::string body = ::testing::TempDir() + "/http_test_body";
  std::string text;
  for (int i = 0; i < 2000; ++i) absl::StrAppend(&text, i, ",");
  { std::ofstream(body) << text; }
  const std::string headers = ::testing::TempDir() + "/http_test_headers";
  // --compressed: curl asks for gzip and decompresses; the headers say what travelled.
  testing::CurlResult gz =
      Curl("--compressed -D " + headers + " --data-binary @" + body + " " + url);
  EXPECT_EQ(gz.body, text);
  EXPECT_TRUE(absl::StrContains(testing::ReadTestFile(headers), "Content-Encoding: gzip"));
  testing::CurlResult plain = Curl("-D " + headers + " --data-binary @" + body + " " + url);
  EXPECT_EQ(plain.body, text);
  EXPECT_FALSE(absl::StrContains(testing::ReadTestFile(headers), "Content-Encoding"));
}

TEST(HttpServerTest, ClientsOverTheirRateAreToldToWait) {
  RealClock clock;
  ServerOptions o;
  o.max_requests_per_second = 5;  // a burst of 10
  auto server = Server::Start(o, TestRouter(), clock);
  ASSERT_TRUE(server.ok());
  const std::string url = absl::StrCat("http://127.0.0.1:", (*server)->port(), "/missing");
  int refused = 0;
  for (int i = 0; i < 30; ++i) refused += Curl(url).status == 429 ? 1 : 0;
  EXPECT_GT(refused, 10);
}

TEST(HttpServerTest, AnAddressInUseIsNamed) {
  RealClock clock;
  auto first = Server::Start({}, TestRouter(), clock);
  ASSERT_TRUE(first.ok());
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
  ASSERT_TRUE(server.ok());
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
  ASSERT_TRUE(server.ok()) << server.status();
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

}  // namespace
}  // namespace podprof::http
