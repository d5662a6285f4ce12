// A small HTTP/1.1 server (Boost.Beast) for the daemons' web pages, JSON API and /metrics:
// HTTPS with the daemon's own certificate and client certificates checked against its CA
// (the identities of the caller are handed to the handler, for the same roles as gRPC), or
// plain HTTP when the daemon runs `insecure`. Requests are bounded (size, header time) and
// rate-limited per client address; handlers run on the server's threads.
#ifndef PODPROF_HTTP_SERVER_H_
#define PODPROF_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "security/tls.h"

namespace podprof::http {

struct Request {
  std::string method;                         // GET, POST, ...
  std::string path;                           // without the query, percent-decoded
  std::map<std::string, std::string> query;   // decoded; the last of repeated keys
  std::map<std::string, std::string> params;  // from the route's {name} parts
  std::string body;
  std::string content_type;
  std::string peer;  // address:port
  // The client certificate's CN and SANs (TLS only; empty for plain HTTP).
  std::vector<std::string> identities;
};

// Where a streamed response writes (server-sent events).
class StreamWriter {
 public:
  virtual ~StreamWriter() = default;
  // Sends `data` at once; false when the client has gone or the server is stopping.
  virtual bool Write(const std::string& data) = 0;
  // True once the server is stopping: a stream should end.
  virtual bool stopping() const = 0;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // When set, the body is written as it happens instead: the server sends the headers, runs
  // this on a thread of its own (at most ServerOptions::max_streams at once; 503 past them)
  // and closes the connection when it returns.
  std::function<void(StreamWriter&)> stream;

  static Response Text(int status, std::string body, std::string type = "text/plain");
  // {"error": message} with the status for `s` (400, 403, 404, 409, 429, 500, 503, ...).
  static Response Error(const absl::Status& s);
};

using Handler = std::function<Response(const Request&)>;

// Routes by method and path pattern ("/api/v1/captures/{id}/kernels"); a {name} matches one
// non-empty segment and lands in Request::params.
class Router {
 public:
  void Add(const std::string& method, const std::string& pattern, Handler handler);
  // 404 for an unknown path, 405 naming the allowed methods for a known one.
  Response Handle(Request& request) const;

 private:
  struct Route {
    std::string method;
    std::vector<std::string> segments;
    Handler handler;
  };
  std::vector<Route> routes_;
};

struct ServerOptions {
  std::string listen = "127.0.0.1:0";  // host:port
  // Off: plain HTTP. On: the daemon's certificate, key and CA bundle (client certificates
  // required and verified).
  bool tls = false;
  security::TlsMaterial material;
  int threads = 2;
  uint64_t max_request_bytes = 1 << 20;
  // Requests per second per client address (a burst of twice as many is allowed).
  double max_requests_per_second = 50;
  int64_t request_timeout_ns = 30'000'000'000;
  // Streamed responses (server-sent events) at once.
  int max_streams = 32;
};

class Server {
 public:
  // Binds and starts serving on its own threads. Errors name the address (cannot bind) or the
  // TLS material.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options,
                                                       std::shared_ptr<const Router> router,
                                                       Clock& clock);
  ~Server();  // Stop()
  void Stop();
  int port() const;

  class Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Splits "host:port"; InvalidArgument naming `what` (the setting) otherwise.
absl::StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& address,
                                                          const std::string& what);

}  // namespace podprof::http

#endif  // PODPROF_HTTP_SERVER_H_
