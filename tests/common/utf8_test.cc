#include "common/utf8.h"

#include <string>

#include "common/json_text.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace podprof {
namespace {

TEST(Utf8Test, WellFormedTextIsValidAndKeptAsItIs) {
  for (const std::string s : {"", "fusion.12", "ΔMEAN%", "核", "\xF0\x9F\x98\x80", "a\tb"}) {
    EXPECT_TRUE(IsValidUtf8(s)) << s;
    EXPECT_EQ(EscapeInvalidUtf8(s), s);
  }
}

TEST(Utf8Test, EachInvalidByteIsWrittenAsHex) {
  // A stray continuation byte, a lone lead byte, an overlong '/', a surrogate, past U+10FFFF,
  // a truncated sequence at the end.
  EXPECT_EQ(EscapeInvalidUtf8("a\x80z"), "a\\x80z");
  EXPECT_EQ(EscapeInvalidUtf8("\xFF"), "\\xFF");
  EXPECT_EQ(EscapeInvalidUtf8("\xC0\xAF"), "\\xC0\\xAF");
  EXPECT_EQ(EscapeInvalidUtf8("\xED\xA0\x80"), "\\xED\\xA0\\x80");
  EXPECT_EQ(EscapeInvalidUtf8("\xF4\x90\x80\x80"), "\\xF4\\x90\\x80\\x80");
  EXPECT_EQ(EscapeInvalidUtf8("ok\xE6\xA0"), "ok\\xE6\\xA0");
  for (const std::string s : {"a\x80z", "\xFF", "\xC0\xAF", "\xED\xA0\x80", "ok\xE6\xA0"}) {
    EXPECT_FALSE(IsValidUtf8(s));
    EXPECT_TRUE(IsValidUtf8(EscapeInvalidUtf8(s)));
  }
}

TEST(Utf8Test, TerminalTextShowsControlsAndBidiOverridesInsteadOfObeyingThem) {
  EXPECT_EQ(EscapeForTerminal("host-1"), "host-1");
  EXPECT_EQ(EscapeForTerminal("\x1b[2Jx"), "\\x1B[2Jx");
  EXPECT_EQ(EscapeForTerminal(std::string("a\0b\n\x7f", 5)), "a\\x00b\\x0A\\x7F");
  EXPECT_EQ(EscapeForTerminal("\xC2\x9B"), "\\x9B");                            // C1 CSI
  EXPECT_EQ(EscapeForTerminal("abc\xE2\x80\xAEgpj.exe"), "abc\\u202Egpj.exe");  // RLO
  EXPECT_EQ(EscapeForTerminal("\xE2\x81\xA6x\xE2\x81\xA9"), "\\u2066x\\u2069");
  EXPECT_EQ(EscapeForTerminal("ΔMEAN \xFF"), "ΔMEAN \\xFF");
}

TEST(Utf8Test, TruncationNeverCutsACharacter) {
  EXPECT_EQ(TruncateUtf8("abc", 5), "abc");
  EXPECT_EQ(TruncateUtf8("abΔ", 3), "ab");  // Δ is 2 bytes
  EXPECT_EQ(TruncateUtf8("ab\xF0\x9F\x98\x80", 5), "ab");
  EXPECT_EQ(TruncateUtf8("abcd", 2), "ab");
}

TEST(JsonTextTest, BadUtf8IsEscapedInsteadOfThrowing) {
  nlohmann::ordered_json j = {{"name", "fusion\xFF"}, {"k\xFE", {"ok", "x\x80"}}};
  EXPECT_THROW(j.dump(), nlohmann::json::type_error);  // what the helper is for
  EXPECT_EQ(JsonText(j), R"({"name":"fusion\\xFF","k\\xFE":["ok","x\\x80"]})");
  const nlohmann::json plain = {{"a", 1}};
  EXPECT_EQ(JsonText(plain, 1), plain.dump(1));
}

}  // namespace
}  // namespace podprof
