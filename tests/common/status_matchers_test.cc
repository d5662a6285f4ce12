#include "tests/util/status_matchers.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"

namespace podprof {
namespace {

using ::podprof::testing::IsOk;
using ::podprof::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<std::vector<int>> Numbers(bool ok) {
  if (!ok) return absl::NotFoundError("no numbers here");
  return std::vector<int>{1, 2, 3};
}

absl::StatusOr<std::map<int, int>> Squares() { return std::map<int, int>{{2, 4}, {3, 9}}; }

absl::StatusOr<std::unique_ptr<int>> Owned(int value) { return std::make_unique<int>(value); }

// A pair of callees whose argument lists carry commas.
absl::StatusOr<int> Sum(int a, int b) { return a + b; }

TEST(StatusMatchersTest, AssertOkPassesOnOk) {
  ASSERT_OK(absl::OkStatus());
  EXPECT_OK(absl::OkStatus());
  const absl::StatusOr<int> value = 7;
  ASSERT_OK(value);
  EXPECT_OK(value) << "streams context";
  ASSERT_OK(Sum(1, 2));
}

TEST(StatusMatchersTest, AssertOkFailsAndPrintsTheStatus) {
  EXPECT_FATAL_FAILURE(ASSERT_OK(absl::NotFoundError("gone missing")),
                       "absl::NotFoundError(\"gone missing\") is not OK: NOT_FOUND: gone missing");
  EXPECT_FATAL_FAILURE(ASSERT_OK(Numbers(false)), "is not OK: NOT_FOUND: no numbers here");
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(absl::InternalError("boom")), "INTERNAL: boom");
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(absl::InternalError("boom")) << "while testing",
                          "while testing");
}

// The shape of grpc::Status (common_test does not link gRPC).
enum class FakeGrpcCode { OK = 0, UNAVAILABLE = 14 };
struct FakeGrpcStatus {
  FakeGrpcCode code;
  std::string message;
  bool ok() const { return code == FakeGrpcCode::OK; }
  FakeGrpcCode error_code() const { return code; }
  std::string error_message() const { return message; }
};

TEST(StatusMatchersTest, AssertOkTakesGrpcLikeStatus) {
  ASSERT_OK((FakeGrpcStatus{FakeGrpcCode::OK, ""}));
  EXPECT_FATAL_FAILURE(ASSERT_OK((FakeGrpcStatus{FakeGrpcCode::UNAVAILABLE, "connect failed"})),
                       "is not OK: code 14: connect failed");
}

TEST(StatusMatchersTest, AssertOkEvaluatesOnce) {
  int calls = 0;
  auto counted = [&calls]() -> absl::Status {
    ++calls;
    return absl::OkStatus();
  };
  ASSERT_OK(counted());
  EXPECT_OK(counted());
  EXPECT_EQ(calls, 2);
}

TEST(StatusMatchersTest, AssignDeclaresAndAssigns) {
  ASSERT_OK_AND_ASSIGN(auto numbers, Numbers(true));
  EXPECT_EQ(numbers, (std::vector<int>{1, 2, 3}));
  ASSERT_OK_AND_ASSIGN(std::vector<int> again, Numbers(true));
  EXPECT_EQ(again.size(), 3u);

  int existing = 0;
  ASSERT_OK_AND_ASSIGN(existing, Sum(20, 22));
  EXPECT_EQ(existing, 42);

  ASSERT_OK_AND_ASSIGN((std::map<int, int> squares), Squares());
  EXPECT_EQ(squares.at(3), 9);

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<int> owned, Owned(5));  // move-only
  ASSERT_NE(owned, nullptr);
  EXPECT_EQ(*owned, 5);

  // Two in one scope get distinct temporaries.
  ASSERT_OK_AND_ASSIGN(auto a, Sum(1, 1));
  ASSERT_OK_AND_ASSIGN(auto b, Sum(2, 2));
  EXPECT_EQ(a + b, 6);
}

TEST(StatusMatchersTest, AssignEvaluatesOnce) {
  int calls = 0;
  auto counted = [&calls]() -> absl::StatusOr<int> { return ++calls; };
  ASSERT_OK_AND_ASSIGN(const int value, counted());
  EXPECT_EQ(value, 1);
  EXPECT_EQ(calls, 1);
}

// EXPECT_FATAL_FAILURE's statement may not touch locals, so the failing assignment lives in a
// function of its own; `reached` shows the assertion returned before the assignment.
bool reached_after_failed_assign = false;
void AssignFromError() {
  ASSERT_OK_AND_ASSIGN(auto numbers, Numbers(false));
  reached_after_failed_assign = true;
  (void)numbers;
}

TEST(StatusMatchersTest, AssignFailsOnErrorWithTheStatus) {
  reached_after_failed_assign = false;
  EXPECT_FATAL_FAILURE(AssignFromError(), "Numbers(false) is not OK: NOT_FOUND: no numbers here");
  EXPECT_FALSE(reached_after_failed_assign);
}

TEST(StatusMatchersTest, IsOkMatcher) {
  EXPECT_THAT(absl::OkStatus(), IsOk());
  EXPECT_THAT(Numbers(true), IsOk());
  EXPECT_THAT(absl::UnknownError("x"), Not(IsOk()));
  EXPECT_THAT(Numbers(false), Not(IsOk()));
  EXPECT_NONFATAL_FAILURE(EXPECT_THAT(Numbers(false), IsOk()),
                          "whose status is NOT_FOUND: no numbers here");
}

TEST(StatusMatchersTest, StatusIsMatcher) {
  EXPECT_THAT(absl::NotFoundError("gone"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(Numbers(false), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(Numbers(true), StatusIs(absl::StatusCode::kOk));
  EXPECT_THAT(absl::NotFoundError("gone"), Not(StatusIs(absl::StatusCode::kInternal)));
  EXPECT_THAT(Numbers(false), StatusIs(absl::StatusCode::kNotFound, HasSubstr("numbers")));
  EXPECT_THAT(Numbers(false), StatusIs(absl::StatusCode::kNotFound, "no numbers here"));
  EXPECT_THAT(Numbers(false), Not(StatusIs(absl::StatusCode::kNotFound, HasSubstr("letters"))));
  EXPECT_THAT(Numbers(false), Not(StatusIs(absl::StatusCode::kInternal, HasSubstr("numbers"))));
  EXPECT_NONFATAL_FAILURE(
      EXPECT_THAT(absl::InternalError("boom"), StatusIs(absl::StatusCode::kNotFound)),
      "has status code NOT_FOUND");
  EXPECT_NONFATAL_FAILURE(EXPECT_THAT(absl::NotFoundError("boom"),
                                      StatusIs(absl::StatusCode::kNotFound, HasSubstr("bang"))),
                          "and a message that has substring \"bang\"");
}

}  // namespace
}  // namespace podprof
