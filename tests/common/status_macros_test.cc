#include "common/status_macros.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"

namespace podprof {
namespace {

absl::Status Fail() { return absl::NotFoundError("missing"); }

absl::StatusOr<std::string> Text(bool ok) {
  if (!ok) return absl::InvalidArgumentError("no text");
  return std::string("text");
}

absl::StatusOr<std::unique_ptr<int>> Owned(int value) { return std::make_unique<int>(value); }

absl::Status ReturnIfError(bool fail, int* reached) {
  RETURN_IF_ERROR(fail ? Fail() : absl::OkStatus());
  ++*reached;
  return absl::OkStatus();
}

TEST(StatusMacrosTest, ReturnIfErrorReturnsTheError) {
  int reached = 0;
  const absl::Status status = ReturnIfError(true, &reached);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "missing");
  EXPECT_EQ(reached, 0);
}

TEST(StatusMacrosTest, ReturnIfErrorContinuesOnOk) {
  int reached = 0;
  EXPECT_OK(ReturnIfError(false, &reached));
  EXPECT_EQ(reached, 1);
}

int evaluations = 0;
absl::Status CountedOk() {
  ++evaluations;
  return absl::OkStatus();
}

absl::Status EvaluatesOnce() {
  RETURN_IF_ERROR(CountedOk());
  return absl::OkStatus();
}

TEST(StatusMacrosTest, ReturnIfErrorEvaluatesOnce) {
  evaluations = 0;
  EXPECT_OK(EvaluatesOnce());
  EXPECT_EQ(evaluations, 1);
}

absl::Status ReturnIfErrorInUnbracedIf(bool check) {
  if (check)
    RETURN_IF_ERROR(Fail());
  else
    return absl::AbortedError("else branch");
  return absl::OkStatus();
}

TEST(StatusMacrosTest, ReturnIfErrorIsOneStatement) {
  EXPECT_EQ(ReturnIfErrorInUnbracedIf(true).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReturnIfErrorInUnbracedIf(false).code(), absl::StatusCode::kAborted);
}

absl::StatusOr<std::string> Declare(bool ok) {
  ASSIGN_OR_RETURN(std::string text, Text(ok));
  return text + "!";
}

absl::StatusOr<std::string> DeclareAuto(bool ok) {
  ASSIGN_OR_RETURN(auto text, Text(ok));
  return text + "?";
}

absl::StatusOr<std::string> AssignExisting(bool ok) {
  std::string text = "unchanged";
  absl::Status status = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(text, Text(ok));
    return absl::OkStatus();
  }();
  if (!status.ok()) return text;
  return text;
}

TEST(StatusMacrosTest, AssignOrReturnDeclaresVariable) {
  EXPECT_EQ(*Declare(true), "text!");
  EXPECT_EQ(*DeclareAuto(true), "text?");
  EXPECT_EQ(Declare(false).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DeclareAuto(false).status().message(), "no text");
}

TEST(StatusMacrosTest, AssignOrReturnAssignsExistingVariable) {
  EXPECT_EQ(*AssignExisting(true), "text");
  EXPECT_EQ(*AssignExisting(false), "unchanged");
}

absl::StatusOr<int> MoveOnlyAndTwoPerScope() {
  ASSIGN_OR_RETURN(std::unique_ptr<int> a, Owned(2));
  ASSIGN_OR_RETURN(std::unique_ptr<int> b, Owned(3));
  return *a * *b;
}

TEST(StatusMacrosTest, AssignOrReturnMovesAndAllowsSeveralUses) {
  EXPECT_EQ(*MoveOnlyAndTwoPerScope(), 6);
}

absl::Status AssignIntoStatusFunction(int* out) {
  ASSIGN_OR_RETURN(*out, absl::StatusOr<int>(absl::UnavailableError("down")));
  return absl::OkStatus();
}

TEST(StatusMacrosTest, AssignOrReturnInStatusFunction) {
  int out = 5;
  EXPECT_EQ(AssignIntoStatusFunction(&out).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(out, 5);
}

}  // namespace
}  // namespace podprof
