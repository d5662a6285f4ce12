// Cross-slice transfers (insight/dcn.h): the HLO text's reading, XProf's megascale_stats
// figures computed by hand, pairing across hosts' clocks, the wait's split, and the verdicts on
// a ring of slices modelled as docs/MEGASCALE.md's layout describes the simulator's.
#include "insight/dcn.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace podprof::insight {
namespace {

constexpr char kPairs[] = "{{0,1},{1,0}}";

const char* OpName(DcnOpKind kind) {
  switch (kind) {
    case DcnOpKind::kSend:
      return "send";
    case DcnOpKind::kSendDone:
      return "send-done";
    case DcnOpKind::kRecv:
      return "recv";
    case DcnOpKind::kRecvDone:
      return "recv-done";
  }
  return "";
}

// The layout's HLO text (docs/MEGASCALE.md) of one op of a rendezvous on channel `channel`.
std::string HloText(DcnOpKind kind, const std::string& rendezvous, int channel,
                    const std::string& pairs) {
  const std::string attrs = absl::StrCat(
      ", channel_id=", channel, ", is_host_transfer=true, frontend_attributes={",
      "_xla_host_transfer_rendezvous=\"", rendezvous,
      "\",_xla_megascale_transfer_type=\"ONE_TO_ONE\",_xla_send_recv_source_target_pairs=\"", pairs,
      "\"}");
  const std::string n = absl::StrCat(channel);
  switch (kind) {
    case DcnOpKind::kSend:
      return absl::StrCat("%send.", n,
                          " = (bf16[524288]{0}, u32[], token[]) send(bf16[524288]{0} "
                          "%reduce-scatter.0, token[] %after-all.",
                          n, ")", attrs);
    case DcnOpKind::kRecv:
      return absl::StrCat("%recv.", n,
                          " = (bf16[524288]{0}, u32[], token[]) recv(token[] %after-all.", n, ")",
                          attrs);
    case DcnOpKind::kSendDone:
      return absl::StrCat("%send-done.", n,
                          " = token[] send-done((bf16[524288]{0}, u32[], token[]) %send.", n, ")",
                          attrs);
    case DcnOpKind::kRecvDone:
      return absl::StrCat("%recv-done.", n,
                          " = (bf16[524288]{0}, token[]) recv-done((bf16[524288]{0}, u32[], "
                          "token[]) %recv.",
                          n, ")", attrs);
  }
  return "";
}

trace::KernelDef DcnKernel(DcnOpKind kind, const std::string& rendezvous, int channel,
                           const std::string& pairs = kPairs) {
  trace::KernelDef k;
  k.module = "jit_train_step";
  k.name = absl::StrCat(OpName(kind), ".", channel);
  k.category = absl::StrCat("host ", OpName(kind));
  k.hlo_text = HloText(kind, rendezvous, channel, pairs);
  return k;
}

// A host's capture built by hand: per chip one `XLA Ops` and one `XLA Modules` block.
class CaptureBuilder {
 public:
  // `line_ns`: every block's base_ns (the reader's absolute line start).
  CaptureBuilder(const std::string& host, int chips, int64_t first_global_id, int64_t line_ns) {
    c_.host.name = host;
    for (int i = 0; i < chips; ++i) {
      trace::Chip chip;
      chip.ordinal = i;
      chip.global_id = first_global_id + i;
      c_.host.chips.push_back(chip);
      for (trace::LineKind kind : {trace::LineKind::kModules, trace::LineKind::kOps}) {
        trace::EventBlock& b = c_.blocks.emplace_back();
        b.chip = i;
        b.kind = kind;
        b.line = kind == trace::LineKind::kOps ? "XLA Ops" : "XLA Modules";
        b.base_ns = line_ns;
      }
    }
    trace::KernelDef module;
    module.name = "jit_train_step(1)";
    module.category = "xla module";
    c_.kernels.push_back(module);
  }

  uint32_t Kernel(const trace::KernelDef& k) {
    for (size_t i = 0; i < c_.kernels.size(); ++i) {
      if (c_.kernels[i].name == k.name) return static_cast<uint32_t>(i);
    }
    c_.kernels.push_back(k);
    return static_cast<uint32_t>(c_.kernels.size() - 1);
  }
  void Op(int chip, uint32_t kernel, int64_t start_ps, int64_t duration_ps) {
    Add(Block(chip, trace::LineKind::kOps), kernel, start_ps, duration_ps);
  }
  void Module(int chip, int64_t start_ps, int64_t duration_ps) {
    Add(Block(chip, trace::LineKind::kModules), 0, start_ps, duration_ps);
  }
  // One sample of counter `name` of `chip` at `at_ns` (host clock), its series made on first use.
  void Sample(int chip, const std::string& name, int64_t at_ns, double value) {
    trace::CounterSeries* series = nullptr;
    for (trace::CounterSeries& s : c_.counters) {
      if (s.chip == chip && s.name == name) series = &s;
    }
    if (series == nullptr) {
      series = &c_.counters.emplace_back();
      series->chip = chip;
      series->name = name;
    }
    series->time_ns.push_back(at_ns);
    series->value.push_back(value);
  }
  trace::HostCapture& capture() { return c_; }

