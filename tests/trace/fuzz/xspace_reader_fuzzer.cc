// libFuzzer entry point: any bytes must give a capture or a clean Status.
#include <cstddef>
#include <cstdint>

#include "trace/kernel_stats.h"
#include "trace/xspace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  podprof::trace::MemorySource source(absl::string_view(reinterpret_cast<const char*>(data), size));
  auto capture = podprof::trace::ReadXSpace(source);
  if (capture.ok()) {
    podprof::trace::RollUpByKernel(podprof::trace::ComputeKernelStats(*capture));
  }
  return 0;
}
