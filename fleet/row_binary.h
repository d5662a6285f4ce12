// Rows in ClickHouse's RowBinary format: each row's columns in table order, integers and
// floats little-endian, strings and arrays as a LEB128 length then their bytes or elements.
// The compact form ClickHouse parses fastest, and exact (no text round trip of doubles).
#ifndef PODPROF_FLEET_ROW_BINARY_H_
#define PODPROF_FLEET_ROW_BINARY_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/string_view.h"

namespace podprof::fleet {

class RowBinary {
 public:
  explicit RowBinary(std::string* out) : out_(out) {}

  // UInt8..UInt64, Int32, Int64 and Float64 columns, by the C++ type given.
  template <typename T>
  RowBinary& Fixed(T v) {
    static_assert(std::is_arithmetic_v<T>);
    char bytes[sizeof(T)];
    std::memcpy(bytes, &v, sizeof(T));  // x86-64 and arm64 are little-endian, as the format
    out_->append(bytes, sizeof(T));
    return *this;
  }
  RowBinary& U64(uint64_t v) { return Fixed(v); }
  RowBinary& I64(int64_t v) { return Fixed(v); }
  RowBinary& U32(uint32_t v) { return Fixed(v); }
  RowBinary& U8(uint8_t v) { return Fixed(v); }
  RowBinary& F64(double v) { return Fixed(v); }
  RowBinary& Str(absl::string_view s) {
    Length(s.size());
    out_->append(s.data(), s.size());
    return *this;
  }
  template <typename T>
  RowBinary& FixedArray(const std::vector<T>& v) {
    Length(v.size());
    for (const T& x : v) Fixed(x);
    return *this;
  }
  RowBinary& StrArray(const std::vector<std::string>& v) {
    Length(v.size());
    for (const std::string& s : v) Str(s);
    return *this;
  }

 private:
  void Length(uint64_t n) {
    while (n >= 0x80) {
      out_->push_back(static_cast<char>((n & 0x7F) | 0x80));
      n >>= 7;
    }
    out_->push_back(static_cast<char>(n));
  }

  std::string* out_;
};

}  // namespace podprof::fleet

#endif  // PODPROF_FLEET_ROW_BINARY_H_
