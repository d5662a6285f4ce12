// Fork-join over indices: the one shape of the "split the work, run it on a few threads, wait
// for all of it" loops (the pod's collective walk, the aggregator's capture dispatch), so that a
// caller says only how many threads it may use and no caller starts or joins threads by hand.
#ifndef PODPROF_COMMON_PARALLEL_H_
#define PODPROF_COMMON_PARALLEL_H_

#include <cstddef>

#include "absl/functional/function_ref.h"

namespace podprof {

// Calls fn(i) once for every i in [0, n) on at most `threads` threads, the calling thread among
// them, and returns when every call has returned. Indices go out in increasing order to
// whichever thread is free next, so one slow call does not hold back the others. With n or
// `threads` below 2 every call runs on the calling thread, in order. `fn` is called from
// several threads at once (for distinct indices) and must be safe so; a lock the caller holds
// stays held by the caller for the whole run, not by the threads that call `fn`.
void ParallelFor(size_t n, size_t threads, absl::FunctionRef<void(size_t)> fn);

// The threads a ParallelFor may use on this machine: one per core, at least 1, at most `most`
// (beyond a few, the merge and the memory bandwidth eat what more threads would win).
size_t CoresUpTo(size_t most);

}  // namespace podprof

#endif  // PODPROF_COMMON_PARALLEL_H_
