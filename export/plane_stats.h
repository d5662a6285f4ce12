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

  // `stats` must outlive this (a constant table).
  template <size_t N>
  constexpr explicit PlaneStats(const Stat (&stats)[N]) : stats_(stats), size_(N) {}

  // Declares the list as `plane`'s stat metadata.
  void Declare(tensorflow::profiler::XPlane* plane) const {
    for (size_t i = 0; i < size_; ++i) {
      const int64_t id = static_cast<int64_t>(i) + 1;
      auto& metadata = (*plane->mutable_stat_metadata())[id];
      metadata.set_id(id);
      metadata.set_name(std::string(trace::xspace::StatName(stats_[i])));
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
    for (size_t i = 0; i < size_; ++i) {
      if (stats_[i] == stat) return static_cast<int64_t>(i) + 1;
    }
    return 0;
  }

 private:
  const Stat* stats_;
  size_t size_;
};

}  // namespace podprof::exporter

#endif  // PODPROF_EXPORT_PLANE_STATS_H_
