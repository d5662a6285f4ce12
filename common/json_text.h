// JSON text that never throws: nlohmann::json's dump() throws type_error.316 on a string that
// is not valid UTF-8, and the strings podprof writes hold names from outside (kernel names read
// from an XSpace, host names, warnings, labels). Escaping each name first would cost a check
// per string on every answer; instead the text is dumped as it is and, only when that throws,
// dumped again from a copy whose invalid bytes are written `\xNN` (common/utf8.h), keys too.
//
// Header-only (a template over nlohmann's json and ordered_json); its includers link
// nlohmann_json and podprof_common. Thread-safe.
#ifndef PODPROF_COMMON_JSON_TEXT_H_
#define PODPROF_COMMON_JSON_TEXT_H_

#include <string>
#include <utility>

#include "common/utf8.h"
#include "nlohmann/json.hpp"

namespace podprof {
namespace json_text_internal {

// `j` with EscapeInvalidUtf8 applied to every string and key. Recursive: the JSON podprof writes
// nests a few levels (bodies are read with a depth bound, http/json_body.h).
template <typename Json>
Json Escaped(const Json& j) {
  if (j.is_string()) return Json(EscapeInvalidUtf8(j.template get_ref<const std::string&>()));
  if (j.is_array()) {
    Json out = Json::array();
    for (const Json& v : j) out.push_back(Escaped(v));
    return out;
  }
  if (j.is_object()) {
    Json out = Json::object();
    for (auto it = j.begin(); it != j.end(); ++it) out[EscapeInvalidUtf8(it.key())] = Escaped(*it);
    return out;
  }
  return j;
}

}  // namespace json_text_internal

// `j` as JSON text, as j.dump(indent) writes it, with invalid UTF-8 in strings and keys written
// `\xNN` instead of throwing.
template <typename Json>
std::string JsonText(const Json& j, int indent = -1) {
  try {
    return j.dump(indent);
  } catch (const nlohmann::detail::type_error&) {
    // Nothing else in dump() throws a type_error: the only cause is bad UTF-8. Replace is the
    // last resort should the escaped copy still fail (it cannot: its strings are valid).
    return json_text_internal::Escaped(j).dump(indent, ' ', false, Json::error_handler_t::replace);
  }
}

}  // namespace podprof

#endif  // PODPROF_COMMON_JSON_TEXT_H_
