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
  // Short name used in flags and output: "v4", "v5e", "v5p", "v6e", "v7x".
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
  // PCI device id under vendor 0x1ae0; 0 when not known here.
  uint16_t pci_device_id;
  // What the kernel-profiling counters are read against (insight/kernel_profile.h), from
  // XProf's Utilization Viewer; 0 when not known for the generation.
  // TensorCore clock, Hz.
  double tc_clock_hz = 0;
  // TensorCores per chip (v7x: one per die) and matrix units per TensorCore.
  int tensor_cores = 0;
  int mxus_per_core = 0;
  // Cycles one cross-lane (XLU) instruction occupies its unit.
  int xlu_cycles_per_instruction = 0;
  // Peak HBM bandwidth per TensorCore, bytes per second (what the Utilization Viewer divides by).
  double hbm_bytes_per_s_per_core = 0;
  // Whether the runtime samples performance counters inside kernels (TPU7x and later).
  bool kernel_profiling = false;
};

// All known generations, oldest first.
const std::vector<ChipGeneration>& ChipGenerations();

// Finds a generation by short name ("v6e"); null if unknown.
const ChipGeneration* FindGenerationByName(absl::string_view name);

// Finds the generation a `device_type_string` names ("TPU v6 Lite", "TPU v5p"); null if unknown.
const ChipGeneration* FindGenerationByDeviceType(absl::string_view device_type);

}  // namespace podprof::trace

#endif  // PODPROF_TRACE_CHIP_CATALOG_H_
