// The stats of an XPlane being written, by kind. A plane declares the stats it uses as its stat
// metadata, ids 1..N in the order of its list, and stats are then added by kind; the names come
// from trace/xspace_schema.h. The XProf exporter and the simulated host write XSpace this one
// way, so that what they write is what the reader reads.
#ifndef PODPROF_EXPORT_PLANE_STATS_H_
#define PODPROF_EXPORT_PLANE_STATS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "proto/xplane.pb.h"
#include "trace/xspace_schema.h"

namespace podprof::exporter {

class PlaneStats {
 public:
  using Stat = trace::xspace::Stat;
  using XStats = google::protobuf::RepeatedPtrField<tensorflow::profiler::XStat>;

  // A run of a plane's list: a constant table, which must outlive every PlaneStats made of it.
  class Part {
   public:
    constexpr Part() : stats_(nullptr), size_(0) {}
    template <size_t N>
    constexpr Part(const Stat (&stats)[N])  // NOLINT(runtime/explicit): a table is a part
        : stats_(stats), size_(N) {}

   private:
    friend class PlaneStats;
    const Stat* stats_;
    size_t size_;
  };

  // The list is the parts one after the other (a plane's own stats around the shared runs
  // below), so its ids are those of the written-out list.
  constexpr explicit PlaneStats(Part a, Part b = {}, Part c = {}, Part d = {})
      : parts_{a, b, c, d} {}

  // Declares the list as `plane`'s stat metadata.
  void Declare(tensorflow::profiler::XPlane* plane) const {
    int64_t id = 0;
    for (const Part& part : parts_) {
      for (size_t i = 0; i < part.size_; ++i) {
        auto& metadata = (*plane->mutable_stat_metadata())[++id];
        metadata.set_id(id);
        metadata.set_name(std::string(trace::xspace::StatName(part.stats_[i])));
      }
    }
  }

  // Adds a stat of kind `stat` (one of the list's) to the stats of the plane, of one of its
  // event metadata or of one of its events; the caller sets its value.
  tensorflow::profiler::XStat* Add(XStats* to, Stat stat) const {
    tensorflow::profiler::XStat* s = to->Add();
    s->set_metadata_id(IdOf(stat));
    return s;
  }

  // The stat metadata id of `stat` on the plane (for writers of the wire format); 0 if the
  // list lacks it.
  int64_t IdOf(Stat stat) const {
    int64_t id = 0;
    for (const Part& part : parts_) {
      for (size_t i = 0; i < part.size_; ++i) {
        ++id;
        if (part.stats_[i] == stat) return id;
      }
    }
    return 0;
  }

 private:
  Part parts_[4];
};

// The stats of a device plane's op metadata and events as both writers give them, in this
// order: an HLO op's category, FLOPs, bytes, source and program, a collective's id, and a
// counter sample's value.
inline constexpr PlaneStats::Stat kDeviceEventStats[] = {
    PlaneStats::Stat::kHloCategory,   PlaneStats::Stat::kFlops,
    PlaneStats::Stat::kBytesAccessed, PlaneStats::Stat::kSource,
    PlaneStats::Stat::kProgramId,     PlaneStats::Stat::kAllReduceUniqueId,
    PlaneStats::Stat::kCounterValue,
};

// The Task Environment plane: the profile's start and stop (ns since the Unix epoch).
inline constexpr PlaneStats::Stat kTaskEnvironmentStats[] = {PlaneStats::Stat::kProfileStartTime,
                                                             PlaneStats::Stat::kProfileStopTime};
inline constexpr PlaneStats kTaskEnvironment(kTaskEnvironmentStats);

}  // namespace podprof::exporter

#endif  // PODPROF_EXPORT_PLANE_STATS_H_
