#include "report/format.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/utf8.h"
#include "nlohmann/json.hpp"

namespace podprof::report {

const std::map<std::string, OutputFormat>& OutputFormatsByName() {
  static const auto* const kFormats = new std::map<std::string, OutputFormat>{
      {"table", OutputFormat::kTable}, {"json", OutputFormat::kJson}, {"csv", OutputFormat::kCsv}};
  return *kFormats;
}

int DefaultTop(int top, OutputFormat format) {
  if (top >= 0) return top;
  return format == OutputFormat::kTable ? kDefaultTableRows : 0;
}

void WriteJson(const nlohmann::json& j, std::ostream& out) {
  out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

std::string OneLine(absl::string_view s) {
  return EscapeForTerminal(
      absl::StripAsciiWhitespace(absl::StrReplaceAll(s, {{"\r\n", " "}, {"\n", " "}})));
}

std::string CsvDouble(double v) { return absl::StrCat(v); }

std::string CountOf(uint64_t n, absl::string_view noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

std::string FormatMeanPs(double mean_ps) { return FormatDurationPs(std::llround(mean_ps)); }

std::string CsvField(absl::string_view raw) {
  // Names from outside may hold bytes that are not UTF-8; a CSV reader decoding as UTF-8
  // would refuse the file or lose them silently.
  const std::string s = EscapeInvalidUtf8(raw);
  if (s.find_first_of(",\"\n\r") == absl::string_view::npos) return s;
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

std::string Truncate(absl::string_view s, size_t n) {
  return s.size() <= n ? std::string(s) : absl::StrCat(s.substr(0, n - 3), "...");
}

std::string Percent(double fraction) {
  return fraction > 0 ? absl::StrFormat("%.1f%%", fraction * 100) : "-";
}

std::string FormatChange(double change) { return absl::StrFormat("%+.1f%%", change * 100); }

std::string FormatTflops(double tflops) {
  return tflops > 0 ? absl::StrFormat("%.2f", tflops) : "-";
}

std::string FormatPpm(double ppm) { return absl::StrFormat("%+.2f ppm", ppm); }

std::string FormatSignificant(double v, int digits) { return absl::StrFormat("%.*g", digits, v); }

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1000) return absl::StrCat(bytes, " B");
  const char* units[] = {"kB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1000 && u < 3) {
    v /= 1000;
    ++u;
  }
  return absl::StrFormat("%.1f %s", v, units[u]);
}

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  const absl::string_view t = absl::StripAsciiWhitespace(text);
  size_t digits = 0;
  while (digits < t.size() && (absl::ascii_isdigit(t[digits]) || t[digits] == '.')) ++digits;
  double number = 0;
  if (digits == 0 || !absl::SimpleAtod(t.substr(0, digits), &number)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad size \"", text, "\": want a number and a unit, e.g. 256MB or 1GB"));
  }
  const absl::string_view unit = absl::StripAsciiWhitespace(t.substr(digits));
  static const std::map<std::string, double>* const kUnits =
      new std::map<std::string, double>{{"", 1},
                                        {"b", 1},
                                        {"kb", 1e3},
                                        {"mb", 1e6},
                                        {"gb", 1e9},
                                        {"tb", 1e12},
                                        {"kib", 1024.0},
                                        {"mib", 1024.0 * 1024},
                                        {"gib", 1024.0 * 1024 * 1024},
                                        {"tib", 1024.0 * 1024 * 1024 * 1024}};
  auto it = kUnits->find(absl::AsciiStrToLower(unit));
  if (it == kUnits->end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad size \"", text, "\": unknown unit \"", unit,
                     "\" (use B, kB, MB, GB, TB or KiB, MiB, GiB, TiB)"));
  }
  const double bytes = std::round(number * it->second);
  if (!(bytes >= 1) || bytes >= 9.2e18) {
    return absl::InvalidArgumentError(absl::StrCat("bad size \"", text,
                                                   "\": must be at least 1 B"
                                                   " and below 9 EB"));
  }
  return static_cast<uint64_t>(bytes);
}

std::string FormatSignedNs(int64_t ns) {
  const double a = std::abs(static_cast<double>(ns));
  if (a < 1e3) return absl::StrCat(ns, " ns");
  if (a < 1e6) return absl::StrFormat("%.2f us", ns / 1e3);
  if (a < 1e9) return absl::StrFormat("%.3f ms", ns / 1e6);
  return absl::StrFormat("%.3f s", ns / 1e9);
}

std::string Sparkline(const std::vector<double>& values) {
  static const char* const kBlocks[] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                        "\u2585", "\u2586", "\u2587", "\u2588"};
  if (values.empty()) return "";
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  // The full height stands for at least a tenth of the values' size: 250 us then 250.4 us is
  // one level, not the jump from the lowest block to the highest that min-max scaling drew.
  const double least = 0.1 * std::max(std::abs(*lo), std::abs(*hi));
  const double span = *hi - *lo;
  std::string out;
  for (double v : values) {
    const double at = span >= least && span > 0 ? (v - *lo) / span * 8
                      : least > 0               ? 3.5 + (v - (*lo + *hi) / 2) / least * 8
                                                : 3.5;
    out += kBlocks[std::clamp(static_cast<int>(std::floor(at)), 0, 7)];
  }
  return out;
}

std::string FormatTimestampNs(int64_t ns) {
  if (ns == 0) return "-";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixNanos(ns), absl::UTCTimeZone());
}

absl::Status FlushOutput(std::ostream& out) {
  out.flush();
  if (!out) return absl::UnavailableError("could not write the output (is stdout closed?)");
  return absl::OkStatus();
}

}  // namespace podprof::report
