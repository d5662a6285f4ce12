#include "trace/hlo_text.h"

#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace podprof::trace::hlo {
namespace {

constexpr int kMaxDepth = 16;
constexpr int64_t kMaxBytes = int64_t{1} << 60;  // beyond this a shape is not believed

struct TypeName {
  std::string_view name;
  PrimitiveType type;
};
constexpr TypeName kTypes[] = {
    {"pred", PrimitiveType::kPred},
    {"s2", PrimitiveType::kS2},
    {"s4", PrimitiveType::kS4},
    {"s8", PrimitiveType::kS8},
    {"s16", PrimitiveType::kS16},
    {"s32", PrimitiveType::kS32},
    {"s64", PrimitiveType::kS64},
    {"u2", PrimitiveType::kU2},
    {"u4", PrimitiveType::kU4},
    {"u8", PrimitiveType::kU8},
    {"u16", PrimitiveType::kU16},
    {"u32", PrimitiveType::kU32},
    {"u64", PrimitiveType::kU64},
    {"f16", PrimitiveType::kF16},
    {"bf16", PrimitiveType::kBf16},
    {"f32", PrimitiveType::kF32},
    {"f64", PrimitiveType::kF64},
    {"c64", PrimitiveType::kC64},
    {"c128", PrimitiveType::kC128},
    {"f8e5m2", PrimitiveType::kF8E5M2},
    {"f8e4m3fn", PrimitiveType::kF8E4M3FN},
    {"f8e4m3b11fnuz", PrimitiveType::kF8E4M3B11FNUZ},
    {"f8e5m2fnuz", PrimitiveType::kF8E5M2FNUZ},
    {"f8e4m3fnuz", PrimitiveType::kF8E4M3FNUZ},
    {"f8e3m4", PrimitiveType::kF8E3M4},
    {"f4e2m1fn", PrimitiveType::kF4E2M1FN},
    {"f8e8m0fnu", PrimitiveType::kF8E8M0FNU},
    {"f8e4m3", PrimitiveType::kF8E4M3},
};

bool IsIdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

void SkipSpaces(std::string_view s, size_t* i) {
  while (*i < s.size() && (s[*i] == ' ' || s[*i] == '\t' || s[*i] == '\n' || s[*i] == '\r')) ++*i;
}

std::string_view Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  SkipSpaces(s, &b);
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\n' || s[e - 1] == '\r')) {
    --e;
  }
  return s.substr(b, e - b);
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

// A quoted string at s[*i] (backslash escapes); `out`, when given, gets it unescaped.
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

// Skips a bracketed group opening at s[*i] (`{`, `(` or `[`, any of them nested inside,
// quoted strings too); false when it does not close.
bool SkipGroup(std::string_view s, size_t* i) {
  int depth = 0;
  size_t j = *i;
  while (j < s.size()) {
    const char c = s[j];
    if (c == '"') {
      if (!ReadQuoted(s, &j, nullptr)) return false;
      continue;
    }
    if (c == '{' || c == '(' || c == '[') ++depth;
    if ((c == '}' || c == ')' || c == ']') && --depth == 0) {
      *i = j + 1;
      return true;
    }
    ++j;
  }
  return false;
}

bool TypeOf(std::string_view name, PrimitiveType* type) {
  for (const TypeName& t : kTypes) {
    if (t.name == name) {
      *type = t.type;
      return true;
    }
  }
  return false;
}

