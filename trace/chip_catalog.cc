#include "trace/chip_catalog.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace podprof::trace {

const std::vector<ChipGeneration>& ChipGenerations() {
  constexpr int64_t kGiB = int64_t{1} << 30;
  constexpr double kGiBd = static_cast<double>(kGiB);
  // Peaks are the vendor's published per-chip figures (bf16 TFLOP/s, HBM GB/s). The clock,
  // unit counts and per-core HBM peak of v6e and v7x are the ones XProf's Utilization Viewer
  // computes with. v7x's PCI device id is not known here.
  static const auto* const kGenerations = new std::vector<ChipGeneration>{
      {"v4", "TPU v4", 275.0, 1228.0, 32 * kGiB, 4, 0x005e},
      {"v5e", "TPU v5 Lite", 197.0, 819.0, 16 * kGiB, 8, 0x0063},
      {"v5p", "TPU v5", 459.0, 2765.0, 95 * kGiB, 4, 0x0062},
      {"v6e", "TPU v6 Lite", 918.0, 1640.0, 32 * kGiB, 8, 0x006f, 1.75e9, 1, 2, 4, 1525.5 * kGiBd,
       false},
      {"v7x", "TPU v7x", 2307.0, 7370.0, 192 * kGiB, 4, 0, 1.9e9, 2, 2, 1, 3433.0 * kGiBd, true},
  };
  return *kGenerations;
}

const ChipGeneration* FindGenerationByName(absl::string_view name) {
  for (const ChipGeneration& g : ChipGenerations()) {
    if (absl::EqualsIgnoreCase(g.name, name)) return &g;
  }
  return nullptr;
}

const ChipGeneration* FindGenerationByDeviceType(absl::string_view device_type) {
  std::string t = absl::AsciiStrToLower(device_type);
  if (absl::StrContains(t, "v7")) return FindGenerationByName("v7x");
  // "TPU v5" is v5p's string and a prefix of v5e's ("TPU v5 Lite"): match lite variants first.
  if (absl::StrContains(t, "v6") && (absl::StrContains(t, "lite") || absl::StrContains(t, "v6e"))) {
    return FindGenerationByName("v6e");
  }
  if (absl::StrContains(t, "v5") && (absl::StrContains(t, "lite") || absl::StrContains(t, "v5e"))) {
    return FindGenerationByName("v5e");
  }
  if (absl::StrContains(t, "v5")) return FindGenerationByName("v5p");
  if (absl::StrContains(t, "v4")) return FindGenerationByName("v4");
  return nullptr;
}

}  // namespace podprof::trace
