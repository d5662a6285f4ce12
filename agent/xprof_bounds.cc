#include "agent/xprof_bounds.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"

namespace podprof::agent {
namespace {

namespace fs = std::filesystem;

// `p` lexically normalised, without a trailing separator ("/a/b/" is "/a/b").
fs::path Clean(const fs::path& p) {
  fs::path n = p.lexically_normal();
  if (!n.has_filename() && n.has_relative_path()) n = n.parent_path();
  return n;
}

// `p` with the symbolic links that exist now followed; nullopt-like empty path on error.
fs::path Resolve(const fs::path& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(p, ec);
  if (ec) return {};
  return Clean(r);
}

bool IsInside(const fs::path& path, const fs::path& root) {
  if (root.empty() || path.empty()) return false;
  auto [r, p] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  return r == root.end();
}

// The roots as configured, for messages.
std::string RootsText(const XprofBounds& b) {
  std::vector<std::string> all = {XprofSpoolRoot(b.spool_dir)};
  all.insert(all.end(), b.allowed_roots.begin(), b.allowed_roots.end());
  return absl::StrJoin(all, ", ");
}

absl::Status CheckComponent(const std::string& field, const std::string& value) {
  if (value == "." || value == ".." || absl::StrContains(value, '/') ||
      absl::StrContains(value, '\0')) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " \"", value, "\" must be a single path component"));
  }
  return absl::OkStatus();
}

absl::Status CheckHostName(const std::string& field, const std::string& value) {
  if (absl::StrContains(value, '/') || absl::StrContains(value, '\0')) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " \"", value, "\" names the output file and may not hold '/'"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string XprofSpoolRoot(const std::string& spool_dir) {
  return (Clean(spool_dir) / "xprof").string();
}

absl::Status CheckXprofDuration(uint64_t duration_ms, const XprofBounds& bounds,
                                const std::string& field) {
  const uint64_t max_ms =
      static_cast<uint64_t>(std::max<int64_t>(bounds.max_duration_ns, 0)) / 1'000'000;
  if (duration_ms <= max_ms) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, " = ", duration_ms,
                   " is longer than this agent allows (limits.max_capture_duration = ",
                   FormatDurationPs(bounds.max_duration_ns * 1000), ")"));
}

absl::Status CheckInsideXprofRoots(const XprofBounds& bounds, const std::string& field,
                                   const std::string& path) {
  if (path.empty() || path.front() != '/' || absl::StrContains(path, '\0')) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " \"", path, "\" is not an absolute path"));
  }
  const fs::path resolved = Resolve(Clean(path));
  // The spool itself holds podprof's own capture directories: only its xprof folder is
  // offered, and a link put in that folder's place is not followed.
  std::vector<fs::path> roots = {Resolve(Clean(bounds.spool_dir)) / "xprof"};
  for (const std::string& r : bounds.allowed_roots) roots.push_back(Resolve(Clean(r)));
  for (const fs::path& root : roots) {
    if (IsInside(resolved, root)) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      field, " \"", path, "\"",
      resolved.empty() || resolved.string() == path
          ? ""
          : absl::StrCat(" (resolving to ", resolved.string(), ")"),
      " is outside the directories XProf sessions may be written to: ", RootsText(bounds),
      " ([xprof] allowed_roots in the agent's configuration adds more)"));
}

absl::Status BoundProfileRequest(const XprofBounds& bounds, int64_t now_ns,
                                 tensorflow::ProfileRequest* request) {
  tensorflow::ProfileOptions& opts = *request->mutable_opts();
  // Servers wait on one field or the other; both are held to the limit.
  const uint64_t duration_ms = std::max(request->duration_ms(), opts.duration_ms());
  if (duration_ms == 0) {
    return absl::InvalidArgumentError(
        "duration_ms (and opts.duration_ms) is 0; a session lasts at least 1 ms");
  }
  if (absl::Status s = CheckXprofDuration(duration_ms, bounds, "duration_ms"); !s.ok()) return s;
  const uint64_t now = static_cast<uint64_t>(std::max<int64_t>(now_ns, 0));
  if (opts.start_timestamp_ns() > now &&
      opts.start_timestamp_ns() - now > static_cast<uint64_t>(bounds.max_duration_ns)) {
    return absl::InvalidArgumentError(
        absl::StrCat("opts.start_timestamp_ns is ", (opts.start_timestamp_ns() - now) / 1'000'000,
                     " ms ahead; a session may start at most limits.max_capture_duration (",
                     FormatDurationPs(bounds.max_duration_ns * 1000), ") from now"));
  }
  for (const auto& [field, value] :
       {std::pair<const char*, const std::string*>{"session_id", &request->session_id()},
        {"opts.session_id", &opts.session_id()}}) {
    if (absl::Status s = CheckComponent(field, *value); !s.ok()) return s;
  }
  if (absl::Status s = CheckHostName("host_name", request->host_name()); !s.ok()) return s;
  if (absl::Status s = CheckHostName("opts.override_hostname", opts.override_hostname()); !s.ok()) {
    return s;
  }
  if (auto it = opts.advanced_configuration().find("override_hostname");
      it != opts.advanced_configuration().end()) {
    if (absl::Status s = CheckHostName("opts.advanced_configuration[\"override_hostname\"]",
                                       it->second.string_value());
        !s.ok()) {
      return s;
    }
  }
  if (request->repository_root().empty()) {
    request->set_repository_root(XprofSpoolRoot(bounds.spool_dir));
  }
  // The session directory, as the workload makes it, for each session id it may use.
  for (const std::string* session : {&request->session_id(), &opts.session_id()}) {
    const std::string dir = session->empty()
                                ? request->repository_root()
                                : absl::StrCat(request->repository_root(), "/", *session);
    if (absl::Status s = CheckInsideXprofRoots(bounds, "the session directory", dir); !s.ok()) {
      // Name what the caller sent when it alone is outside.
      if (absl::Status r =
              CheckInsideXprofRoots(bounds, "repository_root", request->repository_root());
          !r.ok()) {
        return r;
      }
      return s;
    }
  }
  if (!opts.repository_path().empty()) {
    if (absl::Status s =
            CheckInsideXprofRoots(bounds, "opts.repository_path", opts.repository_path());
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace podprof::agent
