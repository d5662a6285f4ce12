#include "sim/dcn_program.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "trace/hlo_proto_writer.h"
#include "trace/varint.h"

namespace podprof::sim {
namespace {

namespace hlo = trace::hlo;

// HLO text of the shapes (the layout XLA prints for a rank-1 array).
constexpr char kBuffer[] = "bf16[524288]{0}";
constexpr char kStarted[] = "(bf16[524288]{0}, u32[], token[])";  // send, recv
constexpr char kReceived[] = "(bf16[524288]{0}, token[])";        // recv-done

struct RoleText {
  DcnRole role;
  const char* opcode;
  const char* category;
};
constexpr RoleText kRoles[] = {
    {DcnRole::kSend, "send", "host send"},
    {DcnRole::kRecv, "recv", "host recv"},
    {DcnRole::kSendDone, "send-done", "host send-done"},
    {DcnRole::kRecvDone, "recv-done", "host recv-done"},
};

std::string RendezvousName(int r) { return absl::StrCat("dcn_grads.", r); }

// The frontend attributes every op of a rendezvous carries, in the order XLA prints them.
std::vector<std::pair<std::string, std::string>> Attributes(int r, const std::string& pairs) {
  return {{"_xla_host_transfer_rendezvous", RendezvousName(r)},
          {"_xla_megascale_transfer_type", "ONE_TO_ONE"},
          {"_xla_send_recv_source_target_pairs", pairs}};
}

std::string HloText(DcnRole role, int64_t channel, int r, const std::string& pairs) {
  std::string operands;
  std::string shape;
  switch (role) {
    case DcnRole::kSend:
      shape = kStarted;
      operands = absl::StrCat(kBuffer, " %reduce-scatter.0, token[] %after-all.", channel);
      break;
    case DcnRole::kRecv:
      shape = kStarted;
      operands = absl::StrCat("token[] %after-all.", channel);
      break;
    case DcnRole::kSendDone:
      shape = "token[]";
      operands = absl::StrCat(kStarted, " %send.", channel);
      break;
    default:
      shape = kReceived;
      operands = absl::StrCat(kStarted, " %recv.", channel);
      break;
  }
  std::string attributes;
  for (const auto& [key, value] : Attributes(r, pairs)) {
    absl::StrAppend(&attributes, attributes.empty() ? "" : ",", key, "=\"", value, "\"");
  }
  const char* opcode = kRoles[static_cast<int>(role) - 1].opcode;
  return absl::StrCat("%", opcode, ".", channel, " = ", shape, " ", opcode, "(", operands,
                      "), channel_id=", channel, ", is_host_transfer=true, frontend_attributes={",
                      attributes, "}");
}

void PutTag(uint32_t field, uint32_t wire_type, std::string* out) {
  trace::PutVarint(uint64_t{field} << 3 | wire_type, out);
}
void PutSub(uint32_t field, const std::string& bytes, std::string* out) {
  PutTag(field, 2, out);
  trace::PutVarint(bytes.size(), out);
  out->append(bytes);
}

// DcnCollectiveInfoProto.Endpoint{int32 slice_id = 1; int32 device_id = 2;}.
std::string Endpoint(int64_t chip, int64_t chips_per_slice) {
  std::string out;
  PutTag(1, 0, &out);
  trace::PutVarint(static_cast<uint64_t>(chip / chips_per_slice), &out);
  PutTag(2, 0, &out);
  trace::PutVarint(static_cast<uint64_t>(chip % chips_per_slice), &out);
  return out;
}

}  // namespace

std::string DcnSourceTargetPairs(int64_t total_chips, int64_t chips_per_slice) {
  std::string out = "{";
  for (int64_t g = 0; g < total_chips; ++g) {
    absl::StrAppend(&out, g == 0 ? "" : ",", "{", g, ",", (g + chips_per_slice) % total_chips, "}");
  }
  return out + "}";
}

std::vector<OpTemplate> DcnOps(int64_t total_chips, int64_t chips_per_slice) {
  const std::string pairs = DcnSourceTargetPairs(total_chips, chips_per_slice);
  std::vector<OpTemplate> ops;
  for (int r = 0; r < kDcnRendezvous; ++r) {
    const int64_t channel = kFirstDcnChannel + r;
    for (const RoleText& role : kRoles) {
      OpTemplate op;
      op.name = absl::StrCat(role.opcode, ".", channel);
      op.hlo_text = HloText(role.role, channel, r, pairs);
      op.category = role.category;
      op.efficiency = 1;
      op.source = absl::StrCat("train.py:", 70 + r);
      op.tf_op = absl::StrCat("jit(train_step)/jit(main)/", role.opcode);
      op.units = {0, 0, 0.02, 0.3, 0, 0.2};
      op.expected_bound = "communication";
      op.dcn = role.role;
      op.rendezvous = r;
      op.rendezvous_name = RendezvousName(r);
      op.channel_id = channel;
      op.dcn_bytes = kDcnBytes;
      ops.push_back(std::move(op));
    }
  }
  return ops;
}

std::string DcnHloProto(const std::string& module_name, int64_t module_id,
                        const std::vector<OpTemplate>& ops, int64_t total_chips,
                        int64_t chips_per_slice) {
  const std::string pairs = DcnSourceTargetPairs(total_chips, chips_per_slice);
  const hlo::Shape buffer = hlo::Shape::Array(hlo::PrimitiveType::kBf16, {kDcnElements});
  const hlo::Shape started = hlo::Shape::Tuple(
      {buffer, hlo::Shape::Array(hlo::PrimitiveType::kU32, {}), hlo::Shape::Token()});
  hlo::Computation entry;
  entry.name = "main";
  int64_t next_id = 1;
  hlo::Instruction param;
  param.name = "reduce-scatter.0";  // the gradients the rendezvous carry: a parameter here
  param.opcode = "parameter";
  param.shape = buffer;
  param.id = next_id++;
  entry.instructions.push_back(param);
  // One token per rendezvous; the send and recv of a rendezvous take it, their -done partners
  // take them.
  int64_t token_id = 0, send_id = 0, recv_id = 0, last_recv_done = 0;
  for (const OpTemplate& t : ops) {
    if (t.dcn == DcnRole::kNone) continue;
    if (t.dcn == DcnRole::kSend) {
      hlo::Instruction token;
      token.name = absl::StrCat("after-all.", t.channel_id);
      token.opcode = "after-all";
      token.shape = hlo::Shape::Token();
      token.id = token_id = next_id++;
      entry.instructions.push_back(std::move(token));
    }
    hlo::Instruction in;
    in.name = t.name;
    in.opcode = kRoles[static_cast<int>(t.dcn) - 1].opcode;
    in.id = next_id++;
    in.channel_id = t.channel_id;
    in.is_host_transfer = true;
    in.frontend_attributes = Attributes(t.rendezvous, pairs);
    in.op_name = t.tf_op;
    switch (t.dcn) {
      case DcnRole::kSend:
        in.shape = started;
        in.operand_ids = {param.id, token_id};
        send_id = in.id;
        break;
      case DcnRole::kRecv:
        in.shape = started;
        in.operand_ids = {token_id};
        recv_id = in.id;
        break;
      case DcnRole::kSendDone:
        in.shape = hlo::Shape::Token();
        in.operand_ids = {send_id};
        break;
      default:
        in.shape = hlo::Shape::Tuple({buffer, hlo::Shape::Token()});
        in.operand_ids = {recv_id};
        last_recv_done = in.id;
        break;
    }
    entry.instructions.push_back(std::move(in));
  }
  // The result: the last rendezvous' received gradients.
  hlo::Instruction result;
  result.name = "get-tuple-element.dcn";
  result.opcode = "get-tuple-element";
  result.shape = buffer;
  result.id = next_id++;
  result.operand_ids = {last_recv_done};
  entry.instructions.push_back(result);
  entry.root_id = result.id;
  entry.id = next_id++;
  hlo::Module module;
  module.name = module_name;
  module.id = module_id;
  module.computations.push_back(std::move(entry));
  module.parameters = {buffer};
  module.parameter_names = {param.name};
  module.result = buffer;
  return hlo::EncodeHloProto(module);
}

std::string DcnCollectiveInfo(int64_t total_chips, int64_t chips_per_slice) {
  std::string out;
  PutTag(1, 0, &out);         // transfer_type
  trace::PutVarint(2, &out);  // ONE_TO_ONE
  for (int64_t g = 0; g < total_chips; ++g) {
    std::string group;
    PutSub(1, Endpoint(g, chips_per_slice), &group);
    PutSub(2, Endpoint((g + chips_per_slice) % total_chips, chips_per_slice), &group);
    PutSub(3, group, &out);  // one_to_one_groups
  }
  return out;
}

}  // namespace podprof::sim
