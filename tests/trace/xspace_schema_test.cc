// The XSpace schema table: its field numbers are those of the generated protobuf code (checked
// at compile time), and every stat name maps back to its kind.
#include "trace/xspace_schema.h"

#include <set>
#include <string>

#include "gtest/gtest.h"
#include "proto/xplane.pb.h"

namespace podprof::trace::xspace {
namespace {

namespace tp = tensorflow::profiler;

// The streaming reader decodes by these numbers; the writers use the generated classes.
static_assert(XSpaceField::kPlanes == tp::XSpace::kPlanesFieldNumber);
static_assert(XSpaceField::kErrors == tp::XSpace::kErrorsFieldNumber);
static_assert(XSpaceField::kWarnings == tp::XSpace::kWarningsFieldNumber);
static_assert(XSpaceField::kHostnames == tp::XSpace::kHostnamesFieldNumber);

static_assert(XPlaneField::kId == tp::XPlane::kIdFieldNumber);
static_assert(XPlaneField::kName == tp::XPlane::kNameFieldNumber);
static_assert(XPlaneField::kLines == tp::XPlane::kLinesFieldNumber);
static_assert(XPlaneField::kEventMetadata == tp::XPlane::kEventMetadataFieldNumber);
static_assert(XPlaneField::kStatMetadata == tp::XPlane::kStatMetadataFieldNumber);
static_assert(XPlaneField::kStats == tp::XPlane::kStatsFieldNumber);

static_assert(XLineField::kId == tp::XLine::kIdFieldNumber);
static_assert(XLineField::kName == tp::XLine::kNameFieldNumber);
static_assert(XLineField::kTimestampNs == tp::XLine::kTimestampNsFieldNumber);
static_assert(XLineField::kEvents == tp::XLine::kEventsFieldNumber);
static_assert(XLineField::kDurationPs == tp::XLine::kDurationPsFieldNumber);
static_assert(XLineField::kDisplayId == tp::XLine::kDisplayIdFieldNumber);
static_assert(XLineField::kDisplayName == tp::XLine::kDisplayNameFieldNumber);

static_assert(XEventField::kMetadataId == tp::XEvent::kMetadataIdFieldNumber);
static_assert(XEventField::kOffsetPs == tp::XEvent::kOffsetPsFieldNumber);
static_assert(XEventField::kDurationPs == tp::XEvent::kDurationPsFieldNumber);
static_assert(XEventField::kStats == tp::XEvent::kStatsFieldNumber);
static_assert(XEventField::kNumOccurrences == tp::XEvent::kNumOccurrencesFieldNumber);

static_assert(XStatField::kMetadataId == tp::XStat::kMetadataIdFieldNumber);
static_assert(XStatField::kDoubleValue == tp::XStat::kDoubleValueFieldNumber);
static_assert(XStatField::kUint64Value == tp::XStat::kUint64ValueFieldNumber);
static_assert(XStatField::kInt64Value == tp::XStat::kInt64ValueFieldNumber);
static_assert(XStatField::kStrValue == tp::XStat::kStrValueFieldNumber);
static_assert(XStatField::kBytesValue == tp::XStat::kBytesValueFieldNumber);
static_assert(XStatField::kRefValue == tp::XStat::kRefValueFieldNumber);
static_assert(XStatField::kCompressedStrValue == tp::XStat::kCompressedStrValueFieldNumber);

static_assert(XEventMetadataField::kId == tp::XEventMetadata::kIdFieldNumber);
static_assert(XEventMetadataField::kName == tp::XEventMetadata::kNameFieldNumber);
static_assert(XEventMetadataField::kMetadata == tp::XEventMetadata::kMetadataFieldNumber);
static_assert(XEventMetadataField::kDisplayName == tp::XEventMetadata::kDisplayNameFieldNumber);
static_assert(XEventMetadataField::kStats == tp::XEventMetadata::kStatsFieldNumber);
static_assert(XEventMetadataField::kChildId == tp::XEventMetadata::kChildIdFieldNumber);

static_assert(XStatMetadataField::kId == tp::XStatMetadata::kIdFieldNumber);
static_assert(XStatMetadataField::kName == tp::XStatMetadata::kNameFieldNumber);
static_assert(XStatMetadataField::kDescription == tp::XStatMetadata::kDescriptionFieldNumber);

TEST(XSpaceSchemaTest, EveryStatNameMapsBackToItsKind) {
  std::set<std::string> names;
  for (size_t i = 1; i < kStatCount; ++i) {
    const Stat stat = static_cast<Stat>(i);
    const absl::string_view name = StatName(stat);
    EXPECT_FALSE(name.empty()) << i;
    EXPECT_TRUE(names.emplace(name).second) << "duplicate " << name;
    EXPECT_EQ(StatOfName(name), stat) << name;
  }
  EXPECT_EQ(StatName(Stat::kDeviceDurationPs), "device_duration_ps");
  EXPECT_EQ(StatName(Stat::kPeakHbmBw), "peak_hbm_bw_gigabytes_per_second");
  EXPECT_EQ(StatOfName("all_reduce_unique_id"), Stat::kAllReduceUniqueId);
}

TEST(XSpaceSchemaTest, OtherNamesAreUnknown) {
  EXPECT_EQ(StatOfName(""), Stat::kUnknown);
  EXPECT_EQ(StatOfName("Flops"), Stat::kUnknown) << "names match exactly";
  EXPECT_EQ(StatOfName("flops "), Stat::kUnknown);
  EXPECT_EQ(StatOfName("some_stat_podprof_ignores"), Stat::kUnknown);
}

TEST(XSpaceSchemaTest, WritersNumberTheirStatsInListOrder) {
  constexpr Stat kStats[] = {Stat::kFlops, Stat::kSource, Stat::kProgramId};
  static_assert(StatIdIn(kStats, Stat::kFlops) == 1);
  static_assert(StatIdIn(kStats, Stat::kProgramId) == 3);
  static_assert(StatIdIn(kStats, Stat::kTfOp) == 0);
  EXPECT_EQ(StatIdIn(kStats, Stat::kSource), 2);
}

}  // namespace
}  // namespace podprof::trace::xspace
