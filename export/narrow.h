// Narrowed exports: what `podprof export --from/--to, --hosts, --chips, --kernels` keeps of a
// stored capture, applied to one host's capture at a time while an export streams; and the
// size a selection would take as Chrome JSON, estimated from stored counts before anything is
// written, so that a file no viewer can open is refused up front.
#ifndef PODPROF_EXPORT_NARROW_H_
#define PODPROF_EXPORT_NARROW_H_

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/pattern.h"
#include "trace/model.h"

namespace podprof::exporter {

// What an export keeps. The default keeps everything.
struct Selection {
  // The window, ns since the Unix epoch on the clock of the events (the stored capture's).
  // Events that overlap [from_ns, to_ns) are kept whole: one running across an edge keeps its
  // true start and duration, so its statistics and nesting stay as they were. Counter samples
  // are kept when they lie inside it.
  int64_t from_ns = std::numeric_limits<int64_t>::min();
  int64_t to_ns = std::numeric_limits<int64_t>::max();
  std::set<std::string> hosts;  // by name; empty for every host
  std::set<int> chips;          // ordinals (N of /device:TPU:N); empty for every chip
  // RE2 syntax (common/pattern.h), searched (unanchored) in each kernel's op name and in its
  // module; at most kMaxUserPatternBytes; empty for every kernel. Only kernel lines (XLA Ops,
  // GPU streams) are filtered by it; named scopes (XLA TraceMe) go with the kernel they fall
  // in; module and step lines are kept, as context.
  std::string kernel_regex;
};

// Applies a Selection. Not thread-safe (it remembers each kernel's match).
class Narrower {
 public:
  // InvalidArgument naming the flag and its value: a pattern that does not compile or is too
  // long (--kernels, see CompileUserPattern), a window that is empty (--from not before --to).
  static absl::StatusOr<Narrower> Create(Selection selection);

  const Selection& selection() const { return selection_; }
  // True when the selection keeps everything: exports can skip Apply.
  bool KeepsEverything() const;
  bool WantsHost(const std::string& host) const;
  bool WantsChip(int ordinal) const;
  // Whether a kernel passes --kernels. The regex runs once per distinct (module, name).
  bool WantsKernel(const std::string& module, const std::string& name);

  // Narrows one host's capture in place: blocks and counter series of chips not selected are
  // dropped, then events outside the window or of kernels not selected (and the scopes of
  // those kernels), then counter samples outside the window; blocks and series left empty go,
  // and kernel definitions no remaining event uses are dropped (indices remapped). Series held
  // only encoded are decoded first; InvalidArgument when one is damaged.
  // The host's chips all stay listed (block and series chip indices stay as they are, and the
  // timeline writers name chips by them).
  absl::Status Apply(trace::HostCapture* capture);
  // Removes the chips not selected from the host's chips, renumbering the blocks' and series'
  // chip indices: for the XSpace export, which writes a device plane per listed chip. Call
  // after Apply (which drops their events).
  void DropUnselectedChips(trace::HostCapture* capture) const;

 private:
  explicit Narrower(Selection selection) : selection_(std::move(selection)) {}
  // Per kernel definition of `capture`: whether its events stay.
  std::vector<char> KernelsKept(const trace::HostCapture& capture);
  // The window and --kernels applied to every block's events (scopes after the kernels).
  void NarrowEvents(trace::HostCapture* capture);
  // The window applied to the counter samples.
  absl::Status NarrowCounters(trace::HostCapture* capture) const;

  Selection selection_;
  std::optional<UserPattern> kernels_;
  std::map<std::pair<std::string, std::string>, bool> kernel_matches_;
};

// What the store holds of one chip, for sizing an export of it.
struct ChipVolume {
  std::string host;
  int ordinal = 0;
  uint64_t events = 0;  // on every line
  uint64_t counter_samples = 0;
  // Kernel-line events per kernel (module, op name), from the stored statistics.
  std::map<std::pair<std::string, std::string>, uint64_t> kernel_events;
};

// Bytes the Chrome JSON writer takes per timeline event and per counter sample. Measured on
// `podprof demo --hosts 2 --duration 1s` (v5p): 277 per event on average (296 on XLA Ops,
// whose args carry the kernel's costs, collective id and verdict; 120-190 on steps, modules
// and scopes) and 89 per counter sample, 114 per item overall. About 15% more here, so that
// the estimate errs large (it came to 1.2 times the demo's file).
inline constexpr uint64_t kJsonBytesPerEvent = 320;
inline constexpr uint64_t kJsonBytesPerCounterSample = 105;
// The default limit for Chrome JSON: about what chrome://tracing and browsers load.
inline constexpr uint64_t kDefaultMaxJsonBytes = 256'000'000;

struct JsonEstimate {
  uint64_t events = 0;
  uint64_t counter_samples = 0;
  uint64_t bytes = 0;
};

// The Chrome JSON of what `narrower` selects of a capture whose chips hold `volumes` and
// whose window is [capture_start_ns, capture_end_ns]: events and samples of the selected hosts
// and chips, kernel-line events of the selected kernels, scaled by the share of the capture's
// window selected (events spread evenly over it, which a training loop's steps do).
JsonEstimate EstimateChromeJson(const std::vector<ChipVolume>& volumes, int64_t capture_start_ns,
                                int64_t capture_end_ns, Narrower& narrower);

// "the Chrome JSON of cap-x would be about 3.7 GB, over the 256 MB limit (--max-size): ...",
// naming the ways out: the perfetto format, or narrowing.
std::string JsonTooLargeMessage(const std::string& capture_id, uint64_t estimate_bytes,
                                uint64_t limit_bytes);

// A byte count for people, in powers of 1000: "812 B", "3.4 MB", "1.0 GB".
std::string HumanBytes(uint64_t bytes);

}  // namespace podprof::exporter

#endif  // PODPROF_EXPORT_NARROW_H_