// A shape at s[*i]: an array `bf16[524288]{0}`, `token[]`, or a tuple of shapes. Its size
// stays within kMaxBytes.
bool ReadShape(std::string_view s, size_t* i, int depth, Shape* out) {
  if (depth > kMaxDepth) return false;
  SkipSpaces(s, i);
  if (*i < s.size() && s[*i] == '(') {
    ++*i;
    *out = Shape::Tuple({});
    SkipSpaces(s, i);
    if (*i < s.size() && s[*i] == ')') {
      ++*i;
      return true;
    }
    int64_t bytes = 0;  // summed as the elements come: sizing the tuple each time is quadratic
    while (true) {
      Shape element;
      if (!ReadShape(s, i, depth + 1, &element)) return false;
      bytes += ShapeByteSize(element);
      if (bytes > kMaxBytes) return false;
      out->tuple_shapes.push_back(std::move(element));
      SkipSpaces(s, i);
      if (*i >= s.size()) return false;
      if (s[*i] == ')') {
        ++*i;
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
  std::vector<int64_t> dims;
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
      dims.push_back(d);
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
    // The layout; `E(n)` after its `:` packs the elements into n bits each.
    const size_t layout_at = *i;
    if (!SkipGroup(s, i)) return false;
    const std::string_view layout = s.substr(layout_at, *i - layout_at);
    const size_t colon = layout.find(':');
    const size_t e = colon == std::string_view::npos ? colon : layout.find("E(", colon);
    if (e != std::string_view::npos) {
      size_t at = e + 2;
      if (!ReadUint(layout, &at, &element_bits) || element_bits > 64) return false;
    }
  }
  if (type == "token") {
    if (!dims.empty()) return false;
    *out = Shape::Token();
    return true;
  }
  PrimitiveType t;
  if (!TypeOf(type, &t)) return false;
  *out = Shape::Array(t, std::move(dims));
  out->element_bits = element_bits;
  return ShapeByteSize(*out) <= kMaxBytes;
}

// A whole shape text (nothing after it but spaces).
bool ParseShape(std::string_view s, Shape* out) {
  size_t i = 0;
  if (!ReadShape(s, &i, 0, out)) return false;
  SkipSpaces(s, &i);
  return i == s.size();
}

// The opcode: the first identifier directly followed by `(` outside any brace group (a shape
// has none: its identifiers precede `[`; a layout's `T(8,128)` is inside braces). Its start in
// *at; npos when there is none.
size_t FindOpcode(std::string_view s, size_t from, size_t* at) {
  size_t i = from;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '{') {
      if (!SkipGroup(s, &i)) return std::string_view::npos;
      continue;
    }
    if (c == '"') {
      if (!ReadQuoted(s, &i, nullptr)) return std::string_view::npos;
      continue;
    }
    if (c >= 'a' && c <= 'z' && (i == from || !IsIdentChar(s[i - 1]))) {
      size_t j = i;
      while (j < s.size() && IsIdentChar(s[j])) ++j;
      if (j < s.size() && s[j] == '(') {
        *at = i;
        return j;  // the `(`
      }
      i = j;
      continue;
    }
    ++i;
  }
  return std::string_view::npos;
}

// The operand list's text between `(` at s[open] and its `)`, split at its top-level commas.
bool ReadOperands(std::string_view s, size_t open, size_t* end, InstructionText* out) {
  size_t close = open;
  if (!SkipGroup(s, &close)) return false;
  *end = close;
  const std::string_view list = s.substr(open + 1, close - open - 2);
  size_t i = 0, start = 0;
  auto add = [&](std::string_view operand) {
    operand = Trim(operand);
    if (operand.empty()) return;
    InstructionText::Operand o;
    const size_t pct = operand.rfind('%');
    std::string_view shape = operand;
    if (pct != std::string_view::npos) {
      size_t n = pct + 1;
      while (n < operand.size() && IsIdentChar(operand[n])) ++n;
      o.name = std::string(operand.substr(pct + 1, n - pct - 1));
      shape = Trim(operand.substr(0, pct));
    }
    if (!shape.empty()) o.has_shape = ParseShape(shape, &o.shape);
    out->operands.push_back(std::move(o));
  };
  while (i < list.size()) {
    const char c = list[i];
    if (c == '{' || c == '(' || c == '[') {
      if (!SkipGroup(list, &i)) return false;
      continue;
    }
    if (c == '"') {
      if (!ReadQuoted(list, &i, nullptr)) return false;
      continue;
    }
    if (c == ',') {
      add(list.substr(start, i - start));
      start = i + 1;
    }
    ++i;
  }
  add(list.substr(start));
  return true;
}

// `{k="v",k2="v2"}` at s[*i]; false (nothing kept) when it is not that.
bool ReadFrontendAttributes(std::string_view s, size_t* i,
                            std::vector<std::pair<std::string, std::string>>* out) {
  std::vector<std::pair<std::string, std::string>> attrs;
  if (*i >= s.size() || s[*i] != '{') return false;
  ++*i;
  while (true) {
    SkipSpaces(s, i);
    if (*i < s.size() && s[*i] == '}') {
      ++*i;
      *out = std::move(attrs);
      return true;
    }
    const size_t key_at = *i;
    while (*i < s.size() && IsIdentChar(s[*i])) ++*i;
    const std::string_view key = s.substr(key_at, *i - key_at);
    if (key.empty() || *i >= s.size() || s[*i] != '=') return false;
    ++*i;
    std::string value;
    if (!ReadQuoted(s, i, &value)) return false;
    attrs.emplace_back(std::string(key), std::move(value));
    SkipSpaces(s, i);
    if (*i < s.size() && s[*i] == ',') ++*i;
  }
}

// `op_name="..."` inside a `metadata={...}` group (its fields are separated by spaces).
void ReadOpName(std::string_view group, std::string* op_name) {
  size_t i = 1;  // past `{`
  while (i < group.size()) {
    SkipSpaces(group, &i);
    const size_t key_at = i;
    while (i < group.size() && IsIdentChar(group[i])) ++i;
    const std::string_view key = group.substr(key_at, i - key_at);
    if (key.empty() || i >= group.size() || group[i] != '=') return;
    ++i;
    if (i < group.size() && group[i] == '"') {
      std::string value;
      if (!ReadQuoted(group, &i, &value)) return;
      if (key == "op_name") *op_name = std::move(value);
    } else if (i < group.size() && group[i] == '{') {
      if (!SkipGroup(group, &i)) return;
    } else {
      while (i < group.size() && group[i] != ' ' && group[i] != '}') ++i;
    }
  }
}

