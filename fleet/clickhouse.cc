#include "fleet/clickhouse.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace podprof::fleet {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// ClickHouse's error codes for refused credentials (UNKNOWN_USER, WRONG_PASSWORD,
// REQUIRED_PASSWORD, IP_ADDRESS_NOT_ALLOWED, AUTHENTICATION_FAILED) and missing rights
// (READONLY, ACCESS_DENIED).
const std::set<int> kRefused = {192, 193, 194, 195, 516, 164, 497};
// Missing database, table or column.
const std::set<int> kMissing = {81, 60, 16, 47};
// The data or statement itself is wrong: parse errors, wrong types, values that do not fit.
// Sending it again cannot succeed, unlike everything else (memory, too many parts, timeouts),
// which is retried.
const std::set<int> kBadData = {6,  26,  27,  32,  33,  38,  41,  53,  62,  69, 70,
                                72, 117, 130, 131, 132, 170, 250, 251, 321, 395};

std::string UrlEncode(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : s) {
    if (absl::ascii_isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out.push_back(static_cast<char>(ch));
    } else {
      out.push_back('%');
      out.push_back(kHex[ch >> 4]);
      out.push_back(kHex[ch & 15]);
    }
  }
  return out;
}

// ClickHouse's message without its frame: old servers say "Code: N, e.displayText() =
// DB::Exception: MESSAGE, e.what() = DB::Exception", new ones "Code: N. DB::Exception:
// MESSAGE. (NAME) (version ...)".
std::string ExceptionText(absl::string_view body) {
  size_t at = body.find("DB::Exception: ");
  if (at != absl::string_view::npos) body.remove_prefix(at + 15);
  for (absl::string_view end : {", e.what() =", " (version"}) {
    size_t cut = body.find(end);
    if (cut != absl::string_view::npos) body = body.substr(0, cut);
  }
  return std::string(absl::StripAsciiWhitespace(body));
}

}  // namespace

absl::Status ClickHouseError(const std::string& server, int http_status, const std::string& body) {
  int code = -1;
  if (absl::StartsWith(body, "Code: ")) {
    absl::string_view digits = absl::string_view(body).substr(6);
    digits = digits.substr(0, digits.find_first_not_of("0123456789"));
    if (!absl::SimpleAtoi(digits, &code)) code = -1;
  }
  const std::string what = absl::StrCat("ClickHouse at ", server, ": ", ExceptionText(body),
                                        code >= 0 ? absl::StrCat(" (code ", code, ")") : "");
  if (kRefused.count(code) > 0 || http_status == 401 || http_status == 403) {
    return absl::PermissionDeniedError(what);
  }
  if (kMissing.count(code) > 0) return absl::NotFoundError(what);
  if (kBadData.count(code) > 0) return absl::InvalidArgumentError(what);
  return absl::UnavailableError(what);
}

std::string Quote(const std::string& text) {
  std::string out = "'";
  for (char ch : text) {
    if (ch == '\\' || ch == '\'') out.push_back('\\');
    out.push_back(ch);
  }
  out.push_back('\'');
  return out;
}

absl::StatusOr<ClickHouse> ClickHouse::Create(const ClickHouseOptions& options) {
  absl::string_view rest = options.url;
  if (!absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ClickHouse URL '", options.url, "' is not http://host:port (its HTTP interface)"));
  }
  rest = rest.substr(0, rest.find('/'));
  if (rest.find('@') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("ClickHouse URL '", options.url,
                                                   "' carries credentials: give the user and "
                                                   "password on their own"));
  }
  std::string host(rest), port = "8123";
  if (size_t colon = rest.rfind(':'); colon != absl::string_view::npos) {
    host = std::string(rest.substr(0, colon));
    port = std::string(rest.substr(colon + 1));
    int p = 0;
    if (!absl::SimpleAtoi(port, &p) || p <= 0 || p > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("ClickHouse URL '", options.url, "' has a bad port '", port, "'"));
    }
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ClickHouse URL '", options.url, "' names no host"));
  }
  return ClickHouse(options, std::move(host), std::move(port));
}

ClickHouse::ClickHouse(ClickHouseOptions options, std::string host, std::string port)
    : options_(std::move(options)), host_(std::move(host)), port_(std::move(port)) {
  url_ = absl::StrCat("http://", host_, ":", port_);
}

absl::StatusOr<std::string> ClickHouse::Post(const std::string& query, const std::string& body,
                                             const std::string& settings) const {
  http::request<http::string_body> req{http::verb::post, "/?query=" + UrlEncode(query) + settings,
                                       11};
  req.set(http::field::host, host_);
  req.set(http::field::authorization,
          "Basic " + absl::Base64Escape(options_.user + ":" + options_.password));
  req.set(http::field::content_type, "application/octet-stream");
  req.body() = body;
  req.prepare_payload();

  asio::io_context ioc;
  asio::ip::tcp::resolver resolver(ioc);
  beast::tcp_stream stream(ioc);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(options_.max_response_bytes);
  beast::error_code failure;
  const char* stage = "resolving";
  // One deadline over the whole exchange: tcp_stream cancels whatever is pending when it
  // passes.
  stream.expires_after(std::chrono::nanoseconds(options_.timeout_ns));
  resolver.async_resolve(host_, port_, [&](beast::error_code ec, auto results) {
    if (ec) return void(failure = ec);
    stage = "connecting";
    stream.async_connect(results, [&](beast::error_code ec, auto) {
      if (ec) return void(failure = ec);
      stage = "sending";
      http::async_write(stream, req, [&](beast::error_code ec, size_t) {
        if (ec) return void(failure = ec);
        stage = "reading the answer";
        http::async_read(stream, buffer, parser,
                         [&](beast::error_code ec, size_t) { failure = ec; });
      });
    });
  });
  ioc.run();
  if (failure == beast::error::timeout) {
    return absl::DeadlineExceededError(absl::StrCat("ClickHouse at ", url_, ": no answer within ",
                                                    options_.timeout_ns / 1'000'000'000, " s (",
                                                    stage, ")"));
  }
  if (failure) {
    return absl::UnavailableError(
        absl::StrCat("ClickHouse at ", url_, ": ", stage, ": ", failure.message()));
  }
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, failure);
  const auto& res = parser.get();
  if (res.result() != http::status::ok) {
    return ClickHouseError(url_, static_cast<int>(res.result_int()), res.body());
  }
  return res.body();
}

absl::StatusOr<std::string> ClickHouse::Query(const std::string& sql) const {
  // JSON answers carry 64-bit integers as numbers, not strings.
  return Post("", sql, "&output_format_json_quote_64bit_integers=0");
}

absl::Status ClickHouse::Insert(const std::string& insert, const std::string& data) const {
  // Parse the whole body as one block, so that it becomes one part: all or nothing.
  return Post(insert, data, "&max_insert_block_size=1000000000").status();
}

absl::Status ClickHouse::Ping() const { return Query("SELECT 1").status(); }

}  // namespace podprof::fleet
