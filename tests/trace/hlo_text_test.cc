#include "trace/hlo_text.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"
#include "trace/hlo_host_transfer.h"
#include "trace/hlo_proto.h"

namespace podprof::trace::hlo {
namespace {

constexpr char kSend[] =
    "%send.101 = (bf16[524288]{0}, u32[], token[]) send(bf16[524288]{0} %reduce-scatter.0, "
    "token[] %after-all.101), channel_id=101, is_host_transfer=true, "
    "frontend_attributes={_xla_host_transfer_rendezvous=\"dcn_grads.0\","
    "_xla_megascale_transfer_type=\"ONE_TO_ONE\",_xla_send_recv_source_target_pairs=\"{{0,16},"
    "{16,0}}\"}";

InstructionText Parse(const std::string& text) {
  InstructionText in;
  EXPECT_TRUE(ParseInstructionText(text, &in)) << text;
  return in;
}

TEST(HloTextTest, ASendReadsWhole) {
  const InstructionText in = Parse(kSend);
  EXPECT_EQ(in.name, "send.101");
  EXPECT_EQ(in.opcode, "send");
  ASSERT_TRUE(in.has_shape);
  ASSERT_EQ(in.shape.element_type, PrimitiveType::kTuple);
  ASSERT_EQ(in.shape.tuple_shapes.size(), 3u);
  EXPECT_EQ(in.shape.tuple_shapes[0].element_type, PrimitiveType::kBf16);
  EXPECT_EQ(in.shape.tuple_shapes[0].dimensions, std::vector<int64_t>{524288});
  EXPECT_EQ(in.shape.tuple_shapes[1].element_type, PrimitiveType::kU32);
  EXPECT_EQ(in.shape.tuple_shapes[2].element_type, PrimitiveType::kToken);
  // XProf's size of a tuple: its elements summed (u32[] 4, token 0).
  EXPECT_EQ(ShapeByteSize(in.shape), 1048576 + 4);
  ASSERT_EQ(in.operands.size(), 2u);
  EXPECT_EQ(in.operands[0].name, "reduce-scatter.0");
  EXPECT_TRUE(in.operands[0].has_shape);
  EXPECT_EQ(in.operands[1].name, "after-all.101");
  EXPECT_EQ(in.operands[1].shape.element_type, PrimitiveType::kToken);
  EXPECT_EQ(in.channel_id, 101);
  EXPECT_TRUE(in.is_host_transfer);
  ASSERT_EQ(in.frontend_attributes.size(), 3u);
  EXPECT_EQ(in.frontend_attributes[0].first, "_xla_host_transfer_rendezvous");
  EXPECT_EQ(*FrontendAttribute(in, "_xla_megascale_transfer_type"), "ONE_TO_ONE");
  EXPECT_EQ(*FrontendAttribute(in, "_xla_send_recv_source_target_pairs"), "{{0,16},{16,0}}");
  EXPECT_EQ(FrontendAttribute(in, "absent"), nullptr);
}

TEST(HloTextTest, RootMetadataPackingAndDynamicDimensions) {
  const InstructionText in = Parse(
      "ROOT %recv-done.7 = (s4[<=64,2]{1,0:T(8,128)E(4)}, token[]) recv-done((s4[64,2], u32[], "
      "token[]) %recv.7), channel_id=7, metadata={op_name=\"jit(f)/recv\" "
      "source_file=\"a.py\" source_line=3}");
  EXPECT_EQ(in.name, "recv-done.7");
  EXPECT_EQ(in.opcode, "recv-done");
  ASSERT_TRUE(in.has_shape);
  EXPECT_EQ(in.shape.tuple_shapes[0].element_bits, 4);
  EXPECT_EQ(ShapeByteSize(in.shape), 64);  // 128 four-bit elements
  InstructionText f4;
  ASSERT_TRUE(ParseInstructionText("%s = f4e2m1fn[6]{0} send()", &f4));
  ASSERT_TRUE(f4.has_shape);
  EXPECT_EQ(f4.shape.element_type, PrimitiveType::kF4E2M1FN);
  EXPECT_EQ(ShapeByteSize(f4.shape), 6);  // a byte each unless the layout packs them
  EXPECT_EQ(in.op_name, "jit(f)/recv");
  EXPECT_FALSE(in.is_host_transfer);
  ASSERT_EQ(in.operands.size(), 1u);
  EXPECT_EQ(in.operands[0].name, "recv.7");
}

TEST(HloTextTest, AnUnknownElementTypeLeavesTheShapeAbsentNotTheRest) {
  const InstructionText in = Parse(
      "%send.3 = (q7[8]{0}, u32[], token[]) send(q7[8]{0} %p, token[] "
      "%t), channel_id=3, frontend_attributes={_xla_host_transfer_rendezvous=\"r\"}");
  EXPECT_FALSE(in.has_shape);
  EXPECT_EQ(in.opcode, "send");
  EXPECT_EQ(in.channel_id, 3);
  EXPECT_EQ(*FrontendAttribute(in, "_xla_host_transfer_rendezvous"), "r");
}

TEST(HloTextTest, DamagedTextIsSafe) {
  InstructionText in;
  EXPECT_FALSE(ParseInstructionText("", &in));
  EXPECT_FALSE(ParseInstructionText("no equals sign", &in));
  EXPECT_FALSE(ParseInstructionText("%x = f32[] ", &in));  // no opcode
  // Unclosed groups, a deep tuple, an overflowing dimension: parsed as far as they go.
  ASSERT_TRUE(ParseInstructionText("%a = f32[] send(f32[] %b, channel_id=1", &in));
  EXPECT_EQ(in.opcode, "send");
  EXPECT_TRUE(in.operands.empty());
  ASSERT_TRUE(ParseInstructionText(
      "%a = " + std::string(100, '(') + "f32[]" + std::string(100, ')') + " send()", &in));
  EXPECT_FALSE(in.has_shape);
  ASSERT_TRUE(ParseInstructionText("%a = f32[99999999999,99999999999] recv(), channel_id=2", &in));
  EXPECT_FALSE(in.has_shape);
  EXPECT_EQ(in.channel_id, 2);
  ASSERT_TRUE(ParseInstructionText(
      "%a = token[] send-done(), frontend_attributes={k=\"unclosed}, channel_id=5", &in));
  EXPECT_TRUE(in.frontend_attributes.empty());
}

std::vector<InstructionText> Texts(const std::vector<std::string>& texts) {
  std::vector<InstructionText> out;
  for (const std::string& t : texts) out.push_back(Parse(t));
  return out;
}

std::vector<std::string> Names(const Module& m) {
  std::vector<std::string> out;
  for (const Instruction& in : m.computations.back().instructions) out.push_back(in.name);
  return out;
}

TEST(HostTransferModuleTest, ParametersTokensOperandsAndRoot) {
  const Module m = HostTransferModule(
      "jit_step", 1,
      Texts({kSend,
             "%recv.101 = (bf16[524288]{0}, u32[], token[]) recv(token[] %t), "
             "channel_id=101, is_host_transfer=true",
             "%send-done.101 = token[] send-done((bf16[524288]{0}, u32[], token[]) %send.101), "
             "channel_id=101, is_host_transfer=true",
             "%recv-done.101 = (bf16[524288]{0}, token[]) recv-done((bf16[524288]{0}, u32[], "
             "token[]) %recv.101), channel_id=101, is_host_transfer=true",
             "%fusion.1 = f32[] fusion(f32[] %x), kind=kLoop"}));
  EXPECT_EQ(Names(m),
            (std::vector<std::string>{"reduce-scatter.0", "after-all.101", "send.101", "recv.101",
                                      "send-done.101", "recv-done.101", "get-tuple-element.dcn"}));
  const auto& in = m.computations.back().instructions;
  EXPECT_EQ(in[2].operand_ids, (std::vector<int64_t>{in[0].id, in[1].id}));
  EXPECT_EQ(in[3].operand_ids, std::vector<int64_t>{in[1].id});
  EXPECT_EQ(in[4].operand_ids, std::vector<int64_t>{in[2].id});
  EXPECT_EQ(in[5].operand_ids, std::vector<int64_t>{in[3].id});
  EXPECT_EQ(m.computations.back().root_id, in[6].id);
  EXPECT_EQ(m.parameter_names, std::vector<std::string>{"reduce-scatter.0"});
  EXPECT_EQ(m.result.element_type, PrimitiveType::kBf16);
  EXPECT_EQ(in[2].frontend_attributes.size(), 3u);
  EXPECT_TRUE(in[5].is_host_transfer);

  // XLA's field numbers, read back by podprof's own HloProto reader.
  HloModuleOps ops;
  ASSERT_OK(ReadHloModuleOps(EncodeHloProto(m), &ops));
  EXPECT_EQ(ops.name, "jit_step");
  EXPECT_EQ(ops.ops.at("recv-done.101").opcode, "recv-done");
  EXPECT_EQ(ops.ops.at("after-all.101").opcode, "after-all");
}

TEST(HostTransferModuleTest, ADoneWaitsForItsStartAndAMissingStartIsMadeUp) {
  const Module m = HostTransferModule(
      "m", 2,
      Texts({"%recv-done.5 = (f32[4]{0}, token[]) recv-done(%recv.5), channel_id=5",
             "%recv.5 = (f32[4]{0}, u32[], token[]) recv(%t), channel_id=5",
             "%send-done.9 = token[] send-done(%send.9), channel_id=9",
             "%recv.5 = (f32[4]{0}, u32[], token[]) recv(%t), channel_id=5"}));  // twice
  EXPECT_EQ(Names(m), (std::vector<std::string>{"send.9.start.data", "after-all.5", "recv.5",
                                                "recv-done.5", "after-all.9", "send.9.start",
                                                "send-done.9", "get-tuple-element.dcn"}));
  const auto& in = m.computations.back().instructions;
  EXPECT_EQ(in[3].operand_ids, std::vector<int64_t>{in[2].id});
  EXPECT_EQ(in[6].operand_ids, std::vector<int64_t>{in[5].id});
  EXPECT_EQ(in[7].operand_ids, std::vector<int64_t>{in[3].id});
}

TEST(HloTextTest, SourceTargetPairs) {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  ASSERT_TRUE(ParseSourceTargetPairs("{{0,16}, {16,0}}", &pairs));
  EXPECT_EQ(pairs, (std::vector<std::pair<int64_t, int64_t>>{{0, 16}, {16, 0}}));
  ASSERT_TRUE(ParseSourceTargetPairs("{}", &pairs));
  EXPECT_TRUE(pairs.empty());
  EXPECT_FALSE(ParseSourceTargetPairs("{{0,16},{1}}", &pairs));
  EXPECT_TRUE(pairs.empty());
  EXPECT_FALSE(ParseSourceTargetPairs("{{0,16}} trailing", &pairs));
}

}  // namespace
}  // namespace podprof::trace::hlo
