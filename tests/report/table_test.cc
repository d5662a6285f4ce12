// TextTable's fitting (report/table.h): columns without values go, narrow terminals lose the
// lowest-priority columns and cut the kernel name, --wide keeps everything whole.
#include "report/table.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace podprof::report {
namespace {

using Align = TextTable::Align;
constexpr int kAlways = TextTable::kAlways;

// A kernel table's shape: the name (cut to fit, down to 24), its verdict, then figures of
// falling importance, and one column with no value on any row.
TextTable KernelTable() {
  TextTable t({{"KERNEL", Align::kLeft, 0, kAlways, 24},
               {"VERDICT", Align::kLeft},
               {"MEAN", Align::kRight, 0, 90},
               {"VALU", Align::kRight, 0, 10},
               {"P99", Align::kRight, 0, 70},
               {"GB/S", Align::kRight, 0, 15}});
  t.AddRow(
      {"fusion.convolution.with.a.long.name", "compute bound", "343 us", "-", "365 us", "483.6"});
  t.AddRow({"copy.3", "memory bound", "12 us", "", "13 us", "2349.0"});
  return t;
}

std::vector<std::string> LinesOf(const TextTable& t, const TableFit& fit) {
  std::ostringstream out;
  t.Write(out, fit);
  return absl::StrSplit(out.str(), '\n', absl::SkipEmpty());
}

size_t Chars(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

TEST(TableFitTest, AColumnWithoutAValueOnAnyRowGoesAndTheRestStayWithoutAWidth) {
  const TextTable t = KernelTable();
  EXPECT_EQ(t.Shown({}), (std::vector<std::string>{"KERNEL", "VERDICT", "MEAN", "P99", "GB/S"}));
  const std::vector<std::string> lines = LinesOf(t, {});
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1], "fusion.convolution.with.a.long.name  compute bound  343 us  365 us   483.6");
}

TEST(TableFitTest, ANarrowTerminalDropsTheLowestPriorityFirstAndCutsTheName) {
  const TextTable t = KernelTable();
  // 35 + 13 + 6 + 6 + 6 and four gaps of 2 is 74. At 57, even with the name at its narrowest
  // (24) the line needs 63: GB/S (priority 15) goes, and the name gets what room is left.
  const TableFit fit{57, false};
  EXPECT_EQ(t.Shown(fit), (std::vector<std::string>{"KERNEL", "VERDICT", "MEAN", "P99"}));
  const std::vector<std::string> lines = LinesOf(t, fit);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "KERNEL                      VERDICT          MEAN     P99");
  EXPECT_EQ(lines[1], "fusion.convolution.with...  compute bound  343 us  365 us");
  EXPECT_EQ(lines[2], "copy.3                      memory bound    12 us   13 us");
  for (const std::string& line : lines) EXPECT_LE(Chars(line), 57u) << line;
  // Narrower: P99 (70) goes before MEAN (90).
  const TableFit narrow{48, false};
  EXPECT_EQ(t.Shown(narrow), (std::vector<std::string>{"KERNEL", "VERDICT", "MEAN"}));
  EXPECT_EQ(LinesOf(t, narrow)[1], "fusion.convolution.wit...  compute bound  343 us");
}

TEST(TableFitTest, ColumnsThatAlwaysStayRunOverRatherThanGo) {
  const TextTable t = KernelTable();
  // KERNEL at its narrowest (24) and VERDICT (13) need 39: at 10 every other column goes and
  // the name is cut no shorter than 24.
  EXPECT_EQ(t.Shown({10, false}), (std::vector<std::string>{"KERNEL", "VERDICT"}));
  EXPECT_EQ(LinesOf(t, {10, false})[1], "fusion.convolution.wi...  compute bound");
}

TEST(TableFitTest, WideShowsEveryColumnWhole) {
  const TextTable t = KernelTable();
  const TableFit wide{40, true};
  EXPECT_EQ(t.Shown(wide),
            (std::vector<std::string>{"KERNEL", "VERDICT", "MEAN", "VALU", "P99", "GB/S"}));
  const std::vector<std::string> lines = LinesOf(t, wide);
  EXPECT_EQ(lines[1],
            "fusion.convolution.with.a.long.name  compute bound  343 us     -  365 us   483.6");
}

TEST(TableFitTest, MaxWidthCutsUnlessWideAndHeadersAloneKeepEveryColumn) {
  TextTable t({{"NAME", Align::kLeft, 6}, {"EMPTY", Align::kRight}});
  EXPECT_EQ(t.Shown({}), (std::vector<std::string>{"NAME", "EMPTY"}));  // no rows yet
  t.AddRow({"much-too-long", "-"});
  EXPECT_EQ(LinesOf(t, {})[1], "muc...");
  EXPECT_EQ(LinesOf(t, {0, true})[1], "much-too-long      -");
  // The plain Write is the table as it was: every column, cut at max_width.
  std::ostringstream out;
  t.Write(out);
  EXPECT_EQ(out.str(), "NAME    EMPTY\nmuc...      -\n");
}

TEST(TableFitTest, WidthsCountCharactersNotBytes) {
  TextTable t({{"KERNEL", Align::kLeft, 0, kAlways, 6}, {"ΔMEAN%", Align::kRight, 0, 50}});
  t.AddRow({"ÄÖÜäöüßé", "+1.0%"});
  const std::vector<std::string> lines = LinesOf(t, {14, false});
  EXPECT_EQ(lines[0], "KERNEL  ΔMEAN%");
  EXPECT_EQ(lines[1], "ÄÖÜ...   +1.0%");
}

TEST(TruncateCharsTest, CutsOnCharacterBoundaries) {
  EXPECT_EQ(TruncateChars("abcdef", 6), "abcdef");
  EXPECT_EQ(TruncateChars("abcdefg", 6), "abc...");
  EXPECT_EQ(TruncateChars("ääääääää", 5), "ää...");
  EXPECT_EQ(Utf8Length("ΔMEAN%"), 6u);
}

}  // namespace
}  // namespace podprof::report
