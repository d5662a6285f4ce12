// Captures for the fleet tests: small synthetic pods stored through the real ingest path.
#ifndef PODPROF_TESTS_FLEET_FLEET_TEST_UTIL_H_
#define PODPROF_TESTS_FLEET_FLEET_TEST_UTIL_H_

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "ingest/capture_ingest.h"
#include "trace/model.h"

namespace podprof::testing {

// A capture of `hosts` hosts x 2 chips running `kernel` (module jit_step) `n` times per chip
// for about `ps` each (spread by up to 6 x `jitter`), and a copy kernel beside it.
inline ingest::CaptureInput SyntheticPod(const std::string& id, int64_t start_ns,
                                         const std::string& kernel, int64_t ps, int hosts = 2,
                                         int n = 200, int64_t jitter = 0,
                                         std::map<std::string, std::string> labels = {}) {
  ingest::CaptureInput w;
  w.id = id;
  w.start_ns = start_ns;
  w.end_ns = start_ns + 1'000'000'000;
  w.labels = std::move(labels);
  for (int h = 0; h < hosts; ++h) {
    trace::HostCapture c;
    c.host.name = absl::StrCat("host-", h);
    c.host.chips.resize(2);
    for (int chip = 0; chip < 2; ++chip) {
      c.host.chips[chip].ordinal = chip;
      c.host.chips[chip].peak_tflops = 100;
      c.host.chips[chip].peak_hbm_gbps = 1000;
    }
    trace::KernelDef k;
    k.module = "jit_step";
    k.name = kernel;
    k.category = "convolution fusion";
    k.program_id = 7;
    k.flops = 1'000'000;
    k.bytes_accessed = 4096;
    c.kernels.push_back(k);
    trace::KernelDef copy = k;
    copy.name = "copy.1";
    copy.category = "copy";
    c.kernels.push_back(copy);
    for (int chip = 0; chip < 2; ++chip) {
      trace::EventBlock b;
      b.chip = chip;
      b.line = "XLA Ops";
      for (int i = 0; i < n; ++i) {
        b.start_ps.push_back(i * 10 * ps);
        b.duration_ps.push_back(ps + ((i + h + chip) % 7) * jitter);
        b.kernel.push_back(0);
        b.collective.push_back(0);
        b.start_ps.push_back(i * 10 * ps + 2 * ps);
        b.duration_ps.push_back(1000 + i % 3);
        b.kernel.push_back(1);
        b.collective.push_back(0);
      }
      c.blocks.push_back(std::move(b));
    }
    ingest::HostInput hi;
    hi.host = c.host.name;
    hi.capture = std::move(c);
    w.hosts.push_back(std::move(hi));
  }
  return w;
}

}  // namespace podprof::testing

#endif  // PODPROF_TESTS_FLEET_FLEET_TEST_UTIL_H_
