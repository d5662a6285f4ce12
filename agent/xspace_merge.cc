#include "agent/xspace_merge.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trace/wire.h"
#include "trace/xspace_schema.h"

namespace podprof::agent {
namespace {

using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using tensorflow::profiler::XStat;

// The Task Environment plane holding the profile's window; null when there is none.
const XPlane* Window(const XSpace& space, int64_t* start, int64_t* stop) {
  for (const XPlane& p : space.planes()) {
    if (p.name() != trace::xspace::kTaskEnvironmentPlane) continue;
    int found = 0;
    for (const XStat& st : p.stats()) {
      auto m = p.stat_metadata().find(st.metadata_id());
      if (m == p.stat_metadata().end()) continue;
      const int64_t v = st.value_case() == XStat::kUint64Value
                            ? static_cast<int64_t>(st.uint64_value())
                            : st.int64_value();
      if (m->second.name() == trace::xspace::StatName(trace::xspace::Stat::kProfileStartTime)) {
        *start = v;
        ++found;
      } else if (m->second.name() ==
                 trace::xspace::StatName(trace::xspace::Stat::kProfileStopTime)) {
        *stop = v;
        ++found;
      }
    }
    if (found == 2) return &p;
  }
  return nullptr;
}

// The first id past a metadata map's (0 for an empty one, so a first snapshot keeps its ids).
template <typename Map>
int64_t NextId(const Map& m) {
  int64_t next = 0;
  for (const auto& [id, unused] : m) next = std::max(next, id + 1);
  return next;
}

void Shift(XStat* st, int64_t stat_base) {
  st->set_metadata_id(st->metadata_id() + stat_base);
  if (st->value_case() == XStat::kRefValue) st->set_ref_value(st->ref_value() + stat_base);
}

// `in`'s lines (moved: a snapshot's bytes are held once) and metadata into `out`, ids past
// `out`'s own, lines on absolute time.
void Append(XPlane& in, int64_t start_ns, bool fresh, XPlane* out) {
  const int64_t event_base = NextId(out->event_metadata());
  const int64_t stat_base = NextId(out->stat_metadata());
  for (const auto& [id, m] : in.stat_metadata()) {
    auto& copy = (*out->mutable_stat_metadata())[id + stat_base];
    copy = m;
    copy.set_id(id + stat_base);
  }
  for (const auto& [id, m] : in.event_metadata()) {
    auto& copy = (*out->mutable_event_metadata())[id + event_base];
    copy = m;
    copy.set_id(id + event_base);
    for (XStat& st : *copy.mutable_stats()) Shift(&st, stat_base);
    for (int64_t& child : *copy.mutable_child_id()) child += event_base;
  }
  if (fresh) {
    for (const XStat& st : in.stats()) {
      XStat* copy = out->add_stats();
      *copy = st;
      Shift(copy, stat_base);
    }
  }
  for (auto& line : *in.mutable_lines()) {
    auto* copy = out->add_lines();
    copy->Swap(&line);
    if (copy->timestamp_ns() < trace::xspace::kAbsoluteLineTimestampNs) {
      copy->set_timestamp_ns(copy->timestamp_ns() + start_ns);
    }
    for (auto& e : *copy->mutable_events()) {
      e.set_metadata_id(e.metadata_id() + event_base);
      for (XStat& st : *e.mutable_stats()) Shift(&st, stat_base);
    }
  }
}

// The first snapshot's Task Environment, its window widened to [start, stop].
void SetWindow(XPlane* env, int64_t start, int64_t stop) {
  for (XStat& st : *env->mutable_stats()) {
    // A workload's stat may name metadata its plane never defined: Map::at() CHECK-fails (the
    // agent aborted on one), so such a stat is left as it is.
    auto m = env->stat_metadata().find(st.metadata_id());
    if (m == env->stat_metadata().end()) continue;
    const std::string& name = m->second.name();
    if (name == trace::xspace::StatName(trace::xspace::Stat::kProfileStartTime))
      st.set_uint64_value(start);
    if (name == trace::xspace::StatName(trace::xspace::Stat::kProfileStopTime))
      st.set_uint64_value(stop);
  }
}

// Snapshots' ids are shifted past the merged plane's, each snapshot's past the last: ids
// beyond 2^52 (a workload's bytes can hold any int64; profilers' own reach 2^40 and a little
// more) would overflow the shift within a few snapshots, so a plane holding one is refused.
// Under it, 2,000 snapshots' shifts stay within an int64.
constexpr int64_t kMaxMetadataId = int64_t{1} << 52;

absl::Status CheckIds(const XPlane& p, size_t snapshot) {
  for (const auto& [id, unused] : p.stat_metadata()) {
    if (id < 0 || id > kMaxMetadataId) {
      return absl::InvalidArgumentError(absl::StrCat("snapshot ", snapshot, " plane \"", p.name(),
                                                     "\" has stat metadata id ", id));
    }
  }
  for (const auto& [id, unused] : p.event_metadata()) {
    if (id < 0 || id > kMaxMetadataId) {
      return absl::InvalidArgumentError(absl::StrCat("snapshot ", snapshot, " plane \"", p.name(),
                                                     "\" has event metadata id ", id));
    }
  }
  return absl::OkStatus();
}

// What one parsed message of each kind holds besides its bytes on the wire: the object, and
// its slot in the repeated field or map holding it.
constexpr uint64_t kLineObject = sizeof(tensorflow::profiler::XLine) + sizeof(void*);
constexpr uint64_t kEventObject = sizeof(tensorflow::profiler::XEvent) + sizeof(void*);
constexpr uint64_t kStatObject = sizeof(XStat) + sizeof(void*);
constexpr uint64_t kMetadataObject = sizeof(tensorflow::profiler::XEventMetadata) + 64;

// Counts the length-delimited fields `field` of the message `m`, calling `each` on each.
template <typename Each>
bool ForEach(trace::wire::Span m, uint32_t field, Each each) {
  while (!m.done()) {
    uint32_t f;
    trace::wire::WireType wt;
    if (!m.ReadTag(&f, &wt)) return false;
    if (f != field || wt != trace::wire::kLengthDelimited) {
      if (!m.Skip(wt)) return false;
      continue;
    }
    trace::wire::Span sub;
    if (!m.ReadSub(&sub) || !each(sub)) return false;
  }
  return true;
}

}  // namespace

absl::Status ProfileWindowOfBytes(absl::string_view xspace, int64_t* start_ns, int64_t* stop_ns) {
  const auto* p = reinterpret_cast<const uint8_t*>(xspace.data());
  XSpace env;
  auto plane = [&](trace::wire::Span pl) {
    const absl::string_view bytes = pl.rest();
    bool named = false;
    auto name = [&](trace::wire::Span n) {
      named = n.rest() == trace::xspace::kTaskEnvironmentPlane;
      return true;
    };
    if (!ForEach(pl, trace::xspace::XPlaneField::kName, name)) return false;
    return !named || env.add_planes()->ParseFromArray(bytes.data(), bytes.size());
  };
  if (!ForEach(trace::wire::Span(p, p + xspace.size(), 0), trace::xspace::XSpaceField::kPlanes,
               plane)) {
    return absl::InvalidArgumentError("the snapshot is no XSpace");
  }
  return ProfileWindow(env, start_ns, stop_ns);
}

absl::StatusOr<uint64_t> ParsedBytesEstimate(absl::string_view xspace) {
  using trace::xspace::XEventField;
  using trace::xspace::XLineField;
  using trace::xspace::XPlaneField;
  using trace::xspace::XSpaceField;
  const auto* p = reinterpret_cast<const uint8_t*>(xspace.data());
  uint64_t bytes = xspace.size();
  auto stat = [&](trace::wire::Span) {
    bytes += kStatObject;
    return true;
  };
  auto event = [&](trace::wire::Span e) {
    bytes += kEventObject;
    return ForEach(e, XEventField::kStats, stat);
  };
  auto line = [&](trace::wire::Span l) {
    bytes += kLineObject;
    return ForEach(l, XLineField::kEvents, event);
  };
  auto metadata = [&](trace::wire::Span) {
    bytes += kMetadataObject;
    return true;
  };
  auto plane = [&](trace::wire::Span pl) {
    return ForEach(pl, XPlaneField::kLines, line) &&
           ForEach(pl, XPlaneField::kEventMetadata, metadata) &&
           ForEach(pl, XPlaneField::kStatMetadata, metadata) &&
           ForEach(pl, XPlaneField::kStats, stat);
  };
  if (!ForEach(trace::wire::Span(p, p + xspace.size(), 0), XSpaceField::kPlanes, plane)) {
    return absl::InvalidArgumentError("the snapshot is no XSpace");
  }
  return bytes;
}

absl::Status ProfileWindow(const XSpace& space, int64_t* start_ns, int64_t* stop_ns) {
  if (Window(space, start_ns, stop_ns) != nullptr) return absl::OkStatus();
  return absl::NotFoundError("the XSpace has no Task Environment plane with the profile's window");
}

absl::Status SnapshotMerger::Add(XSpace snapshot) {
  const size_t i = added_++;
  for (const XPlane& p : snapshot.planes()) RETURN_IF_ERROR(CheckIds(p, i));
  int64_t start = 0, stop = 0;
  const XPlane* env = Window(snapshot, &start, &stop);
  if (env == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot ", i, " has no Task Environment plane with its window"));
  }
  if (i == 0) {
    *out_.mutable_hostnames() = snapshot.hostnames();
    first_start_ = start;
    XPlane* copy = out_.add_planes();
    *copy = *env;
    by_name_[copy->name()] = copy;
  }
  last_stop_ = std::max(last_stop_, stop);
  for (XPlane& p : *snapshot.mutable_planes()) {
    if (p.name() == trace::xspace::kTaskEnvironmentPlane) continue;
    auto [at, fresh] = by_name_.try_emplace(p.name(), nullptr);
    if (fresh) {
      at->second = out_.add_planes();
      at->second->set_id(p.id());
      at->second->set_name(p.name());
    }
    Append(p, start, fresh, at->second);
  }
  return absl::OkStatus();
}

absl::StatusOr<XSpace> SnapshotMerger::Finish() && {
  if (added_ == 0) return absl::InvalidArgumentError("no snapshots to merge");
  SetWindow(by_name_.at(std::string(trace::xspace::kTaskEnvironmentPlane)), first_start_,
            last_stop_);
  return std::move(out_);
}

absl::StatusOr<XSpace> MergeSnapshots(std::vector<XSpace> snapshots) {
  SnapshotMerger merger;
  for (XSpace& s : snapshots) {
    RETURN_IF_ERROR(merger.Add(std::move(s)));
    s = XSpace();
  }
  return std::move(merger).Finish();
}

}  // namespace podprof::agent
