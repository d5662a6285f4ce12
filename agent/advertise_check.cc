#include "agent/advertise_check.h"

#include <netdb.h>
#include <sys/socket.h>

#include "absl/strings/str_cat.h"

namespace podprof::agent {

absl::Status SystemResolver::Resolve(const std::string& host) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (found != nullptr) ::freeaddrinfo(found);
  if (rc == 0) return absl::OkStatus();
  return absl::NotFoundError(gai_strerror(rc));
}

std::string AdvertisedAddress(const AgentConfig& config, bool* from_host_name) {
  *from_host_name = config.advertise.empty();
  if (!config.advertise.empty()) return config.advertise;
  const size_t colon = config.listen.rfind(':');
  return absl::StrCat(config.host_name,
                      colon == std::string::npos ? "" : config.listen.substr(colon));
}

namespace {

// "host" of "host:port" or "[v6]:port".
std::string HostOf(const std::string& address) {
  std::string host = address.substr(0, address.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

}  // namespace

absl::Status CheckAdvertisedAddress(const AgentConfig& config, Resolver& resolver,
                                    std::string* warning) {
  warning->clear();
  if (config.aggregator.empty()) return absl::OkStatus();
  bool from_host_name = false;
  const std::string host = HostOf(AdvertisedAddress(config, &from_host_name));
  absl::Status resolved = resolver.Resolve(host);
  if (resolved.ok()) return absl::OkStatus();
  const std::string sentence = absl::StrCat(
      "the aggregator dials this agent at ", host,
      from_host_name ? " (its host name: advertise is not set)"
                     : absl::StrCat(" (advertise = ", config.advertise, ")"),
      ", which does not resolve on this host (", resolved.message(),
      "), so captures of this host will likely fail: set --advertise (advertise in agent.toml) "
      "to an address the aggregator reaches, such as this host's IP address and port",
      from_host_name ? ", or --host-name to a name that resolves" : "");
  if (config.advertise_check == "refuse") {
    return absl::FailedPreconditionError(
        absl::StrCat(sentence, " (advertise_check = \"refuse\"; \"warn\" starts anyway)"));
  }
  *warning = sentence;
  return absl::OkStatus();
}

}  // namespace podprof::agent
