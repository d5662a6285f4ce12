// libFuzzer target: raw bytes as an HTTP request, through Beast's parser, the conversion the
// server makes, the browser guard, the router with the aggregator's route shapes, and the
// bounded JSON body reading of POST /api/v1/captures. Anything may be refused; nothing may
// crash, hang or grow without bound.
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "http/beast_request.h"
#include "http/guard.h"
#include "http/json_body.h"
#include "http/message.h"

namespace {

namespace bhttp = boost::beast::http;
using podprof::http::Request;
using podprof::http::Response;

// The body as the aggregator reads a capture request, field by field.
Response StartCapture(const Request& r) {
  absl::StatusOr<nlohmann::json> body = podprof::http::ParseJsonObject(r.body);
  if (!body.ok()) return Response::Error(body.status());
  static constexpr const char* kFields[] = {"duration_ms", "delay_ms", "hosts", "selector",
                                            "labels"};
  if (absl::Status s = podprof::http::OnlyKnownFields(*body, kFields); !s.ok()) {
    return Response::Error(s);
  }
  auto duration = podprof::http::UintField(*body, "duration_ms", 1, 9'223'372'036'854, 0);
  auto delay = podprof::http::UintField(*body, "delay_ms", 0, 4'294'967'295u, 0);
  auto hosts = podprof::http::StringListField(*body, "hosts");
  auto labels = podprof::http::StringMapField(*body, "labels");
  auto selector = podprof::http::StringMapField(*body, "selector");
  const bool ok = duration.ok() && delay.ok() && hosts.ok() && labels.ok() && selector.ok();
  return Response::Text(ok ? 201 : 400, "");
}

const podprof::http::Router& Routes() {
  static const auto* router = [] {
    auto* r = new podprof::http::Router;
    auto echo = [](const Request& q) { return Response::Text(200, q.path); };
    for (const char* p :
         {"/api/v1/captures", "/api/v1/captures/{id}", "/api/v1/captures/{id}/kernels",
          "/api/v1/captures/{id}/timeline", "/api/v1/captures/{id}/export",
          "/api/v1/captures/{id}/events", "/api/v1/kernels/{name}", "/metrics"}) {
      r->Add("GET", p, echo);
    }
    r->Add("POST", "/api/v1/captures", StartCapture);
    r->Add("POST", "/api/v1/captures/{id}/cancel", echo);
    return r;
  }();
  return *router;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bhttp::request_parser<bhttp::string_body> parser;
  parser.body_limit(1 << 20);
  parser.header_limit(64 * 1024);
  parser.eager(true);
  boost::beast::error_code ec;
  size_t used = 0;
  while (used < size && !parser.is_done()) {
    const size_t n = parser.put(boost::asio::buffer(data + used, size - used), ec);
    if (ec || n == 0) break;
    used += n;
  }
  if (!parser.is_done()) {
    // The end of the connection ends a body read to EOF; only a parser that has read a
    // header and not failed may be told (put_eof's precondition).
    if ((ec && ec != bhttp::error::need_more) || !parser.got_some()) return 0;
    ec = {};
    parser.put_eof(ec);
    if (ec || !parser.is_done()) return 0;
  }
  Request request = podprof::http::ToRequest(parser.get(), "127.0.0.1:1");
  podprof::http::GuardPolicy policy;
  policy.allowed_hosts = {"podprof.example.com"};
  policy.allowed_origins = {"https://podprof.example.com"};
  if (podprof::http::Refusal(request, policy).has_value()) return 0;
  Routes().Handle(request);
  return 0;
}
