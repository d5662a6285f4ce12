#include "common/utf8.h"

#include <cstdint>
#include <cstdio>

namespace podprof {
namespace {

// The length of the well-formed UTF-8 sequence at the start of `s` (1 to 4), with its code
// point in `*cp`; 0 when the first byte does not begin one. The ranges are the Unicode
// standard's table 3-7 (well-formed byte sequences).
size_t DecodeOne(absl::string_view s, uint32_t* cp) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t c = b(0);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t n = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < n || b(1) < lo || b(1) > hi) return 0;
  uint32_t v = c & (0xFF >> (n + 1));
  v = (v << 6) | (b(1) & 0x3F);
  for (size_t i = 2; i < n; ++i) {
    if ((b(i) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b(i) & 0x3F);
  }
  *cp = v;
  return n;
}

void AppendByteEscape(uint8_t byte, std::string* out) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02X", byte);
  out->append(buf);
}

// Shared by both escapers: `terminal` also escapes controls and bidirectional controls.
std::string Escape(absl::string_view s, bool terminal) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = DecodeOne(s.substr(i), &cp);
    if (n == 0) {
      AppendByteEscape(static_cast<uint8_t>(s[i]), &out);
      ++i;
      continue;
    }
    if (terminal && (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F))) {
      AppendByteEscape(static_cast<uint8_t>(cp), &out);
    } else if (terminal && ((cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069))) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(cp));
      out.append(buf);
    } else {
      out.append(s.data() + i, n);
    }
    i += n;
  }
  return out;
}

}  // namespace

bool IsValidUtf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    // ASCII runs are the common case: skip them a byte at a time without decoding.
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t n = DecodeOne(s.substr(i), &cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string EscapeInvalidUtf8(absl::string_view s) {
  if (IsValidUtf8(s)) return std::string(s);
  return Escape(s, /*terminal=*/false);
}

std::string TruncateUtf8(absl::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return std::string(s);
  size_t end = max_bytes;
  // Back to the first byte of the sequence the cut falls in (at most 3 continuation bytes).
  while (end > 0 && max_bytes - end < 3 && (static_cast<uint8_t>(s[end]) & 0xC0) == 0x80) --end;
  if ((static_cast<uint8_t>(s[end]) & 0xC0) == 0x80) end = max_bytes;  // not UTF-8 there anyway
  return std::string(s.substr(0, end));
}

std::string EscapeForTerminal(absl::string_view s) { return Escape(s, /*terminal=*/true); }

}  // namespace podprof
