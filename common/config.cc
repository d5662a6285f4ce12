#include "common/config.h"

#include <fcntl.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "common/errno_status.h"
#include "common/status_macros.h"

namespace podprof {

struct ConfigFile::Impl {
  std::string name;
  toml::table root;
};

namespace {

// Debian's Abseil has its own string_view class, not an alias of the
// std::string_view that toml++ returns.
absl::string_view ToAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Type names as they appear after "got" in messages.
const char* TypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::none:
      return "nothing";
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
  }
  return "unknown type";
}

// " (line N)", or nothing when toml++ recorded no position (tables that only
// exist implicitly, such as 'a' in "[a.b]").
std::string LineSuffix(const toml::source_region& source) {
  if (source.begin.line == 0) return "";
  return absl::StrCat(" (line ", source.begin.line, ")");
}

// The common prefix of every message about one key: "<file>: key 'a.b'
// (line N)".
std::string KeyPrefix(const std::string& file, absl::string_view key, const toml::node& node) {
  return absl::StrCat(file, ": key '", key, "'", LineSuffix(node.source()));
}

absl::Status WrongType(const std::string& file, absl::string_view key, const toml::node& node,
                       absl::string_view expected) {
  return absl::InvalidArgumentError(
      absl::StrCat(KeyPrefix(file, key, node), " must be ", expected, ", got ", TypeName(node)));
}

// Finds the node at dotted `key`. Returns nullptr when it is absent, and an
// error when a component on the way exists but is not a table.
absl::StatusOr<const toml::node*> Find(const std::string& file, const toml::table& root,
                                       absl::string_view key) {
  const toml::table* table = &root;
  const toml::node* node = nullptr;
  size_t consumed = 0;
  for (absl::string_view part : absl::StrSplit(key, '.')) {
    if (node != nullptr) {
      table = node->as_table();
      if (table == nullptr) {
        // consumed - 1 drops the '.' after the component that is not a
        // table.
        return WrongType(file, key.substr(0, consumed - 1), *node, "a table");
      }
    }
    node = table->get(std::string_view(part.data(), part.size()));
    if (node == nullptr) return nullptr;
    consumed += part.size() + 1;
  }
  return node;
}

// Reads the whole file at `path`.
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path));
  std::string contents;
  char buf[16384];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      close(fd);
      return ErrnoToStatus(err, absl::StrCat("read ", path));
    }
    if (n == 0) break;
    contents.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return contents;
}

// The keys CheckKnownKeys accepts, split by kind.
class KnownKeys {
 public:
  explicit KnownKeys(const std::vector<std::string>& known) {
    for (absl::string_view key : known) {
      if (key == "*") {
        everything_ = true;
        continue;
      }
      if (absl::EndsWith(key, ".*")) {
        key.remove_suffix(2);
        wildcards_.emplace(key);
      } else {
        exact_.emplace(key);
      }
      // Every proper prefix of a known key is a table that may appear.
      for (size_t dot = key.find('.'); dot != absl::string_view::npos;
           dot = key.find('.', dot + 1)) {
        sections_.emplace(key.substr(0, dot));
      }
    }
  }

  // Whether `key` and everything below it is accepted.
  bool CoversSubtree(absl::string_view key) const {
    if (everything_) return true;
    for (size_t dot = key.find('.');; dot = key.find('.', dot + 1)) {
      if (wildcards_.count(std::string(key.substr(0, dot))) > 0) return true;
      if (dot == absl::string_view::npos) return false;
    }
  }

  // Whether a value (not a table) may appear at `key`.
  bool AcceptsValue(const std::string& key) const { return exact_.count(key) > 0; }

  // Whether a table may appear at `key`; its entries are checked separately.
  bool AcceptsTable(const std::string& key) const {
    return exact_.count(key) > 0 || sections_.count(key) > 0;
  }

 private:
  bool everything_ = false;
  std::set<std::string> exact_;
  std::set<std::string> wildcards_;
  std::set<std::string> sections_;
};

