// Checks of a daemon's shipped example configuration (deploy/*.toml) against its loader: that
// the file sets every key the loader knows, and that each value it sets is the compiled
// default. A key added to a loader without its deploy entry, or a default changed in one
// place only, fails the test that calls these.
#ifndef PODPROF_TESTS_UTIL_SHIPPED_CONFIG_H_
#define PODPROF_TESTS_UTIL_SHIPPED_CONFIG_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/config.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace podprof::testing {

// The keys of `known` (dotted; "labels.*" for a table of any keys) that `file` does not set.
inline std::vector<std::string> KeysNotSet(const ConfigFile& file,
                                           const std::vector<std::string>& known) {
  std::vector<std::string> missing;
  for (std::string key : known) {
    if (absl::EndsWith(key, ".*")) key.resize(key.size() - 2);
    if (!file.Has(key)) missing.push_back(key);
  }
  return missing;
}

// One configuration key's value in a loaded configuration, as JSON text.
template <typename Config>
using KeyValue = std::function<nlohmann::json(const Config&)>;

// Expects `values` to name exactly the keys of `known` (so that a new key needs its line
// there), and each key's value in `shipped` to equal the one in `defaults`, except the keys of
// `differ`, which must differ (deliberately, as the caller says).
template <typename Config>
void ExpectShippedDefaults(const std::vector<std::string>& known,
                           const std::map<std::string, KeyValue<Config>>& values,
                           const Config& shipped, const Config& defaults,
                           const std::set<std::string>& differ) {
  std::set<std::string> named;
  for (const auto& [key, value] : values) named.insert(key);
  EXPECT_EQ(named, std::set<std::string>(known.begin(), known.end()))
      << "every key the loader knows needs its line in this test's table";
  for (const auto& [key, value] : values) {
    if (differ.count(key) != 0) {
      EXPECT_NE(value(shipped), value(defaults)) << key << " was to differ from its default";
    } else {
      EXPECT_EQ(value(shipped), value(defaults)) << key << ": the shipped value is not the default";
    }
  }
}

}  // namespace podprof::testing

#endif  // PODPROF_TESTS_UTIL_SHIPPED_CONFIG_H_
