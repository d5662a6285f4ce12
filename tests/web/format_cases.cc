// The CLI's formatting rules, one line in, one line out, for web/format_test.mjs to compare the
// pages' JavaScript (web/src/app.js) against. Each input line is a kind and a number:
//   d <int64>    FormatDurationPs (common/clock.h)
//   m <double>   report::FormatMeanPs
//   p <double>   report::Percent
// and each output line is the C++ function's string. Exits 2 on a line it cannot read.
#include <cstdint>
#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "report/format.h"

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    const absl::string_view l(line);
    if (l.size() < 3 || l[1] != ' ') {
      std::cerr << "format_cases: bad line \"" << line << "\"\n";
      return 2;
    }
    const absl::string_view number = l.substr(2);
    int64_t i = 0;
    double d = 0;
    if (l[0] == 'd' && absl::SimpleAtoi(number, &i)) {
      std::cout << podprof::FormatDurationPs(i) << "\n";
    } else if (l[0] == 'm' && absl::SimpleAtod(number, &d)) {
      std::cout << podprof::report::FormatMeanPs(d) << "\n";
    } else if (l[0] == 'p' && absl::SimpleAtod(number, &d)) {
      std::cout << podprof::report::Percent(d) << "\n";
    } else {
      std::cerr << "format_cases: bad line \"" << line << "\"\n";
      return 2;
    }
  }
  return 0;
}
