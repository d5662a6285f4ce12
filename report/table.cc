#include "report/table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"

namespace podprof::report {
namespace {

bool IsUtf8Continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Columns are separated by two spaces.
constexpr size_t kGap = 2;

size_t LineWidth(const std::vector<size_t>& widths) {
  size_t total = 0;
  for (size_t w : widths) total += w;
  return widths.empty() ? 0 : total + kGap * (widths.size() - 1);
}

}  // namespace

size_t Utf8Length(const std::string& s) {
  return std::count_if(s.begin(), s.end(), [](char c) { return !IsUtf8Continuation(c); });
}

std::string TruncateChars(const std::string& s, size_t n) {
  if (Utf8Length(s) <= n) return s;
  const size_t keep = n > 3 ? n - 3 : 0;
  size_t end = 0;
  for (size_t chars = 0; end < s.size(); ++end) {
    if (!IsUtf8Continuation(s[end]) && chars++ == keep) break;
  }
  return absl::StrCat(s.substr(0, end), "...");
}

TextTable::TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  // Cells hold names from outside: escape sequences, NULs and bidirectional overrides would
  // be obeyed by the terminal, and a newline would break the table. Kept whole: the layout
  // decides where to cut.
  for (std::string& cell : cells) cell = EscapeForTerminal(cell);
  rows_.push_back(std::move(cells));
}

bool TextTable::Empty(size_t i) const {
  if (rows_.empty()) return false;  // a header alone says what would be there
  return std::all_of(rows_.begin(), rows_.end(), [i](const std::vector<std::string>& row) {
    return row[i].empty() || row[i] == "-";
  });
}

size_t TextTable::NaturalWidth(size_t i, size_t cap) const {
  size_t width = 0;
  for (const std::vector<std::string>& row : rows_) width = std::max(width, Utf8Length(row[i]));
  if (cap > 0) width = std::min(width, cap);
  return std::max(width, Utf8Length(columns_[i].header));
}

TextTable::Layout TextTable::Fit(const TableFit& fit) const {
  Layout l;
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (!fit.wide && Empty(i)) continue;
    l.columns.push_back(i);
    l.widths.push_back(NaturalWidth(i, fit.wide ? 0 : columns_[i].max_width));
  }
  if (fit.wide || fit.width == 0) return l;
  // The narrowest each shown column may be: a shrinking one down to its min_width.
  auto floors = [&] {
    std::vector<size_t> f = l.widths;
    for (size_t k = 0; k < f.size(); ++k) {
      const Column& c = columns_[l.columns[k]];
      if (c.min_width > 0) f[k] = std::min(f[k], std::max(c.min_width, Utf8Length(c.header)));
    }
    return f;
  };
  while (LineWidth(floors()) > fit.width) {
    size_t drop = l.columns.size();
    for (size_t k = 0; k < l.columns.size(); ++k) {
      const int p = columns_[l.columns[k]].priority;
      if (p != kAlways && (drop == l.columns.size() || p <= columns_[l.columns[drop]].priority)) {
        drop = k;
      }
    }
    if (drop == l.columns.size()) break;  // only columns that always stay: lines run over
    l.columns.erase(l.columns.begin() + static_cast<std::ptrdiff_t>(drop));
    l.widths.erase(l.widths.begin() + static_cast<std::ptrdiff_t>(drop));
  }
  // Cut the shrinking columns, leftmost first, by what still runs over.
  const std::vector<size_t> f = floors();
  size_t excess = LineWidth(l.widths) > fit.width ? LineWidth(l.widths) - fit.width : 0;
  for (size_t k = 0; k < l.widths.size() && excess > 0; ++k) {
    const size_t cut = std::min(excess, l.widths[k] - f[k]);
    l.widths[k] -= cut;
    excess -= cut;
  }
  return l;
}

void TextTable::WriteLayout(const Layout& layout, std::ostream& out) const {
  auto write_line = [&](auto cell_of) {
    std::string line;
    for (size_t k = 0; k < layout.columns.size(); ++k) {
      const std::string cell = TruncateChars(cell_of(layout.columns[k]), layout.widths[k]);
      const std::string pad(layout.widths[k] - Utf8Length(cell), ' ');
      if (k > 0) line += std::string(kGap, ' ');
      if (columns_[layout.columns[k]].align == Align::kRight) {
        absl::StrAppend(&line, pad, cell);
      } else {
        absl::StrAppend(&line, cell, pad);
      }
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << "\n";
  };
  write_line([&](size_t i) -> const std::string& { return columns_[i].header; });
  for (const std::vector<std::string>& row : rows_) {
    write_line([&](size_t i) -> const std::string& { return row[i]; });
  }
}

void TextTable::Write(std::ostream& out) const {
  Layout all;
  for (size_t i = 0; i < columns_.size(); ++i) {
    all.columns.push_back(i);
    all.widths.push_back(NaturalWidth(i, columns_[i].max_width));
  }
  WriteLayout(all, out);
}

void TextTable::Write(std::ostream& out, const TableFit& fit) const { WriteLayout(Fit(fit), out); }

std::vector<std::string> TextTable::Shown(const TableFit& fit) const {
  std::vector<std::string> headers;
  for (size_t i : Fit(fit).columns) headers.push_back(columns_[i].header);
  return headers;
}

}  // namespace podprof::report
