// The host planes looked at for a capture's request (trace/host_planes.h): TraceMe events on
// the host's threads, the Python tracer's events merged into them or on a plane of their own,
// device planes left unread.
#include "trace/host_planes.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/xplane.pb.h"
#include "tests/util/status_matchers.h"
#include "tests/util/trace_fixtures.h"
#include "trace/byte_source.h"
#include "trace/xspace_schema.h"

namespace podprof::trace {
namespace {

namespace xp = tensorflow::profiler;
using ::podprof::testing::FixturePath;
using ::podprof::testing::LengthField;
using ::podprof::testing::StatusIs;
using xspace::XPlaneField;
using xspace::XSpaceField;

// A plane named `name` whose one line holds an event of each of `events` (their names).
void AddPlane(xp::XSpace* space, absl::string_view name, const std::vector<std::string>& events) {
  xp::XPlane* plane = space->add_planes();
  plane->set_name(std::string(name));
  xp::XLine* line = plane->add_lines();
  line->set_id(1);
  line->set_name("thread 1");
  for (size_t i = 0; i < events.size(); ++i) {
    const int64_t id = static_cast<int64_t>(i) + 1;
    (*plane->mutable_event_metadata())[id].set_id(id);
    (*plane->mutable_event_metadata())[id].set_name(events[i]);
    xp::XEvent* ev = line->add_events();
    ev->set_metadata_id(id);
    ev->set_offset_ps(1000 * id);
    ev->set_duration_ps(500);
  }
}

HostPlanes Read(const xp::XSpace& space) {
  const std::string bytes = space.SerializeAsString();
  MemorySource source(bytes);
  absl::StatusOr<HostPlanes> planes = ReadHostPlanes(source);
  EXPECT_OK(planes);
  return planes.value_or(HostPlanes{});
}

TEST(HostPlanesTest, ACaptureWithoutAHostPlaneHoldsNeitherKind) {
  xp::XSpace space;
  AddPlane(&space, "/device:TPU:0", {"fusion.1", "$not_python_here.py:1 f"});
  const HostPlanes p = Read(space);
  EXPECT_FALSE(p.host_plane);
  EXPECT_FALSE(p.thread_events);
  EXPECT_FALSE(p.python_events);
}

TEST(HostPlanesTest, TraceMeEventsAreTheThreadsAndNotPython) {
  xp::XSpace space;
  AddPlane(&space, xspace::kHostCpuPlane, {"PjitFunction(train_step)", "ExecuteHelper"});
  const HostPlanes p = Read(space);
  EXPECT_TRUE(p.host_plane);
  EXPECT_TRUE(p.thread_events);
  EXPECT_FALSE(p.python_events);
}

TEST(HostPlanesTest, PythonEventsMergedIntoTheHostPlaneAreToldByTheirName) {
  xp::XSpace space;
  AddPlane(&space, xspace::kHostCpuPlane, {"$train.py:38 train_step", "$builtins isinstance"});
  HostPlanes p = Read(space);
  EXPECT_TRUE(p.python_events);
  EXPECT_FALSE(p.thread_events);  // only Python's

  space.mutable_planes(0)->mutable_lines(0)->add_events()->set_metadata_id(99);  // no metadata
  p = Read(space);
  EXPECT_TRUE(p.python_events);
  EXPECT_TRUE(p.thread_events);
}

TEST(HostPlanesTest, ThePythonTracersOwnPlaneHoldsPythonEvents) {
  xp::XSpace space;
  AddPlane(&space, xspace::kPythonTracerPlane, {"anything"});
  const HostPlanes p = Read(space);
  EXPECT_FALSE(p.host_plane);
  EXPECT_FALSE(p.thread_events);
  EXPECT_TRUE(p.python_events);
}

TEST(HostPlanesTest, AHostPlaneWithoutEventsHoldsNone) {
  xp::XSpace space;
  AddPlane(&space, xspace::kHostCpuPlane, {});
  const HostPlanes p = Read(space);
  EXPECT_TRUE(p.host_plane);
  EXPECT_FALSE(p.thread_events);
  EXPECT_FALSE(p.python_events);
}

// A device plane is skipped by its length: bytes that are not a plane's lines are never read.
TEST(HostPlanesTest, DevicePlanesAreNotRead) {
  // A device plane whose line is three zero bytes (a tag of field 0, which no reader accepts).
  std::string bytes =
      LengthField(XSpaceField::kPlanes, LengthField(XPlaneField::kName, "/device:TPU:0") +
                                            LengthField(XPlaneField::kLines, std::string(3, '\0')));
  xp::XSpace host;
  AddPlane(&host, xspace::kHostCpuPlane, {"ExecuteHelper"});
  bytes += host.SerializeAsString();
  MemorySource source(bytes);
  absl::StatusOr<HostPlanes> p = ReadHostPlanes(source);
  ASSERT_OK(p);
  EXPECT_TRUE(p->thread_events);
}

// A real JAX capture on TPU v6e: 122 thread lines of TraceMe events on `/host:CPU`, no Python
// tracer.
TEST(HostPlanesTest, ARealTpuCaptureHoldsThreadEventsAndNoPython) {
  absl::StatusOr<HostPlanes> p =
      ReadHostPlanesFile(FixturePath("tpu_v6e_4chip_host_offload.xplane.pb"));
  ASSERT_OK(p);
  EXPECT_TRUE(p->host_plane);
  EXPECT_TRUE(p->thread_events);
  EXPECT_FALSE(p->python_events);
}

TEST(HostPlanesTest, DamagedOrEmptyInputIsRefused) {
  MemorySource empty("");
  EXPECT_THAT(ReadHostPlanes(empty), StatusIs(absl::StatusCode::kInvalidArgument));
  xp::XSpace space;
  AddPlane(&space, xspace::kHostCpuPlane, {"ExecuteHelper"});
  std::string bytes = space.SerializeAsString();
  bytes.resize(bytes.size() - 3);  // the plane's length runs past the end
  MemorySource cut(bytes);
  EXPECT_THAT(ReadHostPlanes(cut), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(ReadHostPlanesFile("/nonexistent/h.xplane.pb"),
              StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace podprof::trace
