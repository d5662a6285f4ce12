// How a host's timeline becomes tracks, for the writers of export/trace_export.h: the
// (chip, line) tracks in display order, each track's events nested in lanes (nesting.h), their
// names, and the verdict noted for a kernel. Internal to export/.
#ifndef PODPROF_EXPORT_TRACKS_H_
#define PODPROF_EXPORT_TRACKS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "export/trace_export.h"
#include "trace/model.h"

namespace podprof::exporter {

// One timeline event, placed: where it begins and ends (ns) and where it came from.
struct Placed {
  int64_t begin, end;
  uint32_t block, index;
};

// Lines in the order XProf shows them; anything else after.
int LineRank(const std::string& line);

// "chip <ordinal> (<device type>)", or "chip <index>" for a chip the host does not describe.
std::string ChipName(const trace::Chip* chip, int index);

// The events of one (chip, line) track in start order, longer first at equal starts, so that
// enclosing slices come before what they enclose; nested (nesting.h), in lanes: lane 0 is the
// track itself, later lanes hold events that really overlap the ones before them (an async
// copy running past the next op), shown whole on tracks of their own rather than cut. Begin and
// end are each the exact instant in ps rounded down to ns: rounding a begin and a duration
// separately could end a scope after its kernel, while rounding both instants one way keeps
// every order.
std::vector<std::vector<Placed>> TrackLanes(const trace::HostCapture& capture,
                                            const std::vector<uint32_t>& blocks);

// The name of a lane's track: the line's own for lane 0.
std::string LaneName(const std::string& line, size_t lane);

// Blocks of each (chip, line), tracks in display order.
std::vector<std::pair<std::pair<int, std::string>, std::vector<uint32_t>>> Tracks(
    const trace::HostCapture& capture);

// The verdict noted for kernel `k` on `chip` (an index into the host's chips), or null.
class NoteLookup {
 public:
  NoteLookup(const trace::HostCapture& capture, const KernelNotes* notes)
      : capture_(capture), notes_(notes) {}
  const std::string* Of(int chip, uint32_t k) {
    if (notes_ == nullptr || k >= capture_.kernels.size() || chip < 0 ||
        chip >= static_cast<int>(capture_.host.chips.size())) {
      return nullptr;
    }
    auto [it, fresh] = cache_.try_emplace({chip, k}, nullptr);
    if (fresh) {
      const trace::KernelDef& def = capture_.kernels[k];
      auto n = notes_->find({capture_.host.chips[chip].ordinal, def.module, def.name});
      if (n != notes_->end()) it->second = &n->second;
    }
    return it->second;
  }

 private:
  const trace::HostCapture& capture_;
  const KernelNotes* notes_;
  std::map<std::pair<int, uint32_t>, const std::string*> cache_;
};

}  // namespace podprof::exporter

#endif  // PODPROF_EXPORT_TRACKS_H_