// The attributes after the operand list: `, channel_id=101, frontend_attributes={...}, ...`.
void ReadAttributes(std::string_view s, size_t i, InstructionText* out) {
  while (i < s.size()) {
    SkipSpaces(s, &i);
    if (i < s.size() && s[i] == ',') ++i;
    SkipSpaces(s, &i);
    const size_t key_at = i;
    while (i < s.size() && IsIdentChar(s[i])) ++i;
    const std::string_view key = s.substr(key_at, i - key_at);
    if (key.empty() || i >= s.size() || s[i] != '=') return;
    ++i;
    const size_t value_at = i;
    if (key == "channel_id") {
      int64_t id = 0;
      if (ReadUint(s, &i, &id)) out->channel_id = id;
    } else if (key == "is_host_transfer") {
      out->is_host_transfer = s.substr(i, 4) == "true";
    } else if (key == "frontend_attributes") {
      if (ReadFrontendAttributes(s, &i, &out->frontend_attributes)) continue;
      i = value_at;
    }
    // The rest of the value: a braced group, a quoted string or a bare token.
    if (i < s.size() && s[i] == '{') {
      if (!SkipGroup(s, &i)) return;
      if (key == "metadata") ReadOpName(s.substr(value_at, i - value_at), &out->op_name);
    } else if (i < s.size() && s[i] == '"') {
      if (!ReadQuoted(s, &i, nullptr)) return;
    } else {
      while (i < s.size() && s[i] != ',') ++i;
    }
  }
}

}  // namespace

int ElementBits(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kTuple:
    case PrimitiveType::kToken:
      return 0;
    case PrimitiveType::kS16:
    case PrimitiveType::kU16:
    case PrimitiveType::kF16:
    case PrimitiveType::kBf16:
      return 16;
    case PrimitiveType::kS32:
    case PrimitiveType::kU32:
    case PrimitiveType::kF32:
      return 32;
    case PrimitiveType::kS64:
    case PrimitiveType::kU64:
    case PrimitiveType::kF64:
    case PrimitiveType::kC64:
      return 64;
    case PrimitiveType::kC128:
      return 128;
    default:
      return 8;  // pred, 8-bit types, and the sub-byte types unpacked
  }
}

int64_t ShapeByteSize(const Shape& shape) {
  if (shape.element_type == PrimitiveType::kTuple) {
    int64_t sum = 0;
    for (const Shape& t : shape.tuple_shapes) {
      sum += ShapeByteSize(t);
      if (sum > kMaxBytes) return kMaxBytes + 1;
    }
    return sum;
  }
  if (shape.element_type == PrimitiveType::kToken) return 0;
  int64_t elements = 1;
  for (int64_t d : shape.dimensions) {
    if (d != 0 && elements > kMaxBytes / d) return kMaxBytes + 1;
    elements *= d;
  }
  if (shape.element_bits > 0) return (elements * shape.element_bits + 7) / 8;
  return elements * (ElementBits(shape.element_type) / 8);
}

bool ParseInstructionText(std::string_view s, InstructionText* out) {
  InstructionText in;
  size_t i = 0;
  SkipSpaces(s, &i);
  if (s.substr(i, 5) == "ROOT ") i += 5;
  SkipSpaces(s, &i);
  if (i < s.size() && s[i] == '%') ++i;
  const size_t name_at = i;
  while (i < s.size() && IsIdentChar(s[i])) ++i;
  in.name = std::string(s.substr(name_at, i - name_at));
  SkipSpaces(s, &i);
  if (in.name.empty() || i >= s.size() || s[i] != '=') return false;
  ++i;
  size_t op_at = 0;
  const size_t open = FindOpcode(s, i, &op_at);
  if (open == std::string_view::npos) return false;
  in.opcode = std::string(s.substr(op_at, open - op_at));
  const std::string_view shape = Trim(s.substr(i, op_at - i));
  in.has_shape = ParseShape(shape, &in.shape);
  if (!in.has_shape) in.shape = Shape::Tuple({});
  size_t end = open;
  if (ReadOperands(s, open, &end, &in)) ReadAttributes(s, end, &in);
  *out = std::move(in);
  return true;
}

bool ParseSourceTargetPairs(std::string_view s, std::vector<std::pair<int64_t, int64_t>>* pairs) {
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

const std::string* FrontendAttribute(const InstructionText& in, std::string_view key) {
  for (const auto& [k, v] : in.frontend_attributes) {
    if (k == key) return &v;
  }
  return nullptr;
}

}  // namespace podprof::trace::hlo
