// The Megascale runtime's action graph (`/device:CUSTOM:Megascale Trace`) read as counter series
// of the host's TPU chips (trace/megascale_trace.h), on captures built by hand in the layout of
// docs/MEGASCALE.md ("The runtime's action graph"): names, chips, times on both kinds of line
// time, values, budgets from the action graph, the raw-id-to-chip pairing, and damaged planes.
#include "trace/megascale_trace.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/xplane.pb.h"
#include "tests/util/status_matchers.h"
#include "trace/byte_source.h"
#include "trace/xspace_reader.h"

namespace podprof::trace {
namespace {

namespace xp = tensorflow::profiler;

constexpr int64_t kStartNs = 1'767'225'600'000'000'000;
constexpr char kPlane[] = "/device:CUSTOM:Megascale Trace";

// Names a plane's stats and events on first use, as the profiler does.
class PlaneBuilder {
 public:
  PlaneBuilder(xp::XSpace* space, const std::string& name) : plane_(space->add_planes()) {
    plane_->set_name(name);
  }
  int64_t StatId(const std::string& name) {
    auto [it, fresh] = stats_.try_emplace(name, static_cast<int64_t>(stats_.size()) + 1);
    if (fresh) (*plane_->mutable_stat_metadata())[it->second].set_name(name);
    return it->second;
  }
  xp::XEventMetadata& Meta(const std::string& name) {
    auto [it, fresh] = metas_.try_emplace(name, static_cast<int64_t>(metas_.size()) + 1);
    xp::XEventMetadata& m = (*plane_->mutable_event_metadata())[it->second];
    if (fresh) {
      m.set_id(it->second);
      m.set_name(name);
    }
    return m;
  }
  xp::XStat* Stat(xp::XEvent* ev, const std::string& name) {
    xp::XStat* s = ev->add_stats();
    s->set_metadata_id(StatId(name));
    return s;
  }
  xp::XLine* Line(const std::string& name, int64_t timestamp_ns) {
    xp::XLine* line = plane_->add_lines();
    line->set_id(plane_->lines_size());
    line->set_name(name);
    line->set_timestamp_ns(timestamp_ns);
    return line;
  }
  xp::XEvent* Event(xp::XLine* line, const std::string& meta, int64_t offset_ps,
                    int64_t duration_ps) {
    xp::XEvent* ev = line->add_events();
    ev->set_metadata_id(Meta(meta).id());
    ev->set_offset_ps(offset_ps);
    ev->set_duration_ps(duration_ps);
    return ev;
  }
  xp::XPlane* plane() { return plane_; }

