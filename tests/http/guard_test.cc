// http/guard.h: what a browser's request may do, decided from the headers it cannot forge.
#include "http/guard.h"

#include "gtest/gtest.h"

namespace podprof::http {
namespace {

Request Get(const std::string& host) {
  Request r;
  r.method = "GET";
  r.path = "/api/v1/captures";
  r.host = host;
  return r;
}

Request Post(const std::string& host, const std::string& type, const std::string& origin = "") {
  Request r = Get(host);
  r.method = "POST";
  r.content_type = type;
  r.origin = origin;
  return r;
}

int StatusOf(const Request& r, const GuardPolicy& p = {}) {
  std::optional<Response> refused = Refusal(r, p);
  return refused ? refused->status : 0;
}

TEST(GuardTest, HostNamesParse) {
  EXPECT_EQ(HostName("127.0.0.1:7180"), "127.0.0.1");
  EXPECT_EQ(HostName("[::1]:7180"), "::1");
  EXPECT_EQ(HostName("[::1]"), "::1");
  EXPECT_EQ(HostName("Example.COM."), "example.com");
  EXPECT_EQ(HostName("localhost"), "localhost");
  EXPECT_EQ(HostName("a.b:x"), "");
  EXPECT_EQ(HostName("[::1"), "");
  EXPECT_EQ(HostName("[evil.example]"), "");
  EXPECT_EQ(HostName("a b"), "");
  EXPECT_EQ(HostName(""), "");
  EXPECT_EQ(OriginOf("https://PodProf.example.com:8443/x?y"), "https://podprof.example.com:8443");
  EXPECT_EQ(OriginOf("ftp://a"), "");
}

TEST(GuardTest, LoopbackNamesAndAddressesAreAnsweredOtherNamesGet421) {
  EXPECT_EQ(StatusOf(Get("127.0.0.1:7180")), 0);
  EXPECT_EQ(StatusOf(Get("[::1]:7180")), 0);
  EXPECT_EQ(StatusOf(Get("10.1.2.3:7180")), 0);  // an address: rebinding needs a name
  EXPECT_EQ(StatusOf(Get("localhost:7180")), 0);
  EXPECT_EQ(StatusOf(Get("app.localhost")), 0);
  // DNS rebinding: the attacker's name, resolving to this machine.
  EXPECT_EQ(StatusOf(Get("evil.example:7180")), 421);
  EXPECT_EQ(StatusOf(Get("localhost.evil.example")), 421);
  GuardPolicy p;
  p.allowed_hosts = {"podprof.example.com"};
  EXPECT_EQ(StatusOf(Get("podprof.example.com"), p), 0);
  EXPECT_EQ(StatusOf(Get("PODPROF.example.com:443"), p), 0);
  EXPECT_EQ(StatusOf(Get("")), 400);
  EXPECT_EQ(StatusOf(Get("a b")), 400);
  const std::optional<Response> r = Refusal(Get("evil.example"), p);
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->body.find("evil.example"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("allowed_hosts"), std::string::npos) << r->body;
}

TEST(GuardTest, WritesNeedJsonAndTheServersOwnOrigin) {
  EXPECT_EQ(StatusOf(Post("127.0.0.1:7180", "application/json")), 0);  // curl, a script
  EXPECT_EQ(StatusOf(Post("127.0.0.1:7180", "Application/JSON; charset=utf-8")), 0);
  // What a form or a no-cors fetch can send without a preflight.
  EXPECT_EQ(StatusOf(Post("127.0.0.1:7180", "text/plain")), 415);
  EXPECT_EQ(StatusOf(Post("127.0.0.1:7180", "application/x-www-form-urlencoded")), 415);
  EXPECT_EQ(StatusOf(Post("127.0.0.1:7180", "multipart/form-data; boundary=x")), 415);
  EXPECT_EQ(StatusOf(Post("127.0.0.1:7180", "")), 415);
  // The page itself.
  EXPECT_EQ(StatusOf(Post("127.0.0.1:7180", "application/json", "http://127.0.0.1:7180")), 0);
  // Another port on the same machine is another origin.
  EXPECT_EQ(StatusOf(Post("127.0.0.1:7180", "application/json", "http://127.0.0.1:8888")), 403);
  EXPECT_EQ(StatusOf(Post("127.0.0.1:7180", "application/json", "null")), 403);
  // Under TLS the server's origin is https.
  GuardPolicy tls;
  tls.tls = true;
  EXPECT_EQ(StatusOf(Post("10.0.0.5:7180", "application/json", "https://10.0.0.5:7180"), tls), 0);
  EXPECT_EQ(StatusOf(Post("10.0.0.5:7180", "application/json", "http://10.0.0.5:7180"), tls), 403);
  // A configured external URL (a proxy in front).
  GuardPolicy proxied;
  proxied.allowed_origins = {"https://podprof.example.com"};
  EXPECT_EQ(
      StatusOf(Post("127.0.0.1:7180", "application/json", "https://podprof.example.com"), proxied),
      0);
}

TEST(GuardTest, CrossSiteRequestsAreRefusedButLinksStillOpenPages) {
  Request img = Get("127.0.0.1:7180");
  img.fetch_site = "cross-site";
  img.fetch_mode = "no-cors";
  img.fetch_dest = "image";
  EXPECT_EQ(StatusOf(img), 403);
  Request link = img;
  link.fetch_mode = "navigate";
  link.fetch_dest = "document";
  EXPECT_EQ(StatusOf(link), 0);
  Request framed = link;
  framed.fetch_dest = "iframe";
  EXPECT_EQ(StatusOf(framed), 403);
  Request form = Post("127.0.0.1:7180", "application/json");
  form.fetch_site = "same-site";
  form.fetch_mode = "navigate";
  EXPECT_EQ(StatusOf(form), 403);
  Request own = Post("127.0.0.1:7180", "application/json", "http://127.0.0.1:7180");
  own.fetch_site = "same-origin";
  own.fetch_mode = "cors";
  EXPECT_EQ(StatusOf(own), 0);
}

}  // namespace
}  // namespace podprof::http
