// Output helpers shared by the `podprof` subcommands: the output formats, RFC 4180 CSV
// fields, timestamps (aligned text tables are report/table.h).
#ifndef PODPROF_REPORT_FORMAT_H_
#define PODPROF_REPORT_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"
#include "report/table.h"  // TextTable, where the commands have always found it

namespace podprof::report {

// What a subcommand writes to stdout: an aligned table for people, JSON or CSV for scripts.
enum class OutputFormat { kTable, kJson, kCsv };

// The formats by the names flags and the CLI's configuration file use: table, json, csv.
const std::map<std::string, OutputFormat>& OutputFormatsByName();

// Rows a table shows when the user gave no --top; csv and json show all.
inline constexpr int kDefaultTableRows = 25;

// The rows to show for a --top of `top`: `top` when given (>= 0; 0 = all), else
// kDefaultTableRows for the table and all for csv and json.
int DefaultTop(int top, OutputFormat format);

// Writes `j` indented, ending in a newline. Names from captures may hold invalid UTF-8: it is
// replaced, never thrown about.
void WriteJson(const nlohmann::json& j, std::ostream& out);

// `s` on one line: line breaks become spaces, surrounding whitespace goes, and what a terminal
// would obey (other controls, bidirectional overrides, bytes that are not UTF-8) is escaped
// (common/utf8.h EscapeForTerminal): error messages and warnings from other machines.
std::string OneLine(absl::string_view s);

// A number for CSV: six significant digits, enough for rates and relative changes.
std::string CsvDouble(double v);

// "1 capture", "2 captures".
std::string CountOf(uint64_t n, absl::string_view noun);

// A mean duration in ps, rounded, for people ("1.23 us").
std::string FormatMeanPs(double mean_ps);

// Returns `s` as one CSV field: unchanged unless it holds a comma, a quote or a line break,
// else quoted with inner quotes doubled (RFC 4180). Kernel names contain commas and quotes;
// bytes that are not UTF-8 are written `\xNN` (common/utf8.h), so the file is UTF-8.
std::string CsvField(absl::string_view s);

// Returns `s` cut to at most `n` bytes, ending in "..." when cut. `n` must be at least 3.
std::string Truncate(absl::string_view s, size_t n);

// Formats a fraction as a percentage with one decimal ("12.5%"), or "-" when it is not
// positive (unknown peak, no work).
std::string Percent(double fraction);

// Formats a relative change with its sign, to a tenth of a percent: "+5.2%", "-0.3%"
// (`podprof diff`'s and `podprof fleet`'s change columns).
std::string FormatChange(double change);

// An achieved rate in TFLOP/s to two decimals ("123.45"), or "-" when it is not positive: the
// rate means nothing there (no cost model, an async start/done op).
std::string FormatTflops(double tflops);

// A clock's drift in ppm with its sign and unit, two decimals: "+1.25 ppm", "-0.40 ppm".
std::string FormatPpm(double ppm);

// `v` to `digits` significant digits as printf's %g writes it: "512", "1.235e+07", "2.5".
std::string FormatSignificant(double v, int digits);

// Formats a byte count for people: "512 B", "1.2 kB", "3.4 MB", "1.0 GB" (powers of 1000).
std::string FormatBytes(uint64_t bytes);

// Reads a size written as a number and a unit, e.g. "256MB", "1.5GB", "64 MiB", "1000": B,
// kB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), in any case; bytes
// when there is no unit. InvalidArgument naming the text for anything else, zero, or a size
// past 2^63 bytes.
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

// Formats a signed ns quantity for people with its unit: "-12.3 us", "4.56 ms", "812 ns".
std::string FormatSignedNs(int64_t ns);

// A one-line trend of `values` in block characters (U+2581..U+2588), lowest to highest;
// empty for no values, a flat middle line when all are equal.
std::string Sparkline(const std::vector<double>& values);

// Formats `ns` since the Unix epoch as UTC ISO-8601 with milliseconds,
// "2024-05-01T12:00:00.123Z"; 0 (unknown) is "-".
std::string FormatTimestampNs(int64_t ns);

// Flushes `out` and reports whether everything written to it arrived. Fails with Unavailable
// when it did not (stdout closed, disk full).
absl::Status FlushOutput(std::ostream& out);

}  // namespace podprof::report

#endif  // PODPROF_REPORT_FORMAT_H_
