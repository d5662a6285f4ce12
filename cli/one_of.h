// A CLI11 transformer for flags that take one of a few names (--format, --by, --sort), whose
// refusal lists the names plainly. CLI11's CheckedTransformer and IsMember print their own
// internals ("Check foo value in {category->3,chip->1,...} FAILED"). Only for cli/*.cc: it
// includes CLI11, which the rest of the tree does not see.
#ifndef PODPROF_CLI_ONE_OF_H_
#define PODPROF_CLI_ONE_OF_H_

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace podprof::cli {

// Accepts the names of `values` in any case and turns the text into the name's value (an enum's
// as its number, which CLI11 converts back into the enum the option binds; a string as it is).
// Other text is refused with `"foo" is not one of a, b, c` (CLI11 puts the flag's name first).
template <typename T>
CLI::Validator OneOf(std::vector<std::pair<std::string, T>> values) {
  std::vector<std::string> names;
  for (const auto& entry : values) names.push_back(entry.first);
  std::string allowed = absl::StrJoin(names, ", ");
  return CLI::Validator(
      [values = std::move(values), allowed](std::string& text) -> std::string {
        for (const auto& [name, value] : values) {
          if (!absl::EqualsIgnoreCase(text, name)) continue;
          if constexpr (std::is_enum_v<T>) {
            text = absl::StrCat(static_cast<int64_t>(value));
          } else {
            text = value;
          }
          return "";
        }
        return absl::StrCat("\"", text, "\" is not one of ", allowed);
      },
      absl::StrJoin(names, "|"));
}

}  // namespace podprof::cli

#endif  // PODPROF_CLI_ONE_OF_H_
