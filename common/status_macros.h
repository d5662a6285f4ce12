// Early-return helpers for code that propagates absl::Status.
//
// Both macros only read their arguments once and are usable from any
// function whose return type is constructible from absl::Status (that is,
// absl::Status itself or any absl::StatusOr<T>).

#ifndef PODPROF_COMMON_STATUS_MACROS_H_
#define PODPROF_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Evaluates `expr`, which must yield an absl::Status, and returns that status
// from the enclosing function if it is not OK.
//
//   RETURN_IF_ERROR(file.Flush());
#define RETURN_IF_ERROR(expr)                                     \
  do {                                                            \
    ::absl::Status podprof_status_macros_status = (expr);         \
    if (ABSL_PREDICT_FALSE(!podprof_status_macros_status.ok())) { \
      return podprof_status_macros_status;                        \
    }                                                             \
  } while (false)

// Evaluates `expr`, which must yield an absl::StatusOr<T>. On error returns
// the status from the enclosing function; otherwise moves the value into
// `lhs`, which may be a declaration (`auto x`, `std::string y`) or an
// existing variable.
//
//   ASSIGN_OR_RETURN(ConfigFile config, ConfigFile::Load(path));
//   ASSIGN_OR_RETURN(count_, ParseCount(text));
//
// Because `lhs` may declare a variable in the enclosing scope this macro
// expands to several statements, not a do/while block: use it only as a
// statement of its own inside braces (never as the body of an unbraced if or
// loop). A `lhs` whose type contains a top-level comma (std::pair<int, int>)
// needs a type alias. At most one use per source line.
#define ASSIGN_OR_RETURN(lhs, expr)            \
  PODPROF_STATUS_MACROS_ASSIGN_OR_RETURN_IMPL( \
      PODPROF_STATUS_MACROS_CONCAT(podprof_status_macros_statusor_, __LINE__), lhs, expr)

// Implementation details; not part of the API.
#define PODPROF_STATUS_MACROS_CONCAT_INNER(x, y) x##y
#define PODPROF_STATUS_MACROS_CONCAT(x, y) PODPROF_STATUS_MACROS_CONCAT_INNER(x, y)
#define PODPROF_STATUS_MACROS_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                                                \
  if (ABSL_PREDICT_FALSE(!statusor.ok())) {                              \
    return std::move(statusor).status();                                 \
  }                                                                      \
  lhs = *std::move(statusor)

#endif  // PODPROF_COMMON_STATUS_MACROS_H_
