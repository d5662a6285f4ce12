#include "http/guard.h"

#include <arpa/inet.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace podprof::http {
namespace {

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool IsIpLiteral(const std::string& name) {
  unsigned char buf[16];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

bool HostAllowed(const std::string& name, const GuardPolicy& policy) {
  if (name == "localhost" || absl::EndsWith(name, ".localhost") || IsIpLiteral(name)) return true;
  return std::find(policy.allowed_hosts.begin(), policy.allowed_hosts.end(), name) !=
         policy.allowed_hosts.end();
}

bool IsSafeMethod(const std::string& method) { return method == "GET" || method == "HEAD"; }

// The media type of a Content-Type ("Application/JSON; charset=utf-8" -> "application/json").
std::string MediaType(absl::string_view content_type) {
  return absl::AsciiStrToLower(
      absl::StripAsciiWhitespace(content_type.substr(0, content_type.find(';'))));
}

std::optional<Response> CheckFetchMetadata(const Request& r) {
  if (r.fetch_site.empty() || r.fetch_site == "same-origin" || r.fetch_site == "none") {
    return std::nullopt;
  }
  // A link followed from elsewhere opens the page; nothing else from another site gets in.
  const bool top_navigation = IsSafeMethod(r.method) && r.fetch_mode == "navigate" &&
                              (r.fetch_dest.empty() || r.fetch_dest == "document");
  if (top_navigation) return std::nullopt;
  return Response::Error(
      403, absl::StrCat("refused a ", r.fetch_site, " request (Sec-Fetch-Site: ", r.fetch_site,
                        ", Sec-Fetch-Mode: ", r.fetch_mode.empty() ? "-" : r.fetch_mode,
                        "): pages on other sites cannot use this server"));
}

std::optional<Response> CheckWrite(const Request& r, const GuardPolicy& policy) {
  if (IsSafeMethod(r.method)) return std::nullopt;
  if (MediaType(r.content_type) != "application/json") {
    return Response::Error(
        415, absl::StrCat("a ", r.method, " needs Content-Type: application/json, got \"",
                          r.content_type, "\""));
  }
  if (r.origin.empty()) return std::nullopt;  // not a browser
  const std::string own =
      absl::StrCat(policy.tls ? "https://" : "http://", absl::AsciiStrToLower(r.host));
  const std::string origin = absl::AsciiStrToLower(r.origin);
  if (origin == own || std::find(policy.allowed_origins.begin(), policy.allowed_origins.end(),
                                 origin) != policy.allowed_origins.end()) {
    return std::nullopt;
  }
  return Response::Error(403, absl::StrCat("Origin ", r.origin, " is not this server (", own,
                                           "): a page elsewhere cannot ", r.method, " here"));
}

}  // namespace

std::string HostName(const std::string& host_header) {
  absl::string_view h = host_header;
  std::string name;
  if (absl::ConsumePrefix(&h, "[")) {
    const size_t close = h.find(']');
    if (close == absl::string_view::npos) return "";
    name = std::string(h.substr(0, close));
    h.remove_prefix(close + 1);
    if (!h.empty() && !(absl::ConsumePrefix(&h, ":") && AllDigits(h))) return "";
    unsigned char buf[16];
    return inet_pton(AF_INET6, name.c_str(), buf) == 1 ? absl::AsciiStrToLower(name) : "";
  }
  const size_t colon = h.rfind(':');
  if (colon != absl::string_view::npos) {
    if (!AllDigits(h.substr(colon + 1))) return "";
    h = h.substr(0, colon);
  }
  absl::ConsumeSuffix(&h, ".");
  if (h.empty()) return "";
  for (char c : h) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '-' && c != '_') return "";
  }
  return absl::AsciiStrToLower(h);
}

std::string OriginOf(const std::string& url) {
  absl::string_view u = url;
  std::string scheme;
  if (absl::ConsumePrefix(&u, "https://")) {
    scheme = "https://";
  } else if (absl::ConsumePrefix(&u, "http://")) {
    scheme = "http://";
  } else {
    return "";
  }
  const std::string authority(u.substr(0, u.find_first_of("/?#")));
  if (HostName(authority).empty()) return "";
  return absl::AsciiStrToLower(absl::StrCat(scheme, authority));
}

std::optional<Response> Refusal(const Request& request, const GuardPolicy& policy) {
  if (request.host.empty()) return Response::Error(400, "the request has no Host header");
  const std::string name = HostName(request.host);
  if (name.empty()) {
    return Response::Error(
        400, absl::StrCat("the Host header \"", request.host, "\" is not a host name or address"));
  }
  if (!HostAllowed(name, policy)) {
    std::vector<std::string> names = {"localhost", "IP addresses"};
    names.insert(names.end(), policy.allowed_hosts.begin(), policy.allowed_hosts.end());
    return Response::Error(
        421, absl::StrCat("this server does not answer to the name \"", name, "\" (it answers to ",
                          absl::StrJoin(names, ", "), "; add a name to [http] allowed_hosts)"));
  }
  if (auto refused = CheckFetchMetadata(request)) return refused;
  return CheckWrite(request, policy);
}

}  // namespace podprof::http
