// The simulator's multi-slice job (issue #56, docs/MEGASCALE.md "podprof's multi-slice
// layout"): ICI collectives per slice, the DCN ring's four ops per rendezvous and their timing,
// the injected DCN faults, and what the XSpace says of them.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/skewed_clock.h"
#include "gtest/gtest.h"
#include "sim/dcn_program.h"
#include "sim/pod_model.h"
#include "sim/xspace_builder.h"
#include "tests/util/status_matchers.h"
#include "trace/byte_source.h"
#include "trace/hlo_proto.h"
#include "trace/varint.h"
#include "trace/xspace_reader.h"
#include "trace/xspace_schema.h"

namespace podprof::sim {
namespace {

constexpr int64_t kUsPs = 1'000'000;

PodConfig Pod(int hosts, int slices, int index = 0) {
  PodConfig c;
  c.generation = "v5e";
  c.chips = 4;
  c.hosts = hosts;
  c.slices = slices;
  c.host_index = index;
  c.pod_seed = 11;
  return c;
}

// Every host's step `step`, by pod-wide chip id.
std::vector<ChipStep> PodStep(const PodConfig& pod, int64_t step) {
  std::vector<ChipStep> all;
  for (int h = 0; h < pod.hosts; ++h) {
    PodConfig c = pod;
    c.host_index = h;
    auto m = PodModel::Create(c);
    EXPECT_OK(m);
    for (ChipStep& cs : m->Step(step)) all.push_back(std::move(cs));
  }
  return all;
}

// The run of op `name` on a chip, or null.
const OpRun* RunOf(const PodModel& m, const ChipStep& cs, const std::string& name) {
  for (const OpRun& r : cs.runs) {
    if (m.ops()[r.op].name == name) return &r;
  }
  return nullptr;
}

int64_t EndOf(const OpRun& r) { return r.start_ps + r.duration_ps; }

TEST(MultiSliceTest, OneSliceHasNoDcnPhase) {
  auto one = PodModel::Create(Pod(4, 1)), plain = PodModel::Create(Pod(4, 1));
  ASSERT_OK(one);
  for (const OpTemplate& op : one->ops()) EXPECT_EQ(op.dcn, DcnRole::kNone) << op.name;
  const StepSchedule s = one->Schedule(3);
  EXPECT_TRUE(s.dcn_arrivals.empty());
  EXPECT_EQ(s.collective_ends.size(), static_cast<size_t>(s.collectives));
  EXPECT_EQ(one->slices(), 1);
  EXPECT_EQ(one->hosts_per_slice(), 4);
}

TEST(MultiSliceTest, RingPairsAndTheFourOpsInOrder) {
  const PodConfig pod = Pod(8, 4, 3);  // 2 hosts x 4 chips per slice, 32 chips
  auto m = PodModel::Create(pod);
  ASSERT_OK(m);
  EXPECT_EQ(m->slice(), 1);
  EXPECT_EQ(m->chips_per_slice(), 8);
  EXPECT_EQ(m->DcnDestination(5), 13);
  EXPECT_EQ(m->DcnDestination(29), 5);  // the last slice sends to the first
  EXPECT_EQ(m->DcnSource(5), 29);
  EXPECT_EQ(m->DcnSource(13), 5);
  EXPECT_EQ(DcnSourceTargetPairs(32, 8).substr(0, 24), "{{0,8},{1,9},{2,10},{3,1");
  const std::vector<std::string> names = {"send.101", "recv.101", "send-done.101", "recv-done.101",
                                          "send.102", "recv.102", "send-done.102", "recv-done.102"};
  const std::vector<std::string> categories = {"host send", "host recv", "host send-done",
                                               "host recv-done"};
  for (const ChipStep& cs : m->Step(17)) {
    std::vector<const OpRun*> dcn;
    for (const OpRun& r : cs.runs) {
      if (m->ops()[r.op].dcn != DcnRole::kNone) dcn.push_back(&r);
    }
    ASSERT_EQ(dcn.size(), 8u);
    for (size_t i = 0; i < dcn.size(); ++i) {
      const OpTemplate& op = m->ops()[dcn[i]->op];
      EXPECT_EQ(op.name, names[i]);
      EXPECT_EQ(op.category, categories[i % 4]);
      EXPECT_EQ(op.rendezvous_name, absl::StrCat("dcn_grads.", i / 4));
      EXPECT_EQ(dcn[i]->collective_id, 0u);
      if (i > 0) {
        EXPECT_GT(dcn[i]->start_ps, EndOf(*dcn[i - 1])) << op.name;
      }
    }
    // After the backward pass, before the loss' all-reduce.
    EXPECT_GT(dcn[0]->start_ps, EndOf(*RunOf(*m, cs, "reduce-scatter.0")));
    EXPECT_LT(EndOf(*dcn[7]), RunOf(*m, cs, "all-reduce.0")->start_ps);
    // send and recv issue in a few us; the buffer leaves in ~170 us.
    EXPECT_LT(dcn[0]->duration_ps, 4 * kUsPs);
    EXPECT_GT(EndOf(*dcn[2]) - dcn[0]->start_ps, 140 * kUsPs);
    EXPECT_LT(EndOf(*dcn[2]) - dcn[0]->start_ps, 200 * kUsPs);
  }
}

TEST(MultiSliceTest, ReceiverWaitsForItsSourceInThePreviousSlice) {
  const PodConfig pod = Pod(4, 2);
  auto m = PodModel::Create(pod);
  ASSERT_OK(m);
  for (int64_t step : {0, 9, 12345}) {
    const std::vector<ChipStep> all = PodStep(pod, step);
    for (size_t g = 0; g < all.size(); ++g) {
      const ChipStep& src = all[m->DcnSource(static_cast<int64_t>(g))];
      for (const char* r : {"101", "102"}) {
        const OpRun* send_done = RunOf(*m, src, absl::StrCat("send-done.", r));
        const OpRun* recv_done = RunOf(*m, all[g], absl::StrCat("recv-done.", r));
        // The data left with the send-done at the latest, then crossed the network (34 us at
        // least), then was copied.
        EXPECT_GE(EndOf(*recv_done), EndOf(*send_done) + 34 * kUsPs) << g << " " << r;
      }
    }
  }
}

TEST(MultiSliceTest, IciCollectivesSynchroniseOneSlice) {
  const PodConfig pod = Pod(4, 2);
  const std::vector<ChipStep> all = PodStep(pod, 7);
  auto m = PodModel::Create(pod);
  ASSERT_OK(m);
  int collectives = 0, differ_between_slices = 0;
  for (size_t i = 0; i < all[0].runs.size(); ++i) {
    if (all[0].runs[i].collective_id == 0) continue;
    ++collectives;
    for (size_t g = 0; g < all.size(); ++g) {
      const ChipStep& ref = all[g < 8 ? 0 : 8];  // chip 0 of the chip's slice
      EXPECT_EQ(all[g].runs[i].collective_id, ref.runs[i].collective_id);
      EXPECT_EQ(EndOf(all[g].runs[i]), EndOf(ref.runs[i]));
    }
    EXPECT_NE(all[0].runs[i].collective_id, all[8].runs[i].collective_id);
    differ_between_slices += EndOf(all[0].runs[i]) != EndOf(all[8].runs[i]);
  }
  EXPECT_EQ(collectives, 9);
  EXPECT_GT(differ_between_slices, 0);
  for (const ChipStep& cs : all) EXPECT_LT(cs.busy_end_ps, m->step_period_ns() * 1000);
}

TEST(MultiSliceTest, SharedScheduleGivesEveryHostItsOwnStep) {
  auto h0 = PodModel::Create(Pod(8, 4, 0)), h5 = PodModel::Create(Pod(8, 4, 5));
  ASSERT_OK(h0);
  ASSERT_OK(h5);
  const StepSchedule schedule = h0->Schedule(21);
  EXPECT_EQ(schedule.dcn_arrivals.size(), 32u * kDcnRendezvous);
  EXPECT_EQ(schedule.collective_ends.size(), 4u * schedule.collectives);
  std::vector<ChipStep> alone = h5->Step(21), shared = h5->Step(21, schedule);
  for (size_t c = 0; c < alone.size(); ++c) {
    ASSERT_EQ(alone[c].runs.size(), shared[c].runs.size());
    for (size_t i = 0; i < alone[c].runs.size(); ++i) {
      EXPECT_EQ(alone[c].runs[i].start_ps, shared[c].runs[i].start_ps);
      EXPECT_EQ(alone[c].runs[i].duration_ps, shared[c].runs[i].duration_ps);
    }
  }
}

// The delayed link's receivers wait about the delay longer in the first rendezvous; everyone
// else's first rendezvous is untouched (the second then shows its late producer a slice on).
TEST(MultiSliceTest, DcnDelayLengthensOnlyTheDelayedLinksRecvDone) {
  PodConfig delayed = Pod(4, 4);  // one host per slice
  delayed.dcn_delays.push_back({1, 500'000, INT64_MIN});
  auto base_model = PodModel::Create(Pod(4, 4));
  ASSERT_OK(base_model);
  const std::vector<ChipStep> base = PodStep(Pod(4, 4), 5), with = PodStep(delayed, 5);
  for (size_t g = 0; g < base.size(); ++g) {
    const int slice = static_cast<int>(g / 4);
    const int64_t b = RunOf(*base_model, base[g], "recv-done.101")->duration_ps;
    const int64_t w = RunOf(*base_model, with[g], "recv-done.101")->duration_ps;
    if (slice == 2) {
      EXPECT_GE(w - b, 450 * kUsPs) << g;
      EXPECT_LE(w - b, 500 * kUsPs) << g;
    } else {
      EXPECT_EQ(w, b) << g;
    }
  }
  auto with_model = PodModel::Create(delayed);
  ASSERT_OK(with_model);
  EXPECT_GE(with_model->step_period_ns(), base_model->step_period_ns() + 1'000'000);
}

TEST(MultiSliceTest, SlowSliceSendsLate) {
  PodConfig slow = Pod(4, 4);
  slow.slow_slices.push_back({3, 1.5, INT64_MIN});
  auto m = PodModel::Create(Pod(4, 4));
  ASSERT_OK(m);
  const std::vector<ChipStep> base = PodStep(Pod(4, 4), 8), with = PodStep(slow, 8);
  for (size_t g = 0; g < base.size(); ++g) {
    const int slice = static_cast<int>(g / 4);
    const int64_t b = RunOf(*m, base[g], "send.101")->start_ps;
    const int64_t w = RunOf(*m, with[g], "send.101")->start_ps;
    if (slice == 3) {
      EXPECT_GT(w, b * 13 / 10) << g;
    } else {
      EXPECT_EQ(w, b) << g;
    }
    // Slice 0 receives from slice 3: it waits for the late producer.
    const int64_t wait_b = RunOf(*m, base[g], "recv-done.101")->duration_ps;
    const int64_t wait_w = RunOf(*m, with[g], "recv-done.101")->duration_ps;
    if (slice == 0) {
      EXPECT_GT(wait_w, wait_b + 300 * kUsPs) << g;
    }
  }
}

TEST(MultiSliceTest, BadConfigsAreClear) {
  const auto message = [](const PodConfig& c) {
    return std::string(PodModel::Create(c).status().message());
  };
  EXPECT_TRUE(absl::StrContains(message(Pod(6, 4)), "6 hosts do not split into 4 slices"));
  EXPECT_TRUE(absl::StrContains(message(Pod(4, 0)), "slices"));
  PodConfig d = Pod(4, 2);
  d.dcn_delays.push_back({2, 1000, 0});
  EXPECT_TRUE(absl::StrContains(message(d), "DCN delay 2:"));
  d.dcn_delays = {{0, -5, 0}};
  EXPECT_TRUE(absl::StrContains(message(d), "negative"));
  PodConfig one = Pod(4, 1);
  one.dcn_delays.push_back({0, 1000, 0});
  EXPECT_TRUE(absl::StrContains(message(one), "multi-slice"));
  PodConfig s = Pod(4, 2);
  s.slow_slices.push_back({1, 0, 0});
  EXPECT_TRUE(absl::StrContains(message(s), "slow slice 1:0"));
}

// --- The XSpace ---------------------------------------------------------------------------

// A protobuf message's fields by number: varints as numbers, length-delimited as bytes.
struct Fields {
  std::multimap<uint32_t, uint64_t> ints;
  std::multimap<uint32_t, std::string> bytes;
  std::string Bytes(uint32_t f) const {
    auto it = bytes.find(f);
    return it == bytes.end() ? "" : it->second;
  }
  uint64_t Int(uint32_t f) const {
    auto it = ints.find(f);
    return it == ints.end() ? 0 : it->second;
  }
  std::vector<std::string> All(uint32_t f) const {
    std::vector<std::string> out;
    for (auto [it, end] = bytes.equal_range(f); it != end; ++it) out.push_back(it->second);
    return out;
  }
};

Fields Walk(absl::string_view msg) {
  Fields out;
  while (!msg.empty()) {
    uint64_t tag = 0, v = 0;
    if (!trace::GetVarint(&msg, &tag)) ADD_FAILURE() << "bad tag";
    if ((tag & 7) == 0) {
      if (!trace::GetVarint(&msg, &v)) ADD_FAILURE() << "bad varint";
      out.ints.emplace(static_cast<uint32_t>(tag >> 3), v);
    } else if ((tag & 7) == 2) {
      if (!trace::GetVarint(&msg, &v) || v > msg.size()) {
        ADD_FAILURE() << "bad length";
        return out;
      }
      out.bytes.emplace(static_cast<uint32_t>(tag >> 3), std::string(msg.substr(0, v)));
      msg.remove_prefix(v);
    } else {
      ADD_FAILURE() << "unexpected wire type " << (tag & 7);
      return out;
    }
  }
  return out;
}

const tensorflow::profiler::XPlane* PlaneNamed(const tensorflow::profiler::XSpace& space,
                                               absl::string_view name) {
  for (const auto& p : space.planes()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

// The stat named `name` of event metadata `m` of `plane`, or null.
const tensorflow::profiler::XStat* StatOf(const tensorflow::profiler::XPlane& plane,
                                          const tensorflow::profiler::XEventMetadata& m,
                                          absl::string_view name) {
  for (const auto& s : m.stats()) {
    auto it = plane.stat_metadata().find(s.metadata_id());
    if (it != plane.stat_metadata().end() && it->second.name() == name) return &s;
  }
  return nullptr;
}

BuildResult Build(const PodModel& m, FakeClock& truth) {
  const SkewedClock host(truth, 0, 0);
  SessionWindow w;
  w.true_start_ns = truth.NowNs();
  w.true_end_ns = w.true_start_ns + 50'000'000;
  w.host_name = "sim-ms";
  return BuildXSpace(m, host, w);
}

TEST(MultiSliceXSpaceTest, DcnOpsHloTextCollectiveInfoAndHostPlanes) {
  auto m = PodModel::Create(Pod(4, 2, 3));  // 8 chips per slice, 16 chips; host 3 in slice 1
  ASSERT_OK(m);
  FakeClock truth(1'800'000'000'000'000'000);
  const BuildResult built = Build(*m, truth);
  const auto* tpu = PlaneNamed(built.space, "/device:TPU:0");
  ASSERT_NE(tpu, nullptr);
  const std::string pairs =
      "{{0,8},{1,9},{2,10},{3,11},{4,12},{5,13},{6,14},{7,15},{8,0},{9,1},{10,2},{11,3},"
      "{12,4},{13,5},{14,6},{15,7}}";
  const std::string attributes = absl::StrCat(
      "frontend_attributes={_xla_host_transfer_rendezvous=\"dcn_grads.0\","
      "_xla_megascale_transfer_type=\"ONE_TO_ONE\",_xla_send_recv_source_target_pairs=\"",
      pairs, "\"}");
  const std::map<std::string, std::pair<std::string, std::string>> want = {
      {"send.101",
       {"host send",
        "%send.101 = (bf16[524288]{0}, u32[], token[]) send(bf16[524288]{0} %reduce-scatter.0, "
        "token[] %after-all.101), channel_id=101, is_host_transfer=true, " +
            attributes}},
      {"recv.101",
       {"host recv",
        "%recv.101 = (bf16[524288]{0}, u32[], token[]) recv(token[] %after-all.101), "
        "channel_id=101, is_host_transfer=true, " +
            attributes}},
      {"send-done.101",
       {"host send-done",
        "%send-done.101 = token[] send-done((bf16[524288]{0}, u32[], token[]) %send.101), "
        "channel_id=101, is_host_transfer=true, " +
            attributes}},
      {"recv-done.101",
       {"host recv-done",
        "%recv-done.101 = (bf16[524288]{0}, token[]) recv-done((bf16[524288]{0}, u32[], "
        "token[]) %recv.101), channel_id=101, is_host_transfer=true, " +
            attributes}},
  };
  int seen = 0;
  std::map<int64_t, std::string> display_by_id;
  for (const auto& [id, meta] : tpu->event_metadata()) {
    display_by_id[id] = meta.display_name();
    auto it = want.find(meta.display_name());
    if (it == want.end()) continue;
    ++seen;
    EXPECT_EQ(meta.name(), it->second.second);
    const auto* category = StatOf(*tpu, meta, "hlo_category");
    ASSERT_NE(category, nullptr);
    EXPECT_EQ(category->str_value(), it->second.first);
    const auto* info = StatOf(*tpu, meta, "dcn_collective_info");
    EXPECT_EQ(info != nullptr, meta.display_name() == "send.101");
    if (info == nullptr) continue;
    // DcnCollectiveInfoProto: ONE_TO_ONE, a group per pair, endpoints {slice, device in slice}.
    const Fields proto = Walk(info->bytes_value());
    EXPECT_EQ(proto.Int(1), 2u);
    const std::vector<std::string> groups = proto.All(3);
    ASSERT_EQ(groups.size(), 16u);
    const Fields g11 = Walk(groups[11]);  // chip 11 (slice 1, device 3) -> chip 3 (slice 0)
    EXPECT_EQ(Walk(g11.Bytes(1)).Int(1), 1u);
    EXPECT_EQ(Walk(g11.Bytes(1)).Int(2), 3u);
    EXPECT_EQ(Walk(g11.Bytes(2)).Int(1), 0u);
    EXPECT_EQ(Walk(g11.Bytes(2)).Int(2), 3u);
  }
  EXPECT_EQ(seen, 4);
  // The ops on the XLA Ops line, in the doc's order, inside their module's events.
  std::vector<std::string> order;
  for (const auto& line : tpu->lines()) {
    if (line.name() == "XLA Modules") {
      ASSERT_GT(line.events_size(), 0);
      for (const auto& e : line.events()) {
        EXPECT_EQ(tpu->event_metadata().at(e.metadata_id()).name(),
                  absl::StrCat("jit_train_step(", m->program_id(), ")"));
      }
    }
    if (line.name() != "XLA Ops") continue;
    for (const auto& e : line.events()) {
      const std::string& d = display_by_id[e.metadata_id()];
      if (absl::StrContains(d, ".10")) order.push_back(d);
    }
  }
  ASSERT_GE(order.size(), 8u);
  const size_t first = std::find(order.begin(), order.end(), "send.101") - order.begin();
  ASSERT_LE(first + 8, order.size());
  EXPECT_EQ(order[first + 1], "recv.101");
  EXPECT_EQ(order[first + 2], "send-done.101");
  EXPECT_EQ(order[first + 3], "recv-done.101");
  EXPECT_EQ(order[first + 4], "send.102");

  // /host:CPU: XProf's megascale gate.
  const auto* cpu = PlaneNamed(built.space, trace::xspace::kHostCpuPlane);
  ASSERT_NE(cpu, nullptr);
  bool megascale = false;
  for (const auto& [id, meta] : cpu->event_metadata()) {
    megascale |= absl::StartsWith(meta.name(), trace::xspace::kMegaScalePrefix);
  }
  EXPECT_TRUE(megascale);

  // /host:metadata: the program's HloProto, read by podprof's reader and walked by hand.
  const auto* md = PlaneNamed(built.space, trace::xspace::kHostMetadataPlane);
  ASSERT_NE(md, nullptr);
  ASSERT_EQ(md->event_metadata_size(), 1);
  const auto& program = md->event_metadata().begin()->second;
  const auto* id = StatOf(*md, program, "program_id");
  ASSERT_NE(id, nullptr);
  EXPECT_EQ(id->uint64_value(), m->program_id());
  const auto* hlo = StatOf(*md, program, "Hlo Proto");
  ASSERT_NE(hlo, nullptr);
  trace::HloModuleOps ops;
  ASSERT_OK(trace::ReadHloModuleOps(hlo->bytes_value(), &ops));
  EXPECT_EQ(ops.name, "jit_train_step");
  EXPECT_EQ(ops.ops.at("send.101").opcode, "send");
  EXPECT_EQ(ops.ops.at("recv-done.102").opcode, "recv-done");
  EXPECT_EQ(ops.ops.at("send-done.102").opcode, "send-done");
  EXPECT_EQ(ops.ops.at("recv.101").opcode, "recv");
  const Fields module = Walk(Walk(hlo->bytes_value()).Bytes(1));
  EXPECT_EQ(module.Bytes(2), "main");  // entry computation name
  EXPECT_NE(module.Bytes(4), "");      // host program shape
  const Fields entry = Walk(module.Bytes(3));
  std::map<std::string, Fields> by_name;
  for (const std::string& in : entry.All(2)) {
    Fields f = Walk(in);
    by_name[f.Bytes(1)] = f;
  }
  const Fields& send = by_name.at("send.101");
  EXPECT_EQ(send.Int(26), 101u);  // channel_id
  EXPECT_EQ(send.Int(47), 1u);    // is_host_transfer
  std::map<std::string, std::string> attrs;
  for (const std::string& entry_bytes : Walk(send.Bytes(68)).All(1)) {
    const Fields kv = Walk(entry_bytes);
    attrs[kv.Bytes(1)] = kv.Bytes(2);
  }
  EXPECT_EQ(attrs["_xla_host_transfer_rendezvous"], "dcn_grads.0");
  EXPECT_EQ(attrs["_xla_megascale_transfer_type"], "ONE_TO_ONE");
  EXPECT_EQ(attrs["_xla_send_recv_source_target_pairs"], pairs);
  // recv-done's shape: (bf16[524288], token[]), so XProf's size is the array's 1 MiB.
  const Fields shape = Walk(by_name.at("recv-done.102").Bytes(3));
  EXPECT_EQ(shape.Int(2), 13u);  // TUPLE
  const std::vector<std::string> elements = shape.All(4);
  ASSERT_EQ(elements.size(), 2u);
  EXPECT_EQ(Walk(elements[0]).Int(2), 16u);  // BF16
  EXPECT_EQ(Walk(elements[1]).Int(2), 17u);  // TOKEN
  EXPECT_EQ(by_name.at("recv-done.102").Int(26), 102u);

  // podprof's reader reads it, the host-transfer ops among the kernels.
  const std::string bytes = built.space.SerializeAsString();
  trace::MemorySource src(bytes);
  auto capture = trace::ReadXSpace(src);
  ASSERT_OK(capture);
  int host_transfers = 0;
  for (const trace::KernelDef& k : capture->kernels) {
    host_transfers += absl::StartsWith(k.category, "host ");
  }
  EXPECT_EQ(host_transfers, 8);
}

TEST(MultiSliceXSpaceTest, OneSliceWritesNoDcnPlanes) {
  auto m = PodModel::Create(Pod(2, 1, 1));
  ASSERT_OK(m);
  FakeClock truth(1'800'000'000'000'000'000);
  const BuildResult built = Build(*m, truth);
  EXPECT_EQ(PlaneNamed(built.space, trace::xspace::kHostMetadataPlane), nullptr);
  const auto* cpu = PlaneNamed(built.space, trace::xspace::kHostCpuPlane);
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->event_metadata_size(), 1);
  const auto* tpu = PlaneNamed(built.space, "/device:TPU:0");
  for (const auto& [id, meta] : tpu->stat_metadata()) EXPECT_NE(meta.name(), "dcn_collective_info");
}

}  // namespace
}  // namespace podprof::sim
