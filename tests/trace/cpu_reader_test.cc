// JAX on CPU, in the layout JAX 0.10 writes (docs/INTEROP.md, "Real peers"): XLA ops as events
// on host threads (`/host:CPU`, stats hlo_op, hlo_module, program_id, run_id) and each
// program's HloProto on `/host:metadata`. tests/jax runs the real thing; this pins the layout.
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "proto/xplane.pb.h"
#include "tests/util/status_matchers.h"
#include "tests/util/trace_fixtures.h"
#include "trace/byte_source.h"
#include "trace/hlo_proto.h"
#include "trace/xspace_reader.h"

namespace podprof::trace {
namespace {

using ::podprof::testing::LengthField;
namespace xp = tensorflow::profiler;

// An HloProto with one module and one computation of `ops` (name -> {opcode, op_name}).
std::string HloProtoBytes(const std::string& module,
                          const std::map<std::string, std::pair<std::string, std::string>>& ops) {
  std::string computation = LengthField(1, "main");
  for (const auto& [name, what] : ops) {
    computation += LengthField(2, LengthField(1, name) + LengthField(2, what.first) +
                                      LengthField(7, LengthField(2, what.second)));
  }
  return LengthField(1, LengthField(1, module) + LengthField(3, computation));
}

int64_t StatId(xp::XPlane* plane, const std::string& name) {
  for (const auto& [id, m] : plane->stat_metadata()) {
    if (m.name() == name) return id;
  }
  const int64_t id = plane->stat_metadata_size() + 1;
  (*plane->mutable_stat_metadata())[id].set_name(name);
  return id;
}

void AddOp(xp::XPlane* plane, xp::XLine* line, int64_t meta, int64_t offset_ps, uint64_t run) {
  xp::XEvent* ev = line->add_events();
  ev->set_metadata_id(meta);
  ev->set_offset_ps(offset_ps);
  ev->set_duration_ps(1'000'000);
  auto* op = ev->add_stats();
  op->set_metadata_id(StatId(plane, "hlo_op"));
  op->set_str_value(plane->event_metadata().at(meta).name());
  auto* module = ev->add_stats();
  module->set_metadata_id(StatId(plane, "hlo_module"));
  module->set_str_value("jit_step");
  auto* program = ev->add_stats();
  program->set_metadata_id(StatId(plane, "program_id"));
  program->set_int64_value(7);
  auto* run_id = ev->add_stats();
  run_id->set_metadata_id(StatId(plane, "run_id"));
  run_id->set_int64_value(static_cast<int64_t>(run));
}

// One JAX-on-CPU process: two steps, each a dot and an all-reduce on two threads.
xp::XSpace CpuSpace(bool with_hlo, uint64_t first_run) {
  xp::XSpace space;
  if (with_hlo) {
    xp::XPlane* meta = space.add_planes();
    meta->set_name("/host:metadata");
    auto& program = (*meta->mutable_event_metadata())[1];
    program.set_name("jit_step(7)");
    auto* hlo = program.add_stats();
    hlo->set_metadata_id(StatId(meta, "Hlo Proto"));
    hlo->set_bytes_value(
        HloProtoBytes("jit_step", {{"dot.2", {"dot", "jit(step)/dense/dot_general"}},
                                   {"psum.1", {"all-reduce", "jit(step)/grads/psum"}}}));
    auto* id = program.add_stats();
    id->set_metadata_id(StatId(meta, "program_id"));
    id->set_uint64_value(7);
  }
  xp::XPlane* cpu = space.add_planes();
  cpu->set_name("/host:CPU");
  (*cpu->mutable_event_metadata())[1].set_name("dot.2");
  (*cpu->mutable_event_metadata())[2].set_name("psum.1");
  (*cpu->mutable_event_metadata())[3].set_name("ThreadpoolListener::Record");
  (*cpu->mutable_event_metadata())[4].set_name("train");
  xp::XLine* python = cpu->add_lines();
  python->set_name("python3");
  xp::XLine* eigen = cpu->add_lines();
  eigen->set_name("tf_XLAEigen/17");
  xp::XLine* client = cpu->add_lines();
  client->set_name("tf_XLAPjRtCpuClient/3");
  for (int step = 0; step < 2; ++step) {
    const int64_t t = step * 10'000'000;
    xp::XEvent* s = python->add_events();
    s->set_metadata_id(4);
    s->set_offset_ps(t);
    s->set_duration_ps(9'000'000);
    auto* n = s->add_stats();
    n->set_metadata_id(StatId(cpu, "step_num"));
    n->set_int64_value(step);
    AddOp(cpu, client, 1, t + 1'000'000, first_run + step);
    AddOp(cpu, eigen, 2, t + 3'000'000, first_run + step);
    xp::XEvent* noise = client->add_events();  // a runtime event: no hlo_op, not a kernel
    noise->set_metadata_id(3);
    noise->set_offset_ps(t + 5'000'000);
  }
  return space;
}

HostCapture Read(const xp::XSpace& space) {
  const std::string bytes = space.SerializeAsString();
  MemorySource source(bytes);
  auto c = ReadXSpace(source);
  EXPECT_OK(c);
  return c.ok() ? *std::move(c) : HostCapture();
}

const KernelDef* Kernel(const HostCapture& c, const std::string& name) {
  for (const KernelDef& k : c.kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

TEST(CpuReaderTest, HostThreadOpsAreOneCpuDevicesKernels) {
  HostCapture c = Read(CpuSpace(/*with_hlo=*/true, 100));
  ASSERT_EQ(c.host.chips.size(), 1u);
  EXPECT_EQ(c.host.chips[0].kind, DeviceKind::kCpu);
  EXPECT_EQ(c.host.chips[0].device_type, kCpuDeviceType);
  std::map<std::string, const EventBlock*> blocks;
  for (const EventBlock& b : c.blocks) blocks[b.line] = &b;
  // The thread of runtime events only is no block; each op thread and the steps are.
  ASSERT_EQ(blocks.size(), 3u);
  ASSERT_TRUE(blocks.count("XLA Ops: tf_XLAEigen/17"));
  ASSERT_TRUE(blocks.count("XLA Ops: tf_XLAPjRtCpuClient/3"));
  ASSERT_TRUE(blocks.count("Steps"));
  EXPECT_EQ(blocks["XLA Ops: tf_XLAPjRtCpuClient/3"]->size(), 2u);  // the noise is not kept
  EXPECT_EQ(blocks["Steps"]->kind, LineKind::kSteps);
  EXPECT_EQ(blocks["Steps"]->size(), 2u);
  const KernelDef* dot = Kernel(c, "dot.2");
  ASSERT_NE(dot, nullptr);
  EXPECT_EQ(dot->module, "jit_step");
  EXPECT_EQ(dot->program_id, 7u);
  EXPECT_EQ(dot->category, "dot");
  EXPECT_EQ(dot->tf_op, "jit(step)/dense/dot_general");
  const KernelDef* psum = Kernel(c, "psum.1");
  ASSERT_NE(psum, nullptr);
  EXPECT_EQ(psum->category, "all-reduce");
}

TEST(CpuReaderTest, CollectivesOfOneRunShareAnIdAcrossProcesses) {
  HostCapture a = Read(CpuSpace(true, 100));
  HostCapture b = Read(CpuSpace(true, 100));
  HostCapture later = Read(CpuSpace(true, 101));
  auto ids = [](const HostCapture& c) {
    std::vector<uint64_t> out;
    for (const EventBlock& blk : c.blocks) {
      for (uint64_t id : blk.collective) {
        if (id != 0) out.push_back(id);
      }
    }
    return out;
  };
  // Only the all-reduce is a collective: two runs, two ids, the same in both processes.
  ASSERT_EQ(ids(a).size(), 2u);
  EXPECT_NE(ids(a)[0], ids(a)[1]);
  EXPECT_EQ(ids(a), ids(b));
  EXPECT_EQ(ids(later)[0], ids(a)[1]);  // run 101 is the first process's second run
}

TEST(CpuReaderTest, WithoutHloTheNameSaysWhichOpsAreCollectives) {
  xp::XSpace space = CpuSpace(/*with_hlo=*/false, 100);
  (*space.mutable_planes(0)->mutable_event_metadata())[2].set_name("all-reduce.4");
  HostCapture c = Read(space);
  const KernelDef* ar = Kernel(c, "all-reduce.4");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->category, "all-reduce");
  EXPECT_EQ(Kernel(c, "dot.2")->category, "unknown");
  EXPECT_TRUE(Kernel(c, "dot.2")->tf_op.empty());
}

TEST(CpuReaderTest, ADevicePlaneMeansTheHostPlaneIsNotRead) {
  xp::XSpace space = CpuSpace(true, 100);
  xp::XPlane* gpu = space.add_planes();
  gpu->set_name("/device:GPU:0");
  (*gpu->mutable_event_metadata())[1].set_name("gemm_kernel");
  xp::XLine* stream = gpu->add_lines();
  stream->set_name("Stream #7(Compute)");
  xp::XEvent* ev = stream->add_events();
  ev->set_metadata_id(1);
  ev->set_duration_ps(5000);
  HostCapture c = Read(space);
  ASSERT_EQ(c.host.chips.size(), 1u);
  EXPECT_EQ(c.host.chips[0].kind, DeviceKind::kGpu);
  EXPECT_EQ(Kernel(c, "dot.2"), nullptr);
  EXPECT_NE(Kernel(c, "gemm_kernel"), nullptr);
}

TEST(CpuReaderTest, DamagedHloIsAWarningAndTheOpsAreStillRead) {
  xp::XSpace space = CpuSpace(true, 100);
  auto& program = (*space.mutable_planes(0)->mutable_event_metadata())[1];
  program.mutable_stats(0)->set_bytes_value(std::string("\x0a\x7f", 2));  // length past the end
  HostCapture c = Read(space);
  ASSERT_NE(Kernel(c, "dot.2"), nullptr);
  bool warned = false;
  for (const std::string& w : c.warnings) warned |= w.find("/host:metadata") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST(HloProtoTest, CollectiveOpcodes) {
  EXPECT_TRUE(IsCollectiveOpcode("all-reduce"));
  EXPECT_TRUE(IsCollectiveOpcode("all-gather-start"));
  EXPECT_TRUE(IsCollectiveOpcode("collective-permute"));
  EXPECT_FALSE(IsCollectiveOpcode("fusion"));
  EXPECT_FALSE(IsCollectiveOpcode("all-reduce-done"));
}

}  // namespace
}  // namespace podprof::trace
