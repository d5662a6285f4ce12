#include "trace/xspace_schema.h"

#include "absl/container/flat_hash_map.h"

namespace podprof::trace::xspace {

static_assert(StatName(Stat::kProfileStopTime) == "profile_stop_time",
              "kStatNames must list a name for every Stat, in the enum's order");

Stat StatOfName(absl::string_view name) {
  // Keys view the static names, so the map owns no strings.
  static const auto* const kByName = [] {
    auto* by_name = new absl::flat_hash_map<absl::string_view, Stat>();
    for (size_t i = 1; i < kStatCount; ++i) by_name->emplace(kStatNames[i], static_cast<Stat>(i));
    return by_name;
  }();
  auto it = kByName->find(name);
  return it == kByName->end() ? Stat::kUnknown : it->second;
}

}  // namespace podprof::trace::xspace
