// The host-transfer instructions' HLO text, read as XProf reads the instruction behind it
// (xspace_to_dcn_slack_analysis.cc, GetInstrMetadataFromHloModule): opcode, channel_id, the
// frontend attributes and the shape's byte size.
//
// The text comes from a capture, so it may be anything: every reader here walks the text once
// (nesting bounded by kMaxDepth) and a part it cannot read is treated as absent, never trusted.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "insight/dcn.h"

namespace podprof::insight {
namespace {

constexpr int kMaxDepth = 16;
constexpr int64_t kMaxBytes = int64_t{1} << 60;  // beyond this a shape is not believed

bool IsIdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

void SkipSpaces(std::string_view s, size_t* i) {
  while (*i < s.size() && (s[*i] == ' ' || s[*i] == '\t' || s[*i] == '\n' || s[*i] == '\r')) ++*i;
}

// A non-negative decimal at s[*i]; false (and *i unmoved) when there is none or it overflows.
bool ReadUint(std::string_view s, size_t* i, int64_t* out) {
  size_t j = *i;
  int64_t v = 0;
  while (j < s.size() && s[j] >= '0' && s[j] <= '9') {
    if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) return false;
    v = v * 10 + (s[j] - '0');
    ++j;
  }
  if (j == *i) return false;
  *i = j;
  *out = v;
  return true;
}

// Bytes of one element as ShapeUtil::ByteSizeOfPrimitiveType gives them (sub-byte types take a
// byte each unless the layout packs them); -1 for a name that is not a primitive type.
int ElementBytes(std::string_view t) {
  if (t == "pred" || t == "s2" || t == "s4" || t == "s8" || t == "u2" || t == "u4" || t == "u8") {
    return 1;
  }
  if (t.substr(0, 2) == "f8" || t.substr(0, 2) == "f4") return 1;  // f8e4m3fn, f4e2m1fn, ...
  if (t == "s16" || t == "u16" || t == "f16" || t == "bf16") return 2;
  if (t == "s32" || t == "u32" || t == "f32") return 4;
  if (t == "s64" || t == "u64" || t == "f64" || t == "c64") return 8;
  if (t == "c128") return 16;
  return -1;
}

// Skips a `{...}` group at s[*i] (nested braces, quoted strings inside); false when unclosed.
bool SkipBraces(std::string_view s, size_t* i);

// Skips a quoted string at s[*i] (backslash escapes); `out`, when given, gets it unescaped.
bool ReadQuoted(std::string_view s, size_t* i, std::string* out) {
  if (*i >= s.size() || s[*i] != '"') return false;
  size_t j = *i + 1;
  while (j < s.size() && s[j] != '"') {
    char c = s[j];
    if (c == '\\') {
      if (++j >= s.size()) return false;
      c = s[j] == 'n' ? '\n' : s[j] == 't' ? '\t' : s[j] == 'r' ? '\r' : s[j];
    }
    if (out != nullptr) out->push_back(c);
    ++j;
  }
  if (j >= s.size()) return false;
  *i = j + 1;
  return true;
}

bool SkipBraces(std::string_view s, size_t* i) {
  int depth = 0;
  size_t j = *i;
  while (j < s.size()) {
    const char c = s[j];
    if (c == '"') {
      if (!ReadQuoted(s, &j, nullptr)) return false;
      continue;
    }
    if (c == '{') ++depth;
    if (c == '}' && --depth == 0) {
      *i = j + 1;
      return true;
    }
    ++j;
  }
  return false;
}

// A shape at s[*i]: an array `bf16[524288]{0}`, a token `token[]` or a tuple of shapes. Its
// size in `*bytes` as XProf counts the instruction's: an array's elements, a tuple's arrays
// summed (ShapeUtil::ByteSizeOf of each: a token is 0, a scalar its element). A tuple inside a
// tuple would stop XProf (ByteSizeOf of a tuple needs a pointer size); podprof adds its arrays.
bool ReadShape(std::string_view s, size_t* i, int depth, int64_t* bytes) {
  if (depth > kMaxDepth) return false;
  SkipSpaces(s, i);
  if (*i < s.size() && s[*i] == '(') {
    ++*i;
    int64_t sum = 0;
    SkipSpaces(s, i);
    if (*i < s.size() && s[*i] == ')') {
      ++*i;
      *bytes = 0;
      return true;
    }
    while (true) {
      int64_t b = 0;
      if (!ReadShape(s, i, depth + 1, &b)) return false;
      sum += b;
      if (sum > kMaxBytes) return false;
      SkipSpaces(s, i);
      if (*i >= s.size()) return false;
      if (s[*i] == ')') {
        ++*i;
        *bytes = sum;
        return true;
      }
      if (s[*i] != ',') return false;
      ++*i;
    }
  }
  const size_t type_at = *i;
  while (*i < s.size() && ((s[*i] >= 'a' && s[*i] <= 'z') || (s[*i] >= '0' && s[*i] <= '9'))) ++*i;
  const std::string_view type = s.substr(type_at, *i - type_at);
  if (type.empty() || *i >= s.size() || s[*i] != '[') return false;
  ++*i;
  int64_t elements = 1;
  SkipSpaces(s, i);
  if (*i < s.size() && s[*i] != ']') {
    while (true) {
      SkipSpaces(s, i);
      if (s.substr(*i, 2) == "<=") *i += 2;  // a dynamic dimension: its bound is allocated
      int64_t d = 0;
      if (!ReadUint(s, i, &d)) return false;
      if (d != 0 && elements > kMaxBytes / d) return false;
      elements *= d;
      SkipSpaces(s, i);
      if (*i >= s.size()) return false;
      if (s[*i] == ']') break;
      if (s[*i] != ',') return false;
      ++*i;
    }
  }
  ++*i;  // ']'
  int64_t element_bits = 0;
  if (*i < s.size() && s[*i] == '{') {
    // The layout; `E(n)` after its `:` packs elements into n bits each.
    const size_t layout_at = *i;
    if (!SkipBraces(s, i)) return false;
    const std::string_view layout = s.substr(layout_at, *i - layout_at);
    const size_t colon = layout.find(':');
    const size_t e = colon == std::string_view::npos ? colon : layout.find("E(", colon);
    if (e != std::string_view::npos) {
      size_t at = e + 2;
      if (!ReadUint(layout, &at, &element_bits) || element_bits > 64) return false;
    }
  }
  if (type == "token") {
    *bytes = 0;
    return true;
  }
  const int width = ElementBytes(type);
  if (width < 0) return false;
  *bytes = element_bits > 0 ? (elements * element_bits + 7) / 8 : elements * width;
  return *bytes <= kMaxBytes;
}

bool OpcodeKind(std::string_view op, DcnOpKind* kind) {
  if (op == "send")
    *kind = DcnOpKind::kSend;
  else if (op == "send-done")
    *kind = DcnOpKind::kSendDone;
  else if (op == "recv")
    *kind = DcnOpKind::kRecv;
  else if (op == "recv-done")
    *kind = DcnOpKind::kRecvDone;
  else
    return false;
  return true;
}

// `{{0,16},{16,32}}`; false (pairs cleared) for anything else.
bool ParsePairs(std::string_view s, std::vector<std::pair<int64_t, int64_t>>* pairs) {
  pairs->clear();
  size_t i = 0;
  SkipSpaces(s, &i);
  if (i >= s.size() || s[i] != '{') return false;
  ++i;
  while (true) {
    SkipSpaces(s, &i);
    if (i < s.size() && s[i] == '}' && pairs->empty()) {  // `{}`: no pairs
      ++i;
      SkipSpaces(s, &i);
      return i == s.size();
    }
    int64_t a = 0, b = 0;
    if (i >= s.size() || s[i] != '{') break;
    ++i;
    SkipSpaces(s, &i);
    if (!ReadUint(s, &i, &a)) break;
    SkipSpaces(s, &i);
    if (i >= s.size() || s[i] != ',') break;
    ++i;
    SkipSpaces(s, &i);
    if (!ReadUint(s, &i, &b)) break;
    SkipSpaces(s, &i);
    if (i >= s.size() || s[i] != '}') break;
    ++i;
    pairs->emplace_back(a, b);
    SkipSpaces(s, &i);
    if (i < s.size() && s[i] == ',') {
      ++i;
      continue;
    }
    if (i < s.size() && s[i] == '}') {
      ++i;
      SkipSpaces(s, &i);
      if (i == s.size()) return true;
    }
    break;
  }
  pairs->clear();
  return false;
}

// `{k="v",k2="v2"}` at s[*i] into `out`; false when it is not that.
bool ReadFrontendAttributes(std::string_view s, size_t* i, DcnInstruction* out) {
  if (*i >= s.size() || s[*i] != '{') return false;
  ++*i;
  while (true) {
    SkipSpaces(s, i);
    if (*i < s.size() && s[*i] == '}') {
      ++*i;
      return true;
    }
    const size_t key_at = *i;
    while (*i < s.size() && IsIdentChar(s[*i])) ++*i;
    const std::string_view key = s.substr(key_at, *i - key_at);
    if (key.empty() || *i >= s.size() || s[*i] != '=') return false;
    ++*i;
    std::string value;
    if (!ReadQuoted(s, i, &value)) return false;
    if (key == "_xla_host_transfer_rendezvous") {
      out->rendezvous = std::move(value);
      out->has_rendezvous = true;
    } else if (key == "_xla_megascale_transfer_type") {
      out->transfer_type = std::move(value);
    } else if (key == "_xla_send_recv_source_target_pairs") {
      ParsePairs(value, &out->source_target_pairs);
    }
    SkipSpaces(s, i);
    if (*i < s.size() && s[*i] == ',') ++*i;
  }
}

// The attributes after the operand list: `, channel_id=101, frontend_attributes={...}, ...`.
void ReadAttributes(std::string_view s, size_t i, DcnInstruction* out) {
  while (i < s.size()) {
    SkipSpaces(s, &i);
    if (i < s.size() && s[i] == ',') ++i;
    SkipSpaces(s, &i);
    const size_t key_at = i;
    while (i < s.size() && IsIdentChar(s[i])) ++i;
    const std::string_view key = s.substr(key_at, i - key_at);
    if (key.empty() || i >= s.size() || s[i] != '=') return;
    ++i;
    if (key == "channel_id") {
      int64_t id = 0;
      if (ReadUint(s, &i, &id)) out->channel_id = id;
    } else if (key == "frontend_attributes") {
      const size_t at = i;
      DcnInstruction attrs;
      if (ReadFrontendAttributes(s, &i, &attrs)) {
        out->rendezvous = std::move(attrs.rendezvous);
        out->has_rendezvous = attrs.has_rendezvous;
        out->transfer_type = std::move(attrs.transfer_type);
        out->source_target_pairs = std::move(attrs.source_target_pairs);
        continue;
      }
      i = at;
    }
    // Any other value: a braced group, a quoted string or a bare token.
    if (i < s.size() && s[i] == '{') {
      if (!SkipBraces(s, &i)) return;
    } else if (i < s.size() && s[i] == '"') {
      if (!ReadQuoted(s, &i, nullptr)) return;
    } else {
      while (i < s.size() && s[i] != ',') ++i;
    }
  }
}

// Skips the operand list `(...)` at s[*i] (nested parentheses and braces); false if unclosed.
bool SkipOperands(std::string_view s, size_t* i) {
  int depth = 0;
  while (*i < s.size()) {
    const char c = s[*i];
    if (c == '"') {
      if (!ReadQuoted(s, i, nullptr)) return false;
      continue;
    }
    if (c == '{') {
      if (!SkipBraces(s, i)) return false;
      continue;
    }
    ++*i;
    if (c == '(') ++depth;
    if (c == ')' && --depth == 0) return true;
    if (depth <= 0) return false;
  }
  return false;
}

}  // namespace

