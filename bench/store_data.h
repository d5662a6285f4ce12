// The synthetic captures bench_store and bench_fleet store: hosts of 4 chips running the
// same kernels, one capture an hour.
#ifndef PODPROF_BENCH_STORE_DATA_H_
#define PODPROF_BENCH_STORE_DATA_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "ingest/capture_ingest.h"
#include "trace/model.h"

namespace podprof {

// One host's capture: `kernels` kernels on each of `chips` chips, `events` executions each.
inline trace::HostCapture MakeHost(const std::string& name, int chips, int kernels, int events,
                                   uint64_t program) {
  trace::HostCapture c;
  c.host.name = name;
  c.host.chips.resize(chips);
  for (int i = 0; i < chips; ++i) {
    c.host.chips[i].ordinal = i;
    c.host.chips[i].generation = "v5p";
    c.host.chips[i].peak_tflops = 459;
    c.host.chips[i].peak_hbm_gbps = 2765;
  }
  for (int k = 0; k < kernels; ++k) {
    trace::KernelDef d;
    d.module = "jit_train_step";
    d.name = "fusion." + std::to_string(k);
    d.category = k % 10 == 0 ? "all-reduce" : "convolution fusion";
    d.program_id = program;
    d.hlo_hash = 1000 + k;
    d.flops = 1'000'000'000 + k;
    d.bytes_accessed = 4'000'000 + k;
    c.kernels.push_back(d);
  }
  for (int chip = 0; chip < chips; ++chip) {
    trace::EventBlock b;
    b.chip = chip;
    b.line = "XLA Ops";
    int64_t t = 0;
    for (int e = 0; e < events; ++e) {
      for (int k = 0; k < kernels; ++k) {
        int64_t d = 1'000'000 + (k * 7919 + chip * 104729 + e * 13) % 500'000;
        b.start_ps.push_back(t);
        b.duration_ps.push_back(d);
        b.kernel.push_back(static_cast<uint32_t>(k));
        b.collective.push_back(0);
        t += d + 1000;
      }
    }
    c.blocks.push_back(std::move(b));
  }
  return c;
}

// Capture number `c` of a history: `chips` chips (4 per host) running `kernels` kernels once
// each, an hour after the one before; a new program id every 100 captures (recompiles that
// history must see through).
inline ingest::CaptureInput HistoryCapture(int c, int chips, int kernels) {
  ingest::CaptureInput cw;
  cw.id = "cap-" + std::to_string(c);
  cw.start_ns = int64_t{c} * 3'600'000'000'000;
  cw.end_ns = cw.start_ns + 2'000'000'000;
  for (int h = 0; h < std::max(1, chips / 4); ++h) {
    ingest::HostInput hw;
    hw.host = "host-" + std::to_string(h);
    hw.capture = MakeHost(hw.host, 4, kernels, 1, 100 + c / 100);
    cw.hosts.push_back(std::move(hw));
  }
  return cw;
}

}  // namespace podprof

#endif  // PODPROF_BENCH_STORE_DATA_H_
