// Large synthetic XSpaces for the benchmarks that read or stream captures of a chosen size.
#ifndef PODPROF_BENCH_SYNTHETIC_XSPACE_H_
#define PODPROF_BENCH_SYNTHETIC_XSPACE_H_

#include <string>

namespace podprof::bench {

// A pod-host-like capture of about `mb` MB, serialized: `chips` TPU planes with an XLA Ops line
// (device durations and collective ids on events, costs on metadata) holding three quarters of
// the bytes, and a busy /host:CPU plane holding the rest. Deterministic.
std::string MakeSyntheticXSpace(int mb, int chips);

}  // namespace podprof::bench

#endif  // PODPROF_BENCH_SYNTHETIC_XSPACE_H_