 private:
  trace::EventBlock& Block(int chip, trace::LineKind kind) {
    for (trace::EventBlock& b : c_.blocks) {
      if (b.chip == chip && b.kind == kind) return b;
    }
    return c_.blocks.front();
  }
  static void Add(trace::EventBlock& b, uint32_t kernel, int64_t start_ps, int64_t duration_ps) {
    b.start_ps.push_back(start_ps);
    b.duration_ps.push_back(duration_ps);
    b.kernel.push_back(kernel);
    b.collective.push_back(0);
  }
  trace::HostCapture c_;
};

// ---------------------------------------------------------------------------------------------
// Parsing.

TEST(ParseDcnInstruction, ReadsTheLayoutsSend) {
  trace::KernelDef k = DcnKernel(DcnOpKind::kSend, "dcn_grads.0", 101, "{{0,16},{16,32}}");
  DcnInstruction d;
  ASSERT_TRUE(ParseDcnInstruction(k, &d));
  EXPECT_EQ(d.kind, DcnOpKind::kSend);
  EXPECT_EQ(d.name, "send.101");
  EXPECT_EQ(d.rendezvous, "dcn_grads.0");
  EXPECT_TRUE(d.has_rendezvous);
  EXPECT_EQ(d.transfer_type, "ONE_TO_ONE");
  EXPECT_EQ(d.channel_id, 101);
  // bf16[524288] is 1 MiB; the u32[] scalar 4 bytes; the token nothing.
  EXPECT_EQ(d.bytes, 1048576 + 4);
  const std::vector<std::pair<int64_t, int64_t>> pairs = {{0, 16}, {16, 32}};
  EXPECT_EQ(d.source_target_pairs, pairs);
}

TEST(ParseDcnInstruction, RecvDoneCountsItsArrayAndNotItsToken) {
  DcnInstruction d;
  ASSERT_TRUE(ParseDcnInstruction(DcnKernel(DcnOpKind::kRecvDone, "r", 7), &d));
  EXPECT_EQ(d.kind, DcnOpKind::kRecvDone);
  EXPECT_EQ(d.bytes, 1048576);
  ASSERT_TRUE(ParseDcnInstruction(DcnKernel(DcnOpKind::kSendDone, "r", 7), &d));
  EXPECT_EQ(d.kind, DcnOpKind::kSendDone);
  EXPECT_EQ(d.bytes, 0);  // token[]
}

TEST(ParseDcnInstruction, ShapesAsShapeUtilSizesThem) {
  auto bytes = [](const std::string& shape) {
    trace::KernelDef k;
    k.name = "recv-done.1";
    k.category = "host recv-done";
    k.hlo_text = absl::StrCat("ROOT %recv-done.1 = ", shape, " recv-done(%recv.1), channel_id=1");
    DcnInstruction d;
    EXPECT_TRUE(ParseDcnInstruction(k, &d)) << shape;
    return d.bytes;
  };
  EXPECT_EQ(bytes("f32[2,3]{1,0:T(8,128)}"), 24);
  EXPECT_EQ(bytes("s4[10]{0}"), 10);             // a byte each unless packed
  EXPECT_EQ(bytes("s4[10]{0:E(4)}"), 5);         // packed: 4 bits each
  EXPECT_EQ(bytes("(f32[<=8]{0}, u32[])"), 36);  // a dynamic dimension counts its bound
  EXPECT_EQ(bytes("c64[3]"), 24);
  EXPECT_EQ(bytes("pred[]"), 1);
  EXPECT_EQ(bytes("token[]"), 0);
  EXPECT_EQ(bytes("((f32[2]{0}, s8[3]{0}), token[])"), 11);  // nested: podprof adds the arrays
}

TEST(ParseDcnInstruction, AbsentAttributesAreAbsent) {
  trace::KernelDef k;
  k.name = "recv-done.3";
  k.category = "host recv-done";
  k.hlo_text = "%recv-done.3 = (f32[4]{0}, token[]) recv-done(%recv.3), is_host_transfer=true";
  DcnInstruction d;
  ASSERT_TRUE(ParseDcnInstruction(k, &d));
  EXPECT_FALSE(d.has_rendezvous);
  EXPECT_EQ(d.rendezvous, "");
  EXPECT_EQ(d.transfer_type, "");
  EXPECT_EQ(d.channel_id, 0);
  EXPECT_TRUE(d.source_target_pairs.empty());
  EXPECT_EQ(d.bytes, 16);
}

TEST(ParseDcnInstruction, AnEmptyRendezvousIsPresent) {
  trace::KernelDef k = DcnKernel(DcnOpKind::kSend, "", 5);
  DcnInstruction d;
  ASSERT_TRUE(ParseDcnInstruction(k, &d));
  EXPECT_TRUE(d.has_rendezvous);
  EXPECT_EQ(d.rendezvous, "");
}

TEST(ParseDcnInstruction, EscapesInAValueAreRead) {
  trace::KernelDef k = DcnKernel(DcnOpKind::kSend, "a\\\"b,c}", 5);
  DcnInstruction d;
  ASSERT_TRUE(ParseDcnInstruction(k, &d));
  EXPECT_EQ(d.rendezvous, "a\"b,c}");
  EXPECT_EQ(d.channel_id, 5);
  EXPECT_EQ(d.source_target_pairs.size(), 2u);
}

TEST(ParseDcnInstruction, OtherKernelsAreNotHostTransfers) {
  trace::KernelDef k;
  k.name = "fusion.1";
  k.category = "loop fusion";
  k.hlo_text = "%fusion.1 = f32[8]{0} fusion(f32[8]{0} %p), kind=kLoop";
  DcnInstruction d;
  EXPECT_FALSE(ParseDcnInstruction(k, &d));
  k.category = "all-reduce";
  EXPECT_FALSE(ParseDcnInstruction(k, &d));
  bool is = true;
  DcnOpKind kind;
  is = DcnOpKindOfCategory("host send-done", &kind);
  EXPECT_TRUE(is);
  EXPECT_EQ(kind, DcnOpKind::kSendDone);
  EXPECT_FALSE(DcnOpKindOfCategory("host sendx", &kind));
}

TEST(ParseDcnInstruction, UnreadableTextKeepsTheCategorysKindAndNothingElse) {
  trace::KernelDef k;
  k.name = "send.9";
  k.category = "host send";
  k.hlo_text = "garbage";
  DcnInstruction d;
  ASSERT_TRUE(ParseDcnInstruction(k, &d));
  EXPECT_EQ(d.kind, DcnOpKind::kSend);
  EXPECT_EQ(d.bytes, 0);
  EXPECT_FALSE(d.has_rendezvous);
  // The opcode wins over the category, as XProf's kind is the instruction's.
  k.hlo_text = HloText(DcnOpKind::kRecvDone, "r", 9, kPairs);
  ASSERT_TRUE(ParseDcnInstruction(k, &d));
  EXPECT_EQ(d.kind, DcnOpKind::kRecvDone);
}

TEST(ParseDcnInstruction, InvalidPairsAndShapesAreAbsent) {
  for (const char* pairs : {"{{0,16},{16}}", "{{0,16}", "{{-1,2}}", "{{0,16},{1,2}}x", "{{a,b}}",
                            "{{0,99999999999999999999}}"}) {
    DcnInstruction d;
    ASSERT_TRUE(ParseDcnInstruction(DcnKernel(DcnOpKind::kSend, "r", 1, pairs), &d)) << pairs;
    EXPECT_TRUE(d.source_target_pairs.empty()) << pairs;
    EXPECT_EQ(d.rendezvous, "r") << pairs;
  }
  DcnInstruction d;
  ASSERT_TRUE(ParseDcnInstruction(DcnKernel(DcnOpKind::kSend, "r", 1, "{}"), &d));
  EXPECT_TRUE(d.source_target_pairs.empty());
  trace::KernelDef k;
  k.name = "recv-done.1";
  k.category = "host recv-done";
  // Sizes past 2^60 bytes are not believed; the attributes after the shape still are.
  k.hlo_text =
      "%recv-done.1 = f32[4294967296,4294967296]{1,0} recv-done(%recv.1), channel_id=4, "
      "frontend_attributes={_xla_host_transfer_rendezvous=\"x\"}";
  ASSERT_TRUE(ParseDcnInstruction(k, &d));
  EXPECT_EQ(d.bytes, 0);
  EXPECT_EQ(d.channel_id, 4);
  EXPECT_EQ(d.rendezvous, "x");
}

TEST(ParseDcnInstruction, HostileTextNeverCrashesAndStaysLinear) {
  // Deep nesting, unclosed groups and a megabyte of braces: one pass each.
  const std::vector<std::string> texts = {
      "%r = " + std::string(100000, '(') + "f32[1]" + " recv-done()",
      "%r = (f32[1], token[]) recv-done(" + std::string(1 << 20, '{'),
      "%r = (f32[1], token[]) recv-done(x), frontend_attributes={" + std::string(1 << 20, '"'),
      "%r = (f32[1], token[]) recv-done(x), channel_id=" + std::string(1 << 20, '9'),
      "%r = f32[" + std::string(1 << 20, '1') + "] recv-done(x)",
      "=",
      "",
      "%r = (f32[1], token[]) recv-done(x), frontend_attributes={a=\"\\",
  };
  for (const std::string& text : texts) {
    trace::KernelDef k;
    k.name = "recv-done.1";
    k.category = "host recv-done";
    k.hlo_text = text;
    DcnInstruction d;
    EXPECT_TRUE(ParseDcnInstruction(k, &d));
    EXPECT_EQ(d.kind, DcnOpKind::kRecvDone);
  }
  // Every truncation and many random corruptions of a real text.
  const std::string good = HloText(DcnOpKind::kSend, "dcn_grads.0", 101, "{{0,16},{16,32}}");
  std::mt19937_64 rng(56);
  const std::string alphabet = "{}()[],=\"\\%: 0123456789abcdefE<";
  for (size_t cut = 0; cut <= good.size(); ++cut) {
    trace::KernelDef k = DcnKernel(DcnOpKind::kSend, "x", 1);
    k.hlo_text = good.substr(0, cut);
    DcnInstruction d;
    EXPECT_TRUE(ParseDcnInstruction(k, &d));
  }
  for (int i = 0; i < 20000; ++i) {
    std::string text = good;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      text[rng() % text.size()] = alphabet[rng() % alphabet.size()];
    }
    trace::KernelDef k = DcnKernel(DcnOpKind::kSend, "x", 1);
    k.hlo_text = text;
    DcnInstruction d;
    EXPECT_TRUE(ParseDcnInstruction(k, &d));
    EXPECT_GE(d.bytes, 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Reading a capture.

TEST(DcnHostFromCapture, KeepsTheDcnOpsOfTpuOpsLinesByChipThenStart) {
  CaptureBuilder b("h", 2, 0, 1'000'000);
  const uint32_t send = b.Kernel(DcnKernel(DcnOpKind::kSend, "r", 1));
  const uint32_t recv_done = b.Kernel(DcnKernel(DcnOpKind::kRecvDone, "r", 1));
  trace::KernelDef fusion;
  fusion.name = "fusion.1";
  fusion.category = "loop fusion";
  const uint32_t other = b.Kernel(fusion);
  b.Module(0, 0, 1'000'000'000);
  b.Module(1, 0, 1'000'000'000);
  b.Op(1, recv_done, 9'000'000, 1'000'000);
  b.Op(1, send, 5'000'000, 1'000'000);
  b.Op(0, other, 1'000'000, 1'000'000);
  b.Op(0, send, 2'000'000, 1'000'000);
  // A host thread's ops line and an encoded block are not read.
  trace::EventBlock host_ops = b.capture().blocks[1];
  host_ops.line = "XLA Ops: tf_XLAEigen/17";
  b.capture().blocks.push_back(host_ops);
  trace::EventBlock encoded;
  encoded.chip = 0;
  encoded.line = "XLA Ops";
  encoded.encoded = "x";
  encoded.encoded_events = 5;
  b.capture().blocks.push_back(encoded);

  const DcnHost h = DcnHostFromCapture(b.capture(), 3, {});
  EXPECT_EQ(h.host, "h");
  EXPECT_EQ(h.slice, 3);
  ASSERT_EQ(h.instructions.size(), 2u);
  ASSERT_EQ(h.runs.size(), 3u);
  EXPECT_EQ(h.runs[0].chip, 0);
  EXPECT_EQ(h.runs[1].chip, 1);
  EXPECT_EQ(h.runs[1].offset_ps, 5'000'000);
  EXPECT_EQ(h.instructions[static_cast<size_t>(h.runs[1].instruction)].kind, DcnOpKind::kSend);
  EXPECT_EQ(h.runs[2].offset_ps, 9'000'000);
  EXPECT_EQ(h.runs[0].base_ns, 1'000'000);
  EXPECT_EQ(h.runs[0].xprof_line_ns, 1'000'000);  // no profile start: stored absolute
  EXPECT_EQ(h.runs[0].StartNs(), 1'002'000);
  EXPECT_EQ(h.runs[0].EndNs(), 1'003'000);
}

TEST(DcnHostFromCapture, XprofReadsLineTimesAsStoredAndOpsInsideModulesOnly) {
  const int64_t start = 1'700'000'000'000'000'000;
  CaptureBuilder b("h", 1, 0, start + 500);  // stored as 500 ns after the profile start
  b.capture().host.profile_start_ns = start;
  const uint32_t send = b.Kernel(DcnKernel(DcnOpKind::kSend, "r", 1));
  b.Module(0, 10'000'000, 10'000'000);   // [10 us, 20 us)
  b.Op(0, send, 5'000'000, 1'000'000);   // before it
  b.Op(0, send, 12'000'000, 1'000'000);  // inside
  b.Op(0, send, 19'500'000, 1'000'000);  // overlapping its end
  b.Op(0, send, 30'000'000, 1'000'000);  // after
  const DcnHost h = DcnHostFromCapture(b.capture(), 0, {});
  ASSERT_EQ(h.runs.size(), 4u);
  EXPECT_EQ(h.runs[0].xprof_line_ns, 500);
  EXPECT_EQ(h.runs[0].base_ns, start + 500);
  EXPECT_FALSE(h.runs[0].xprof_in_module);
  EXPECT_TRUE(h.runs[1].xprof_in_module);
  EXPECT_FALSE(h.runs[2].xprof_in_module);
  EXPECT_FALSE(h.runs[3].xprof_in_module);
  // Without an `XLA Modules` line XProf finds no module for any op.
  b.capture().blocks.erase(b.capture().blocks.begin());
  for (const DcnOpRun& r : DcnHostFromCapture(b.capture(), 0, {}).runs) {
    EXPECT_FALSE(r.xprof_in_module);
  }
}

// ---------------------------------------------------------------------------------------------
// XProf's figures.

// Two rendezvous on chip 0, worked by hand below from DcnTracker's code. Line at 1 us (a
// capture relative to its profile start: no rounding from the line's time).
DcnHost TwoRendezvous() {
  const int64_t start = 1'700'000'000'000'000'000;
  CaptureBuilder b("host-a", 2, 0, start + 1000);
  b.capture().host.profile_start_ns = start;
  const uint32_t send_a = b.Kernel(DcnKernel(DcnOpKind::kSend, "A", 1));
  const uint32_t recv_a = b.Kernel(DcnKernel(DcnOpKind::kRecv, "A", 1));
  const uint32_t send_done_a = b.Kernel(DcnKernel(DcnOpKind::kSendDone, "A", 1));
  const uint32_t recv_done_a = b.Kernel(DcnKernel(DcnOpKind::kRecvDone, "A", 1));
  const uint32_t send_b = b.Kernel(DcnKernel(DcnOpKind::kSend, "B", 2));
  const uint32_t recv_done_b = b.Kernel(DcnKernel(DcnOpKind::kRecvDone, "B", 2));
  b.Module(0, 0, 100'000'000);
  b.Op(0, send_a, 10'000'000, 2'500'500);
  b.Op(0, recv_a, 13'000'000, 1'000'000);
  b.Op(0, send_done_a, 15'000'000, 3'000'700);
  b.Op(0, send_b, 20'000'000, 1'000'300);
  b.Op(0, recv_done_a, 30'000'000, 4'000'900);
  b.Op(0, recv_done_b, 40'000'000, 2'000'000);
  // A's second instance has no recv or send-done: XProf keeps the first's.
  b.Op(0, send_a, 50'000'000, 1'000'000);
  b.Op(0, recv_done_a, 60'000'000, 1'000'000);
  // Chip 1 is not read by XProf.
  b.Module(1, 0, 100'000'000);
  b.Op(1, send_a, 10'000'000, 9'000'000);
  b.Op(1, recv_done_a, 30'000'000, 9'000'000);
  return DcnHostFromCapture(b.capture(), 0, {});
}

TEST(HostXprofFigures, ReproduceDcnTrackerOnAHandWorkedExample) {
  const std::vector<XprofRendezvousRow> rows = HostXprofFigures(TwoRendezvous());
  ASSERT_EQ(rows.size(), 2u);
  // A, first instance: send at 1 + 10 = 11 us. The overlap is every DCN op from the send on:
  // send 2500 (2500.5 truncated) + recv 1000 + send-done 3000 + B's send 1000 = 7500 ns, so
  // slack = 31000 - 11000 - 7500 = 12500 ns -> 12 us. Stall: 2500 + 1000 + 3000.7 -> 6500,
  // + 4000.9 -> 10500 -> 10 us. recv-done ends at 31000 + 4000.9 -> 35000 -> 35 us.
  // Second: send at 51 us; overlap 1000; slack 61000 - 51000 - 1000 -> 9 us; stall 2 us;
  // observed 62 - 51 = 11.
  const XprofRendezvousRow& a = rows[0];
  EXPECT_EQ(a.host, "host-a");
  EXPECT_EQ(a.rendezvous, "A");
  EXPECT_EQ(a.occurrences, 2u);
  EXPECT_EQ(a.slack_us, 10u);               // (12 + 9) / 2 = 10.5
  EXPECT_EQ(a.stall_duration_us, 6u);       // (10 + 2) / 2
  EXPECT_EQ(a.observed_duration_us, 17u);   // (24 + 11) / 2 = 17.5
  EXPECT_EQ(a.send_duration_us, 1u);        // (2 + 1) / 2: 2.5005 truncated as it is added
  EXPECT_EQ(a.send_done_duration_us, 3u);   // (3 + 3) / 2: the second carries the first's
  EXPECT_EQ(a.recv_done_duration_us, 2u);   // (4 + 1) / 2
  EXPECT_EQ(a.recv_duration_us, 1u);        // (1 + 1) / 2, the first's carried
  EXPECT_EQ(a.recv_stall_us_as_xprof, 0u);  // 1 us / 1e6 truncated to 0 at each addition
  EXPECT_EQ(a.bytes_transmitted, 1048576u);
  EXPECT_EQ(a.transfer_type, "ONE_TO_ONE");
  EXPECT_EQ(a.send_op_name, "send.1");
  EXPECT_EQ(a.recv_op_name, "recv-done.1");
  // B: send at 21 us. Its overlap holds A's recv-done (another rendezvous' op): 1000 (its
  // send) + 4000 = 5000, so slack = 41000 - 21000 - 5000 -> 15 us; stall 1000 + 2000 -> 3 us.
  const XprofRendezvousRow& b = rows[1];
  EXPECT_EQ(b.rendezvous, "B");
  EXPECT_EQ(b.occurrences, 1u);
  EXPECT_EQ(b.slack_us, 15u);
  EXPECT_EQ(b.stall_duration_us, 3u);
  EXPECT_EQ(b.observed_duration_us, 22u);  // 43 - 21
  EXPECT_EQ(b.send_duration_us, 1u);
  EXPECT_EQ(b.send_done_duration_us, 0u);  // B has none
  EXPECT_EQ(b.recv_done_duration_us, 2u);
}

TEST(HostXprofFigures, RecvStallIsDividedByAMillionTwiceAsXprofDoes) {
  CaptureBuilder b("h", 1, 0, 0);
  const uint32_t send = b.Kernel(DcnKernel(DcnOpKind::kSend, "r", 1));
  const uint32_t recv = b.Kernel(DcnKernel(DcnOpKind::kRecv, "r", 1));
  const uint32_t recv_done = b.Kernel(DcnKernel(DcnOpKind::kRecvDone, "r", 1));
  b.Module(0, 0, 100'000'000'000'000);
  for (int i = 0; i < 2; ++i) {
    const int64_t at = 1'000'000'000'000 + i * 10'000'000'000'000;  // 1 s, 11 s
    b.Op(0, send, at, 1'000'000);
    b.Op(0, recv, at + 2'000'000, 2'500'000'000'000);  // 2.5 s
    b.Op(0, recv_done, at + 3'000'000'000'000, 1'000'000);
  }
  const std::vector<XprofRendezvousRow> rows =
      HostXprofFigures(DcnHostFromCapture(b.capture(), 0, {}));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].recv_duration_us, 2'500'000u);
  EXPECT_EQ(rows[0].recv_stall_us_as_xprof, 2u);  // (2 + 2) / 2: 2.5 "us" truncated each time
}

TEST(HostXprofFigures, EpochLineTimesRoundToADoublesStepAsXprofDoes) {
  // At 1.7e18 ns a double's step is 256 ns: TimestampNs() of the line's int64 plus the offset
  // as a double rounds. Send at +10 us, recv-done at +22.95 us: exact slack is 12.949 us -> 12,
  // XProf's 13 (...23040 - ...9984 - 1).
  const int64_t line_ns = 1'700'000'000'000'000'123;
  CaptureBuilder b("h", 1, 0, line_ns);
  const uint32_t send = b.Kernel(DcnKernel(DcnOpKind::kSend, "r", 1));
  const uint32_t recv_done = b.Kernel(DcnKernel(DcnOpKind::kRecvDone, "r", 1));
  b.Module(0, 0, 100'000'000);
  b.Op(0, send, 10'000'000, 1'000);
  b.Op(0, recv_done, 22'950'000, 1'000);
  const std::vector<XprofRendezvousRow> rows =
      HostXprofFigures(DcnHostFromCapture(b.capture(), 0, {}));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].slack_us, 13u);
  // send at ...10 us, recv-done end at ...23 us (its +1 ns lost to the rounding).
  EXPECT_EQ(rows[0].observed_duration_us, 13u);
}

TEST(HostXprofFigures, ChannelFallbackAndOpsOutsideModules) {
  CaptureBuilder b("h", 1, 0, 0);
  const uint32_t send = b.Kernel(DcnKernel(DcnOpKind::kSend, "r", 4));
  trace::KernelDef bare = DcnKernel(DcnOpKind::kRecvDone, "r", 4);
  bare.hlo_text = "%recv-done.4 = (f32[4]{0}, token[]) recv-done(%recv.4), channel_id=4";
  const uint32_t recv_done = b.Kernel(bare);
  trace::KernelDef stray = DcnKernel(DcnOpKind::kRecvDone, "r", 9);
  stray.name = "recv-done.9";
  stray.hlo_text = "%recv-done.9 = (f32[4]{0}, token[]) recv-done(%recv.9), channel_id=9";
  const uint32_t recv_done_stray = b.Kernel(stray);
  b.Module(0, 0, 50'000'000);
  b.Op(0, recv_done_stray, 1'000'000, 1'000'000);  // channel never named: ignored
  b.Op(0, send, 2'000'000, 1'000'000);
  b.Op(0, recv_done, 10'000'000, 1'000'000);  // takes `r` through channel 4
  b.Op(0, send, 60'000'000, 1'000'000);       // outside the module: skipped
  b.Op(0, recv_done, 70'000'000, 1'000'000);
  const std::vector<XprofRendezvousRow> rows =
      HostXprofFigures(DcnHostFromCapture(b.capture(), 0, {}));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].occurrences, 1u);
  EXPECT_EQ(rows[0].slack_us, 7u);            // 10000 - 2000 - 1000
  EXPECT_EQ(rows[0].bytes_transmitted, 16u);  // the recv-done's f32[4], ONE_TO_ONE from the send
}

// ---------------------------------------------------------------------------------------------
// Pairing, on the aggregator's clock.

TEST(AnalyseDcn, PairsAcrossHostsWithTheirClockCorrections) {
  // Slice 0 (chip 0) and slice 1 (chip 1) exchange rendezvous `r`. Host b's clock runs 5 ms
  // ahead of the aggregator's: its correction puts its ops back.
  const int64_t origin = 1'700'000'000'000'000'000;
  CaptureBuilder a("a", 1, 0, origin);
  CaptureBuilder b("b", 1, 1, origin + 5'000'000);
  for (CaptureBuilder* cb : {&a, &b}) {
    cb->Module(0, 0, 1'000'000'000);
  }
  auto ops = [](CaptureBuilder& cb, int64_t send_us, int64_t send_done_end_us,
                int64_t recv_done_start_us, int64_t recv_done_end_us) {
    const int64_t us = 1'000'000;
    cb.Op(0, cb.Kernel(DcnKernel(DcnOpKind::kSend, "r", 1)), send_us * us, 2 * us);
    cb.Op(0, cb.Kernel(DcnKernel(DcnOpKind::kRecv, "r", 1)), (send_us + 2) * us, 1 * us);
    cb.Op(0, cb.Kernel(DcnKernel(DcnOpKind::kSendDone, "r", 1)), (send_us + 3) * us,
          (send_done_end_us - send_us - 3) * us);
    cb.Op(0, cb.Kernel(DcnKernel(DcnOpKind::kRecvDone, "r", 1)), recv_done_start_us * us,
          (recv_done_end_us - recv_done_start_us) * us);
  };
  // a sends at 100 us, its buffer gone at 150; b, ready at 40, sends at 40 (gone at 90).
  // a receives b's data: recv-done 160..200 (transit 200 - 90 = 110).
  // b receives a's: recv-done 100..400 (transit 400 - 150 = 250).
  ops(a, 100, 150, 160, 200);
  ops(b, 40, 90, 100, 400);
  trace::ClockCorrection ahead;
  ahead.offset_ns = 5'000'000;
  const std::vector<DcnHost> hosts = {DcnHostFromCapture(a.capture(), 0, {}),
                                      DcnHostFromCapture(b.capture(), 1, ahead)};
  const DcnReport r = AnalyseDcn(hosts);
  EXPECT_EQ(r.slices, 2);
  EXPECT_EQ(r.transfers, 2);
  EXPECT_EQ(r.unpaired, 0);
  // Two links, medians 110 and 250 us: the smaller is what the network does.
  EXPECT_EQ(r.expected_transit_ns, 110'000);
  ASSERT_EQ(r.worst.size(), 2u);
  const DcnTransfer& t = r.worst[0];  // b's 300 us wait
  EXPECT_EQ(t.rendezvous, "r");
  EXPECT_EQ(t.step, 0);
  EXPECT_EQ(t.src_host, "a");
  EXPECT_EQ(t.dst_host, "b");
  EXPECT_EQ(t.src_slice, 0);
  EXPECT_EQ(t.dst_slice, 1);
  EXPECT_EQ(t.send_start_ns, origin + 100'000);
  EXPECT_EQ(t.send_done_end_ns, origin + 150'000);
  EXPECT_EQ(t.recv_done_start_ns, origin + 100'000);  // b's 5 ms taken off
  EXPECT_EQ(t.recv_done_end_ns, origin + 400'000);
  EXPECT_EQ(t.consumer_ready_ns, origin + 40'000);
  EXPECT_EQ(t.transit_ns, 250'000);
  EXPECT_EQ(t.wait_ns, 300'000);
  // Due at 150 + 110 = 260: the 140 us after it are the network's; of the 160 before, the
  // producer sent 60 us after b was ready.
  EXPECT_EQ(t.network_ns, 140'000);
  EXPECT_EQ(t.producer_ns, 60'000);
  EXPECT_EQ(t.producer_own_ns, 60'000);  // a waited in no recv-done before its send
  const DcnTransfer& u = r.worst[1];
  EXPECT_EQ(u.src_host, "b");
  EXPECT_EQ(u.send_start_ns, origin + 40'000);
  EXPECT_EQ(u.network_ns, 0);   // arrived when due
  EXPECT_EQ(u.producer_ns, 0);  // b sent before a was ready
  // XProf's figures of each host, on its own clock.
  ASSERT_EQ(r.xprof.size(), 2u);
  EXPECT_EQ(r.xprof[0].host, "a");
  EXPECT_EQ(r.xprof[1].host, "b");
  // 400 - 40 on b's clock, but its lines are stamped at epoch times: 40 us after the line's
  // start rounds down to ...5039872 ns (a double's step of 256), 400 up to ...5400064.
  EXPECT_EQ(r.xprof[1].observed_duration_us, 361u);
}

TEST(AnalyseDcn, TheSenderIsItsLatestSendBeforeTheReceiveEnds) {
  // a sends `r` at 0 and 1000 us; b's recv-done ends at 500 and 1500: each pairs with the send
  // just before it, not the latest overall.
  CaptureBuilder a("a", 1, 0, 0);
  CaptureBuilder b("b", 1, 1, 0);
  const int64_t us = 1'000'000;
  for (CaptureBuilder* cb : {&a, &b}) {
    cb->Module(0, 0, 10'000 * us);
    for (int i = 0; i < 2; ++i) {
      const int64_t at = i * 1000 * us;
      cb->Op(0, cb->Kernel(DcnKernel(DcnOpKind::kSend, "r", 1)), at, us);
      cb->Op(0, cb->Kernel(DcnKernel(DcnOpKind::kSendDone, "r", 1)), at + us, 10 * us);
      cb->Op(0, cb->Kernel(DcnKernel(DcnOpKind::kRecvDone, "r", 1)), at + 11 * us, 489 * us);
    }
  }
  const DcnReport r =
      AnalyseDcn({DcnHostFromCapture(a.capture(), 0, {}), DcnHostFromCapture(b.capture(), 1, {})});
  ASSERT_EQ(r.transfers, 4);
  for (const DcnTransfer& t : r.worst) {
    EXPECT_EQ(t.send_start_ns, t.step * 1'000'000) << t.dst_host << " step " << t.step;
    EXPECT_EQ(t.transit_ns, 489'000);
  }
}

TEST(AnalyseDcn, UnknownSlicesPairButJudgeNothing) {
  CaptureBuilder a("a", 1, 0, 0);
  CaptureBuilder b("b", 1, 1, 0);
  const int64_t us = 1'000'000;
  for (CaptureBuilder* cb : {&a, &b}) {
    cb->Module(0, 0, 10'000 * us);
    cb->Op(0, cb->Kernel(DcnKernel(DcnOpKind::kSend, "r", 1)), 0, us);
    cb->Op(0, cb->Kernel(DcnKernel(DcnOpKind::kSendDone, "r", 1)), us, 10 * us);
    cb->Op(0, cb->Kernel(DcnKernel(DcnOpKind::kRecvDone, "r", 1)), 11 * us, 489 * us);
  }
  const DcnReport r =
      AnalyseDcn({DcnHostFromCapture(a.capture(), -1, {}), DcnHostFromCapture(b.capture(), 1, {})});
  EXPECT_EQ(r.transfers, 2);
  EXPECT_EQ(r.slices, 1);
  EXPECT_EQ(r.instances, 0);
  EXPECT_TRUE(r.producers.empty());
  EXPECT_EQ(r.verdict, "no DCN culprit: the hosts' slices are unknown");
  EXPECT_EQ(r.expected_transit_ns, 489'000);  // no known link: the median of all
}

// ---------------------------------------------------------------------------------------------
// Verdicts on a modelled ring (docs/MEGASCALE.md's layout): S slices of one host with two
// chips; every step each slice computes, then for two rendezvous sends to slice s+1 and
// receives from s-1, the next op starting when its recv-done ends. Kernel times carry 3%
// log-normal noise, the DCN latency a few us.

struct Ring {
  int slices = 4;
  int steps = 10;
  uint64_t seed = 1;
  int delayed_link = -1;  // the slice whose outgoing link adds `delay_ns`
  int64_t delay_ns = 300'000;
  int slow_slice = -1;  // computes 1.3x as long
  // Per slice: how far its correction is off (its device mapping's error, which the probes
  // cannot see), and the clock uncertainty its hosts are stored with.
  std::vector<int64_t> clock_error_ns;
  int64_t uncertainty_ns = 0;
  // The runtime's action graph (docs/MEGASCALE.md): each receiving chip's latency from the
  // sender's buffer leaving to the arrival, sampled at the arrival, with a 60 us transmission
  // budget.
  bool runtime = false;
};

std::vector<DcnHost> RingHosts(const Ring& ring) {
  constexpr int kChips = 2;
  const int64_t kCompute = 3'000'000, kBuffer = 100'000, kLatency = 20'000, kCopy = 5'000;
  std::mt19937_64 rng(ring.seed);
  std::normal_distribution<double> normal(0, 1);
  auto noisy = [&](int64_t ns) {
    return static_cast<int64_t>(static_cast<double>(ns) * std::exp(0.03 * normal(rng)));
  };
  const int s_count = ring.slices;
  const std::string pairs = [&] {
    std::string p = "{";
    for (int s = 0; s < s_count; ++s) {
      for (int c = 0; c < kChips; ++c) {
        if (p.size() > 1) p += ",";
        absl::StrAppend(&p, "{", s * kChips + c, ",", ((s + 1) % s_count) * kChips + c, "}");
      }
    }
    return p + "}";
  }();
  // Each host's clock is off the aggregator's by a few ms; its correction says by how much.
  const int64_t origin = 1'700'000'000'000'000'000;
  std::vector<CaptureBuilder> builders;
  std::vector<int64_t> skew;
  for (int s = 0; s < s_count; ++s) {
    skew.push_back((s * 7 % 5 - 2) * 1'000'000);
    builders.emplace_back(absl::StrCat("slice", s, "-host0"), kChips, s * kChips, origin + skew[s]);
  }
  // t[s][c]: where chip c of slice s is, ns on the aggregator's clock from origin.
  std::vector<std::vector<int64_t>> t(s_count, std::vector<int64_t>(kChips, 0));
  for (int step = 0; step < ring.steps; ++step) {
    std::vector<std::vector<int64_t>> step_start = t;
    for (int s = 0; s < s_count; ++s) {
      const int64_t compute = noisy(kCompute) * (s == ring.slow_slice ? 13 : 10) / 10;
      for (int c = 0; c < kChips; ++c) t[s][c] += compute + static_cast<int64_t>(rng() % 500);
    }
    for (int r = 0; r < 2; ++r) {
      const std::string name = absl::StrCat("dcn_grads.", r);
      const int channel = 101 + r;
      std::vector<std::vector<int64_t>> send_done_end(s_count, std::vector<int64_t>(kChips));
      for (int s = 0; s < s_count; ++s) {
        for (int c = 0; c < kChips; ++c) {
          const int64_t send = t[s][c];
          send_done_end[s][c] = send + 5'000 + noisy(kBuffer);
        }
      }
      for (int s = 0; s < s_count; ++s) {
        CaptureBuilder& b = builders[static_cast<size_t>(s)];
        const int from = (s + s_count - 1) % s_count;
        for (int c = 0; c < kChips; ++c) {
          const int64_t send = t[s][c];
          const int64_t rd_start = send_done_end[s][c] + 1'000;
          int64_t arrival =
              send_done_end[from][c] + kLatency + static_cast<int64_t>(rng() % 6'000) - 3'000;
          if (from == ring.delayed_link) arrival += ring.delay_ns;
          const int64_t rd_end = std::max(rd_start, arrival) + noisy(kCopy);
          if (ring.runtime) {
            const std::string series = absl::StrCat("megascale/", name, "/");
            const int64_t at = origin + skew[static_cast<size_t>(s)] + arrival;
            const double us = static_cast<double>(arrival - send_done_end[from][c]) / 1e3;
            b.Sample(c, series + "network_transport_latency_us", at, std::round(us));
            b.Sample(c, series + "transmission_budget_us", at, 60);
            b.Sample(c, series + "delay_budget_us", at, 0);
          }
          // Host clock = aggregator's + skew, as is the line's start: offsets are unskewed.
          auto at = [](int64_t ns) { return ns * 1000; };
          b.Op(c, b.Kernel(DcnKernel(DcnOpKind::kSend, name, channel, pairs)), at(send), 3'000'000);
          b.Op(c, b.Kernel(DcnKernel(DcnOpKind::kRecv, name, channel, pairs)), at(send + 3'000),
               2'000'000);
          b.Op(c, b.Kernel(DcnKernel(DcnOpKind::kSendDone, name, channel, pairs)), at(send + 5'000),
               (send_done_end[s][c] - send - 5'000) * 1000);
          b.Op(c, b.Kernel(DcnKernel(DcnOpKind::kRecvDone, name, channel, pairs)), at(rd_start),
               (rd_end - rd_start) * 1000);
          t[s][c] = rd_end + 2'000;
        }
      }
    }
    for (int s = 0; s < s_count; ++s) {
      for (int c = 0; c < kChips; ++c) {
        builders[static_cast<size_t>(s)].Module(c, step_start[s][c] * 1000,
                                                (t[s][c] - step_start[s][c]) * 1000);
      }
    }
  }
  std::vector<DcnHost> hosts;
  for (int s = 0; s < s_count; ++s) {
    trace::ClockCorrection correction;
    correction.offset_ns = skew[s];
    if (static_cast<size_t>(s) < ring.clock_error_ns.size()) {
      correction.offset_ns += ring.clock_error_ns[static_cast<size_t>(s)];
    }
    hosts.push_back(DcnHostFromCapture(builders[static_cast<size_t>(s)].capture(), s, correction));
    hosts.back().clock_uncertainty_ns = ring.uncertainty_ns;
  }
  return hosts;
}

TEST(DcnVerdict, AHealthyRingNamesNothing) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Ring ring;
    ring.seed = seed;
    ring.steps = 50;
    const DcnReport r = AnalyseDcn(RingHosts(ring));
    EXPECT_EQ(r.slices, 4);
    EXPECT_EQ(r.transfers, 4 * 2 * 2 * 50);
    EXPECT_EQ(r.unpaired, 0);
    EXPECT_EQ(r.instances, 100);
    EXPECT_EQ(r.verdict.rfind("no DCN culprit", 0), 0u) << "seed " << seed << ": " << r.verdict;
    EXPECT_EQ(r.named_after_instances, -1);
    for (const DcnCulprit& c : r.producers) EXPECT_FALSE(c.named);
    for (const DcnCulprit& c : r.links) EXPECT_FALSE(c.named);
  }
}

// Slices whose clocks are off each other by tens of microseconds (their device mappings'
// errors, which no collective across slices can find) read as steady transits and late sends.
// Stored with the uncertainty the alignment gives them, nothing is blamed on that; without it,
// the same ring names a culprit that is not there (as the old analysis did for every capture).
TEST(DcnVerdict, WhatTheClocksCannotVouchForIsBlamedOnNoOne) {
  int named_without = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Ring ring;
    ring.seed = seed;
    ring.steps = 50;
    ring.clock_error_ns = {0, 60'000, -40'000, 25'000};
    ring.uncertainty_ns = 60'000;
    const DcnReport r = AnalyseDcn(RingHosts(ring));
    EXPECT_EQ(r.verdict.rfind("no DCN culprit", 0), 0u) << "seed " << seed << ": " << r.verdict;
    EXPECT_NE(r.verdict.find("agree to within 120 us"), std::string::npos) << r.verdict;
    EXPECT_EQ(r.clock_uncertainty_ns, 120'000);
    ring.uncertainty_ns = 0;
    named_without += AnalyseDcn(RingHosts(ring)).verdict.rfind("no DCN culprit", 0) != 0;
  }
  EXPECT_EQ(named_without, 10);
  // A 300 us delay is still named, and on its link, beyond what the clocks could make.
  Ring ring;
  ring.delayed_link = 1;
  ring.clock_error_ns = {0, 60'000, -40'000, 25'000};
  ring.uncertainty_ns = 60'000;
  const DcnReport r = AnalyseDcn(RingHosts(ring));
  EXPECT_EQ(r.verdict.rfind("the link slice 1 -> slice 2 is slow: transit ", 0), 0u) << r.verdict;
  // And a slow slice, whose lateness is milliseconds.
  ring.delayed_link = -1;
  ring.slow_slice = 2;
  EXPECT_EQ(AnalyseDcn(RingHosts(ring)).verdict.rfind("slice 2 is the late producer: ", 0), 0u);
}

// The runtime's own latency needs no clock across slices: with the slices' clocks so uncertain
// that no transit can show a 300 us delay (400 us each), the delay is still named, as the
// runtime's latency beyond its budget; the same ring read from its transits names nothing.
TEST(DcnVerdict, TheRuntimesLatencyNamesASlowLinkNoClockCanShow) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Ring ring;
    ring.seed = seed;
    ring.delayed_link = 1;
    ring.clock_error_ns = {0, 150'000, -120'000, 80'000};
    ring.uncertainty_ns = 400'000;
    ring.runtime = true;
    const DcnReport r = AnalyseDcn(RingHosts(ring));
    EXPECT_TRUE(r.runtime_network);
    EXPECT_TRUE(r.runtime_budget);
    EXPECT_EQ(r.expected_runtime_latency_ns, 60'000);
    EXPECT_EQ(
        r.verdict.rfind("the link slice 1 -> slice 2 is slow: the runtime's network latency ", 0),
        0u)
        << "seed " << seed << ": " << r.verdict;
    EXPECT_NE(r.verdict.find("beyond its budget of 60 us"), std::string::npos) << r.verdict;
    ASSERT_FALSE(r.links.empty());
    EXPECT_EQ(r.links[0].src_slice, 1);
    EXPECT_NEAR(static_cast<double>(r.links[0].excess_ns), 300'000 + 20'000 - 60'000, 10'000);
    EXPECT_LE(r.named_after_instances, 20);
    for (const DcnCulprit& c : r.producers) EXPECT_FALSE(c.named) << "slice " << c.src_slice;
    for (const DcnTransfer& t : r.worst) {
      ASSERT_GE(t.runtime_latency_ns, 0);
      EXPECT_EQ(t.transmission_budget_ns, 60'000);
      EXPECT_EQ(t.delay_budget_ns, 0);
      // The network's part is the latency beyond the budget, within the wait.
      EXPECT_EQ(t.network_ns, std::clamp<int64_t>(t.runtime_latency_ns - 60'000, 0, t.wait_ns));
    }
    ring.runtime = false;
    EXPECT_EQ(AnalyseDcn(RingHosts(ring)).verdict.rfind("no DCN culprit", 0), 0u);
  }
  // A healthy ring with the runtime's figures names nothing.
  Ring healthy;
  healthy.runtime = true;
  healthy.steps = 50;
  EXPECT_EQ(AnalyseDcn(RingHosts(healthy)).verdict.rfind("no DCN culprit", 0), 0u);
}

// A transfer takes the runtime's sample of its own chip and rendezvous that arrived after the
// chip's previous recv-done of it and by this one's end; a capture whose hosts lack the runtime's
// figures (one host here) is read from its transits, not half from each.
TEST(DcnVerdict, RuntimeSamplesMatchTheirOwnReceiveOrNone) {
  Ring ring;
  ring.runtime = true;
  std::vector<DcnHost> hosts = RingHosts(ring);
  DcnReport r = AnalyseDcn(hosts);
  ASSERT_TRUE(r.runtime_network);
  for (const DcnTransfer& t : r.worst) {
    EXPECT_GT(t.runtime_latency_ns, 15'000) << t.dst_host << " " << t.rendezvous << " " << t.step;
    EXPECT_LT(t.runtime_latency_ns, 30'000) << t.dst_host << " " << t.rendezvous << " " << t.step;
  }
  // A sample the capture's edge cut: that transfer alone goes without.
  std::vector<DcnRuntimeSample>& first = hosts[1].runtime[0].begin()->second;
  first.erase(first.begin());
  DcnOptions every;
  every.max_worst = 1000;
  r = AnalyseDcn(hosts, every);
  EXPECT_TRUE(r.runtime_network);
  int without = 0;
  for (const DcnTransfer& t : r.worst) without += t.runtime_latency_ns < 0;
  EXPECT_EQ(without, 1);
  // A receiving host without any: the capture is read from its transits.
  hosts[2].runtime.clear();
  r = AnalyseDcn(hosts, every);
  EXPECT_FALSE(r.runtime_network);
  ASSERT_EQ(r.worst.size(), 4u * 2 * 2 * 10);
  int on_host2 = 0, elsewhere = 0;
  for (const DcnTransfer& t : r.worst) {
    if (t.runtime_latency_ns >= 0) continue;
    ++(t.dst_host == hosts[2].host ? on_host2 : elsewhere);
  }
  EXPECT_EQ(on_host2, 2 * 2 * 10);
  EXPECT_EQ(elsewhere, 1);
}

TEST(DcnVerdict, ADelayedLinkIsNamedWithinTenSteps) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Ring ring;
    ring.seed = seed;
    ring.delayed_link = 1;
    const DcnReport r = AnalyseDcn(RingHosts(ring));
    EXPECT_EQ(r.verdict.rfind("the link slice 1 -> slice 2 is slow: transit ", 0), 0u)
        << "seed " << seed << ": " << r.verdict;
    EXPECT_GT(r.named_after_instances, 0);
    EXPECT_LE(r.named_after_instances, 20);
    ASSERT_FALSE(r.links.empty());
    EXPECT_EQ(r.links[0].src_slice, 1);
    EXPECT_EQ(r.links[0].dst_slice, 2);
    EXPECT_TRUE(r.links[0].named);
    EXPECT_NEAR(static_cast<double>(r.links[0].excess_ns), 300'000, 30'000);
    for (const DcnCulprit& c : r.producers) EXPECT_FALSE(c.named) << "slice " << c.src_slice;
  }
}

TEST(DcnVerdict, ADelayedLinkBetweenTwoSlicesIsNamedToo) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Ring ring;
    ring.slices = 2;
    ring.seed = seed;
    ring.delayed_link = 0;
    const DcnReport r = AnalyseDcn(RingHosts(ring));
    EXPECT_EQ(r.verdict.rfind("the link slice 0 -> slice 1 is slow", 0), 0u)
        << "seed " << seed << ": " << r.verdict;
    EXPECT_LE(r.named_after_instances, 20);
  }
}

TEST(DcnVerdict, ASlowSliceIsTheLateProducer) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Ring ring;
    ring.seed = seed;
    ring.slow_slice = 2;
    const DcnReport r = AnalyseDcn(RingHosts(ring));
    EXPECT_EQ(r.verdict.rfind("slice 2 is the late producer: ", 0), 0u)
        << "seed " << seed << ": " << r.verdict;
    EXPECT_LE(r.named_after_instances, 20);
    for (const DcnCulprit& c : r.links) {
      EXPECT_FALSE(c.named) << "link " << c.src_slice << " -> " << c.dst_slice << ": " << r.verdict;
    }
  }
}

TEST(DcnVerdict, ASlowSlicesLatenessIsPassedOnAroundTheRing) {
  // Why producers are judged on what they did not inherit: the slice after the slow one waits
  // for it, so it sends late to its own receiver, and so on around the ring. On producer_ns
  // alone the downstream slices are as late as the slow one.
  Ring ring;
  ring.slow_slice = 2;
  ring.steps = 20;
  const DcnReport r = AnalyseDcn(RingHosts(ring));
  std::map<int, int64_t> raw, own;
  for (const DcnTransfer& t : AnalyseDcn(RingHosts(ring), {100000}).worst) {
    raw[t.src_slice] += t.producer_ns;
    own[t.src_slice] += t.producer_own_ns;
  }
  EXPECT_GT(raw[3], raw[2] / 2);  // slice 3 passes slice 2's lateness on
  EXPECT_LT(own[3], own[2] / 10);
  EXPECT_EQ(r.producers[0].src_slice, 2);
}

}  // namespace
}  // namespace podprof::insight
