#include "common/pattern.h"

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"

namespace podprof {
namespace {

using ::testing::HasSubstr;

// Wall time of `f`, in seconds. The limits below are two orders of magnitude above what RE2
// takes, so a loaded machine does not fail them; std::regex took 26 s or crashed.
template <typename F>
double SecondsOf(F f) {
  const auto begin = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

TEST(UserPatternTest, SearchIsUnanchoredLikeRegexSearch) {
  absl::StatusOr<UserPattern> p = CompileUserPattern("kernel", "fusion\\.[0-9]+");
  ASSERT_OK(p);
  EXPECT_EQ(p->pattern(), "fusion\\.[0-9]+");
  EXPECT_TRUE(p->Search("loop_fusion.12"));
  EXPECT_TRUE(p->Search("fusion.7 copy"));
  EXPECT_FALSE(p->Search("fusion"));
  EXPECT_FALSE(p->Search("fusionX7"));
}

TEST(UserPatternTest, OrdinaryEcmaScriptPatternsKeepTheirMeaning) {
  struct Case {
    const char* pattern;
    const char* text;
    bool match;
  };
  const Case kCases[] = {
      {"^fusion\\.7$", "fusion.7", true},
      {"^fusion\\.7$", "fusion.70", false},
      {"all-reduce|all-gather", "all-gather.3", true},
      {"\\bdot\\b", "convolution dot general", true},
      {"\\d{2,}", "copy.15", true},
      {"\\d{2,}", "copy.5", false},
      {"(?i)FUSION", "fusion.1", true},
      {"[[:alpha:]]+\\.\\w+", "reduce.sum", true},
      {"(?:ab)+c", "ababc", true},
      {"\\s", "no_space", false},
      {"", "anything", true},
  };
  for (const Case& c : kCases) {
    absl::StatusOr<UserPattern> p = CompileUserPattern("kernel", c.pattern);
    ASSERT_OK(p) << c.pattern;
    EXPECT_EQ(p->Search(c.text), c.match) << c.pattern << " on " << c.text;
  }
}

TEST(UserPatternTest, BadPatternErrorNamesTheParameterAndRe2sReason) {
  absl::StatusOr<UserPattern> p = CompileUserPattern("--kernels", "(");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(),
              HasSubstr("--kernels \"(\" is not a regular expression: missing )"));
}

TEST(UserPatternTest, BackreferencesAndLookaroundAreRefusedNotMisread) {
  for (const char* pattern : {"(a)\\1", "fusion(?=\\.)", "(?!copy)", "(?<=x)y"}) {
    absl::StatusOr<UserPattern> p = CompileUserPattern("kernel", pattern);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << pattern;
    EXPECT_THAT(p.status().message(), HasSubstr("kernel \"")) << pattern;
  }
}

TEST(UserPatternTest, LengthCapNamesTheParameterTheSizeAndTheCap) {
  EXPECT_OK(CompileUserPattern("kernel", std::string(kMaxUserPatternBytes, 'a')));
  absl::StatusOr<UserPattern> p =
      CompileUserPattern("kernel", std::string(kMaxUserPatternBytes + 1, 'a'));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(), "kernel: pattern is 4097 bytes, at most 4096");
}

TEST(UserPatternTest, TwentyThousandNestedGroupsAreRefusedQuicklyNotACrash) {
  // std::regex's compiler recursed once per group and overflowed the stack (SIGSEGV).
  const std::string nested = std::string(20'000, '(') + "a" + std::string(20'000, ')');
  absl::Status s;
  EXPECT_LT(SecondsOf([&] { s = CheckUserPattern("kernel", nested); }), 1.0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "kernel: pattern is 40001 bytes, at most 4096");
}

TEST(UserPatternTest, NestingUpToTheCapCompilesOrIsRefusedWithoutCrashing) {
  // As deep as the length cap allows: RE2 parses with its own stack.
  const std::string nested = std::string(2047, '(') + "a" + std::string(2047, ')');
  ASSERT_LE(nested.size(), kMaxUserPatternBytes);
  absl::StatusOr<UserPattern> p;
  EXPECT_LT(SecondsOf([&] { p = CompileUserPattern("kernel", nested); }), 1.0);
  if (p.ok()) {
    EXPECT_TRUE(p->Search("xax"));
  }
}

TEST(UserPatternTest, CatastrophicBacktrackingPatternRunsInLinearTime) {
  // `(.*)*#` took std::regex 26 s on a few KB; RE2 matches in one pass.
  absl::StatusOr<UserPattern> p = CompileUserPattern("kernel", "(.*)*#");
  ASSERT_OK(p);
  const std::string text(100'000, 'x');
  bool matched = true;
  EXPECT_LT(SecondsOf([&] { matched = p->Search(text); }), 0.5);
  EXPECT_FALSE(matched);
  EXPECT_TRUE(p->Search(text + "#"));
}

TEST(UserPatternTest, PatternTooBigForTheMemoryBudgetIsRefused) {
  // Nested counted repetition expands to far more than 8 MiB of program.
  absl::StatusOr<UserPattern> p = CompileUserPattern("kernel", "((a{100}){100}){100}");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("kernel \"((a{100}){100}){100}\" is not a"));
}

TEST(UserPatternTest, InvalidUtf8IsRefused) {
  EXPECT_EQ(CheckUserPattern("kernel", "\xff").code(), absl::StatusCode::kInvalidArgument);
}

TEST(UserPatternTest, CopiesShareTheCompiledPattern) {
  absl::StatusOr<UserPattern> p = CompileUserPattern("kernel", "copy");
  ASSERT_OK(p);
  const UserPattern q = *p;
  EXPECT_TRUE(q.Search("copy.3"));
  EXPECT_EQ(q.pattern(), "copy");
}

}  // namespace
}  // namespace podprof
