#include "http/message.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/utf8.h"

namespace podprof::http {
namespace {

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

}  // namespace

void ParseTarget(absl::string_view target, Request* out) {
  const size_t q = target.find('?');
  out->path = Decode(target.substr(0, q), false);
  out->query.clear();
  if (q == absl::string_view::npos) return;
  for (absl::string_view kv : absl::StrSplit(target.substr(q + 1), '&', absl::SkipEmpty())) {
    const size_t eq = kv.find('=');
    out->query[Decode(kv.substr(0, eq), true)] =
        eq == absl::string_view::npos ? "" : Decode(kv.substr(eq + 1), true);
  }
}

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
  return Error(status, s.message());
}

Response Response::Error(int status, absl::string_view message) {
  std::string escaped;
  // Messages name what was asked for (a path, a capture id), which may be any bytes: the body
  // stays valid JSON only if it stays UTF-8.
  for (char c : EscapeInvalidUtf8(message)) {
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
  routes_.push_back(
      {method, pattern, absl::StrSplit(pattern, '/', absl::SkipEmpty()), std::move(handler)});
}

std::vector<Router::RouteInfo> Router::Routes() const {
  std::vector<RouteInfo> out;
  out.reserve(routes_.size());
  for (const Route& r : routes_) out.push_back({r.method, r.pattern});
  return out;
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

}  // namespace podprof::http
