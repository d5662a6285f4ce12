// Bytes that are meant to be text but come from outside (kernel names read from an XSpace, host
// names and warnings sent by agents, labels): UTF-8 checked the way protobuf and nlohmann::json
// check it, and made safe to pass on. Protobuf refuses to parse a proto3 `string` holding bad
// bytes and nlohmann::json throws when dumping one, so a name is escaped before it reaches
// either; a terminal obeys the control characters and bidirectional overrides in a name, so a
// name is escaped before it is printed.
//
// Escapes are visible and ASCII: an invalid byte reads `\xNN`, a control or bidirectional code
// point `\xNN` (below U+0100) or `\uNNNN`. A backslash already in the text stays as it is, so
// the escaping shows what was there but is not meant to be undone.
//
// Pure functions; thread-safe.
#ifndef PODPROF_COMMON_UTF8_H_
#define PODPROF_COMMON_UTF8_H_

#include <string>

#include "absl/strings/string_view.h"

namespace podprof {

// Whether `s` is well-formed UTF-8: no stray continuation bytes, truncated sequences, overlong
// forms, surrogates (U+D800..U+DFFF) or code points past U+10FFFF.
bool IsValidUtf8(absl::string_view s);

// `s` with every byte that is not part of a well-formed UTF-8 sequence written as `\xNN`
// (upper-case hex); `s` itself when it is valid. The result is always valid UTF-8.
std::string EscapeInvalidUtf8(absl::string_view s);

// The longest prefix of `s` of at most `max_bytes` that does not end inside a multi-byte
// sequence: a name cut to a limit stays as valid as it was.
std::string TruncateUtf8(absl::string_view s, size_t max_bytes);

// `s` as it may be written to a terminal: EscapeInvalidUtf8, and also every C0 control
// (U+0000..U+001F, tab and newline included: a table cell or one line of text must stay one),
// DEL and C1 control (U+007F..U+009F) as `\xNN`, and the bidirectional embeddings, overrides
// and isolates (U+202A..U+202E, U+2066..U+2069) as `\uNNNN`, which would otherwise reorder what
// follows them on the line.
std::string EscapeForTerminal(absl::string_view s);

}  // namespace podprof

#endif  // PODPROF_COMMON_UTF8_H_
