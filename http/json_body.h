// Request bodies in JSON, read with bounds: a body is refused before nlohmann's parser (whose
// copies and dumps recurse) sees nesting deeper than a few levels, and each field is read by
// reference and checked against the range of what it becomes, with errors naming the field.
#ifndef PODPROF_HTTP_JSON_BODY_H_
#define PODPROF_HTTP_JSON_BODY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "nlohmann/json.hpp"

namespace podprof::http {

// Deeper than any body the API takes ({"labels": {"k": "v"}} is 2).
inline constexpr int kMaxJsonDepth = 8;
// Items in one list or map field (hosts, labels): more than a pod's hosts.
inline constexpr size_t kMaxJsonItems = 100'000;

// The body as a JSON object; InvalidArgument for nesting past `max_depth`, malformed JSON or
// anything but an object.
absl::StatusOr<nlohmann::json> ParseJsonObject(absl::string_view body,
                                               int max_depth = kMaxJsonDepth);

// InvalidArgument naming the first key of `object` that is not in `known` (and listing them).
absl::Status OnlyKnownFields(const nlohmann::json& object, absl::Span<const char* const> known);

// The unsigned integer `key` of `object` (`fallback` when absent), within [min, max];
// InvalidArgument naming the field for a string, a fraction, a negative number or one out of
// range.
absl::StatusOr<uint64_t> UintField(const nlohmann::json& object, const char* key, uint64_t min,
                                   uint64_t max, uint64_t fallback);
// The string `key` of `object` (`fallback` when absent); InvalidArgument naming the
// field as `name` (`key` when empty: "alerts[2].status") for any other type, or for a string of
// more than `max_bytes`.
absl::StatusOr<std::string> StringField(const nlohmann::json& object, const char* key,
                                        const std::string& fallback, absl::string_view name = "",
                                        size_t max_bytes = 1 << 20);
// The list of strings `key` (empty when absent), at most kMaxJsonItems.
absl::StatusOr<std::vector<std::string>> StringListField(const nlohmann::json& object,
                                                         const char* key);
// The object of strings `key` (empty when absent), at most kMaxJsonItems.
absl::StatusOr<std::map<std::string, std::string>> StringMapField(const nlohmann::json& object,
                                                                  const char* key);

}  // namespace podprof::http

#endif  // PODPROF_HTTP_JSON_BODY_H_
