// The host-transfer instructions' HLO text, read as XProf reads the instruction behind it
// (xspace_to_dcn_slack_analysis.cc, GetInstrMetadataFromHloModule): opcode, channel_id, the
// frontend attributes and the shape's byte size. The text itself is parsed by trace/hlo_text.h,
// the parser the XProf exporter rebuilds the ops' program with, so both read a text alike; it
// walks any text once, nesting bounded, and leaves what it cannot read absent.
#include <string>
#include <string_view>
#include <utility>

#include "insight/dcn.h"
#include "trace/hlo_text.h"

namespace podprof::insight {
namespace {

bool OpcodeKind(std::string_view op, DcnOpKind* kind) {
  if (op == "send")
    *kind = DcnOpKind::kSend;
  else if (op == "send-done")
    *kind = DcnOpKind::kSendDone;
  else if (op == "recv")
    *kind = DcnOpKind::kRecv;
  else if (op == "recv-done")
    *kind = DcnOpKind::kRecvDone;
  else
    return false;
  return true;
}

}  // namespace

bool DcnOpKindOfCategory(const std::string& category, DcnOpKind* kind) {
  if (category == "host send")
    *kind = DcnOpKind::kSend;
  else if (category == "host send-done")
    *kind = DcnOpKind::kSendDone;
  else if (category == "host recv")
    *kind = DcnOpKind::kRecv;
  else if (category == "host recv-done")
    *kind = DcnOpKind::kRecvDone;
  else
    return false;
  return true;
}

bool ParseDcnInstruction(const trace::KernelDef& k, DcnInstruction* out) {
  // XProf takes an op as a host transfer when its category contains `host send` or
  // `host recv`, and its kind from the instruction's opcode; podprof reads the opcode from the
  // text and falls back to the category's exact name.
  const bool host_transfer = k.category.find("host send") != std::string::npos ||
                             k.category.find("host recv") != std::string::npos;
  if (!host_transfer) return false;
  DcnInstruction d;
  d.name = k.name;
  const bool by_category = DcnOpKindOfCategory(k.category, &d.kind);
  trace::hlo::InstructionText in;
  DcnOpKind kind;
  const bool by_opcode =
      trace::hlo::ParseInstructionText(k.hlo_text, &in) && OpcodeKind(in.opcode, &kind);
  if (!by_opcode && !by_category) return false;
  if (by_opcode) {
    d.kind = kind;
    // A shape this parser does not know: its size is unknown, the rest is still read.
    d.bytes = in.has_shape ? trace::hlo::ShapeByteSize(in.shape) : 0;
    d.channel_id = in.channel_id;
    if (const std::string* r = trace::hlo::FrontendAttribute(in, "_xla_host_transfer_rendezvous")) {
      d.rendezvous = *r;
      d.has_rendezvous = true;
    }
    if (const std::string* t = trace::hlo::FrontendAttribute(in, "_xla_megascale_transfer_type")) {
      d.transfer_type = *t;
    }
    if (const std::string* p =
            trace::hlo::FrontendAttribute(in, "_xla_send_recv_source_target_pairs")) {
      trace::hlo::ParseSourceTargetPairs(*p, &d.source_target_pairs);
    }
  }
  *out = std::move(d);
  return true;
}

}  // namespace podprof::insight
