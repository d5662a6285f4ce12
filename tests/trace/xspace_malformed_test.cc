// Damaged input: every case must give a clear Status and never crash or read out of bounds.
// This suite also runs under AddressSanitizer (ctest label `asan`).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <set>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"
#include "tests/util/trace_fixtures.h"
#include "trace/kernel_stats.h"
#include "trace/xspace_reader.h"

namespace podprof::trace {
namespace {

using namespace podprof::testing;  // NOLINT: test helpers

absl::StatusOr<HostCapture> ReadBytes(const std::string& bytes) {
  MemorySource src(bytes);
  return ReadXSpace(src);
}

void ExpectMalformed(const std::string& bytes, absl::string_view needle) {
  auto r = ReadBytes(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "byte offset")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), needle)) << r.status();
}

// Offsets where a top-level field of the XSpace ends: a file cut exactly there is a shorter
// but valid XSpace; anywhere else it is damaged.
std::set<size_t> TopLevelBoundaries(const std::string& bytes) {
  std::set<size_t> out = {0};
  size_t p = 0;
  auto varint = [&](uint64_t* v) {
    *v = 0;
    for (int s = 0; p < bytes.size(); s += 7) {
      uint8_t b = static_cast<uint8_t>(bytes[p++]);
      *v |= uint64_t{b & 0x7Fu} << s;
      if (b < 0x80) return;
    }
  };
  while (p < bytes.size()) {
    uint64_t tag, len;
    varint(&tag);
    EXPECT_EQ(tag & 7, 2u);
    varint(&len);
    p += len;
    out.insert(p);
  }
  return out;
}

TEST(XSpaceMalformedTest, EmptyFile) {
  auto r = ReadBytes("");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
  EXPECT_TRUE(absl::StrContains(r.status().message(), "empty")) << r.status();
}

TEST(XSpaceMalformedTest, TruncatedAtManyOffsets) {
  const std::string bytes = ReadTestFile(FixturePath(kTpuFixture));
  ASSERT_GT(bytes.size(), 100000u);
  std::set<size_t> boundaries = TopLevelBoundaries(bytes);
  std::vector<size_t> cuts;
  for (size_t i = 1; i < 512; ++i) cuts.push_back(i);  // Inside the first plane's header.
  std::mt19937_64 rng(42);
  for (int i = 0; i < 300; ++i) cuts.push_back(1 + rng() % (bytes.size() - 1));
  for (size_t b : boundaries) {
    if (b > 0 && b < bytes.size()) cuts.push_back(b);
  }
  int errors = 0;
  for (size_t cut : cuts) {
    auto r = ReadBytes(bytes.substr(0, cut));
    if (boundaries.count(cut)) {
      EXPECT_OK(r) << "cut at a field boundary " << cut;
    } else {
      ASSERT_FALSE(r.ok()) << "cut at " << cut << " was accepted";
      EXPECT_TRUE(absl::StrContains(r.status().message(), "byte offset")) << r.status();
      ++errors;
    }
  }
  EXPECT_GT(errors, 700);
}

TEST(XSpaceMalformedTest, TruncatedFileNamesPathAndOffset) {
  const std::string bytes = ReadTestFile(FixturePath(kTpuFixture));
  std::string path =
      ::testing::TempDir() + "/truncated_" + std::to_string(::getpid()) + ".xplane.pb";
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, 5000, f);
  std::fclose(f);
  auto r = ReadXSpaceFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StartsWith(r.status().message(), path)) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "byte offset")) << r.status();
  std::remove(path.c_str());
}

TEST(XSpaceMalformedTest, WrongWireTypes) {
  ExpectMalformed(VarintField(1, 5), "wire type");                  // planes as a varint
  ExpectMalformed(LengthField(1, VarintField(2, 7)), "wire type");  // plane name as a varint
  std::string group;
  PutTag(1, 3, &group);
  ExpectMalformed(group, "wire type");  // groups do not exist in XSpace
  std::string bad_type;
  PutTag(9, 7, &bad_type);
  ExpectMalformed(bad_type, "wire type");
}

TEST(XSpaceMalformedTest, LengthsPastTheEnd) {
  std::string bytes;
  PutTag(1, 2, &bytes);
  PutVarint(1000, &bytes);
  bytes += "abc";
  ExpectMalformed(bytes, "runs past the end");

  // A line whose length runs past the end of its plane.
  std::string plane = LengthField(2, "/device:TPU:0");
  PutTag(3, 2, &plane);
  PutVarint(50, &plane);
  plane += "xx";
  ExpectMalformed(LengthField(1, plane), "runs past the end");
}

