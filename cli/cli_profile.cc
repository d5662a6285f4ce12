#include "cli/cli_profile.h"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/status_macros.h"

namespace podprof::cli {
namespace {

// The keys of the defaults and of each profile.
const char* const kKeys[] = {"aggregator", "format", "timeout",  "tls_cert",
                             "tls_key",    "tls_ca", "max_size", "http"};

absl::Status Set(const std::string& file, const std::string& key, const std::string& value,
                 CliContext& context) {
  if (key == "aggregator") {
    context.target.address = value;
  } else if (key == "tls_cert") {
    context.tls.cert = value;
  } else if (key == "tls_key") {
    context.tls.key = value;
  } else if (key == "tls_ca") {
    context.tls.ca = value;
  } else if (key == "format") {
    auto it = OutputFormatsByName().find(value);
    if (it == OutputFormatsByName().end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": ", key, " = \"", value, "\": use table, json or csv"));
    }
    context.format = it->second;
  } else if (key == "timeout") {
    absl::StatusOr<int64_t> ns = ParseDurationNs(value);
    if (!ns.ok() || *ns <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": ", key, " = \"", value, "\": want a positive duration, e.g. 30s"));
    }
    context.target.timeout_ns = *ns;
    context.timeout_from_profile = true;
  } else if (key == "max_size") {
    absl::StatusOr<uint64_t> bytes = ParseByteSize(value);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": ", key, " = \"", value, "\": want a size, e.g. 256MB or 1GB"));
    }
    context.export_max_bytes = *bytes;
  } else if (key == "http") {
    if (!absl::StartsWith(value, "http://") && !absl::StartsWith(value, "https://")) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ": ", key, " = \"", value, "\": want the HTTP API's URL, e.g. https://agg:7180"));
    }
    context.http_url = value;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": unknown key '", key,
                     "' (aggregator, format, timeout, tls_cert, tls_key, tls_ca, max_size, http)"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string EnvValue(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

std::string CliConfigPath() {
  if (std::string p = EnvValue("PODPROF_CLI_CONFIG"); !p.empty()) return p;
  if (std::string x = EnvValue("XDG_CONFIG_HOME"); !x.empty()) {
    return absl::StrCat(x, "/podprof/cli.toml");
  }
  if (std::string h = EnvValue("HOME"); !h.empty()) {
    return absl::StrCat(h, "/.config/podprof/cli.toml");
  }
  return "";
}

std::string ProfileName(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--profile" && i + 1 < argc) return argv[i + 1];
    if (absl::StartsWith(arg, "--profile=")) {
      return std::string(absl::StripPrefix(arg, "--profile="));
    }
  }
  return EnvValue("PODPROF_PROFILE");
}

absl::Status ApplyCliProfile(const std::string& path, const std::string& profile,
                             CliContext& context) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) {
    if (profile.empty()) return absl::OkStatus();
    return absl::NotFoundError(absl::StrCat("profile \"", profile, "\" asked for, but ",
                                            path.empty() ? "no configuration file" : path,
                                            " does not exist"));
  }
  ASSIGN_OR_RETURN(ConfigFile file, ConfigFile::Load(path));
  std::vector<std::string> known(std::begin(kKeys), std::end(kKeys));
  known.push_back("profiles.*");
  RETURN_IF_ERROR(file.CheckKnownKeys(known));
  for (const char* key : kKeys) {
    std::string value;
    RETURN_IF_ERROR(file.GetString(key, &value));
    if (!value.empty()) RETURN_IF_ERROR(Set(path, key, value, context));
  }
  if (profile.empty()) return absl::OkStatus();
  std::map<std::string, std::string> keys;
  RETURN_IF_ERROR(file.GetStringMap(absl::StrCat("profiles.", profile), &keys));
  if (keys.empty()) {
    return absl::NotFoundError(
        absl::StrCat(path, ": no [profiles.", profile, "] (from --profile or $PODPROF_PROFILE)"));
  }
  for (const auto& [key, value] : keys) {
    RETURN_IF_ERROR(Set(absl::StrCat(path, " [profiles.", profile, "]"), key, value, context));
  }
  return absl::OkStatus();
}

void ApplyCliEnvironment(CliContext& context) {
  const std::pair<const char*, std::string*> kVariables[] = {
      {"PODPROF_AGGREGATOR", &context.target.address},
      {"PODPROF_TLS_CERT", &context.tls.cert},
      {"PODPROF_TLS_KEY", &context.tls.key},
      {"PODPROF_TLS_CA", &context.tls.ca},
  };
  for (const auto& [name, setting] : kVariables) {
    if (std::string value = EnvValue(name); !value.empty()) *setting = std::move(value);
  }
}

}  // namespace podprof::cli
