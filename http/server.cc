#include "http/server.h"

#include <openssl/ssl.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <future>
#include <optional>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "common/utf8.h"
#include "http/beast_request.h"
#include "security/certificate_check.h"

namespace podprof::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

// A token bucket per client: `rate` per second, bursts of twice that.
class RateLimiter {
 public:
  RateLimiter(double rate, Clock& clock) : rate_(rate), clock_(clock) {}
  bool Allow(const std::string& client) {
    const int64_t now = clock_.MonotonicNs();
    absl::MutexLock lock(&mu_);
    if (buckets_.size() > 10'000) buckets_.clear();  // forget idle clients rather than grow
    Bucket& b = buckets_.try_emplace(client, Bucket{2 * rate_, now}).first->second;
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

// Counts of what is open, in total and per key, each refused past its caps.
class Counter {
 public:
  Counter(int total_cap, int per_key_cap) : total_cap_(total_cap), per_key_cap_(per_key_cap) {}
  bool Take(const std::string& key) {
    absl::MutexLock lock(&mu_);
    int& n = by_key_[key];
    if (total_ >= total_cap_ || n >= per_key_cap_) {
      if (n == 0) by_key_.erase(key);
      return false;
    }
    ++n;
    ++total_;
    return true;
  }
  void Give(const std::string& key) {
    absl::MutexLock lock(&mu_);
    auto it = by_key_.find(key);
    if (it != by_key_.end() && --it->second == 0) by_key_.erase(it);
    --total_;
  }
  void AwaitZero() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* n) { return *n == 0; }, &total_));
  }

 private:
  const int total_cap_;
  const int per_key_cap_;
  absl::Mutex mu_;
  int total_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, int> by_key_ ABSL_GUARDED_BY(mu_);
};

// Held by a connection for its life: its place under the connection caps.
class ConnectionSlot {
 public:
  ConnectionSlot(Counter* counter, std::string address)
      : counter_(counter), address_(std::move(address)) {}
  ~ConnectionSlot() { counter_->Give(address_); }
  ConnectionSlot(const ConnectionSlot&) = delete;
  ConnectionSlot& operator=(const ConnectionSlot&) = delete;

 private:
  Counter* const counter_;
  const std::string address_;
};

// The route's answer to `req`. Handlers answer errors as responses; an exception one lets out
// anyway (a bug, or a library throwing on input nobody foresaw) is the last guard's: a 500
// naming it, and a log line, instead of std::terminate taking the daemon and every other
// client's request with it.
Response Handled(const Router& router, Request& req) {
  std::string what;
  try {
    return router.Handle(req);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  PODPROF_LOG(ERROR) << req.method << " " << EscapeForTerminal(req.path) << " from " << req.peer
                     << " failed: " << EscapeForTerminal(what);
  return Response::Error(500, absl::StrCat("internal error: ", what));
}

// What every connection shares: the options, the router, the limits' counts.
struct Shared {
  Shared(ServerOptions o, std::shared_ptr<const Router> r, Clock& clock)
      : options(std::move(o)),
        router(std::move(r)),
        limiter(options.max_requests_per_second, clock),
        connections(options.max_connections, options.max_connections_per_address),
        streams(options.max_streams, options.max_streams_per_client) {
    policy.tls = options.tls;
    policy.allowed_hosts = options.allowed_hosts;
    policy.allowed_origins = options.allowed_origins;
    // This machine's own name cannot be made to point elsewhere by a page: answer to it.
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) == 0) {
      const std::string own = HostName(name);
      if (!own.empty()) policy.allowed_hosts.push_back(own);
    }
  }
  const ServerOptions options;
  const std::shared_ptr<const Router> router;
  GuardPolicy policy;
  RateLimiter limiter;
  Counter connections;  // by address
  Counter streams;      // by client; Stop waits for them to end
  std::atomic<bool> stopping{false};
};

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

