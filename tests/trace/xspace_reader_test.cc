// The streaming reader against protobuf's generated full parse of the same real captures.
#include "trace/xspace_reader.h"

#include <map>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "proto/xplane.pb.h"
#include "tests/trace/test_util.h"
#include "trace/hash.h"
#include "trace/kernel_stats.h"

namespace podprof::trace {
namespace {

using podprof::testing::FixturePath;
using podprof::testing::ReadFileBytes;

struct Totals {
  int64_t count = 0;
  int64_t total_ps = 0;
  bool operator==(const Totals& o) const { return count == o.count && total_ps == o.total_ps; }
};
// (chip ordinal, short name, hash of full name) -> totals.
using TotalsMap = std::map<std::tuple<int, std::string, uint64_t>, Totals>;

// The independent path: the whole XSpace through protobuf, kernels as INTEROP.md describes
// them (`XLA Ops` on TPU planes, `Stream #` lines on GPU planes, device_duration_ps preferred).
TotalsMap TotalsFromFullParse(const std::string& bytes) {
  tensorflow::profiler::XSpace space;
  EXPECT_TRUE(space.ParseFromString(bytes));
  TotalsMap out;
  for (const auto& plane : space.planes()) {
    bool tpu = absl::StartsWith(plane.name(), "/device:TPU:");
    bool gpu = absl::StartsWith(plane.name(), "/device:GPU:");
    if (!tpu && !gpu) continue;
    std::string digits = plane.name().substr(12);
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    int ordinal = std::stoi(digits);
    int64_t device_duration_id = -1;
    for (const auto& [id, sm] : plane.stat_metadata()) {
      if (sm.name() == "device_duration_ps") device_duration_id = id;
    }
    for (const auto& line : plane.lines()) {
      bool kernels = tpu ? line.name() == "XLA Ops" : absl::StartsWith(line.name(), "Stream #");
      if (!kernels) continue;
      for (const auto& ev : line.events()) {
        const auto& meta = plane.event_metadata().at(ev.metadata_id());
        std::string short_name = meta.display_name().empty() ? meta.name() : meta.display_name();
        int64_t d = ev.duration_ps();
        for (const auto& st : ev.stats()) {
          if (st.metadata_id() == device_duration_id) d = static_cast<int64_t>(st.uint64_value());
        }
        Totals& t = out[{ordinal, short_name, Fnv1a64(meta.name())}];
        ++t.count;
        t.total_ps += d;
      }
    }
  }
  return out;
}

TotalsMap TotalsFromReader(const HostCapture& c) {
  TotalsMap out;
  for (const KernelStats& s : ComputeKernelStats(c)) {
    const KernelDef& k = c.kernels[s.kernel];
    Totals& t = out[{c.host.chips[s.chip].ordinal, k.name, k.hlo_hash}];
    t.count += s.count;
    t.total_ps += s.total_ps;
  }
  return out;
}

class FixtureTest : public ::testing::TestWithParam<const char*> {};

TEST_P(FixtureTest, PerChipPerKernelCountsAndTotalsMatchFullParse) {
  std::string path = FixturePath(GetParam());
  auto capture = ReadXSpaceFile(path);
  ASSERT_TRUE(capture.ok()) << capture.status();
  TotalsMap expected = TotalsFromFullParse(ReadFileBytes(path));
  TotalsMap got = TotalsFromReader(*capture);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(got.size(), expected.size());
  for (const auto& [key, want] : expected) {
    auto it = got.find(key);
    ASSERT_NE(it, got.end()) << "missing chip " << std::get<0>(key) << " kernel "
                             << std::get<1>(key);
    EXPECT_EQ(it->second.count, want.count) << std::get<1>(key);
    EXPECT_EQ(it->second.total_ps, want.total_ps) << std::get<1>(key);
  }
}

TEST_P(FixtureTest, FileAndMemorySourcesAgree) {
  std::string path = FixturePath(GetParam());
  std::string bytes = ReadFileBytes(path);
  MemorySource mem(bytes);
  ReadOptions opts;
  opts.host_name = HostNameFromPath(path);
  auto a = ReadXSpace(mem, opts);
  auto b = ReadXSpaceFile(path);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->host.name, b->host.name);
  EXPECT_EQ(a->EventCount(), b->EventCount());
  EXPECT_EQ(a->kernels.size(), b->kernels.size());
  EXPECT_LT(b->KeptBytes(), bytes.size());  // Host threads and HLO protos are not kept.
}

INSTANTIATE_TEST_SUITE_P(RealCaptures, FixtureTest,
                         ::testing::Values(podprof::testing::kTpuFixture,
                                           podprof::testing::kGpuFixture));

TEST(XSpaceReaderTest, TpuHostChipsAndWindow) {
  auto c = ReadXSpaceFile(FixturePath(podprof::testing::kTpuFixture));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->host.name, "tpu_v6e_4chip_host_offload");
  EXPECT_EQ(c->host.profile_start_ns, 1741722099081044120);
  EXPECT_EQ(c->host.profile_stop_ns, 1741722197726153802);
  ASSERT_EQ(c->host.chips.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const Chip& chip = c->host.chips[i];
    EXPECT_EQ(chip.kind, DeviceKind::kTpu);
    EXPECT_EQ(chip.ordinal, i);
    EXPECT_EQ(chip.global_id, 4 + i);
    EXPECT_EQ(chip.device_type, "TPU v6 Lite");
    EXPECT_EQ(chip.generation, "v6e");
    EXPECT_DOUBLE_EQ(chip.peak_tflops, 918);
    EXPECT_NEAR(chip.peak_hbm_gbps, 1638, 1);
  }
}

