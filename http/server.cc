#include "http/server.h"

#include <openssl/ssl.h>
#include <zlib.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <optional>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "security/certificate_check.h"

namespace podprof::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding (and '+' as a space in queries); a malformed escape stays as it is.
std::string Decode(absl::string_view s, bool plus_is_space) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
    } else if (plus_is_space && s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// A token bucket per client address: `rate` per second, bursts of twice that.
class RateLimiter {
 public:
  RateLimiter(double rate, Clock& clock) : rate_(rate), clock_(clock) {}
  bool Allow(const std::string& address) {
    const int64_t now = clock_.MonotonicNs();
    absl::MutexLock lock(&mu_);
    if (buckets_.size() > 10'000) buckets_.clear();  // forget idle clients rather than grow
    Bucket& b = buckets_.try_emplace(address, Bucket{2 * rate_, now}).first->second;
    b.tokens = std::min(2 * rate_, b.tokens + (now - b.last_ns) / 1e9 * rate_);
    b.last_ns = now;
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }

 private:
  struct Bucket {
    double tokens;
    int64_t last_ns;
  };
  const double rate_;
  Clock& clock_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
};

struct Shared {
  Shared(ServerOptions o, std::shared_ptr<const Router> r, Clock& clock)
      : options(std::move(o)),
        router(std::move(r)),
        limiter(options.max_requests_per_second, clock) {}
  const ServerOptions options;
  const std::shared_ptr<const Router> router;
  RateLimiter limiter;
  // Streamed responses running on their own threads; Stop waits for them to end.
  absl::Mutex mu;
  int streams ABSL_GUARDED_BY(mu) = 0;
  std::atomic<bool> stopping{false};

  bool BeginStream() {
    absl::MutexLock lock(&mu);
    if (stopping || streams >= options.max_streams) return false;
    ++streams;
    return true;
  }
  void EndStream() {
    absl::MutexLock lock(&mu);
    --streams;
  }
  void WaitForStreams() {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](int* n) { return *n == 0; }, &streams));
  }
};

Request ToRequest(const bhttp::request<bhttp::string_body>& r, const std::string& peer) {
  Request out;
  out.method = std::string(r.method_string());
  const auto raw_target = r.target();
  absl::string_view target(raw_target.data(), raw_target.size());
  const size_t q = target.find('?');
  out.path = Decode(target.substr(0, q), false);
  if (q != absl::string_view::npos) {
    for (absl::string_view kv : absl::StrSplit(target.substr(q + 1), '&', absl::SkipEmpty())) {
      const size_t eq = kv.find('=');
      out.query[Decode(kv.substr(0, eq), true)] =
          eq == absl::string_view::npos ? "" : Decode(kv.substr(eq + 1), true);
    }
  }
  out.body = r.body();
  out.content_type = std::string(r[bhttp::field::content_type]);
  out.peer = peer;
  return out;
}

