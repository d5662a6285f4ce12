// The streaming reader against protobuf's generated full parse of the same real captures.
#include "trace/xspace_reader.h"

#include <zlib.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "common/utf8.h"
#include "gtest/gtest.h"
#include "proto/xplane.pb.h"
#include "tests/util/status_matchers.h"
#include "tests/util/trace_fixtures.h"
#include "trace/hash.h"
#include "trace/kernel_stats.h"

namespace podprof::trace {
namespace {

using podprof::testing::FixturePath;
using podprof::testing::ReadTestFile;

std::string LengthFieldForTest(uint32_t field, const std::string& body) {
  return podprof::testing::LengthField(field, body);
}

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
  ASSERT_OK(capture);
  TotalsMap expected = TotalsFromFullParse(ReadTestFile(path));
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
  std::string bytes = ReadTestFile(path);
  MemorySource mem(bytes);
  ReadOptions opts;
  opts.host_name = HostNameFromPath(path);
  auto a = ReadXSpace(mem, opts);
  auto b = ReadXSpaceFile(path);
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_EQ(a->host.name, b->host.name);
  EXPECT_EQ(a->EventCount(), b->EventCount());
  EXPECT_EQ(a->kernels.size(), b->kernels.size());
  EXPECT_LT(b->KeptBytes(), bytes.size());  // Host threads and HLO protos are not kept.
}

// Read in pieces (as the agent streams a capture), the host comes first with every chip, then
// each device plane's data on absolute times, and it adds up to the whole read: the same
// events, series and kernels, a plane at a time.
TEST_P(FixtureTest, PiecesAddUpToTheWholeCapture) {
  const std::string path = FixturePath(GetParam());
  auto whole = ReadXSpaceFile(path);
  ASSERT_OK(whole);
  class Collect final : public PieceSink {
   public:
    absl::Status OnHost(const Host& host) override {
      EXPECT_EQ(pieces, 0) << "the host comes first";
      host_ = host;
      return absl::OkStatus();
    }
    absl::Status OnPlane(const HostCapture& piece, size_t first_new_kernel) override {
      EXPECT_EQ(first_new_kernel, kernels) << "new kernels continue the previous piece's";
      kernels = piece.kernels.size();
      std::set<int> chips;
      for (const EventBlock& b : piece.blocks) chips.insert(b.chip);
      for (const CounterSeries& c : piece.counters) chips.insert(c.chip);
      EXPECT_LE(chips.size(), 1u) << "a piece is one plane's, one chip's";
      blocks.insert(blocks.end(), piece.blocks.begin(), piece.blocks.end());
      counters.insert(counters.end(), piece.counters.begin(), piece.counters.end());
      largest_piece = std::max(largest_piece, piece.EventCount());
      ++pieces;
      return absl::OkStatus();
    }
    Host host_;
    int pieces = 0;
    size_t kernels = 0;
    size_t largest_piece = 0;
    std::vector<EventBlock> blocks;
    std::vector<CounterSeries> counters;
  } sink;
  auto source = FileSource::Open(path);
  ASSERT_OK(source);
  ReadOptions opts;
  opts.host_name = HostNameFromPath(path);
  auto rest = ReadXSpaceInPieces(**source, opts, &sink);
  ASSERT_OK(rest);
  EXPECT_TRUE(rest->blocks.empty());
  EXPECT_TRUE(rest->counters.empty());
  EXPECT_EQ(sink.host_.name, whole->host.name);
  EXPECT_EQ(sink.host_.chips.size(), whole->host.chips.size());
  EXPECT_EQ(sink.host_.profile_start_ns, whole->host.profile_start_ns);
  EXPECT_EQ(sink.pieces, static_cast<int>(whole->host.chips.size()));
  EXPECT_LT(sink.largest_piece, whole->EventCount());
  ASSERT_EQ(sink.kernels, whole->kernels.size());
  for (size_t k = 0; k < sink.kernels; ++k) {
    EXPECT_EQ(rest->kernels[k].name, whole->kernels[k].name);
    EXPECT_EQ(rest->kernels[k].module, whole->kernels[k].module) << rest->kernels[k].name;
  }
  ASSERT_EQ(sink.blocks.size(), whole->blocks.size());
  for (size_t b = 0; b < sink.blocks.size(); ++b) {
    EXPECT_EQ(sink.blocks[b].base_ns, whole->blocks[b].base_ns);
    EXPECT_EQ(sink.blocks[b].chip, whole->blocks[b].chip);
    EXPECT_EQ(sink.blocks[b].start_ps, whole->blocks[b].start_ps);
    EXPECT_EQ(sink.blocks[b].kernel, whole->blocks[b].kernel);
  }
  ASSERT_EQ(sink.counters.size(), whole->counters.size());
  for (size_t c = 0; c < sink.counters.size(); ++c) {
    EXPECT_EQ(sink.counters[c].name, whole->counters[c].name);
    EXPECT_EQ(sink.counters[c].time_ns, whole->counters[c].time_ns);
  }
}

// Reads `source` in pieces with a piece budget of `budget` bytes and expects at least
// `min_pieces` pieces, none holding much past the budget (one read chunk's events: at most
// 1 MiB of wire, an event at least 4 bytes of it), that add up to `whole`: every line's
// events, every series' samples and every kernel with its module.
void ExpectPartsAddUp(ByteSource& source, ReadOptions opts, size_t budget, const HostCapture& whole,
                      int min_pieces) {
  using Key = std::tuple<int, std::string, int>;  // chip, line, kind
  struct Line {
    std::vector<int64_t> start_ps, duration_ps;  // absolute: base_ns x 1000 + start
    std::vector<uint32_t> kernel;
  };
  using Samples = std::pair<std::vector<int64_t>, std::vector<double>>;
  struct Data {
    std::map<Key, Line> lines;
    std::map<std::pair<int, std::string>, Samples> series;
    void Add(const HostCapture& c) {
      for (const EventBlock& b : c.blocks) {
        Line& l = lines[{b.chip, b.line, static_cast<int>(b.kind)}];
        for (size_t i = 0; i < b.size(); ++i) {
          l.start_ps.push_back(b.base_ns * 1000 + b.start_ps[i]);
          l.duration_ps.push_back(b.duration_ps[i]);
          l.kernel.push_back(b.kernel[i]);
        }
      }
      for (const CounterSeries& c : c.counters) {
        Samples& s = series[{c.chip, c.name}];
        s.first.insert(s.first.end(), c.time_ns.begin(), c.time_ns.end());
        s.second.insert(s.second.end(), c.value.begin(), c.value.end());
      }
    }
  };
  class Collect final : public PieceSink {
   public:
    absl::Status OnHost(const Host&) override { return absl::OkStatus(); }
    absl::Status OnPlane(const HostCapture& piece, size_t first_new_kernel) override {
      EXPECT_EQ(first_new_kernel, kernels) << "new kernels continue the previous piece's";
      kernels = piece.kernels.size();
      size_t events = piece.EventCount();
      for (const CounterSeries& c : piece.counters) events += c.time_ns.size();
      largest = std::max(largest, events);
      data.Add(piece);
      ++pieces;
      return absl::OkStatus();
    }
    Data data;
    int pieces = 0;
    size_t kernels = 0, largest = 0;
  } sink;
  opts.max_piece_bytes = budget;
  auto rest = ReadXSpaceInPieces(source, opts, &sink);
  ASSERT_OK(rest);
  EXPECT_GE(sink.pieces, min_pieces);
  EXPECT_LE(sink.largest, budget / 8 + (size_t{1} << 18));
  Data want;
  want.Add(whole);
  ASSERT_EQ(sink.data.lines.size(), want.lines.size());
  for (const auto& [key, w] : want.lines) {
    const Line& got = sink.data.lines[key];
    EXPECT_EQ(got.start_ps, w.start_ps) << std::get<1>(key);
    EXPECT_EQ(got.duration_ps, w.duration_ps) << std::get<1>(key);
    EXPECT_EQ(got.kernel, w.kernel) << std::get<1>(key);
  }
  for (const auto& [key, w] : sink.data.series) {
    EXPECT_TRUE(want.series.count(key)) << key.first << " " << key.second << " " << w.first.size();
  }
  ASSERT_EQ(sink.data.series.size(), want.series.size());
  for (const auto& [key, w] : want.series) EXPECT_EQ(sink.data.series[key], w) << key.second;
  ASSERT_EQ(rest->kernels.size(), whole.kernels.size());
  for (size_t k = 0; k < whole.kernels.size(); ++k) {
    EXPECT_EQ(rest->kernels[k].name, whole.kernels[k].name);
    EXPECT_EQ(rest->kernels[k].module, whole.kernels[k].module) << whole.kernels[k].name;
  }
}

// A plane larger than the reader's piece budget is streamed in parts, never held whole (an
// agent's memory must not follow the workload's plane size): with a budget of 4 KiB, a real
// capture's planes come apart at their lines and still add up to the whole read.
TEST_P(FixtureTest, PlanesLargerThanThePieceBudgetComeInParts) {
  const std::string path = FixturePath(GetParam());
  auto whole = ReadXSpaceFile(path);
  ASSERT_OK(whole);
  auto source = FileSource::Open(path);
  ASSERT_OK(source);
  ReadOptions opts;
  opts.host_name = HostNameFromPath(path);
  ExpectPartsAddUp(**source, opts, 4096, *whole, static_cast<int>(whole->host.chips.size()) + 1);
}

INSTANTIATE_TEST_SUITE_P(RealCaptures, FixtureTest,
                         ::testing::Values(podprof::testing::kTpuFixture,
                                           podprof::testing::kGpuFixture));

TEST(XSpaceReaderTest, TpuHostChipsAndWindow) {
  auto c = ReadXSpaceFile(FixturePath(podprof::testing::kTpuFixture));
  ASSERT_OK(c);
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
  ASSERT_OK(c);
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
  ASSERT_OK(c);
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
  ASSERT_OK(c);
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
  ASSERT_OK(c);
  EXPECT_EQ(c->host.name, "34.83.195.179:6003");  // XSpace.hostnames wins over the file name.
  ASSERT_EQ(c->host.chips.size(), 8u);
  std::set<std::string> categories;
  for (const KernelDef& k : c->kernels) categories.insert(k.category);
  EXPECT_TRUE(categories.count("gpu kernel"));
  EXPECT_TRUE(categories.count("memcpy"));
}

// gzip, as the profiler writes compressed_str_value.
std::string Gzip(const std::string& in) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY),
            Z_OK);
  std::string out(deflateBound(&zs, in.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// A small TPU capture built with the generated classes, exercising what the real fixtures do
// not: ref_value and compressed strings, counters, Steps, and a line whose name follows its
// events.
// The reader reads the field order every writer emits straight through; any other order, a
// stat id of two bytes, an int64 or double value, and an unread stat's value before its id
// must give the same events.
TEST(XSpaceReaderTest, EventsInAnyFieldOrderReadAlike) {
  using podprof::testing::LengthField;
  using podprof::testing::VarintField;
  tensorflow::profiler::XPlane plane;
  plane.set_name("/device:TPU:0");
  (*plane.mutable_stat_metadata())[1].set_name("device_duration_ps");
  (*plane.mutable_stat_metadata())[200].set_name("all_reduce_unique_id");
  (*plane.mutable_stat_metadata())[3].set_name("device_offset_ps");
  (*plane.mutable_event_metadata())[1].set_name("fusion.1");
  (*plane.mutable_event_metadata())[300].set_name("all-reduce.2");
  // An event: metadata id, offset, duration, then its stats, each given as field bytes.
  auto event = [](std::vector<std::string> fields) {
    std::string ev;
    for (const std::string& f : fields) ev += f;
    return LengthField(4, ev);
  };
  auto stat = [](const std::string& a, const std::string& b) { return LengthField(4, a + b); };
  std::string double_dd;  // device_duration_ps as a double: not a duration podprof takes
  podprof::testing::PutTag(2, 1, &double_dd);
  double_dd.append("\0\0\0\0\0\0\xf0\x3f", 8);  // 1.0
  std::string line = LengthField(2, "XLA Ops");
  // Written as every writer writes it.
  line += event({VarintField(1, 1), VarintField(2, 1000), VarintField(3, 900),
                 stat(VarintField(1, 3), VarintField(3, 123456789012)),
                 stat(VarintField(1, 1), VarintField(3, 700))});
  // Reversed: stats first, each value before its id; an int64 duration.
  line += event({stat(VarintField(3, 123456789012), VarintField(1, 3)),
                 stat(VarintField(4, 710), VarintField(1, 1)), VarintField(3, 900),
                 VarintField(2, 5000), VarintField(1, 1)});
  // A two-byte event id and stat id, the collective's id, and a double duration ignored.
  line +=
      event({VarintField(1, 300), VarintField(2, 9000), VarintField(3, 800),
             stat(VarintField(1, 200), VarintField(3, 77)), stat(VarintField(1, 1), double_dd)});
  std::string bytes =
      LengthFieldForTest(1, plane.SerializeAsString() + LengthFieldForTest(3, line));

  MemorySource source(bytes);
  auto c = ReadXSpace(source);
  ASSERT_OK(c);
  ASSERT_EQ(c->blocks.size(), 1u);
  const EventBlock& b = c->blocks[0];
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b.duration_ps[0], 700);
  EXPECT_EQ(b.duration_ps[1], 710);
  EXPECT_EQ(b.duration_ps[2], 800);  // the event's own: the device duration was no integer
  EXPECT_EQ(b.start_ps[1] - b.start_ps[0], 4000);
  EXPECT_EQ(b.kernel[0], b.kernel[1]);
  EXPECT_EQ(c->kernels[b.kernel[2]].name, "all-reduce.2");
  EXPECT_EQ(b.collective[0], 0u);
  EXPECT_EQ(b.collective[2], 77u);
}

TEST(XSpaceReaderTest, RefValuesCompressedStringsCountersAndFieldOrder) {
  tensorflow::profiler::XSpace space;
  auto* plane = space.add_planes();
  plane->set_name("/device:TPU:2");
  const char* stats[] = {"",
                         "hlo_category",
                         "source",
                         "flops",
                         "counter_value",
                         "convolution fusion",
                         "device_duration_ps"};
  for (int i = 1; i <= 6; ++i) (*plane->mutable_stat_metadata())[i].set_name(stats[i]);
  auto& conv = (*plane->mutable_event_metadata())[1];
  conv.set_name("%fusion.7 = bf16[8,8] fusion(...)");
  conv.set_display_name("fusion.7");
  auto* cat = conv.add_stats();
  cat->set_metadata_id(1);
  cat->set_ref_value(5);  // -> "convolution fusion"
  auto* src = conv.add_stats();
  src->set_metadata_id(2);
  src->set_compressed_str_value(Gzip("model.py:42"));
  auto* flops = conv.add_stats();
  flops->set_metadata_id(3);
  flops->set_uint64_value(4096);
  (*plane->mutable_event_metadata())[2].set_name("mxu_busy");
  (*plane->mutable_event_metadata())[3].set_name("step 17");

  // Proto3 serializes in field order; emulate a writer that does not by building the line
  // bytes by hand: events first, name last.
  tensorflow::profiler::XLine ops;
  for (int i = 0; i < 3; ++i) {
    auto* ev = ops.add_events();
    ev->set_metadata_id(1);
    ev->set_offset_ps(1000 * i);
    ev->set_duration_ps(500);
    auto* dd = ev->add_stats();
    dd->set_metadata_id(6);
    dd->set_uint64_value(400 + i);
  }
  tensorflow::profiler::XLine name_only;
  name_only.set_name("XLA Ops");
  name_only.set_timestamp_ns(250);
  std::string line_bytes = ops.SerializeAsString() + name_only.SerializeAsString();

  auto* counters = plane->add_lines();
  counters->set_name("_counters_");
  for (int i = 0; i < 4; ++i) {
    auto* ev = counters->add_events();
    ev->set_metadata_id(2);
    ev->set_offset_ps(2'000'000 * i);
    auto* v = ev->add_stats();
    v->set_metadata_id(4);
    v->set_double_value(0.25 * i);
  }
  auto* steps = plane->add_lines();
  steps->set_name("Steps");
  auto* step = steps->add_events();
  step->set_metadata_id(3);
  step->set_duration_ps(9000);

  auto* env = space.add_planes();
  env->set_name("Task Environment");
  (*env->mutable_stat_metadata())[1].set_name("profile_start_time");
  auto* start = env->add_stats();
  start->set_metadata_id(1);
  start->set_uint64_value(1'700'000'000'000'000'000);

  // Append the hand-made line to the plane: concatenated fields merge on the wire.
  std::string plane_bytes = plane->SerializeAsString();
  plane_bytes += LengthFieldForTest(3, line_bytes);
  std::string bytes =
      LengthFieldForTest(1, plane_bytes) + LengthFieldForTest(1, env->SerializeAsString());

  MemorySource src_bytes(bytes);
  auto c = ReadXSpace(src_bytes);
  ASSERT_OK(c);
  ASSERT_EQ(c->host.chips.size(), 1u);
  EXPECT_EQ(c->host.chips[0].ordinal, 2);
  const EventBlock* op_block = nullptr;
  const EventBlock* step_block = nullptr;
  for (const EventBlock& b : c->blocks) {
    if (b.kind == LineKind::kOps) op_block = &b;
    if (b.kind == LineKind::kSteps) step_block = &b;
  }
  ASSERT_NE(op_block, nullptr);
  ASSERT_NE(step_block, nullptr);
  EXPECT_EQ(op_block->line, "XLA Ops");
  EXPECT_EQ(op_block->base_ns, 1'700'000'000'000'000'250);
  EXPECT_EQ(op_block->duration_ps, (std::vector<int64_t>{400, 401, 402}));
  const KernelDef& k = c->kernels[op_block->kernel[0]];
  EXPECT_EQ(k.name, "fusion.7");
  EXPECT_EQ(k.category, "convolution fusion");
  EXPECT_EQ(k.source, "model.py:42");
  EXPECT_EQ(k.flops, 4096);
  EXPECT_EQ(c->kernels[step_block->kernel[0]].category, "step");
  ASSERT_EQ(c->counters.size(), 1u);
  EXPECT_EQ(c->counters[0].name, "mxu_busy");
  EXPECT_EQ(c->counters[0].value, (std::vector<double>{0, 0.25, 0.5, 0.75}));
  EXPECT_EQ(c->counters[0].time_ns[1], 1'700'000'000'000'002'000);
}

// One line of 300,000 events (about 11 MB) and a counter line of 100,000 samples, with the
// plane's module line after them: read in pieces of 1 MiB, the lines come apart in the middle
// and continue in the next pieces, and every kernel still knows its module, although the
// pieces holding its events went before the module line was read.
TEST(XSpaceReaderTest, ALineLargerThanThePieceBudgetIsSplitInTheMiddle) {
  tensorflow::profiler::XSpace space;
  auto* plane = space.add_planes();
  plane->set_name("/device:TPU:0");
  const char* stats[] = {"", "program_id", "counter_value", "device_duration_ps"};
  for (int i = 1; i <= 3; ++i) (*plane->mutable_stat_metadata())[i].set_name(stats[i]);
  for (int k = 1; k <= 3; ++k) {
    auto& m = (*plane->mutable_event_metadata())[k];
    m.set_name("fusion." + std::to_string(k));
    auto* program = m.add_stats();
    program->set_metadata_id(1);
    program->set_uint64_value(70 + k);
  }
  (*plane->mutable_event_metadata())[10].set_name("mxu_busy");
  for (int k = 1; k <= 3; ++k) {
    (*plane->mutable_event_metadata())[20 + k].set_name("jit_step_" + std::to_string(k) + "(" +
                                                        std::to_string(70 + k) + ")");
  }
  auto* ops = plane->add_lines();
  ops->set_name("XLA Ops");
  ops->set_timestamp_ns(1000);
  for (int i = 0; i < 300'000; ++i) {
    auto* ev = ops->add_events();
    ev->set_metadata_id(1 + i % 3);
    ev->set_offset_ps(int64_t{10'000} * i);
    ev->set_duration_ps(9'000 + i % 7);
  }
  auto* counters = plane->add_lines();
  counters->set_name("_counters_");
  for (int i = 0; i < 100'000; ++i) {
    auto* ev = counters->add_events();
    ev->set_metadata_id(10);
    ev->set_offset_ps(int64_t{30'000} * i);
    auto* v = ev->add_stats();
    v->set_metadata_id(2);
    v->set_double_value(i % 100 / 100.0);
  }
  auto* modules = plane->add_lines();
  modules->set_name("XLA Modules");
  for (int k = 1; k <= 3; ++k) {
    auto* ev = modules->add_events();
    ev->set_metadata_id(20 + k);
    ev->set_offset_ps(int64_t{1'000'000'000} * k);
    ev->set_duration_ps(1'000'000'000);
  }
  auto* env = space.add_planes();
  env->set_name("Task Environment");
  (*env->mutable_stat_metadata())[1].set_name("profile_start_time");
  auto* start = env->add_stats();
  start->set_metadata_id(1);
  start->set_uint64_value(1'700'000'000'000'000'000);
  const std::string bytes = space.SerializeAsString();
  MemorySource source(bytes);
  auto whole = ReadXSpace(source);
  ASSERT_OK(whole);
  ASSERT_EQ(whole->EventCount(), 300'003u);
  for (const KernelDef& k : whole->kernels) {
    if (absl::StartsWith(k.name, "fusion.")) {
      EXPECT_FALSE(k.module.empty()) << k.name;
    }
  }
  ExpectPartsAddUp(source, ReadOptions(), size_t{1} << 20, *whole, 4);
}

TEST(XSpaceReaderTest, BadGzipIsAnErrorNotACrash) {
  tensorflow::profiler::XSpace space;
  auto* plane = space.add_planes();
  plane->set_name("/device:TPU:0");
  (*plane->mutable_stat_metadata())[1].set_name("hlo_category");
  auto& m = (*plane->mutable_event_metadata())[1];
  m.set_name("op");
  auto* st = m.add_stats();
  st->set_metadata_id(1);
  st->set_compressed_str_value("not gzip at all");
  auto* line = plane->add_lines();
  line->set_name("XLA Ops");
  line->add_events()->set_metadata_id(1);
  std::string bytes = space.SerializeAsString();
  MemorySource src(bytes);
  auto c = ReadXSpace(src);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::StrContains(c.status().message(), "gzip")) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), "byte offset")) << c.status();
}

// A workload's kernel and line names that are not UTF-8 are read as text with the bad bytes
// written \xNN, whole or in pieces: protobuf refuses such a string in a stream and JSON in an
// answer, and both a live capture (failed at its deadline) and an import (its reads ended the
// aggregator) carried them on.
TEST(XSpaceReaderTest, NamesThatAreNotUtf8AreReadEscaped) {
  tensorflow::profiler::XSpace space;
  ASSERT_TRUE(space.ParseFromString(ReadTestFile(FixturePath(podprof::testing::kTpuFixture))));
  int renamed = 0;
  for (auto& plane : *space.mutable_planes()) {
    if (!absl::StartsWith(plane.name(), "/device:TPU:")) continue;
    for (auto& [id, m] : *plane.mutable_event_metadata()) {
      m.set_display_name(m.display_name().empty() ? std::string() : "op\xff\xfe.1");
      if (m.display_name().empty()) m.set_name("op\xff\xfe.1");
      ++renamed;
    }
    for (auto& line : *plane.mutable_lines()) {
      if (line.name() == "XLA Ops") line.set_display_name("XLA\x80Ops");
    }
  }
  ASSERT_GT(renamed, 0);
  const std::string bytes = space.SerializeAsString();
  MemorySource src(bytes);
  absl::StatusOr<HostCapture> c = ReadXSpace(src);
  ASSERT_OK(c.status());
  bool escaped = false;
  for (const KernelDef& k : c->kernels) {
    for (const std::string* text : {&k.name, &k.hlo_text, &k.module, &k.category}) {
      EXPECT_TRUE(IsValidUtf8(*text)) << absl::CEscape(*text);
    }
    escaped |= k.name == "op\\xFF\\xFE.1";
  }
  EXPECT_TRUE(escaped);
  for (const EventBlock& b : c->blocks) EXPECT_TRUE(IsValidUtf8(b.line)) << absl::CEscape(b.line);
  // The same in pieces, as the agent reads.
  struct Check final : PieceSink {
    absl::Status OnHost(const Host&) override { return absl::OkStatus(); }
    absl::Status OnPlane(const HostCapture& piece, size_t first) override {
      for (size_t i = first; i < piece.kernels.size(); ++i) {
        if (!IsValidUtf8(piece.kernels[i].name)) ++bad;
      }
      for (const EventBlock& b : piece.blocks) bad += !IsValidUtf8(b.line);
      return absl::OkStatus();
    }
    int bad = 0;
  } check;
  MemorySource again(bytes);
  ASSERT_OK(ReadXSpaceInPieces(again, {}, &check).status());
  EXPECT_EQ(check.bad, 0);
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