 private:
  xp::XPlane* plane_;
  std::map<std::string, int64_t> stats_, metas_;
};

std::string Key(int64_t raw_id, const std::string& rendezvous, int k) {
  return absl::StrCat("device_", raw_id, "_gid_", rendezvous, "$1^i", k);
}

// The three events of one rendezvous instance of one chip, as the simulator writes them: the
// action graph from `start_ps` for 200 us (with its budgets unless negative), the send, and
// the receive ending at `receive_end_ps` (1 us long) with its latency.
void Instance(PlaneBuilder& p, xp::XLine* line, int64_t raw_id, const std::string& rendezvous,
              int k, int64_t start_ps, int64_t receive_end_ps, uint64_t latency_us,
              int64_t transmission_us, int64_t delay_us) {
  const std::string key = Key(raw_id, rendezvous, k);
  xp::XEvent* graph = p.Event(line, absl::StrCat("device_", raw_id, "_gid_", rendezvous, "_0"),
                              start_ps, 200'000'000);
  p.Stat(graph, "graph_key")->set_str_value(key);
  p.Stat(graph, "input_size")->set_uint64_value(4096);
  if (transmission_us >= 0) {
    p.Stat(graph, "transmission_budget_us")->set_uint64_value(transmission_us);
  }
  if (delay_us >= 0) p.Stat(graph, "delay_budget_us")->set_uint64_value(delay_us);
  xp::XEvent* send = p.Event(line, "NetworkSend END", start_ps + 10'000'000, 1'000'000);
  p.Stat(send, "graph_key")->set_str_value(key);
  p.Stat(send, "action_index")->set_int64_value(1);
  p.Stat(send, "action_duration_ns")->set_uint64_value(3000);
  xp::XEvent* receive = p.Event(line, "NetworkReceive END", receive_end_ps - 1'000'000, 1'000'000);
  p.Stat(receive, "graph_key")->set_str_value(key);
  p.Stat(receive, "action_index")->set_int64_value(2);
  p.Stat(receive, "network_transport_latency_us")->set_uint64_value(latency_us);
  p.Stat(receive, "buffer_sizes")
      ->set_str_value(absl::StrCat("s", raw_id - 100000 + 200000, "->", raw_id, "d|$c0=4096"));
  p.Stat(receive, "is_last_instance")->set_int64_value(1);
}

// The receive of instance k of a chip ends at this offset from its line's start, ps.
int64_t ReceiveEndPs(int64_t raw_id, int rendezvous, int k) {
  return int64_t{1'000'000'000} * (k + 1) + int64_t{300'000'000} * rendezvous +
         1000 * (raw_id % 10) + 123'456;
}

void AddTpuPlane(xp::XSpace* space, int ordinal) {
  PlaneBuilder tpu(space, absl::StrCat("/device:TPU:", ordinal));
  tpu.Event(tpu.Line("XLA Ops", 0), "fusion.1", 1'000'000, 5'000'000);
}

// A host of chips TPU:1 and TPU:0 (in that order in the file), the Megascale plane first with
// the lines of raw ids 100001 and 100000, two rendezvous (dcn_grads.0 with a delay budget of
// 100 us, dcn_grads.1 with 0), three instances each, receives in time order except the last.
// `line_ns`: the Megascale lines' timestamp; `task_environment`: whether the capture has one
// (its line times are then relative to the profile's start unless absolute themselves).
xp::XSpace TwoChipHost(int64_t line_ns, bool task_environment) {
  xp::XSpace space;
  space.add_hostnames("slice1-host0");
  {
    PlaneBuilder ms(&space, kPlane);
    for (int64_t raw_id : {100001, 100000}) {
      xp::XLine* line = ms.Line(absl::StrCat("Megascale device ", raw_id), line_ns);
      for (int k : {0, 2, 1}) {
        for (int r = 0; r < 2; ++r) {
          const int64_t end = ReceiveEndPs(raw_id, r, k);
          Instance(ms, line, raw_id, absl::StrCat("dcn_grads.", r), k, end - 300'000'000, end,
                   40 + k + 10 * r, 60, r == 0 ? 100 : 0);
        }
      }
    }
  }
  AddTpuPlane(&space, 1);
  AddTpuPlane(&space, 0);
  if (task_environment) {
    PlaneBuilder env(&space, "Task Environment");
    xp::XStat* start = env.plane()->add_stats();
    start->set_metadata_id(env.StatId("profile_start_time"));
    start->set_uint64_value(kStartNs);
    xp::XStat* stop = env.plane()->add_stats();
    stop->set_metadata_id(env.StatId("profile_stop_time"));
    stop->set_uint64_value(kStartNs + 10'000'000'000);
  }
  return space;
}

absl::StatusOr<HostCapture> Read(const xp::XSpace& space) {
  const std::string bytes = space.SerializeAsString();
  MemorySource source(bytes);
  return ReadXSpace(source);
}

const CounterSeries* Find(const HostCapture& c, int chip, const std::string& name) {
  for (const CounterSeries& s : c.counters) {
    if (s.chip == chip && s.name == name) return &s;
  }
  return nullptr;
}

std::vector<const CounterSeries*> Megascale(const HostCapture& c) {
  std::vector<const CounterSeries*> out;
  for (const CounterSeries& s : c.counters) {
    if (absl::StartsWith(s.name, "megascale/")) out.push_back(&s);
  }
  return out;
}

int Warnings(const HostCapture& c, const std::string& part) {
  int n = 0;
  for (const std::string& w : c.warnings) n += absl::StrContains(w, part) ? 1 : 0;
  return n;
}

// The chip index of TPU:<ordinal>.
int ChipOf(const HostCapture& c, int ordinal) {
  for (size_t i = 0; i < c.host.chips.size(); ++i) {
    if (c.host.chips[i].ordinal == ordinal) return static_cast<int>(i);
  }
  return -1;
}

// Every series of both chips, by name, each sampled at every receive's end (on `base_ns`, the
// lines' start on the host's clock) with the values written.
void ExpectTwoChipSeries(const HostCapture& c, int64_t base_ns) {
  ASSERT_EQ(c.host.chips.size(), 2u) << "the Megascale plane is no chip";
  EXPECT_TRUE(c.warnings.empty()) << c.warnings[0];
  EXPECT_EQ(Megascale(c).size(), 2u * 2 * 3);
  // Raw ids sorted, paired with the chips sorted by ordinal: 100000 is TPU:0 (chip index 1,
  // its plane second in the file).
  for (int64_t raw_id : {100000, 100001}) {
    const int chip = ChipOf(c, static_cast<int>(raw_id - 100000));
    for (int r = 0; r < 2; ++r) {
      const std::string prefix = absl::StrCat("megascale/dcn_grads.", r, "/");
      const CounterSeries* latency = Find(c, chip, prefix + "network_transport_latency_us");
      const CounterSeries* transmission = Find(c, chip, prefix + "transmission_budget_us");
      const CounterSeries* delay = Find(c, chip, prefix + "delay_budget_us");
      ASSERT_NE(latency, nullptr) << raw_id << " " << prefix;
      ASSERT_NE(transmission, nullptr) << raw_id << " " << prefix;
      ASSERT_NE(delay, nullptr) << raw_id << " " << prefix;
      std::vector<int64_t> times;
      std::vector<double> latencies;
      for (int k = 0; k < 3; ++k) {  // written 0, 2, 1: read in time order
        times.push_back(base_ns + ReceiveEndPs(raw_id, r, k) / 1000);
        latencies.push_back(40 + k + 10 * r);
      }
      EXPECT_EQ(latency->time_ns, times) << raw_id << " " << prefix;
      EXPECT_EQ(latency->value, latencies);
      EXPECT_EQ(transmission->time_ns, times);
      EXPECT_EQ(transmission->value, std::vector<double>(3, 60));
      EXPECT_EQ(delay->time_ns, times);
      EXPECT_EQ(delay->value, std::vector<double>(3, r == 0 ? 100 : 0));
      EXPECT_EQ(latency->kind(), CounterKind::kGauge);
    }
  }
}

TEST(MegascaleTraceTest, LineTimesRelativeToTheProfileStart) {
  auto c = Read(TwoChipHost(/*line_ns=*/0, /*task_environment=*/true));
  ASSERT_OK(c);
  ExpectTwoChipSeries(*c, kStartNs);
}

TEST(MegascaleTraceTest, AbsoluteLineTimes) {
  // Without a Task Environment line times are the host's clock; with one, a line time past
  // xspace::kAbsoluteLineTimestampNs is absolute already (as on the device planes).
  const int64_t line_ns = kStartNs + 5'000;
  auto bare = Read(TwoChipHost(line_ns, /*task_environment=*/false));
  ASSERT_OK(bare);
  ExpectTwoChipSeries(*bare, line_ns);
  auto with_env = Read(TwoChipHost(line_ns, /*task_environment=*/true));
  ASSERT_OK(with_env);
  ExpectTwoChipSeries(*with_env, line_ns);
  // A relative line time of the same capture: the profile start added.
  auto relative = Read(TwoChipHost(7'000, /*task_environment=*/true));
  ASSERT_OK(relative);
  ExpectTwoChipSeries(*relative, kStartNs + 7'000);
}

// The series' times are the device lines' own: a kernel at the same offset starts where the
// reader puts the block's events.
TEST(MegascaleTraceTest, TimesAgreeWithTheDeviceLines) {
  xp::XSpace space = TwoChipHost(0, true);
  auto c = Read(space);
  ASSERT_OK(c);
  ASSERT_FALSE(c->blocks.empty());
  EXPECT_EQ(c->blocks[0].base_ns, kStartNs);
}

TEST(MegascaleTraceTest, TheReceivesOwnBudgetWinsAndNoneMeansNoSample) {
  xp::XSpace space;
  {
    PlaneBuilder ms(&space, kPlane);
    xp::XLine* line = ms.Line("Megascale device 100000", 0);
    // Instance 0: the graph's budgets; instance 1: the receive's own transmission budget;
    // rendezvous "quiet": no budget anywhere.
    Instance(ms, line, 100000, "ar", 0, 0, 2'000'000'000, 41, 60, 100);
    Instance(ms, line, 100000, "ar", 1, 3'000'000'000, 5'000'000'000, 42, 60, 100);
    ms.Stat(line->mutable_events(line->events_size() - 1), "transmission_budget_us")
        ->set_int64_value(75);  // int64 tolerated
    Instance(ms, line, 100000, "quiet", 0, 0, 2'500'000'000, 43, -1, -1);
  }
  AddTpuPlane(&space, 0);
  auto c = Read(space);
  ASSERT_OK(c);
  EXPECT_TRUE(c->warnings.empty()) << c->warnings[0];
  const CounterSeries* t = Find(*c, 0, "megascale/ar/transmission_budget_us");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->value, (std::vector<double>{60, 75}));
  const CounterSeries* d = Find(*c, 0, "megascale/ar/delay_budget_us");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->value, (std::vector<double>{100, 100}));
  EXPECT_NE(Find(*c, 0, "megascale/quiet/network_transport_latency_us"), nullptr);
  EXPECT_EQ(Find(*c, 0, "megascale/quiet/transmission_budget_us"), nullptr);
  EXPECT_EQ(Find(*c, 0, "megascale/quiet/delay_budget_us"), nullptr);
  EXPECT_EQ(Megascale(*c).size(), 4u);
}

// A graph_key given as a ref to stat metadata, as writers do for repeated strings, and one on
// the event's metadata: read as the event's own.
TEST(MegascaleTraceTest, GraphKeyAsRefOrOnTheMetadata) {
  xp::XSpace space;
  {
    PlaneBuilder ms(&space, kPlane);
    xp::XLine* line = ms.Line("Megascale device 100000", 0);
    xp::XEvent* ref = ms.Event(line, "NetworkReceive END", 1'000'000, 1'000'000);
    ms.Stat(ref, "graph_key")->set_ref_value(ms.StatId(Key(100000, "by_ref", 0)));
    ms.Stat(ref, "network_transport_latency_us")->set_uint64_value(50);
    xp::XEventMetadata& m = ms.Meta("device_100000_gid_on_meta_0");
    xp::XStat* key = m.add_stats();
    key->set_metadata_id(ms.StatId("graph_key"));
    key->set_str_value(Key(100000, "on_meta", 0));
    xp::XStat* budget = m.add_stats();
    budget->set_metadata_id(ms.StatId("transmission_budget_us"));
    budget->set_uint64_value(60);
    ms.Event(line, "device_100000_gid_on_meta_0", 0, 5'000'000);
    xp::XEvent* receive = ms.Event(line, "NetworkReceive END", 2'000'000, 1'000'000);
    ms.Stat(receive, "graph_key")->set_str_value(Key(100000, "on_meta", 0));
    ms.Stat(receive, "network_transport_latency_us")->set_uint64_value(51);
  }
  AddTpuPlane(&space, 0);
  auto c = Read(space);
  ASSERT_OK(c);
  const CounterSeries* by_ref = Find(*c, 0, "megascale/by_ref/network_transport_latency_us");
  ASSERT_NE(by_ref, nullptr);
  EXPECT_EQ(by_ref->value, std::vector<double>{50});
  EXPECT_EQ(by_ref->time_ns, std::vector<int64_t>{2000});
  const CounterSeries* t = Find(*c, 0, "megascale/on_meta/transmission_budget_us");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->value, std::vector<double>{60});
}

// What cannot be read is skipped and counted once; the rest is kept.
TEST(MegascaleTraceTest, DamagedEventsAreSkippedAndCountedOnce) {
  xp::XSpace space;
  int damaged_total = 0;
  {
    PlaneBuilder ms(&space, kPlane);
    xp::XLine* line = ms.Line("Megascale device 100000", 0);
    Instance(ms, line, 100000, "good", 0, 0, 2'000'000'000, 40, 60, 100);
    auto receive = [&](const std::string& key) {
      xp::XEvent* ev = ms.Event(line, "NetworkReceive END", 3'000'000'000, 1'000'000);
      if (!key.empty()) ms.Stat(ev, "graph_key")->set_str_value(key);
      return ev;
    };
    const std::string good = Key(100000, "good", 1);
    int damaged = 0;
    for (const char* bad :
         {"device_x_gid_a$1^i0", "device_100000_gid_$1^i0", "device_100000_gid_a b$1^i0",
          "device_100000_gid_a^i0", "device_100000_gid_a$^i0", "device_100000_gid_a$1^i",
          "device_100000_gid_a$1^ix", "gid_a$1^i0", "device_1234567890123456789_gid_a$1^i0"}) {
      ms.Stat(receive(bad), "network_transport_latency_us")->set_uint64_value(40);
      ++damaged;
    }
    receive(good);  // no latency
    ++damaged;
    ms.Stat(receive(good), "network_transport_latency_us")->set_str_value("40");
    ++damaged;
    ms.Stat(receive(good), "network_transport_latency_us")->set_double_value(40);
    ++damaged;
    ms.Stat(receive(good), "network_transport_latency_us")->set_int64_value(-40);
    ++damaged;
    ms.Stat(receive(good), "network_transport_latency_us")->set_uint64_value(~uint64_t{0});
    ++damaged;
    xp::XEvent* int_key = ms.Event(line, "NetworkReceive END", 3'000'000'000, 1'000'000);
    ms.Stat(int_key, "graph_key")->set_int64_value(7);
    ms.Stat(int_key, "network_transport_latency_us")->set_uint64_value(40);
    ++damaged;
    xp::XEvent* late = receive(good);  // an end past int64 ns
    late->set_offset_ps(INT64_MAX - 10);
    ms.Stat(late, "network_transport_latency_us")->set_uint64_value(40);
    ++damaged;
    // A graph with a mistyped budget: its budgets are not used.
    xp::XEvent* graph = ms.Event(line, "device_100000_gid_good_0", 4'000'000'000, 1'000'000);
    ms.Stat(graph, "graph_key")->set_str_value(Key(100000, "good", 2));
    ms.Stat(graph, "transmission_budget_us")->set_str_value("60");
    ++damaged;
    xp::XEvent* r2 = receive(Key(100000, "good", 2));
    ms.Stat(r2, "network_transport_latency_us")->set_uint64_value(42);
    // Events without a graph_key are not the runtime's: ignored, not counted.
    ms.Stat(receive(""), "network_transport_latency_us")->set_str_value("x");
    ms.Event(line, "other", 0, 1);
    damaged_total = damaged;
  }
  AddTpuPlane(&space, 0);
  auto c = Read(space);
  ASSERT_OK(c);
  EXPECT_EQ(Warnings(*c, absl::StrCat(kPlane, ": ", damaged_total, " events skipped")), 1)
      << (c->warnings.empty() ? "" : c->warnings[0]);
  EXPECT_EQ(c->warnings.size(), 1u);
  const CounterSeries* latency = Find(*c, 0, "megascale/good/network_transport_latency_us");
  ASSERT_NE(latency, nullptr);
  EXPECT_EQ(latency->value, (std::vector<double>{40, 42}));
  const CounterSeries* t = Find(*c, 0, "megascale/good/transmission_budget_us");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->value, std::vector<double>{60});  // instance 0's only
  EXPECT_EQ(Megascale(*c).size(), 3u);
}

TEST(MegascaleTraceTest, RendezvousPastTheCapAreSkippedWithAWarning) {
  xp::XSpace space;
  {
    PlaneBuilder ms(&space, kPlane);
    xp::XLine* line = ms.Line("Megascale device 100000", 0);
    for (int i = 0; i < 10'000; ++i) {
      xp::XEvent* ev = ms.Event(line, "NetworkReceive END", int64_t{1'000'000} * i, 1'000'000);
      ms.Stat(ev, "graph_key")->set_str_value(Key(100000, absl::StrCat("r", i), 0));
      ms.Stat(ev, "network_transport_latency_us")->set_uint64_value(40);
    }
  }
  AddTpuPlane(&space, 0);
  auto c = Read(space);
  ASSERT_OK(c);
  EXPECT_EQ(Megascale(*c).size(), MegascaleLimits().max_rendezvous);
  EXPECT_EQ(Warnings(*c, "more than 256 rendezvous on a device; 9744 NetworkReceive END"), 1);
  EXPECT_EQ(c->warnings.size(), 1u);
}

TEST(MegascaleTraceTest, MoreRawIdsThanChipsDropsTheLargestWithAWarning) {
  xp::XSpace space;
  {
    PlaneBuilder ms(&space, kPlane);
    for (int64_t raw_id : {200001, 100001, 100000}) {
      xp::XLine* line = ms.Line(absl::StrCat("Megascale device ", raw_id), 0);
      Instance(ms, line, raw_id, "ar", 0, 0, 2'000'000'000, raw_id % 10, 60, 0);
    }
  }
  AddTpuPlane(&space, 1);
  AddTpuPlane(&space, 0);
  auto c = Read(space);
  ASSERT_OK(c);
  ASSERT_EQ(c->host.chips.size(), 2u);
  EXPECT_EQ(Warnings(*c, absl::StrCat(kPlane,
                                      ": 3 Megascale device ids (100000, 100001, 200001) "
                                      "for 2 TPU chips")),
            1);
  EXPECT_EQ(Warnings(*c, "(200001) and their series dropped"), 1);
  EXPECT_EQ(c->warnings.size(), 1u);
  const CounterSeries* tpu0 = Find(*c, ChipOf(*c, 0), "megascale/ar/network_transport_latency_us");
  const CounterSeries* tpu1 = Find(*c, ChipOf(*c, 1), "megascale/ar/network_transport_latency_us");
  ASSERT_NE(tpu0, nullptr);
  ASSERT_NE(tpu1, nullptr);
  EXPECT_EQ(tpu0->value, std::vector<double>{0});
  EXPECT_EQ(tpu1->value, std::vector<double>{1});
  EXPECT_EQ(Megascale(*c).size(), 2u * 3);
}

// Fewer ids than chips: paired in order, as XProf pairs them, with a warning.
TEST(MegascaleTraceTest, FewerRawIdsThanChipsAreWarnedOf) {
  xp::XSpace space;
  {
    PlaneBuilder ms(&space, kPlane);
    Instance(ms, ms.Line("Megascale device 100001", 0), 100001, "ar", 0, 0, 2'000'000'000, 40, -1,
             -1);
  }
  AddTpuPlane(&space, 0);
  AddTpuPlane(&space, 1);
  auto c = Read(space);
  ASSERT_OK(c);
  EXPECT_EQ(Warnings(*c, "1 Megascale device ids (100001) for 2 TPU chips"), 1);
  EXPECT_NE(Find(*c, 0, "megascale/ar/network_transport_latency_us"), nullptr);
}

// Read in pieces, as the agent streams it: each chip's series come in its own plane's piece
// (a host analysed piece by piece sees each chip once), equal to the whole read's.
TEST(MegascaleTraceTest, PiecesCarryEachChipsSeriesWithItsPlane) {
  const xp::XSpace space = TwoChipHost(0, true);
  auto whole = Read(space);
  ASSERT_OK(whole);
  class Collect final : public PieceSink {
   public:
    absl::Status OnHost(const Host&) override { return absl::OkStatus(); }
    absl::Status OnPlane(const HostCapture& piece, size_t) override {
      std::set<int> chips;
      for (const EventBlock& b : piece.blocks) chips.insert(b.chip);
      for (const CounterSeries& s : piece.counters) {
        chips.insert(s.chip);
        counters.push_back(s);
      }
      pieces.push_back(chips);
      return absl::OkStatus();
    }
    std::vector<std::set<int>> pieces;
    std::vector<CounterSeries> counters;
  } sink;
  const std::string bytes = space.SerializeAsString();
  MemorySource source(bytes);
  auto rest = ReadXSpaceInPieces(source, ReadOptions(), &sink);
  ASSERT_OK(rest);
  EXPECT_EQ(sink.pieces, (std::vector<std::set<int>>{{0}, {1}}));
  ASSERT_EQ(sink.counters.size(), whole->counters.size());
  for (size_t i = 0; i < sink.counters.size(); ++i) {
    EXPECT_EQ(sink.counters[i].name, whole->counters[i].name);
    EXPECT_EQ(sink.counters[i].chip, whole->counters[i].chip);
    EXPECT_EQ(sink.counters[i].time_ns, whole->counters[i].time_ns);
    EXPECT_EQ(sink.counters[i].value, whole->counters[i].value);
  }
}

// The samples held while the plane is read are bounded (ReadOptions::max_piece_bytes).
TEST(MegascaleTraceTest, SamplesPastTheBoundAreSkippedWithAWarning) {
  const xp::XSpace space = TwoChipHost(0, true);
  const std::string bytes = space.SerializeAsString();
  MemorySource source(bytes);
  ReadOptions options;
  options.max_piece_bytes = 256;
  auto c = ReadXSpace(source, options);
  ASSERT_OK(c);
  EXPECT_EQ(Warnings(*c, absl::StrCat(kPlane, ": its samples pass the reader's bound")), 1);
  size_t samples = 0;
  for (const CounterSeries* s : Megascale(*c)) samples += s->time_ns.size();
  EXPECT_GT(samples, 0u);
  EXPECT_LT(samples, 2u * 2 * 3 * 3);
}

// Bytes damaged anywhere in the capture: an error or a capture whose series are usable, never
// a crash.
TEST(MegascaleTraceTest, RandomByteDamageNeverCrashes) {
  const std::string bytes = TwoChipHost(0, true).SerializeAsString();
  std::mt19937_64 rng(11);
  int ok = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string damaged = bytes;
    for (int j = 0; j < 3; ++j) damaged[rng() % damaged.size()] = static_cast<char>(rng());
    MemorySource source(damaged);
    absl::StatusOr<HostCapture> c = ReadXSpace(source);
    if (!c.ok()) continue;
    ++ok;
    for (const CounterSeries& s : c->counters) {
      EXPECT_EQ(s.time_ns.size(), s.value.size());
      EXPECT_TRUE(std::is_sorted(s.time_ns.begin(), s.time_ns.end())) << s.name;
      EXPECT_GE(s.chip, 0);
      EXPECT_LT(static_cast<size_t>(s.chip), c->host.chips.size());
    }
  }
  EXPECT_GT(ok, 0);
}

TEST(MegascaleTraceTest, GraphKeysAndGraphNames) {
  uint64_t id = 0;
  absl::string_view rendezvous;
  EXPECT_TRUE(ParseGraphKey("device_100003_gid_op_name.123_0$l456^i78", 256, &id, &rendezvous));
  EXPECT_EQ(id, 100003u);
  EXPECT_EQ(rendezvous, "op_name.123_0");
  EXPECT_TRUE(ParseGraphKey("device_200000_gid_rendezvous1$1^i0", 256, &id, &rendezvous));
  EXPECT_EQ(rendezvous, "rendezvous1");
  EXPECT_FALSE(ParseGraphKey("device_200000_gid_rendezvous1$1^i0", 5, &id, &rendezvous));
  EXPECT_TRUE(IsActionGraphName("device_100000_gid_dcn_grads.0_0"));
  EXPECT_FALSE(IsActionGraphName("device_100000_gid_dcn_grads.0"));
  EXPECT_FALSE(IsActionGraphName("device_100000_gid__0"));
  EXPECT_FALSE(IsActionGraphName("NetworkReceive END"));
}

}  // namespace
}  // namespace podprof::trace