struct UnknownKey {
  std::string key;
  toml::source_region source;
};

// Returns whether `a` comes before `b` in the file. Positions toml++ did not
// record (line 0) sort last.
bool EarlierInFile(const toml::source_region& a, const toml::source_region& b) {
  auto position = [](const toml::source_region& r) {
    const uint64_t line = r.begin.line == 0 ? std::numeric_limits<uint32_t>::max() : r.begin.line;
    return std::make_pair(line, static_cast<uint64_t>(r.begin.column));
  };
  return position(a) < position(b);
}

// Walks `table` depth-first and records the unknown key that comes first in
// the file in *first (if any is earlier than what it already holds).
void FindUnknownKeys(const toml::table& table, const std::string& prefix, const KnownKeys& known,
                     std::optional<UnknownKey>* first) {
  for (auto&& [name, node] : table) {
    const std::string key =
        prefix.empty() ? std::string(name.str()) : absl::StrCat(prefix, ".", ToAbsl(name.str()));
    if (known.CoversSubtree(key)) continue;
    const toml::table* child = node.as_table();
    if (child != nullptr ? known.AcceptsTable(key) : known.AcceptsValue(key)) {
      if (child != nullptr) FindUnknownKeys(*child, key, known, first);
      continue;
    }
    // The key's own position is the most useful one to show; fall back to
    // the value's.
    const toml::source_region& source =
        name.source().begin.line != 0 ? name.source() : node.source();
    if (!first->has_value() || EarlierInFile(source, (*first)->source)) {
      *first = UnknownKey{key, source};
    }
  }
}

}  // namespace

ConfigFile::ConfigFile(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<ConfigFile> ConfigFile::Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return Parse(text, path);
}

absl::StatusOr<ConfigFile> ConfigFile::Parse(absl::string_view text, std::string name) {
  auto impl = std::make_shared<Impl>();
  impl->name = std::move(name);
  // toml++ reports errors by throwing; they are turned into a Status here so
  // that no exception leaves this file.
  try {
    impl->root =
        toml::parse(std::string_view(text.data(), text.size()), std::string_view(impl->name));
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(impl->name, ":", e.source().begin.line, ":",
                                                   e.source().begin.column, ": ",
                                                   ToAbsl(e.description())));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(impl->name, ": cannot parse: ", e.what()));
  }
  return ConfigFile(std::move(impl));
}

absl::Status ConfigFile::GetInt(absl::string_view key, int64_t* out) const {
  ASSIGN_OR_RETURN(const toml::node* node, Find(impl_->name, impl_->root, key));
  if (node == nullptr) return absl::OkStatus();
  const toml::value<int64_t>* value = node->as_integer();
  if (value == nullptr) return WrongType(impl_->name, key, *node, "an integer");
  *out = value->get();
  return absl::OkStatus();
}

absl::Status ConfigFile::GetInt(absl::string_view key, int32_t* out) const {
  int64_t wide = *out;
  RETURN_IF_ERROR(GetInt(key, &wide));
  constexpr int64_t kMin = std::numeric_limits<int32_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (wide < kMin || wide > kMax) {
    ASSIGN_OR_RETURN(const toml::node* node, Find(impl_->name, impl_->root, key));
    return absl::InvalidArgumentError(absl::StrCat(KeyPrefix(impl_->name, key, *node),
                                                   " must be an integer in [", kMin, ", ", kMax,
                                                   "], got ", wide));
  }
  *out = static_cast<int32_t>(wide);
  return absl::OkStatus();
}

absl::Status ConfigFile::GetDouble(absl::string_view key, double* out) const {
  ASSIGN_OR_RETURN(const toml::node* node, Find(impl_->name, impl_->root, key));
  if (node == nullptr) return absl::OkStatus();
  if (const toml::value<double>* value = node->as_floating_point()) {
    *out = value->get();
  } else if (const toml::value<int64_t>* value = node->as_integer()) {
    *out = static_cast<double>(value->get());
  } else {
    return WrongType(impl_->name, key, *node, "a number");
  }
  return absl::OkStatus();
}

