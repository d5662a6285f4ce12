// Published facts about TPU generations: peaks, HBM size, chips per host, PCI device ids.
// Used to fill in what a capture leaves out and by the simulated host to model chips.
#ifndef PODPROF_TRACE_CHIP_CATALOG_H_
#define PODPROF_TRACE_CHIP_CATALOG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace podprof::trace {

struct ChipGeneration {
  // Short name used in flags and output: "v4", "v5e", "v5p", "v6e".
  std::string name;
  // The profiler's `device_type_string` for this generation, e.g. "TPU v6 Lite".
  std::string device_type;
  // Peak dense bf16 compute per chip, TFLOP/s.
  double peak_tflops;
  // Peak HBM bandwidth per chip, GB/s.
  double peak_hbm_gbps;
  // HBM per chip, bytes.
  int64_t hbm_bytes;
  // Chips on a typical host of this generation.
  int chips_per_host;
  // PCI device id under vendor 0x1ae0.
  uint16_t pci_device_id;
};

// All known generations, oldest first.
const std::vector<ChipGeneration>& ChipGenerations();

// Finds a generation by short name ("v6e"); null if unknown.
const ChipGeneration* FindGenerationByName(absl::string_view name);

// Finds the generation a `device_type_string` names ("TPU v6 Lite", "TPU v5p"); null if unknown.
const ChipGeneration* FindGenerationByDeviceType(absl::string_view device_type);

}  // namespace podprof::trace

#endif  // PODPROF_TRACE_CHIP_CATALOG_H_
