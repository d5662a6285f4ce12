#include "sim/replay.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "trace/xspace_schema.h"

namespace podprof::sim {

using trace::xspace::kAbsoluteLineTimestampNs;
using trace::xspace::Stat;

absl::StatusOr<Replay> Replay::Load(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(), absl::StrCat("cannot open the capture to replay: ",
                                                            bytes.status().message()));
  }
  Replay r;
  if (!r.recorded_.ParseFromString(*bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a valid XSpace capture"));
  }
  for (const auto& plane : r.recorded_.planes()) {
    if (!absl::StartsWith(plane.name(), trace::xspace::kDevicePlanePrefix)) continue;
    for (const auto& line : plane.lines()) r.device_events_ += line.events_size();
  }
  return r;
}

tensorflow::profiler::XSpace Replay::Rebase(const std::string& host_name, int64_t host_start_ns,
                                            int64_t host_stop_ns) const {
  tensorflow::profiler::XSpace space = recorded_;
  space.clear_hostnames();
  space.add_hostnames(host_name);
  // Older recordings stamp lines with absolute times: make them relative to their earliest.
  int64_t earliest = INT64_MAX;
  for (const auto& plane : space.planes()) {
    for (const auto& line : plane.lines()) {
      if (line.timestamp_ns() >= kAbsoluteLineTimestampNs)
        earliest = std::min(earliest, line.timestamp_ns());
    }
  }
  tensorflow::profiler::XPlane* env = nullptr;
  for (auto& plane : *space.mutable_planes()) {
    if (plane.name() == trace::xspace::kTaskEnvironmentPlane) env = &plane;
    for (auto& line : *plane.mutable_lines()) {
      if (line.timestamp_ns() >= kAbsoluteLineTimestampNs)
        line.set_timestamp_ns(line.timestamp_ns() - earliest);
    }
  }
  if (env == nullptr) {
    env = space.add_planes();
    env->set_name(std::string(trace::xspace::kTaskEnvironmentPlane));
  }
  env->clear_stats();
  env->clear_stat_metadata();
  (*env->mutable_stat_metadata())[1].set_id(1);
  (*env->mutable_stat_metadata())[1].set_name(
      std::string(trace::xspace::StatName(Stat::kProfileStartTime)));
  (*env->mutable_stat_metadata())[2].set_id(2);
  (*env->mutable_stat_metadata())[2].set_name(
      std::string(trace::xspace::StatName(Stat::kProfileStopTime)));
  auto* start = env->add_stats();
  start->set_metadata_id(1);
  start->set_uint64_value(static_cast<uint64_t>(host_start_ns));
  auto* stop = env->add_stats();
  stop->set_metadata_id(2);
  stop->set_uint64_value(static_cast<uint64_t>(host_stop_ns));
  return space;
}

}  // namespace podprof::sim
