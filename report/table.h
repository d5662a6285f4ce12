// Aligned text tables for people, and how a wide one is fitted to the terminal: the one place
// where every command's table (`stats`, `kernel`, `diff`, `history`, `import`, `inspect`,
// `telemetry`, ...) decides which columns to show and how wide.
//
// Fitting (Write with a TableFit), unless the fit is `wide`:
//   1. columns with no value on any row (every cell "-" or empty) go;
//   2. cells longer than their column's max_width are cut, ending in "...";
//   3. where a line would pass `width` characters, columns that may shrink (min_width > 0,
//      e.g. the kernel name) are cut down towards their min_width, and while that is not
//      enough the column of lowest priority goes (ties: the rightmost), after which the
//      shrinking columns get back what room there is.
// A `wide` fit shows every column with every cell whole.
#ifndef PODPROF_REPORT_TABLE_H_
#define PODPROF_REPORT_TABLE_H_

#include <climits>
#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace podprof::report {

// How a table meets the terminal: the CLI sets it from $COLUMNS, the terminal's width and
// --wide (cli/command.h, TerminalWidth).
struct TableFit {
  // Most characters a line may hold; 0: no limit (columns without values still go).
  size_t width = 0;
  // Every column, none dropped, no cell cut.
  bool wide = false;
};

// A table for people: each column padded to its widest cell, columns separated by two spaces.
// Widths count UTF-8 characters, not bytes, so headers such as "ΔMEAN%" line up. Cells are
// escaped for the terminal (common/utf8.h EscapeForTerminal). Not thread-safe.
class TextTable {
 public:
  enum class Align { kLeft, kRight };
  // The priority of a column that fitting never drops.
  static constexpr int kAlways = INT_MAX;
  struct Column {
    std::string header;
    Align align = Align::kLeft;
    // Longest cell shown, in characters; longer cells are cut and end in "...". 0: no limit.
    // A wide fit shows the whole cell.
    size_t max_width = 0;
    // Fitting: the lower, the sooner the column goes when lines are too long; kAlways never.
    int priority = kAlways;
    // Fitting: the narrowest the column may be cut to (its header is never cut); 0: it is
    // never cut to fit.
    size_t min_width = 0;
  };

  explicit TextTable(std::vector<Column> columns);

  // Adds a row. `cells` must hold one string per column; missing cells are empty and extra
  // cells are dropped.
  void AddRow(std::vector<std::string> cells);

  // Number of rows added so far.
  size_t rows() const { return rows_.size(); }

  // Writes the header line and the rows, each ending in "\n", without trailing spaces: every
  // column, cells cut at their max_width.
  void Write(std::ostream& out) const;

  // The same, fitted as the file comment says.
  void Write(std::ostream& out, const TableFit& fit) const;

  // The headers of the columns Write(out, fit) shows, in order (what tests and footnotes ask).
  std::vector<std::string> Shown(const TableFit& fit) const;

 private:
  // The columns shown and each one's width, in characters.
  struct Layout {
    std::vector<size_t> columns;
    std::vector<size_t> widths;
  };

  // Whether no row has a value in column `i`.
  bool Empty(size_t i) const;
  // Column `i`'s width: its header's and its widest cell's, cells cut at `cap` (0: whole).
  size_t NaturalWidth(size_t i, size_t cap) const;
  Layout Fit(const TableFit& fit) const;
  void WriteLayout(const Layout& layout, std::ostream& out) const;

  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// Characters (not bytes) of UTF-8 `s`.
size_t Utf8Length(const std::string& s);

// `s` cut to at most `n` characters, never inside a multi-byte character, ending in "..."
// when cut.
std::string TruncateChars(const std::string& s, size_t n);

}  // namespace podprof::report

#endif  // PODPROF_REPORT_TABLE_H_
