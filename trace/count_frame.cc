#include "trace/count_frame.h"

#include "absl/strings/str_cat.h"
#include "trace/varint.h"

namespace podprof::trace::count_frame {
namespace {

// The skippable frame's magic and size fields.
constexpr size_t kFrameHeader = 8;

void PutLe32(uint32_t v, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint32_t GetLe32(const char* p) {
  const auto* b = reinterpret_cast<const uint8_t*>(p);
  return b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
}

}  // namespace

bool Is(absl::string_view blob, uint32_t magic) {
  return blob.size() >= 4 && GetLe32(blob.data()) == magic;
}

std::string Wrap(uint32_t magic, uint64_t count, const std::string& frame, uint64_t max_per_byte,
                 absl::string_view label) {
  std::string fields;
  PutVarint(count, &fields);
  if (!label.empty()) {
    PutVarint(label.size(), &fields);
    fields.append(label.data(), label.size());
  }
  const size_t natural = kFrameHeader + fields.size() + frame.size();
  const size_t least = static_cast<size_t>((count + max_per_byte - 1) / max_per_byte);
  const size_t padding = least > natural ? least - natural : 0;
  std::string out;
  out.reserve(natural + padding);
  PutLe32(magic, &out);
  PutLe32(static_cast<uint32_t>(fields.size() + padding), &out);
  out += fields;
  out.append(padding, '\0');
  out += frame;
  return out;
}

absl::StatusOr<Header> Read(absl::string_view blob, uint32_t magic, absl::string_view what,
                            absl::string_view encoding, bool labelled) {
  if (!Is(blob, magic) || blob.size() < kFrameHeader) {
    return absl::DataLossError(absl::StrCat(what, " is not of the ", encoding));
  }
  const uint32_t size = GetLe32(blob.data() + 4);
  if (size > blob.size() - kFrameHeader) {
    return absl::DataLossError(absl::StrCat(what, " header is truncated"));
  }
  absl::string_view in = blob.substr(kFrameHeader, size);
  Header h;
  if (!GetVarint(&in, &h.count)) return absl::DataLossError(absl::StrCat(what, " header"));
  if (labelled && !in.empty() && in[0] != '\0') {
    uint64_t n;
    if (!GetVarint(&in, &n) || n > kMaxLabelBytes || n > in.size()) {
      return absl::DataLossError(absl::StrCat(what, " header's label is damaged"));
    }
    h.label = in.substr(0, n);
    in.remove_prefix(n);
  }
  // Padding only: anything else in the header is damage.
  if (in.find_first_not_of('\0') != absl::string_view::npos) {
    return absl::DataLossError(absl::StrCat(what, " header holds more than its count"));
  }
  h.size = kFrameHeader + size;
  return h;
}

void PutPlanes(const std::vector<uint64_t>& column, int planes, std::string* raw) {
  const size_t n = column.size(), at = raw->size();
  raw->resize(at + n * static_cast<size_t>(planes));
  char* out = raw->data() + at;
  for (int p = planes - 1; p >= 0; --p) {
    for (size_t i = 0; i < n; ++i) *out++ = static_cast<char>(column[i] >> (8 * p));
  }
}

}  // namespace podprof::trace::count_frame
