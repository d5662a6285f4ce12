// Finds the host's TPU chips in sysfs without opening them (the workload owns the devices).
#ifndef PODPROF_AGENT_DISCOVERY_H_
#define PODPROF_AGENT_DISCOVERY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace podprof::agent {

struct DiscoveredChip {
  std::string pci_address;  // e.g. "0000:00:04.0"
  uint16_t device_id = 0;
  // Generation from the PCI device id ("v6e"); "v2/v3" when the id does not tell them apart.
  std::string generation;
};

// Lists PCI devices of vendor 0x1ae0 under `<sysfs_root>/bus/pci/devices`, sorted by PCI
// address (the order chips get their ordinals in). A missing tree is no chips, not an error
// (machines without TPUs, simulation); unreadable files are an error naming the file.
absl::StatusOr<std::vector<DiscoveredChip>> DiscoverChips(const std::string& sysfs_root);

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_DISCOVERY_H_
