// http/json_body.h: bodies refused for their shape before anything recurses over them, and
// fields checked against what they become.
#include "http/json_body.h"

#include <chrono>
#include <limits>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"

namespace podprof::http {
namespace {

// A body nesting 250,000 arrays in labels overflowed the stack in nlohmann's recursive copy.
TEST(JsonBodyTest, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep =
      absl::StrCat("{\"duration_ms\": 5, \"labels\": ", std::string(250'000, '['),
                   std::string(250'000, ']'), "}");
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<nlohmann::json> j = ParseJsonObject(deep);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  ASSERT_FALSE(j.ok());
  EXPECT_TRUE(absl::StrContains(j.status().message(), "deeper than 8")) << j.status();
  // Brackets inside strings are text, not nesting.
  j = ParseJsonObject(absl::StrCat("{\"a\": \"", std::string(1000, '['), "\\\"[\"}"));
  ASSERT_OK(j);
  EXPECT_EQ(ParseJsonObject("{\"a\": [[[[[[[1]]]]]]]}").status().code(),
            absl::StatusCode::kOk);                                  // 8 levels
  EXPECT_FALSE(ParseJsonObject("{\"a\": [[[[[[[[1]]]]]]]]}").ok());  // 9
}

TEST(JsonBodyTest, OnlyObjectsOfValidJson) {
  EXPECT_TRUE(absl::StrContains(ParseJsonObject("[1]").status().message(), "array"));
  EXPECT_TRUE(absl::StrContains(ParseJsonObject("{\"a\": ").status().message(), "not valid"));
  EXPECT_FALSE(ParseJsonObject("").ok());
  const nlohmann::json o = *ParseJsonObject("{\"duration\": 1}");
  static constexpr const char* kKnown[] = {"duration_ms", "labels"};
  absl::Status s = OnlyKnownFields(o, kKnown);
  EXPECT_TRUE(absl::StrContains(s.message(), "unknown field \"duration\"")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "duration_ms, labels")) << s;
}

// duration_ms = 2^58 + 1000 passed the duration limit by signed overflow; delay_ms was cut to
// 32 bits.
TEST(JsonBodyTest, NumbersAreCheckedAgainstTheirRange) {
  const nlohmann::json o = *ParseJsonObject(
      "{\"big\": 288230376151712744, \"neg\": -5, \"frac\": 1.5, \"str\": \"1s\", \"ok\": 7}");
  EXPECT_EQ(*UintField(o, "ok", 1, 10, 0), 7u);
  EXPECT_EQ(*UintField(o, "absent", 1, 10, 3), 3u);
  absl::StatusOr<uint64_t> big = UintField(o, "big", 1, 9'223'372'036'854, 0);
  ASSERT_FALSE(big.ok());
  EXPECT_TRUE(absl::StrContains(big.status().message(), "big must be between 1 and"))
      << big.status();
  EXPECT_FALSE(UintField(o, "big", 0, std::numeric_limits<uint32_t>::max(), 0).ok());
  EXPECT_TRUE(absl::StrContains(UintField(o, "neg", 0, 10, 0).status().message(), "got -5"));
  EXPECT_TRUE(absl::StrContains(UintField(o, "frac", 0, 10, 0).status().message(), "whole"));
  EXPECT_TRUE(absl::StrContains(UintField(o, "str", 0, 10, 0).status().message(), "string"));
}

TEST(JsonBodyTest, ListsAndMapsOfStrings) {
  const nlohmann::json o = *ParseJsonObject(
      "{\"hosts\": [\"a\", \"b\"], \"bad\": [\"a\", 1], \"labels\": {\"k\": \"v\"}, "
      "\"badmap\": {\"k\": [\"v\"]}, \"notlist\": \"a\"}");
  EXPECT_EQ(StringListField(o, "hosts")->size(), 2u);
  EXPECT_TRUE(StringListField(o, "absent")->empty());
  EXPECT_FALSE(StringListField(o, "bad").ok());
  EXPECT_FALSE(StringListField(o, "notlist").ok());
  EXPECT_EQ(StringMapField(o, "labels")->at("k"), "v");
  absl::Status s = StringMapField(o, "badmap").status();
  EXPECT_TRUE(absl::StrContains(s.message(), "badmap.k must be a string")) << s;
}

}  // namespace
}  // namespace podprof::http
