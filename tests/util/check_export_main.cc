// podprof-check-export: the export checker (export_checker.h) as a command, for scripts.
//
//   podprof-check-export perfetto FILE | chrome FILE | xprof DIR
//
// Prints what it saw as key=value and the problems, one per line; exits 1 when there are any.
#include <iostream>
#include <string>

#include "common/file_util.h"
#include "tests/util/export_checker.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: podprof-check-export perfetto FILE | chrome FILE | xprof DIR\n";
    return 2;
  }
  const std::string kind = argv[1], path = argv[2];
  podprof::testing::ExportCheck c;
  if (kind == "perfetto" || kind == "chrome") {
    absl::StatusOr<std::string> bytes = podprof::ReadFile(path);
    if (!bytes.ok()) {
      std::cerr << "podprof-check-export: " << bytes.status().message() << "\n";
      return 2;
    }
    c = kind == "perfetto" ? podprof::testing::CheckPerfetto(*bytes)
                           : podprof::testing::CheckChromeJson(*bytes);
  } else if (kind == "xprof") {
    c = podprof::testing::CheckXprofSession(path);
  } else {
    std::cerr << "podprof-check-export: unknown kind " << kind << "\n";
    return 2;
  }
  std::cout << kind << " " << path << ": slices=" << c.slices
            << " counter_samples=" << c.counter_samples << " flows=" << c.flows
            << " tracks=" << c.tracks << " problems=" << c.per_rule.size() << "\n"
            << c.Summary();
  return c.ok() ? 0 : 1;
}
