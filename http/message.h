// HTTP requests and responses as the daemons' handlers see them, and the router that picks a
// handler by method and path. Nothing here knows about sockets or TLS (http/server.h does), so
// the fuzzer and the sanitizer build take this part alone.
#ifndef PODPROF_HTTP_MESSAGE_H_
#define PODPROF_HTTP_MESSAGE_H_

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace podprof::http {

struct Request {
  std::string method;                         // GET, POST, ...
  std::string path;                           // without the query, percent-decoded
  std::map<std::string, std::string> query;   // decoded; the last of repeated keys
  std::map<std::string, std::string> params;  // from the route's {name} parts
  std::string body;
  std::string content_type;
  std::string peer;  // address:port
  // The headers a browser sets and a page cannot forge, read by http/guard.h: Host, Origin
  // and the Fetch Metadata (Sec-Fetch-Site, -Mode, -Dest). Empty when absent.
  std::string host;
  std::string origin;
  std::string fetch_site;
  std::string fetch_mode;
  std::string fetch_dest;
  // The client certificate's CN and SANs (TLS only; empty for plain HTTP).
  std::vector<std::string> identities;
  // The podprof roles it carries (security::CertificateRoles: "operator", ...), for the same
  // role checks as gRPC's.
  std::vector<std::string> roles;
};

// Splits a request target ("/a%20b/c?x=1&y") into the decoded path and query (percent escapes,
// and '+' as a space in the query; a malformed escape stays as it is).
void ParseTarget(absl::string_view target, Request* out);

// Where a streamed response writes (server-sent events, downloads).
class StreamWriter {
 public:
  virtual ~StreamWriter() = default;
  // Sends `data` at once; false when the client has gone, has not taken the data within the
  // server's write deadline, or the server is stopping.
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
  // this on a thread of its own (at most ServerOptions::max_streams at once, and
  // max_streams_per_client for one client; 503 past them) and closes the connection when it
  // returns.
  std::function<void(StreamWriter&)> stream;

  static Response Text(int status, std::string body, std::string type = "text/plain");
  // {"error": message} with the status for `s` (400, 403, 404, 409, 429, 500, 503, ...).
  static Response Error(const absl::Status& s);
  // {"error": message} with an explicit status (415, 421, ... that no Status code maps to).
  static Response Error(int status, absl::string_view message);
};

using Handler = std::function<Response(const Request&)>;

// Routes by method and path pattern ("/api/v1/captures/{id}/kernels"); a {name} matches one
// non-empty segment and lands in Request::params. Filled before serving, then read-only (and so
// safe from any thread).
class Router {
 public:
  void Add(const std::string& method, const std::string& pattern, Handler handler);
  // 404 for an unknown path, 405 naming the allowed methods for a known one.
  Response Handle(Request& request) const;

  // A route as added: its method and pattern, as given to Add.
  struct RouteInfo {
    std::string method;
    std::string pattern;
  };
  // Every route, in the order added: what tools/ checks its registry against.
  std::vector<RouteInfo> Routes() const;

 private:
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<std::string> segments;
    Handler handler;
  };
  std::vector<Route> routes_;
};

}  // namespace podprof::http

#endif  // PODPROF_HTTP_MESSAGE_H_
