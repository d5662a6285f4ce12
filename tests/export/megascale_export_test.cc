// The XSpace export of a capture with host-transfer (DCN) ops holds what XProf's
// `megascale_stats` reads of a host (docs/MEGASCALE.md 1.2-1.3): the ops' metadata by HLO text
// and instruction name, the sends' group, `/host:CPU` with a `MegaScale:` name and the program's
// HloProto on `/host:metadata`; a capture without them gets none of it. The peers test
// (tests/peers/test_megascale_export.py) runs XProf itself on such exports.
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "export/xspace_export.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"
#include "trace/byte_source.h"
#include "trace/hlo_proto.h"
#include "trace/xspace_reader.h"
#include "trace/xspace_schema.h"

namespace podprof::exporter {
namespace {

namespace xp = tensorflow::profiler;
using trace::EventBlock;
using trace::HostCapture;
using trace::KernelDef;
using trace::LineKind;

constexpr int64_t kStartNs = 1'800'000'000'000'000'000;
constexpr uint64_t kProgram = 4242;

std::string Attributes(int r) {
  return "frontend_attributes={_xla_host_transfer_rendezvous=\"dcn_grads." + std::to_string(r) +
         "\",_xla_megascale_transfer_type=\"ONE_TO_ONE\","
         "_xla_send_recv_source_target_pairs=\"{{0,4},{4,0}}\"}";
}

// The simulator's texts (docs/MEGASCALE.md, "podprof's multi-slice layout").
std::string Text(const std::string& opcode, int channel) {
  const std::string c = std::to_string(channel);
  const std::string started = "(bf16[524288]{0}, u32[], token[])";
  std::string shape = started, operands;
  if (opcode == "send") operands = "bf16[524288]{0} %reduce-scatter.0, token[] %after-all." + c;
  if (opcode == "recv") operands = "token[] %after-all." + c;
  if (opcode == "send-done") shape = "token[]", operands = started + " %send." + c;
  if (opcode == "recv-done")
    shape = "(bf16[524288]{0}, token[])", operands = started + " %recv." + c;
  return "%" + opcode + "." + c + " = " + shape + " " + opcode + "(" + operands +
         "), channel_id=" + c + ", is_host_transfer=true, " + Attributes(channel - 101);
}

KernelDef Kernel(const std::string& name, const std::string& category, const std::string& text) {
  KernelDef k;
  k.module = "jit_train_step";
  k.name = name;
  k.category = category;
  k.program_id = kProgram;
  k.hlo_text = text;
  return k;
}

// One chip: a module run holding a fusion and the four ops of two rendezvous.
HostCapture DcnCapture() {
  HostCapture c;
  c.host.name = "simhost-0";
  c.host.profile_start_ns = kStartNs;
  c.host.profile_stop_ns = kStartNs + 1'000'000'000;
  c.host.chips.push_back(trace::Chip{});
  KernelDef module;
  module.module = "jit_train_step";
  module.name = "jit_train_step(4242)";
  module.category = "xla module";
  module.program_id = kProgram;
  c.kernels.push_back(module);
  c.kernels.push_back(Kernel("fusion.1", "loop fusion", "%fusion.1 = f32[8]{0} fusion()"));
  EventBlock ops;
  ops.line = "XLA Ops";
  ops.kind = LineKind::kOps;
  ops.base_ns = kStartNs + 1000;
  ops.start_ps.push_back(0);
  ops.duration_ps.push_back(1'000'000);
  ops.kernel.push_back(1);
  int64_t at = 2'000'000;
  for (int channel : {101, 102}) {
    for (const char* op : {"send", "recv", "send-done", "recv-done"}) {
      c.kernels.push_back(Kernel(std::string(op) + "." + std::to_string(channel),
                                 std::string("host ") + op, Text(op, channel)));
      ops.start_ps.push_back(at);
      ops.duration_ps.push_back(50'000'000);
      ops.kernel.push_back(static_cast<uint32_t>(c.kernels.size() - 1));
      at += 60'000'000;
    }
  }
  ops.collective.assign(ops.size(), 0);
  EventBlock modules;
  modules.line = "XLA Modules";
  modules.kind = LineKind::kModules;
  modules.base_ns = kStartNs + 1000;
  modules.start_ps = {0};
  modules.duration_ps = {at};
  modules.kernel = {0};
  modules.collective = {0};
  c.blocks.push_back(ops);
  c.blocks.push_back(modules);
  return c;
}

const xp::XPlane* PlaneNamed(const xp::XSpace& space, absl::string_view name) {
  for (const xp::XPlane& p : space.planes()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

// The event metadata's stats by stat name (a bytes or string value as it is, numbers printed).
std::map<std::string, std::string> Stats(const xp::XPlane& plane, const xp::XEventMetadata& m) {
  std::map<std::string, std::string> out;
  for (const xp::XStat& s : m.stats()) {
    const std::string& name = plane.stat_metadata().at(s.metadata_id()).name();
    switch (s.value_case()) {
      case xp::XStat::kBytesValue:
        out[name] = s.bytes_value();
        break;
      case xp::XStat::kStrValue:
        out[name] = s.str_value();
        break;
      default:
        out[name] = std::to_string(s.uint64_value() + static_cast<uint64_t>(s.int64_value()));
    }
  }
  return out;
}

// `bytes` parse to `space` (map fields serialize in no fixed order, so bytes are not compared).
bool SameSpace(const std::string& bytes, const xp::XSpace& space) {
  xp::XSpace parsed;
  return parsed.ParseFromString(bytes) &&
         google::protobuf::util::MessageDifferencer::Equals(parsed, space);
}

TEST(MegascaleExportTest, DcnOpsModulesAndHostPlanesAsXprofReadsThem) {
  const HostCapture capture = DcnCapture();
  const xp::XSpace space = ToXSpace(capture);

  const xp::XPlane* tpu = PlaneNamed(space, "/device:TPU:0");
  ASSERT_NE(tpu, nullptr);
  std::map<std::string, const xp::XEventMetadata*> by_display;
  for (const auto& [id, m] : tpu->event_metadata()) by_display[m.display_name()] = &m;
  for (int channel : {101, 102}) {
    for (const std::string op : {"send", "recv", "send-done", "recv-done"}) {
      const std::string name = op + "." + std::to_string(channel);
      ASSERT_EQ(by_display.count(name), 1u) << name;
      const xp::XEventMetadata& m = *by_display[name];
      EXPECT_EQ(m.name(), Text(op, channel));  // the HLO text, as the profiler names the op
      const auto stats = Stats(*tpu, m);
      EXPECT_EQ(stats.at("hlo_category"), "host " + op);
      EXPECT_EQ(stats.at("program_id"), std::to_string(kProgram));
      if (op == "send") {
        // DcnCollectiveInfoProto: transfer_type ONE_TO_ONE, a group per pair (endpoints unset).
        EXPECT_EQ(stats.at("dcn_collective_info"), std::string("\x08\x02\x1a\x00\x1a\x00", 6));
      } else {
        EXPECT_EQ(stats.count("dcn_collective_info"), 0u) << name;
      }
    }
  }
  // Other ops keep their short name, as before.
  ASSERT_EQ(by_display.count(""), 1u);
  bool module_named = false;
  for (const auto& [id, m] : tpu->event_metadata()) {
    module_named |= m.name() == "jit_train_step(4242)";  // the XLA Modules key XProf looks up
  }
  EXPECT_TRUE(module_named);

  // /host:CPU: the MegaScale: name XProf gates a host on.
  const xp::XPlane* cpu = PlaneNamed(space, trace::xspace::kHostCpuPlane);
  ASSERT_NE(cpu, nullptr);
  ASSERT_EQ(cpu->event_metadata_size(), 1);
  EXPECT_TRUE(absl::StartsWith(cpu->event_metadata().begin()->second.name(),
                               trace::xspace::kMegaScalePrefix));
  EXPECT_EQ(cpu->lines_size(), 0);

  // /host:metadata: the program's HloProto with the DCN instructions, and its id.
  const xp::XPlane* md = PlaneNamed(space, trace::xspace::kHostMetadataPlane);
  ASSERT_NE(md, nullptr);
  ASSERT_EQ(md->event_metadata_size(), 1);
  const xp::XEventMetadata& program = md->event_metadata().begin()->second;
  EXPECT_EQ(program.name(), "jit_train_step");
  const auto stats = Stats(*md, program);
  EXPECT_EQ(stats.at("program_id"), std::to_string(kProgram));
  trace::HloModuleOps hlo;
  ASSERT_OK(trace::ReadHloModuleOps(stats.at("Hlo Proto"), &hlo));
  EXPECT_EQ(hlo.name, "jit_train_step");
  EXPECT_EQ(hlo.ops.at("send.101").opcode, "send");
  EXPECT_EQ(hlo.ops.at("recv-done.102").opcode, "recv-done");
  EXPECT_EQ(hlo.ops.count("fusion.1"), 0u);  // only the host transfers

  // Written a plane at a time, the same; read back, the ops keep name, text and category.
  std::ostringstream out;
  ASSERT_TRUE(WriteXSpace(capture, &out));
  EXPECT_TRUE(SameSpace(out.str(), space));
  EXPECT_EQ(XSpaceByteSize(capture), out.str().size());
  const std::string bytes = out.str();
  trace::MemorySource src(bytes);
  ASSERT_OK_AND_ASSIGN(HostCapture read, trace::ReadXSpace(src));
  int transfers = 0;
  for (const KernelDef& k : read.kernels) {
    if (!absl::StartsWith(k.category, "host ")) continue;
    ++transfers;
    EXPECT_EQ(k.hlo_text.substr(0, k.name.size() + 1), "%" + k.name);
    EXPECT_EQ(k.module, "jit_train_step");
  }
  EXPECT_EQ(transfers, 8);
}

TEST(MegascaleExportTest, ACaptureWithoutHostTransfersGetsNoneOfIt) {
  HostCapture capture = DcnCapture();
  for (KernelDef& k : capture.kernels) {
    if (absl::StartsWith(k.category, "host ")) k.category = "copy";
  }
  const xp::XSpace space = ToXSpace(capture);
  EXPECT_EQ(PlaneNamed(space, trace::xspace::kHostCpuPlane), nullptr);
  EXPECT_EQ(PlaneNamed(space, trace::xspace::kHostMetadataPlane), nullptr);
  const xp::XPlane* tpu = PlaneNamed(space, "/device:TPU:0");
  ASSERT_NE(tpu, nullptr);
  for (const auto& [id, s] : tpu->stat_metadata()) EXPECT_NE(s.name(), "dcn_collective_info");
  for (const auto& [id, m] : tpu->event_metadata()) {
    EXPECT_TRUE(m.display_name().empty()) << m.name();
    EXPECT_FALSE(absl::StartsWith(m.name(), "%")) << m.name();
  }
}

TEST(MegascaleExportTest, KernelsWithoutTextOrModuleWriteNoProgram) {
  // A store read without the kernels' texts: the ops keep their short names and no
  // /host:metadata or MegaScale: gate is written (XProf would find no instruction).
  HostCapture capture = DcnCapture();
  for (KernelDef& k : capture.kernels) k.hlo_text.clear();
  const xp::XSpace space = ToXSpace(capture);
  EXPECT_EQ(PlaneNamed(space, trace::xspace::kHostCpuPlane), nullptr);
  EXPECT_EQ(PlaneNamed(space, trace::xspace::kHostMetadataPlane), nullptr);
  std::ostringstream out;
  ASSERT_TRUE(WriteXSpace(capture, &out));
  EXPECT_TRUE(SameSpace(out.str(), space));
}

}  // namespace
}  // namespace podprof::exporter
