// A small HTTP/1.1 server (Boost.Beast) for the daemons' web pages, JSON API and /metrics:
// HTTPS with the daemon's own certificate and client certificates checked against its CA
// (the identities of the caller are handed to the handler, for the same roles as gRPC), or
// plain HTTP when the daemon runs `insecure`. Handlers run on the server's threads.
//
// No client can hold what others need (docs/RELIABILITY.md, "Hostile HTTP"):
// - a client is its certificate's first name under TLS, its address otherwise; requests are
//   rate-limited, and streams (downloads, server-sent events) capped, per client;
// - connections are capped in total and per address (past them a connection is closed at
//   once), and accepting backs off while the process is out of file descriptors;
// - a request must arrive within request_timeout_ns, and every write (a response, each piece
//   of a stream) must be taken by the client within write_timeout_ns, or the connection goes;
// - every request passes http/guard.h (Host, Origin, Fetch Metadata) before its handler.
//
// Memory: at most max_connections requests of max_request_bytes are read at once, and a
// stream holds what its handler holds (one chunk).
#ifndef PODPROF_HTTP_SERVER_H_
#define PODPROF_HTTP_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "http/guard.h"
#include "http/message.h"
#include "security/tls.h"

namespace podprof::http {

struct ServerOptions {
  std::string listen = "127.0.0.1:0";  // host:port
  // Off: plain HTTP. On: the daemon's certificate, key and CA bundle (client certificates
  // required and verified).
  bool tls = false;
  security::TlsMaterial material;
  int threads = 2;
  uint64_t max_request_bytes = 1 << 20;
  // Requests per second per client (a burst of twice as many is allowed).
  double max_requests_per_second = 50;
  // From a connection's first byte (or the end of its last response) to a whole request.
  int64_t request_timeout_ns = 30'000'000'000;
  // For the client to take each write: a response, or one piece of a stream.
  int64_t write_timeout_ns = 20'000'000'000;
  // Streamed responses (server-sent events, downloads) at once, and for one client.
  int max_streams = 32;
  int max_streams_per_client = 8;
  // Open connections, and from one address.
  int max_connections = 256;
  int max_connections_per_address = 64;
  // Names answered beyond loopback and IP literals (this machine's name is added), and other
  // origins whose pages may write (http/guard.h).
  std::vector<std::string> allowed_hosts;
  std::vector<std::string> allowed_origins;
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