bool DcnOpKindOfCategory(const std::string& category, DcnOpKind* kind) {
  if (category == "host send")
    *kind = DcnOpKind::kSend;
  else if (category == "host send-done")
    *kind = DcnOpKind::kSendDone;
  else if (category == "host recv")
    *kind = DcnOpKind::kRecv;
  else if (category == "host recv-done")
    *kind = DcnOpKind::kRecvDone;
  else
    return false;
  return true;
}

bool ParseDcnInstruction(const trace::KernelDef& k, DcnInstruction* out) {
  // XProf takes an op as a host transfer when its category contains `host send` or
  // `host recv`, and its kind from the instruction's opcode; podprof reads the opcode from the
  // text and falls back to the category's exact name.
  const bool host_transfer = k.category.find("host send") != std::string::npos ||
                             k.category.find("host recv") != std::string::npos;
  if (!host_transfer) return false;
  DcnInstruction d;
  d.name = k.name;
  const bool by_category = DcnOpKindOfCategory(k.category, &d.kind);
  const std::string_view s = k.hlo_text;
  // `[ROOT ]%name = SHAPE opcode(operands), attributes`
  bool by_opcode = false;
  const size_t eq = s.find('=');
  if (eq != std::string_view::npos) {
    size_t i = eq + 1;
    int64_t bytes = 0;
    size_t op_at = std::string_view::npos;
    if (ReadShape(s, &i, 0, &bytes)) {
      SkipSpaces(s, &i);
      op_at = i;
    } else {
      // A shape this reader does not know: its size is unknown, the rest may still be read.
      bytes = 0;
      for (const char* op : {" send(", " send-done(", " recv(", " recv-done("}) {
        op_at = std::min(op_at, s.find(op, eq));
      }
      if (op_at != std::string_view::npos) ++op_at;
    }
    if (op_at != std::string_view::npos) {
      i = op_at;
      while (i < s.size() && IsIdentChar(s[i])) ++i;
      DcnOpKind kind;
      if (i < s.size() && s[i] == '(' && OpcodeKind(s.substr(op_at, i - op_at), &kind)) {
        by_opcode = true;
        d.kind = kind;
        d.bytes = bytes;
        if (SkipOperands(s, &i)) ReadAttributes(s, i, &d);
      }
    }
  }
  if (!by_opcode && !by_category) return false;
  *out = std::move(d);
  return true;
}

}  // namespace podprof::insight
