// A request as Boost.Beast parsed it, turned into http::Request: what the server hands its
// handlers, and what the fuzzer (tests/http/fuzz) feeds the router, so both read one way.
#ifndef PODPROF_HTTP_BEAST_REQUEST_H_
#define PODPROF_HTTP_BEAST_REQUEST_H_

#include <boost/beast/http.hpp>
#include <string>

#include "http/message.h"

namespace podprof::http {

inline Request ToRequest(const boost::beast::http::request<boost::beast::http::string_body>& r,
                         const std::string& peer) {
  namespace bhttp = boost::beast::http;
  Request out;
  out.method = std::string(r.method_string());
  const auto raw_target = r.target();
  ParseTarget(absl::string_view(raw_target.data(), raw_target.size()), &out);
  out.body = r.body();
  auto header = [&r](auto field) {
    const auto v = r[field];
    return std::string(v.data(), v.size());
  };
  out.content_type = header(bhttp::field::content_type);
  out.host = header(bhttp::field::host);
  out.origin = header(bhttp::field::origin);
  out.fetch_site = header("Sec-Fetch-Site");
  out.fetch_mode = header("Sec-Fetch-Mode");
  out.fetch_dest = header("Sec-Fetch-Dest");
  out.peer = peer;
  return out;
}

}  // namespace podprof::http

#endif  // PODPROF_HTTP_BEAST_REQUEST_H_
