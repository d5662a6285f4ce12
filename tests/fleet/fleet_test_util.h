// Captures for the fleet tests: small synthetic pods stored through the real ingest path.
#ifndef PODPROF_TESTS_FLEET_FLEET_TEST_UTIL_H_
#define PODPROF_TESTS_FLEET_FLEET_TEST_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

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

// Adds `n` pod-wide collectives (kernel all-reduce.1, ids 1 to n) to a SyntheticPod capture,
// after its other events: in instance i every chip arrives at once but chip `last(i)`
// (numbered over the pod, host h's chip c is 2h + c), which comes 2 us later, so the others
// wait 2 us each. Stored, each chip took part in n instances with a chance count of n / chips.
inline void AddCollectives(ingest::CaptureInput& w, int n, const std::function<int(int)>& last) {
  std::vector<int> late(n);
  for (int i = 0; i < n; ++i) late[i] = last(i);
  int64_t after_ns = 0;  // the pod's last event's end: every chip starts the collectives there
  for (const ingest::HostInput& h : w.hosts) {
    for (const trace::EventBlock& b : h.capture->blocks) {
      for (size_t e = 0; e < b.size(); ++e) {
        after_ns = std::max(after_ns, b.base_ns + (b.start_ps[e] + b.duration_ps[e]) / 1000 + 1);
      }
    }
  }
  for (size_t h = 0; h < w.hosts.size(); ++h) {
    trace::HostCapture& c = *w.hosts[h].capture;
    trace::KernelDef k = c.kernels[0];
    k.name = "all-reduce.1";
    k.category = "all-reduce";
    c.kernels.push_back(k);
    const auto kernel = static_cast<uint32_t>(c.kernels.size() - 1);
    for (trace::EventBlock& b : c.blocks) {
      const int chip = 2 * static_cast<int>(h) + b.chip;
      const int64_t first_ps = (after_ns - b.base_ns) * 1000 + 1'000'000;
      for (int i = 0; i < n; ++i) {
        // 10 us apart, 5 us long: the waits stay within a run, as one execution's must.
        b.start_ps.push_back(first_ps + i * 10'000'000LL + (late[i] == chip ? 2'000'000 : 0));
        b.duration_ps.push_back(5'000'000);
        b.kernel.push_back(kernel);
        b.collective.push_back(static_cast<uint64_t>(i + 1));
      }
    }
  }
}

}  // namespace podprof::testing

#endif  // PODPROF_TESTS_FLEET_FLEET_TEST_UTIL_H_