// One connection: requests read and answered in turn (keep-alive), TLS or not.
// Compresses a text body (JSON, CSV, pages, scripts) for a client that accepts gzip: the web
// timeline of a large pod is numbers that shrink several times. Small bodies, binary ones and
// streams go as they are. Level 1: most of the gain for a fraction of the time.
void Gzip(Response* res) {
  const std::string& t = res->content_type;
  const bool text = absl::StartsWith(t, "text/") || absl::StartsWith(t, "application/json");
  if (!text || res->body.size() < 1024 || res->status != 200) return;
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return;
  std::string out(deflateBound(&z, res->body.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(res->body.data());
  z.avail_in = static_cast<uInt>(res->body.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return;
  out.resize(z.total_out);
  res->body = std::move(out);
  res->headers.emplace_back("Content-Encoding", "gzip");
  res->headers.emplace_back("Vary", "Accept-Encoding");
}

template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Stream stream, std::shared_ptr<Shared> shared, std::string peer)
      : stream_(std::move(stream)), shared_(std::move(shared)), peer_(std::move(peer)) {}

  void Run() {
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      Read();
    } else {
      Lowest().expires_after(std::chrono::nanoseconds(shared_->options.request_timeout_ns));
      stream_.async_handshake(ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return;  // a failed handshake: nothing to answer
                                self->identities_ = security::CertificateNames(
                                    SSL_get0_peer_certificate(self->stream_.native_handle()));
                                self->Read();
                              });
    }
  }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  void Read() {
    parser_.emplace();
    parser_->body_limit(shared_->options.max_request_bytes);
    parser_->header_limit(64 * 1024);
    Lowest().expires_after(std::chrono::nanoseconds(shared_->options.request_timeout_ns));
    bhttp::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == bhttp::error::body_limit || ec == bhttp::error::header_limit) {
      return Write(Response::Text(413, "request too large\n"), false);
    }
    if (ec) return Close();
    const auto& raw = parser_->get();
    Response res;
    if (!shared_->limiter.Allow(peer_.substr(0, peer_.rfind(':')))) {
      res = Response::Text(429, "too many requests\n");
      res.headers.emplace_back("Retry-After", "1");
    } else {
      Request req = ToRequest(raw, peer_);
      req.identities = identities_;
      res = shared_->router->Handle(req);
    }
    if (res.stream) return StartStream(std::move(res));
    if (absl::StrContains(std::string(raw[bhttp::field::accept_encoding]), "gzip")) Gzip(&res);
    Write(std::move(res), raw.keep_alive());
  }

  // The headers, then `res.stream` on a thread of its own writing straight to the socket; this
  // session does nothing else on the connection meanwhile, and closes it when the stream ends.
  void StartStream(Response res) {
    if (!shared_->BeginStream()) {
      return Write(Response::Text(503, "too many streams; try again\n"), false);
    }
    Lowest().expires_never();
    std::thread([self = this->shared_from_this(), res = std::move(res)]() mutable {
      struct Writer : StreamWriter {
        Session* s = nullptr;
        bool Write(const std::string& data) override {
          if (s->shared_->stopping) return false;
          beast::error_code ec;
          asio::write(s->stream_, asio::buffer(data), ec);
          return !ec;
        }
        bool stopping() const override { return s->shared_->stopping; }
      } w;
      w.s = self.get();
      std::string head =
          absl::StrCat("HTTP/1.1 ", res.status, " OK\r\nContent-Type: ", res.content_type,
                       "\r\nCache-Control: no-store\r\nConnection: close\r\n");
      for (const auto& [k, v] : res.headers) absl::StrAppend(&head, k, ": ", v, "\r\n");
      if (w.Write(head + "\r\n")) res.stream(w);
      self->Close();
      self->shared_->EndStream();
    }).detach();
  }

  void Write(Response r, bool keep_alive) {
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>(
        static_cast<bhttp::status>(r.status), 11);
    res->set(bhttp::field::server, "podprof");
    res->set(bhttp::field::content_type, r.content_type);
    res->set(bhttp::field::cache_control, "no-store");
    for (const auto& [k, v] : r.headers) res->set(k, v);
    res->keep_alive(keep_alive);
    res->body() = std::move(r.body);
    res->prepare_payload();
    bhttp::async_write(stream_, *res,
                       [self = this->shared_from_this(), res](beast::error_code ec, size_t) {
                         if (ec || !res->keep_alive()) return self->Close();
                         self->Read();
                       });
  }

  void Close() {
    beast::error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  Stream stream_;
  std::shared_ptr<Shared> shared_;
  std::string peer_;
  std::vector<std::string> identities_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
};

}  // namespace

Response Response::Text(int status, std::string body, std::string type) {
  Response r;
  r.status = status;
  r.content_type = std::move(type);
  r.body = std::move(body);
  return r;
}

Response Response::Error(const absl::Status& s) {
  int status = 500;
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      status = 400;
      break;
    case absl::StatusCode::kUnauthenticated:
      status = 401;
      break;
    case absl::StatusCode::kPermissionDenied:
      status = 403;
      break;
    case absl::StatusCode::kNotFound:
      status = 404;
      break;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted:
      status = 409;
      break;
    case absl::StatusCode::kResourceExhausted:
      status = 429;
      break;
    case absl::StatusCode::kUnavailable:
      status = 503;
      break;
    case absl::StatusCode::kDeadlineExceeded:
      status = 504;
      break;
    default:
      break;
  }
  std::string escaped;
  for (char c : s.message()) {
    if (c == '"' || c == '\\') {
      escaped.push_back('\\');
      escaped.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      escaped.push_back(' ');
    } else {
      escaped.push_back(c);
    }
  }
  return Text(status, absl::StrCat("{\"error\": \"", escaped, "\"}\n"), "application/json");
}

void Router::Add(const std::string& method, const std::string& pattern, Handler handler) {
  routes_.push_back({method, absl::StrSplit(pattern, '/', absl::SkipEmpty()), std::move(handler)});
}

