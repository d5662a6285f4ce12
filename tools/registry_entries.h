// The registry's entries, as data (registry_entries.cc), apart from the functions over them
// (registry.cc). Internal to tools/: callers use tools/registry.h.
#ifndef PODPROF_TOOLS_REGISTRY_ENTRIES_H_
#define PODPROF_TOOLS_REGISTRY_ENTRIES_H_

#include <vector>

#include "tools/registry.h"

namespace podprof::tools::internal {

// Every tool, in Registry()'s order; built anew on each call (Registry() keeps one copy).
std::vector<Tool> ToolEntries();
// Every NotATool; built anew on each call (NotTools() keeps one copy).
std::vector<NotATool> NotToolEntries();
// Every CliShape; built anew on each call (CliShapes() keeps one copy).
std::vector<CliShape> CliShapeEntries();

}  // namespace podprof::tools::internal

#endif  // PODPROF_TOOLS_REGISTRY_ENTRIES_H_
