#include "http/json_body.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace podprof::http {
namespace {

// The deepest nesting of arrays and objects in `text`, counted outside strings; stops counting
// past `limit`. Linear and without recursion, so any body can be measured.
int NestingDepth(absl::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

const char* TypeName(const nlohmann::json& v) { return v.type_name(); }

// The member `key` of `object` when it is a `type` of at most kMaxJsonItems `parts` (nullptr
// when absent); InvalidArgument naming the field otherwise ("labels must be an object of
// strings, got a string").
absl::StatusOr<const nlohmann::json*> Container(const nlohmann::json& object, const char* key,
                                                nlohmann::json::value_t type, const char* kind,
                                                const char* parts) {
  const auto it = object.find(key);
  if (it == object.end()) return nullptr;
  if (it->type() != type) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, " must be ", kind, " of strings, got a ", TypeName(*it)));
  }
  if (it->size() > kMaxJsonItems) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, " has ", it->size(), " ", parts, ", at most ", kMaxJsonItems));
  }
  return &*it;
}

}  // namespace

absl::StatusOr<nlohmann::json> ParseJsonObject(absl::string_view body, int max_depth) {
  if (NestingDepth(body, max_depth) > max_depth) {
    return absl::InvalidArgumentError(
        absl::StrCat("the body nests arrays or objects deeper than ", max_depth, " levels"));
  }
  nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError("the body is not valid JSON");
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the body is a JSON ", TypeName(j), ", not an object"));
  }
  return j;
}

absl::Status OnlyKnownFields(const nlohmann::json& object, absl::Span<const char* const> known) {
  for (const auto& item : object.items()) {
    if (std::find_if(known.begin(), known.end(), [&](const char* k) { return item.key() == k; }) ==
        known.end()) {
      return absl::InvalidArgumentError(absl::StrCat("the body has an unknown field \"", item.key(),
                                                     "\" (known: ", absl::StrJoin(known, ", "),
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> UintField(const nlohmann::json& object, const char* key, uint64_t min,
                                   uint64_t max, uint64_t fallback) {
  const auto it = object.find(key);
  if (it == object.end()) return fallback;
  const nlohmann::json& v = *it;
  uint64_t n = 0;
  if (v.is_number_unsigned()) {
    n = v.get<uint64_t>();
  } else if (v.is_number_integer()) {  // a negative one: unsigned ones were taken above
    return absl::InvalidArgumentError(
        absl::StrCat(key, " must be at least ", min, ", got ", v.get<int64_t>()));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(key, " must be a whole number, got a ", TypeName(v), " (", v.dump(), ")"));
  }
  if (n < min || n > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, " must be between ", min, " and ", max, ", got ", n));
  }
  return n;
}

absl::StatusOr<std::string> StringField(const nlohmann::json& object, const char* key,
                                        const std::string& fallback, absl::string_view name,
                                        size_t max_bytes) {
  const auto it = object.find(key);
  if (it == object.end()) return fallback;
  if (name.empty()) name = key;
  if (!it->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be a string, got a ", TypeName(*it)));
  }
  const std::string& v = it->get_ref<const std::string&>();
  if (v.size() > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be a string of at most ", max_bytes, " bytes"));
  }
  return v;
}

absl::StatusOr<std::vector<std::string>> StringListField(const nlohmann::json& object,
                                                         const char* key) {
  std::vector<std::string> out;
  ASSIGN_OR_RETURN(const nlohmann::json* list,
                   Container(object, key, nlohmann::json::value_t::array, "a list", "items"));
  if (list == nullptr) return out;
  for (const nlohmann::json& v : *list) {
    if (!v.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(key, " must be a list of strings, and has a ", TypeName(v)));
    }
    out.push_back(v.get_ref<const std::string&>());
  }
  return out;
}

absl::StatusOr<std::map<std::string, std::string>> StringMapField(const nlohmann::json& object,
                                                                  const char* key) {
  std::map<std::string, std::string> out;
  ASSIGN_OR_RETURN(const nlohmann::json* map,
                   Container(object, key, nlohmann::json::value_t::object, "an object", "entries"));
  if (map == nullptr) return out;
  for (const auto& item : map->items()) {
    if (!item.value().is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(key, ".", item.key(), " must be a string, got a ", TypeName(item.value())));
    }
    out[item.key()] = item.value().get_ref<const std::string&>();
  }
  return out;
}

}  // namespace podprof::http
