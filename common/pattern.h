// Regular expressions that come from users.
//
// Every pattern a user supplies (a CLI flag such as --kernels, an HTTP
// parameter such as kernel=, a gRPC field such as filter.op_regex, a SQL
// REGEXP operand) is compiled here and nowhere else. std::regex must not see
// user input: its compiler recurses once per nested group, so a GET with
// 20,000 nested groups overflowed the stack and took the daemon down, and its
// backtracking matcher took 26 s on `(.*)*#`. RE2 compiles to an automaton
// with a memory budget and matches in time linear in the text, so no pattern
// can stall or crash a daemon.
//
// The syntax is RE2's (https://github.com/google/re2/wiki/Syntax), which
// agrees with ECMAScript for ordinary patterns (classes, \d \w \s \b,
// anchors, alternation, repetition, (?:...) and (?i)), but does not support
// backreferences (\1) or lookaround ((?=...), (?!...), (?<=...)); those are
// refused with RE2's error text. Patterns are at most kMaxUserPatternBytes.

#ifndef PODPROF_COMMON_PATTERN_H_
#define PODPROF_COMMON_PATTERN_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace re2 {
class RE2;
}  // namespace re2

namespace podprof {

// The longest pattern accepted, in bytes. Room for any hand-written filter
// and for the exact-name pattern the aggregator builds from a kernel name it
// accepts (`^` + the escaped name + `$`: up to 2,050 bytes for a 1,024-byte
// name); far short of the 40 KB of nested groups that crashed std::regex.
inline constexpr size_t kMaxUserPatternBytes = 4096;

// The memory RE2 may use for one compiled pattern (program and DFA caches).
// A pattern whose program does not fit is refused; a match whose DFA runs out
// falls back to RE2's NFA, still linear in the text.
inline constexpr int64_t kMaxUserPatternMemoryBytes = 8 << 20;

// A compiled user pattern. Immutable; copies share the compiled form, and
// Search may be called from any number of threads at once.
class UserPattern {
 public:
  // The pattern as given (the empty pattern matches every text).
  const std::string& pattern() const { return pattern_; }

  // Whether the pattern matches anywhere in `text` (unanchored, like
  // std::regex_search; anchor with ^ and $ for a whole match). Time linear
  // in text.size().
  bool Search(absl::string_view text) const;

 private:
  friend absl::StatusOr<UserPattern> CompileUserPattern(absl::string_view what,
                                                        absl::string_view pattern);
  UserPattern(std::string pattern, std::shared_ptr<const re2::RE2> re)
      : pattern_(std::move(pattern)), re_(std::move(re)) {}

  std::string pattern_;
  std::shared_ptr<const re2::RE2> re_;  // never null
};

// Compiles `pattern`, which came from the user through the parameter, flag or
// field named `what` ("kernel", "--kernels", "filter.op_regex"). Returns
// InvalidArgument naming `what` when the pattern is longer than
// kMaxUserPatternBytes ("kernel: pattern is 40000 bytes, at most 4096"), is
// not valid RE2 syntax or UTF-8, or does not fit the memory budget
// ("--kernels \"(\" is not a regular expression: missing ): (").
// Never logs. Thread-safe.
absl::StatusOr<UserPattern> CompileUserPattern(absl::string_view what, absl::string_view pattern);

// CompileUserPattern's verdict alone, for a layer that checks a pattern it
// hands on (to the store, to ClickHouse) before doing any work.
absl::Status CheckUserPattern(absl::string_view what, absl::string_view pattern);

}  // namespace podprof

#endif  // PODPROF_COMMON_PATTERN_H_
