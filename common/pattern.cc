#include "common/pattern.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "re2/re2.h"

namespace podprof {
namespace {

re2::StringPiece Piece(absl::string_view s) { return re2::StringPiece(s.data(), s.size()); }

}  // namespace

bool UserPattern::Search(absl::string_view text) const {
  return re2::RE2::PartialMatch(Piece(text), *re_);
}

absl::StatusOr<UserPattern> CompileUserPattern(absl::string_view what, absl::string_view pattern) {
  if (pattern.size() > kMaxUserPatternBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": pattern is ", pattern.size(),
                                                   " bytes, at most ", kMaxUserPatternBytes));
  }
  re2::RE2::Options options;  // Perl-like syntax, UTF-8, leftmost-first
  options.set_log_errors(false);
  options.set_max_mem(kMaxUserPatternMemoryBytes);
  auto re = std::make_shared<const re2::RE2>(Piece(pattern), options);
  if (!re->ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", pattern, "\" is not a regular expression: ", re->error()));
  }
  return UserPattern(std::string(pattern), std::move(re));
}

absl::Status CheckUserPattern(absl::string_view what, absl::string_view pattern) {
  return CompileUserPattern(what, pattern).status();
}

}  // namespace podprof
