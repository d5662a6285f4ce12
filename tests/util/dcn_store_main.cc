// podprof-test-dcn-store DB: writes a store holding the hand-made multi-slice captures of
// tests/util/dcn_pod.h, for tests in other languages (tests/python/test_dcn.py) to serve with a
// real podprof-aggregator --db=DB: "dcn-1", two slices of two chips over 20 steps, slice 1
// 300 us late each step and its host's clock 3 ms ahead (stored on it, as an agent's);
// "dcn-slow", its link 0 -> 1 400 us slower than 1 -> 0; and "no-dcn", the pod without its
// host-transfer ops.
#include <iostream>
#include <memory>

#include "storage/store.h"
#include "tests/util/dcn_pod.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: podprof-test-dcn-store DB\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<podprof::storage::Store>> store =
      podprof::storage::Store::Open(argv[1]);
  if (!store.ok()) {
    std::cerr << store.status() << "\n";
    return 1;
  }
  podprof::testing::DcnPod late;
  late.late_slice = 1;
  late.late_ns = 300'000;
  late.clock_offset_ns = {0, 3'000'000};
  podprof::testing::DcnPod slow;
  slow.id = "dcn-slow";
  slow.slow_src = 0;
  slow.slow_dst = 1;
  slow.slow_ns = 400'000;
  podprof::testing::DcnPod none;
  none.id = "no-dcn";
  none.dcn = false;
  for (const auto& pod : {late, slow, none}) {
    if (absl::Status s = podprof::testing::StoreDcnPod((*store)->writer(), pod); !s.ok()) {
      std::cerr << s << "\n";
      return 1;
    }
  }
  return 0;
}
