// The checks that keep a browser from being turned against the daemons' HTTP servers, made on
// every request before a handler sees it. A page the user opens elsewhere can make the browser
// send requests here (an <img>, a form, a no-cors fetch) and a rebinding DNS name can make it
// read the answers; the browser cannot forge Host, Origin or the Fetch Metadata headers, so:
//
// - Host must be a name this server answers to: loopback names (`localhost`, `*.localhost`),
//   an IP literal (a rebinding attack needs a name that the attacker controls), or one listed in
//   GuardPolicy::allowed_hosts. Otherwise 421: a rebinding page reads nothing.
// - A request the browser marks cross-site or same-site (`Sec-Fetch-Site`) is refused unless it
//   is a top-level navigation (a link to a capture page from a chat still opens it): an <img> or
//   a script on another site cannot start work here. 403.
// - Anything but GET and HEAD needs `Content-Type: application/json` (no HTML form and no
//   no-cors fetch can send it without a CORS preflight, which this server refuses) and, when the
//   browser sends an Origin, one equal to the server's own or in GuardPolicy::allowed_origins.
//   415 and 403.
//
// Clients that are not browsers (curl, Prometheus, scripts) send none of the browser headers
// and pass as long as their Host is allowed and their writes say application/json.
#ifndef PODPROF_HTTP_GUARD_H_
#define PODPROF_HTTP_GUARD_H_

#include <optional>
#include <string>
#include <vector>

#include "http/message.h"

namespace podprof::http {

struct GuardPolicy {
  // The scheme of the server's own origin: https when true.
  bool tls = false;
  // Host names (without port, lower case) answered beyond loopback names and IP literals: this
  // machine's name and the configured [http] allowed_hosts.
  std::vector<std::string> allowed_hosts;
  // Origins ("https://podprof.example.com", no path) whose pages may write beyond the server's
  // own: a configured external URL in front of a proxy.
  std::vector<std::string> allowed_origins;
};

// The response refusing `request` (400, 403, 415 or 421, naming the header and what it should
// be), or nullopt when it may go to its handler.
std::optional<Response> Refusal(const Request& request, const GuardPolicy& policy);

// The host part of a Host header ("[::1]:7180" -> "::1", "Example.COM." -> "example.com"),
// or "" for a malformed one.
std::string HostName(const std::string& host_header);

// The origin of an absolute URL ("https://a.example:8443/x" -> "https://a.example:8443"), or
// "" when it is not http(s).
std::string OriginOf(const std::string& url);

}  // namespace podprof::http

#endif  // PODPROF_HTTP_GUARD_H_
