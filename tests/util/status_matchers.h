// Assertions and gMock matchers for absl::Status and absl::StatusOr<T> (abseil in Debian 12
// ships no absl/status/status_matchers.h):
//
//   ASSERT_OK(expr);   EXPECT_OK(expr);
//       expr is an absl::Status, an absl::StatusOr<T> or a grpc::Status (anything with ok(),
//       error_code() and error_message()), evaluated once; on failure the message names the
//       expression and prints the status. More context may be streamed:
//       ASSERT_OK(store.Put(key)) << "key " << key;
//
//   ASSERT_OK_AND_ASSIGN(lhs, rexpr);
//       Evaluates rexpr (an absl::StatusOr<T>) once into a temporary; a fatal failure printing
//       the status if it is not OK, else `lhs = std::move(*temporary)`. lhs may declare:
//       ASSERT_OK_AND_ASSIGN(auto rows, store.Query(q));
//       ASSERT_OK_AND_ASSIGN(std::vector<int> ids, ListIds());
//       ASSERT_OK_AND_ASSIGN(existing_variable, Parse(text));
//       rexpr may contain commas. An lhs whose type has a comma goes in parentheses:
//       ASSERT_OK_AND_ASSIGN((std::map<int, int> m), Load());
//       Like every ASSERT_*, it only works in a function returning void; and since it expands
//       to several statements, it needs braces as the body of an if/for.
//
//   EXPECT_THAT(status_or_statusor, podprof::testing::IsOk());
//   EXPECT_THAT(s, podprof::testing::StatusIs(absl::StatusCode::kNotFound));
//   EXPECT_THAT(s, podprof::testing::StatusIs(absl::StatusCode::kInvalidArgument,
//                                             ::testing::HasSubstr("port")));
//       StatusIs's second argument is a matcher of the message (std::string), or a string it
//       must equal.
#ifndef PODPROF_TESTS_UTIL_STATUS_MATCHERS_H_
#define PODPROF_TESTS_UTIL_STATUS_MATCHERS_H_

#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace podprof::testing {
namespace status_internal {

inline const absl::Status& GetStatus(const absl::Status& status) { return status; }

template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

// A status of the grpc::Status shape (ok(), error_code(), error_message()), recognised without
// including gRPC's headers.
template <typename T, typename = void>
struct IsGrpcLikeStatus : std::false_type {};
template <typename T>
struct IsGrpcLikeStatus<T, std::void_t<decltype(std::declval<const T&>().ok()),
                                       decltype(std::declval<const T&>().error_code()),
                                       decltype(std::declval<const T&>().error_message())>>
    : std::true_type {};

// The predicate-formatters behind ASSERT_OK / EXPECT_OK.
inline ::testing::AssertionResult AssertOk(const char* expr_text, const absl::Status& status) {
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << expr_text << " is not OK: " << status;
}

template <typename T>
::testing::AssertionResult AssertOk(const char* expr_text, const absl::StatusOr<T>& status_or) {
  return AssertOk(expr_text, status_or.status());
}

template <typename S, std::enable_if_t<IsGrpcLikeStatus<S>::value, int> = 0>
::testing::AssertionResult AssertOk(const char* expr_text, const S& status) {
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << expr_text << " is not OK: code " << static_cast<int>(status.error_code()) << ": "
         << status.error_message();
}

}  // namespace status_internal

// Matches an OK absl::Status or absl::StatusOr<T>.
MATCHER(IsOk, negation ? "is not OK" : "is OK") {
  const absl::Status& status = ::podprof::testing::status_internal::GetStatus(arg);
  *result_listener << "whose status is " << status;
  return status.ok();
}

// Matches an absl::Status or absl::StatusOr<T> whose code is `code`.
MATCHER_P(StatusIs, code,
          std::string(negation ? "has a status code other than " : "has status code ") +
              absl::StatusCodeToString(code)) {
  const absl::Status& status = ::podprof::testing::status_internal::GetStatus(arg);
  *result_listener << "whose status is " << status;
  return status.code() == code;
}

// Matches an absl::Status or absl::StatusOr<T> whose code is `code` and whose message matches
// `message_matcher`.
MATCHER_P2(StatusIs, code, message_matcher,
           std::string(negation ? "does not have status code " : "has status code ") +
               absl::StatusCodeToString(code) +
               (negation ? " or a message that " : " and a message that ") +
               ::testing::DescribeMatcher<const std::string&>(message_matcher, negation)) {
  const absl::Status& status = ::podprof::testing::status_internal::GetStatus(arg);
  *result_listener << "whose status is " << status;
  if (status.code() != code) return false;
  return ::testing::Matches(::testing::SafeMatcherCast<const std::string&>(message_matcher))(
      std::string(status.message()));
}

}  // namespace podprof::testing

#define ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::podprof::testing::status_internal::AssertOk, expr)
#define EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::podprof::testing::status_internal::AssertOk, expr)

// ASSERT_OK_AND_ASSIGN's machinery: PODPROF_SM_DEPAREN_ strips one pair of parentheses around
// its argument if it has them ((std::map<int, int> m) -> std::map<int, int> m; auto x -> auto x).
#define PODPROF_SM_DEPAREN_(x) PODPROF_SM_ESCAPE_(PODPROF_SM_ISH_ x)
#define PODPROF_SM_ISH_(...) PODPROF_SM_ISH_ __VA_ARGS__
#define PODPROF_SM_ESCAPE_(...) PODPROF_SM_ESCAPE2_(__VA_ARGS__)
#define PODPROF_SM_ESCAPE2_(...) PODPROF_SM_VAN##__VA_ARGS__
#define PODPROF_SM_VANPODPROF_SM_ISH_
#define PODPROF_SM_CONCAT2_(a, b) a##b
#define PODPROF_SM_CONCAT_(a, b) PODPROF_SM_CONCAT2_(a, b)
#define PODPROF_SM_ASSIGN_IMPL_(tmp, lhs, rexpr_text, ...)                              \
  auto tmp = (__VA_ARGS__);                                                             \
  if (!tmp.ok()) GTEST_FATAL_FAILURE_("") << rexpr_text " is not OK: " << tmp.status(); \
  PODPROF_SM_DEPAREN_(lhs) = std::move(*tmp)

#define ASSERT_OK_AND_ASSIGN(lhs, ...)                                                            \
  PODPROF_SM_ASSIGN_IMPL_(PODPROF_SM_CONCAT_(podprof_status_or_, __COUNTER__), lhs, #__VA_ARGS__, \
                          __VA_ARGS__)

#endif  // PODPROF_TESTS_UTIL_STATUS_MATCHERS_H_
