#include "sim/dcn_program.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "trace/hlo_host_transfer.h"
#include "trace/hlo_proto_writer.h"
#include "trace/hlo_text.h"
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
                        const std::vector<OpTemplate>& ops) {
  std::vector<hlo::InstructionText> texts;
  for (const OpTemplate& t : ops) {
    if (t.dcn == DcnRole::kNone) continue;
    hlo::InstructionText in;
    if (!hlo::ParseInstructionText(t.hlo_text, &in)) continue;
    in.op_name = t.tf_op;
    texts.push_back(std::move(in));
  }
  return hlo::EncodeHloProto(hlo::HostTransferModule(module_name, module_id, texts));
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
