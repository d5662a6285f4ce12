// The CLI's formatting rules, one line in, one line out, for tests/web/format_test.mjs to
// compare the pages' JavaScript (web/src/app.js) against. Each input line is a kind and its
// numbers:
//   d <int64>           FormatDurationPs (common/clock.h)
//   m <double>          report::FormatMeanPs
//   p <double>          report::Percent
//   h <double>          report::ShareCell (report/kernel_rows.h)
//   r <double>          report::FormatChange
//   f <double>          report::FormatTflops
//   ppm <double>        report::FormatPpm
//   g <int> <double>    report::FormatSignificant(value, digits)
//   s <int64>           report::FormatSignedNs
//   t <int64>           report::FormatTimestampNs
//   b <uint64>          report::FormatBytes
//   n <int64>           absl::StrCat: how the CLI writes every count
//   c <uint64>          report::CountOf(n, "regression")
// and each output line is the C++ function's string. Exits 2 on a line it cannot read.
#include <cstdint>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "report/format.h"
#include "report/kernel_rows.h"

namespace {

using Args = std::vector<absl::string_view>;
using Formatter = std::function<std::optional<std::string>(const Args&)>;

// A kind of one number of type T, formatted by `f`; nullopt when the line holds no such
// number.
template <typename T, typename F>
Formatter One(F f) {
  return [f](const Args& args) -> std::optional<std::string> {
    T v{};
    bool ok = false;
    if (args.size() == 1) {
      if constexpr (std::is_same_v<T, double>) {
        ok = absl::SimpleAtod(args[0], &v);
      } else {
        ok = absl::SimpleAtoi(args[0], &v);
      }
    }
    if (!ok) return std::nullopt;
    return f(v);
  };
}

std::optional<std::string> Significant(const Args& args) {
  int digits = 0;
  double v = 0;
  if (args.size() != 2 || !absl::SimpleAtoi(args[0], &digits) || !absl::SimpleAtod(args[1], &v)) {
    return std::nullopt;
  }
  return podprof::report::FormatSignificant(v, digits);
}

const std::map<std::string, Formatter>& Kinds() {
  namespace r = podprof::report;
  static const auto* const kKinds = new std::map<std::string, Formatter>{
      {"d", One<int64_t>([](int64_t v) { return podprof::FormatDurationPs(v); })},
      {"m", One<double>(r::FormatMeanPs)},
      {"p", One<double>(r::Percent)},
      {"h", One<double>(r::ShareCell)},
      {"r", One<double>(r::FormatChange)},
      {"f", One<double>(r::FormatTflops)},
      {"ppm", One<double>(r::FormatPpm)},
      {"g", Significant},
      {"s", One<int64_t>(r::FormatSignedNs)},
      {"t", One<int64_t>(r::FormatTimestampNs)},
      {"b", One<uint64_t>(r::FormatBytes)},
      {"n", One<int64_t>([](int64_t v) { return absl::StrCat(v); })},
      {"c", One<uint64_t>([](uint64_t v) { return r::CountOf(v, "regression"); })},
  };
  return *kKinds;
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    const std::vector<absl::string_view> words = absl::StrSplit(line, ' ');
    auto kind = Kinds().find(std::string(words[0]));
    std::optional<std::string> out;
    if (kind != Kinds().end()) out = kind->second(Args(words.begin() + 1, words.end()));
    if (!out.has_value()) {
      std::cerr << "format_cases: bad line \"" << line << "\"\n";
      return 2;
    }
    std::cout << *out << "\n";
  }
  return 0;
}
