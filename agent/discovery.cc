#include "agent/discovery.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace podprof::agent {
namespace {

namespace fs = std::filesystem;
constexpr uint32_t kGoogleVendor = 0x1ae0;

// PCI device ids of Google's TPUs (see the interop notes).
std::string GenerationOf(uint32_t device_id) {
  switch (device_id) {
    case 0x0027:
      return "v2/v3";
    case 0x005e:
      return "v4";
    case 0x0063:
      return "v5e";
    case 0x0062:
      return "v5p";
    case 0x006f:
      return "v6e";
    case 0x0076:
      return "v7x";
    default:
      return "";
  }
}

absl::StatusOr<uint32_t> ReadHex(const fs::path& file) {
  std::ifstream in(file);
  std::string text;
  if (!in || !std::getline(in, text)) {
    return absl::UnavailableError(absl::StrCat("cannot read ", file.string()));
  }
  text = std::string(absl::StripAsciiWhitespace(text));
  uint32_t v;
  if (!absl::SimpleHexAtoi(text, &v)) {
    return absl::DataLossError(absl::StrCat(file.string(), ": \"", text, "\" is not a hex id"));
  }
  return v;
}

}  // namespace

absl::StatusOr<std::vector<DiscoveredChip>> DiscoverChips(const std::string& sysfs_root) {
  std::vector<DiscoveredChip> chips;
  fs::path dir = fs::path(sysfs_root) / "bus/pci/devices";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return chips;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (!fs::exists(e.path() / "vendor")) continue;
    absl::StatusOr<uint32_t> vendor = ReadHex(e.path() / "vendor");
    if (!vendor.ok()) return vendor.status();
    if (*vendor != kGoogleVendor) continue;
    absl::StatusOr<uint32_t> device = ReadHex(e.path() / "device");
    if (!device.ok()) return device.status();
    DiscoveredChip chip;
    chip.pci_address = e.path().filename().string();
    chip.device_id = static_cast<uint16_t>(*device);
    chip.generation = GenerationOf(*device);
    chips.push_back(std::move(chip));
  }
  if (ec)
    return absl::UnavailableError(absl::StrCat("cannot list ", dir.string(), ": ", ec.message()));
  std::sort(chips.begin(), chips.end(), [](const DiscoveredChip& a, const DiscoveredChip& b) {
    return a.pci_address < b.pci_address;
  });
  return chips;
}

}  // namespace podprof::agent
