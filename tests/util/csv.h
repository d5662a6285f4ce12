// CSV read back as RFC 4180 has it, for the tests of what podprof writes as CSV (fields with
// commas and quotes are quoted; kernel names have both).
#ifndef PODPROF_TESTS_UTIL_CSV_H_
#define PODPROF_TESTS_UTIL_CSV_H_

#include <cstddef>
#include <string>
#include <vector>

namespace podprof::testing {

// The fields of one CSV line: split at commas outside quotes, quoted fields unquoted ("" inside
// quotes is one quote).
inline std::vector<std::string> CsvFields(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted && ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      fields.back() += '"';
      ++i;
    } else if (ch == '"') {
      quoted = !quoted;
    } else if (ch == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += ch;
    }
  }
  return fields;
}

}  // namespace podprof::testing

#endif  // PODPROF_TESTS_UTIL_CSV_H_