// One connection: requests read and answered in turn (keep-alive), TLS or not.
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Stream stream, std::shared_ptr<Shared> shared, std::string address, std::string peer,
          std::unique_ptr<ConnectionSlot> slot)
      : stream_(std::move(stream)),
        shared_(std::move(shared)),
        address_(std::move(address)),
        peer_(std::move(peer)),
        slot_(std::move(slot)),
        client_(address_) {}

  void Run() {
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      Read();
    } else {
      Lowest().expires_after(std::chrono::nanoseconds(shared_->options.request_timeout_ns));
      stream_.async_handshake(
          ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
            if (ec) return;  // a failed handshake: nothing to answer
            const X509* peer = SSL_get0_peer_certificate(self->stream_.native_handle());
            self->identities_ = security::CertificateNames(peer);
            self->roles_ = security::CertificateRoles(peer);
            // Limits follow the certificate: clients behind one address
            // (a proxy, a login node) do not share them.
            if (!self->identities_.empty()) {
              self->client_ = self->identities_.front();
            }
            self->Read();
          });
    }
  }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }
  std::chrono::nanoseconds WriteTimeout() const {
    return std::chrono::nanoseconds(shared_->options.write_timeout_ns);
  }

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
    if (!shared_->limiter.Allow(client_)) {
      res = Response::Text(429, "too many requests\n");
      res.headers.emplace_back("Retry-After", "1");
    } else {
      Request req = ToRequest(raw, peer_);
      req.identities = identities_;
      req.roles = roles_;
      std::optional<Response> refused = Refusal(req, shared_->policy);
      res = refused ? *std::move(refused) : Handled(*shared_->router, req);
    }
    if (res.stream) return StartStream(std::move(res));
    if (absl::StrContains(std::string(raw[bhttp::field::accept_encoding]), "gzip")) Gzip(&res);
    Write(std::move(res), raw.keep_alive());
  }

  // Writes `data` from a stream's thread through the connection's strand, as an asynchronous
  // write under the write deadline: a client that stops reading loses its connection rather
  // than holding the thread. False once the client has gone or the server is stopping.
  bool StreamWrite(const std::string& data) {
    if (shared_->stopping) return false;
    std::promise<beast::error_code> done;
    std::future<beast::error_code> result = done.get_future();
    asio::post(stream_.get_executor(), [this, &data, &done] {
      Lowest().expires_after(WriteTimeout());
      asio::async_write(stream_, asio::buffer(data),
                        [&done](beast::error_code ec, size_t) { done.set_value(ec); });
    });
    // Stop() does not wait out a slow client's deadline: it closes the socket, which ends the
    // write at once (the handler above must still run: it refers to this frame).
    bool closing = false;
    while (result.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
      if (shared_->stopping && !closing) {
        closing = true;
        asio::post(stream_.get_executor(), [this] { Lowest().close(); });
      }
    }
    return !result.get();
  }

  // The headers, then `res.stream` on a thread of its own writing to the socket; this session
  // does nothing else on the connection meanwhile, and closes it when the stream ends.
  void StartStream(Response res) {
    if (!shared_->streams.Take(client_)) {
      return Write(Response::Text(503, absl::StrCat("too many streams at once (at most ",
                                                    shared_->options.max_streams_per_client,
                                                    " per client); try again\n")),
                   false);
    }
    Lowest().expires_never();
    std::thread([self = this->shared_from_this(), res = std::move(res)]() mutable {
      struct Writer : StreamWriter {
        Session* s = nullptr;
        bool Write(const std::string& data) override { return s->StreamWrite(data); }
        bool stopping() const override { return s->shared_->stopping; }
      } w;
      w.s = self.get();
      std::string head =
          absl::StrCat("HTTP/1.1 ", res.status, " OK\r\nContent-Type: ", res.content_type,
                       "\r\nCache-Control: no-store\r\nConnection: close\r\n");
      for (const auto& [k, v] : res.headers) absl::StrAppend(&head, k, ": ", v, "\r\n");
      if (w.Write(head + "\r\n")) {
        // The headers are gone: a stream that throws can only end its connection early.
        try {
          res.stream(w);
        } catch (const std::exception& e) {
          PODPROF_LOG(ERROR) << "a stream ended by an exception: " << EscapeForTerminal(e.what());
        } catch (...) {
          PODPROF_LOG(ERROR) << "a stream ended by an exception that is not a std::exception";
        }
      }
      asio::post(self->stream_.get_executor(), [self] { self->Close(); });
      self->shared_->streams.Give(self->client_);
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
    Lowest().expires_after(WriteTimeout());
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
  const std::string address_;
  const std::string peer_;
  const std::unique_ptr<ConnectionSlot> slot_;
  std::string client_;  // for the rate limit and the stream cap: a certificate name or address_
  std::vector<std::string> identities_;
  std::vector<std::string> roles_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
};

}  // namespace

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
    shared_->streams.AwaitZero();
    ioc_.stop();
    for (auto& t : threads_) t.join();
  }

  int port() const { return port_; }

 private:
  void Accept() {
    acceptor_.async_accept(asio::make_strand(ioc_), [this](beast::error_code ec, tcp::socket s) {
      if (ec == asio::error::operation_aborted) return;
      if (ec == asio::error::no_descriptors || ec.value() == ENFILE ||
          ec == asio::error::no_buffer_space || ec == asio::error::no_memory) {
        // Out of descriptors: the pending connection stays in the backlog, so accepting again
        // at once fails again at once (a spinning loop). Wait for connections to close.
        backoff_.expires_after(std::chrono::milliseconds(100));
        backoff_.async_wait([this](beast::error_code e) {
          if (e != asio::error::operation_aborted) Accept();
        });
        return;
      }
      if (!ec) Admit(std::move(s));
      Accept();
    });
  }

  // Starts a session for `s` if the connection caps allow it; otherwise closes it at once.
  void Admit(tcp::socket s) {
    beast::error_code pe;
    const auto remote = s.remote_endpoint(pe);
    const std::string address = pe ? "unknown" : remote.address().to_string();
    const std::string peer = pe ? address : absl::StrCat(address, ":", remote.port());
    if (!shared_->connections.Take(address)) {
      beast::error_code ignored;
      s.close(ignored);
      return;
    }
    auto slot = std::make_unique<ConnectionSlot>(&shared_->connections, address);
    if (ssl_) {
      std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
          beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(s)), *ssl_), shared_,
          address, peer, std::move(slot))
          ->Run();
    } else {
      std::make_shared<Session<beast::tcp_stream>>(beast::tcp_stream(std::move(s)), shared_,
                                                   address, peer, std::move(slot))
          ->Run();
    }
  }

  std::shared_ptr<Shared> shared_;
  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  asio::steady_timer backoff_{ioc_};
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