TEST(XSpaceMalformedTest, AbsurdSizes) {
  std::string huge;
  PutTag(1, 2, &huge);
  PutVarint(uint64_t{1} << 62, &huge);
  ExpectMalformed(huge, "runs past the end");
  std::string max;
  PutTag(1, 2, &max);
  PutVarint(~uint64_t{0}, &max);
  ExpectMalformed(max, "runs past the end");
  std::string overlong(11, '\xff');
  ExpectMalformed("\x0a" + overlong, "varint");
  ExpectMalformed(std::string("\x00", 1), "tag");
}

TEST(XSpaceMalformedTest, DamagedEventInsideAKeptLine) {
  // A TPU plane whose XLA Ops line holds an event with a truncated stat.
  std::string event = VarintField(1, 1) + VarintField(2, 100);
  std::string stat;
  PutTag(4, 2, &stat);
  PutVarint(10, &stat);
  stat += VarintField(1, 1);  // declares 10 bytes, holds 2
  std::string line = LengthField(2, "XLA Ops") + LengthField(4, event + stat);
  std::string plane = LengthField(2, "/device:TPU:0") + LengthField(3, line);
  ExpectMalformed(LengthField(1, plane), "XEvent");
}

TEST(XSpaceMalformedTest, RandomByteDamageNeverCrashes) {
  const std::string bytes = ReadTestFile(FixturePath(kTpuFixture));
  std::mt19937_64 rng(7);
  int ok = 0, failed = 0;
  for (int i = 0; i < 400; ++i) {
    std::string damaged = bytes;
    for (int j = 0; j < 4; ++j) damaged[rng() % damaged.size()] = static_cast<char>(rng());
    auto r = ReadBytes(damaged);
    if (r.ok()) {
      ++ok;
      ComputeKernelStats(*r);  // Whatever was accepted must be usable.
    } else {
      ++failed;
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  EXPECT_EQ(ok + failed, 400);
}

TEST(XSpaceMalformedTest, EventWithUnknownMetadataIsKeptAndReported) {
  std::string event = VarintField(1, 99) + VarintField(2, 100) + VarintField(3, 5000);
  std::string line = LengthField(2, "XLA Ops") + LengthField(4, event);
  std::string plane = LengthField(2, "/device:TPU:0") + LengthField(3, line);
  auto r = ReadBytes(LengthField(1, plane));
  ASSERT_OK(r);
  ASSERT_EQ(r->EventCount(), 1u);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_TRUE(absl::StrContains(r->warnings[0], "missing metadata id 99"));
}

// A file larger than protobuf's 2 GiB limit: a skipped host plane of 2.2 GiB (a sparse hole on
// disk, so the test writes little), followed by the real TPU capture.
TEST(XSpaceLargeFileTest, ReadsPlanesPastTwoGiB) {
  const std::string fixture = ReadTestFile(FixturePath(kTpuFixture));
  const uint64_t kHole = (uint64_t{11} << 30) / 5;  // 2.2 GiB
  std::string header;
  std::string name = LengthField(2, "/host:CPU");
  std::string lines_tag;
  PutTag(3, 2, &lines_tag);
  PutVarint(kHole, &lines_tag);
  PutTag(1, 2, &header);
  PutVarint(name.size() + lines_tag.size() + kHole, &header);
  header += name + lines_tag;

  std::string path = ::testing::TempDir() + "/large_" + std::to_string(::getpid()) + ".xplane.pb";
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, header.data(), header.size(), 0), static_cast<ssize_t>(header.size()));
  off_t tail = static_cast<off_t>(header.size() + kHole);
  ASSERT_EQ(::pwrite(fd, fixture.data(), fixture.size(), tail),
            static_cast<ssize_t>(fixture.size()));
  ::close(fd);

  auto big = ReadXSpaceFile(path);
  std::remove(path.c_str());
  ASSERT_OK(big);
  auto small = ReadXSpaceFile(FixturePath(kTpuFixture));
  ASSERT_OK(small);
  EXPECT_EQ(big->host.chips.size(), 4u);
  EXPECT_EQ(big->EventCount(), small->EventCount());
  std::vector<KernelStats> a = ComputeKernelStats(*big), b = ComputeKernelStats(*small);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].count, b[i].count);
    EXPECT_EQ(a[i].total_ps, b[i].total_ps);
  }
}

}  // namespace
}  // namespace podprof::trace