Response Router::Handle(Request& request) const {
  const std::vector<std::string> parts = absl::StrSplit(request.path, '/', absl::SkipEmpty());
  std::vector<std::string> allowed;
  for (const Route& r : routes_) {
    if (r.segments.size() != parts.size()) continue;
    std::map<std::string, std::string> params;
    bool match = true;
    for (size_t i = 0; i < parts.size() && match; ++i) {
      const std::string& seg = r.segments[i];
      if (seg.size() > 2 && seg.front() == '{' && seg.back() == '}') {
        params[seg.substr(1, seg.size() - 2)] = parts[i];
      } else {
        match = seg == parts[i];
      }
    }
    if (!match) continue;
    if (r.method != request.method) {
      allowed.push_back(r.method);
      continue;
    }
    request.params = std::move(params);
    return r.handler(request);
  }
  if (!allowed.empty()) {
    Response res = Response::Text(405, "method not allowed\n");
    res.headers.emplace_back("Allow", absl::StrJoin(allowed, ", "));
    return res;
  }
  return Response::Error(absl::NotFoundError(absl::StrCat("no such page: ", request.path)));
}

absl::StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& address,
                                                          const std::string& what) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", address, "' is not host:port"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::make_pair(host.empty() ? "0.0.0.0" : host, port);
}

class Server::Impl {
 public:
  Impl(std::shared_ptr<Shared> shared) : shared_(std::move(shared)), acceptor_(ioc_) {}

  absl::Status Listen() {
    const ServerOptions& o = shared_->options;
    auto hp = SplitHostPort(o.listen, "http.listen");
    if (!hp.ok()) return hp.status();
    beast::error_code ec;
    const auto address = asio::ip::make_address(hp->first, ec);
    if (ec)
      return absl::InvalidArgumentError(
          absl::StrCat("http.listen '", o.listen, "': ", ec.message()));
    tcp::endpoint ep(address, static_cast<unsigned short>(hp->second));
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", o.listen, " (http.listen): ", ec.message()));
    }
    if (o.tls) {
      ssl_.emplace(ssl::context::tls_server);
      ssl_->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                        ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
      ssl_->use_certificate_chain(asio::buffer(o.material.cert), ec);
      if (!ec) ssl_->use_private_key(asio::buffer(o.material.key), ssl::context::pem, ec);
      if (!ec) ssl_->add_certificate_authority(asio::buffer(o.material.ca), ec);
      if (ec) {
        return absl::InvalidArgumentError(
            absl::StrCat("HTTPS with ", o.material.cert_path, ": ", ec.message()));
      }
      // The same rule as gRPC's: a client certificate from the deployment's CA, or nothing.
      ssl_->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    }
    port_ = acceptor_.local_endpoint().port();
    Accept();
    for (int i = 0; i < std::max(1, o.threads); ++i) threads_.emplace_back([this] { ioc_.run(); });
    return absl::OkStatus();
  }

  void Stop() {
    if (stopped_.exchange(true)) return;
    shared_->stopping = true;
    shared_->WaitForStreams();
    ioc_.stop();
    for (auto& t : threads_) t.join();
  }

  int port() const { return port_; }

 private:
  void Accept() {
    acceptor_.async_accept(asio::make_strand(ioc_), [this](beast::error_code ec, tcp::socket s) {
      if (ec) {
        if (ec != asio::error::operation_aborted) Accept();
        return;
      }
      beast::error_code pe;
      const auto remote = s.remote_endpoint(pe);
      const std::string peer =
          pe ? "unknown" : absl::StrCat(remote.address().to_string(), ":", remote.port());
      if (ssl_) {
        std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
            beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(s)), *ssl_), shared_,
            peer)
            ->Run();
      } else {
        std::make_shared<Session<beast::tcp_stream>>(beast::tcp_stream(std::move(s)), shared_, peer)
            ->Run();
      }
      Accept();
    });
  }

  std::shared_ptr<Shared> shared_;
  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  std::optional<ssl::context> ssl_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopped_{false};
  int port_ = 0;
};

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options,
                                                      std::shared_ptr<const Router> router,
                                                      Clock& clock) {
  auto shared = std::make_shared<Shared>(options, std::move(router), clock);
  auto impl = std::make_unique<Impl>(std::move(shared));
  if (absl::Status s = impl->Listen(); !s.ok()) return s;
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() { Stop(); }
void Server::Stop() { impl_->Stop(); }
int Server::port() const { return impl_->port(); }

}  // namespace podprof::http