TEST(XSpaceReaderTest, TpuEventsAreAbsoluteAndInsideTheWindow) {
  auto c = ReadXSpaceFile(FixturePath(podprof::testing::kTpuFixture));
  ASSERT_TRUE(c.ok()) << c.status();
  int op_blocks = 0;
  for (const EventBlock& b : c->blocks) {
    if (b.kind != LineKind::kOps) continue;
    ++op_blocks;
    EXPECT_GT(b.size(), 1000u);  // About 1,500 XLA Ops per chip.
    EXPECT_LT(b.size(), 2000u);
    for (size_t i = 0; i < b.size(); ++i) {
      int64_t start_ns = b.base_ns + b.start_ps[i] / 1000;
      EXPECT_GE(start_ns, c->host.profile_start_ns);
      EXPECT_LE(start_ns, c->host.profile_stop_ns);
    }
  }
  EXPECT_EQ(op_blocks, 4);
}

TEST(XSpaceReaderTest, AllReducesCarryTheirCollectiveIds) {
  auto c = ReadXSpaceFile(FixturePath(podprof::testing::kTpuFixture));
  ASSERT_TRUE(c.ok()) << c.status();
  std::map<int, std::set<uint64_t>> ids_by_chip;
  for (const EventBlock& b : c->blocks) {
    if (b.kind != LineKind::kOps) continue;
    for (size_t i = 0; i < b.size(); ++i) {
      if (b.collective[i] == 0) continue;
      ids_by_chip[b.chip].insert(b.collective[i]);
      EXPECT_EQ(c->kernels[b.kernel[i]].category, "all-reduce");
    }
  }
  // Three all-reduces per chip, each with its own id. (In this capture chip 0 ran a later
  // program instance than chips 1-3, so its ids differ from theirs.)
  ASSERT_EQ(ids_by_chip.size(), 4u);
  for (const auto& [chip, ids] : ids_by_chip) EXPECT_EQ(ids.size(), 3u) << "chip " << chip;
  EXPECT_EQ(ids_by_chip[1], ids_by_chip[2]);
  EXPECT_EQ(ids_by_chip[2], ids_by_chip[3]);
}

TEST(XSpaceReaderTest, KernelsKnowTheirModuleAndCosts) {
  auto c = ReadXSpaceFile(FixturePath(podprof::testing::kTpuFixture));
  ASSERT_TRUE(c.ok()) << c.status();
  bool found = false;
  for (const KernelDef& k : c->kernels) {
    if (k.name != "all-reduce") continue;
    found = true;
    EXPECT_EQ(k.module, "jit__psum");
    EXPECT_EQ(k.program_id, 9646411105960254074u);
    EXPECT_EQ(k.flops, 1342177280);
    EXPECT_EQ(k.bytes_accessed, 10737418240);
  }
  EXPECT_TRUE(found);
}

TEST(XSpaceReaderTest, GpuHostHasEightChipsAndKernelCategories) {
  auto c = ReadXSpaceFile(FixturePath(podprof::testing::kGpuFixture));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->host.name, "34.83.195.179:6003");  // XSpace.hostnames wins over the file name.
  ASSERT_EQ(c->host.chips.size(), 8u);
  std::set<std::string> categories;
  for (const KernelDef& k : c->kernels) categories.insert(k.category);
  EXPECT_TRUE(categories.count("gpu kernel"));
  EXPECT_TRUE(categories.count("memcpy"));
}

TEST(XSpaceReaderTest, HostNameFromPath) {
  EXPECT_EQ(HostNameFromPath("/r/run1/10.0.0.7_9999.xplane.pb"), "10.0.0.7_9999");
  EXPECT_EQ(HostNameFromPath("host-a.xplane.pb"), "host-a");
  EXPECT_EQ(HostNameFromPath("dir/other.bin"), "other.bin");
}

TEST(XSpaceReaderTest, MissingFileNamesThePath) {
  auto c = ReadXSpaceFile("/nonexistent/x.xplane.pb");
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsNotFound(c.status()));
  EXPECT_TRUE(absl::StrContains(c.status().message(), "/nonexistent/x.xplane.pb"));
}

}  // namespace
}  // namespace podprof::trace