bool ConfigFile::Has(absl::string_view key) const {
  absl::StatusOr<const toml::node*> node = Find(impl_->name, impl_->root, key);
  return node.ok() && *node != nullptr;
}

absl::Status ConfigFile::GetBool(absl::string_view key, bool* out) const {
  ASSIGN_OR_RETURN(const toml::node* node, Find(impl_->name, impl_->root, key));
  if (node == nullptr) return absl::OkStatus();
  const toml::value<bool>* value = node->as_boolean();
  if (value == nullptr) return WrongType(impl_->name, key, *node, "a boolean");
  *out = value->get();
  return absl::OkStatus();
}

absl::Status ConfigFile::GetString(absl::string_view key, std::string* out) const {
  ASSIGN_OR_RETURN(const toml::node* node, Find(impl_->name, impl_->root, key));
  if (node == nullptr) return absl::OkStatus();
  const toml::value<std::string>* value = node->as_string();
  if (value == nullptr) return WrongType(impl_->name, key, *node, "a string");
  *out = value->get();
  return absl::OkStatus();
}

absl::Status ConfigFile::GetDurationNs(absl::string_view key, int64_t* out) const {
  ASSIGN_OR_RETURN(const toml::node* node, Find(impl_->name, impl_->root, key));
  if (node == nullptr) return absl::OkStatus();
  const toml::value<std::string>* value = node->as_string();
  if (value == nullptr) {
    return WrongType(impl_->name, key, *node, "a duration like \"100ms\"");
  }
  absl::StatusOr<int64_t> ns = ParseDurationNs(value->get());
  if (!ns.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(KeyPrefix(impl_->name, key, *node), ": ", ns.status().message()));
  }
  *out = *ns;
  return absl::OkStatus();
}

absl::Status ConfigFile::GetStringList(absl::string_view key, std::vector<std::string>* out) const {
  ASSIGN_OR_RETURN(const toml::node* node, Find(impl_->name, impl_->root, key));
  if (node == nullptr) return absl::OkStatus();
  const toml::array* array = node->as_array();
  if (array == nullptr) {
    return WrongType(impl_->name, key, *node, "a list of strings");
  }
  std::vector<std::string> result;
  result.reserve(array->size());
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = *array->get(i);
    const toml::value<std::string>* value = element.as_string();
    if (value == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(KeyPrefix(impl_->name, key, *node),
                                                     " must be a list of strings, got ",
                                                     TypeName(element), " at index ", i));
    }
    result.push_back(value->get());
  }
  *out = std::move(result);
  return absl::OkStatus();
}

absl::Status ConfigFile::GetStringMap(absl::string_view key,
                                      std::map<std::string, std::string>* out) const {
  ASSIGN_OR_RETURN(const toml::node* node, Find(impl_->name, impl_->root, key));
  if (node == nullptr) return absl::OkStatus();
  const toml::table* table = node->as_table();
  if (table == nullptr) {
    return WrongType(impl_->name, key, *node, "a table of strings");
  }
  std::map<std::string, std::string> result;
  for (auto&& [name, element] : *table) {
    const toml::value<std::string>* value = element.as_string();
    if (value == nullptr) {
      return WrongType(impl_->name, absl::StrCat(key, ".", ToAbsl(name.str())), element,
                       "a string");
    }
    result.emplace(std::string(name.str()), value->get());
  }
  *out = std::move(result);
  return absl::OkStatus();
}

absl::Status ConfigFile::CheckKnownKeys(const std::vector<std::string>& known) const {
  std::optional<UnknownKey> first;
  FindUnknownKeys(impl_->root, "", KnownKeys(known), &first);
  if (!first.has_value()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(impl_->name, ": unknown key '", first->key, "'", LineSuffix(first->source),
                   "; known keys: ", known.empty() ? "(none)" : absl::StrJoin(known, ", ")));
}

const std::string& ConfigFile::name() const { return impl_->name; }

}  // namespace podprof
