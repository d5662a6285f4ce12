// One HLO instruction's text, as a TPU capture names an `XLA Ops` event's metadata
// (`%send.101 = (bf16[524288]{0}, u32[], token[]) send(bf16[524288]{0} %x, token[] %t),
// channel_id=101, is_host_transfer=true, frontend_attributes={k="v",...}`), read into what a
// program's HloProto holds of it (trace/hlo_proto_writer.h): name, shape, opcode, operands,
// channel, host-transfer flag, frontend attributes and the framework op name.
//
// The text comes from a capture, so it may be anything: the parser walks it once with nesting
// bounded, never trusts a size past 2^60 bytes, and a part it cannot read is left absent. The
// XSpace exporter parses the stored host-transfer kernels with it to rebuild their program
// (export/xspace_export.cc), and the simulator its own DCN ops' texts (sim/dcn_program.h), so
// that the HloProto it writes is what its texts say.
#ifndef PODPROF_TRACE_HLO_TEXT_H_
#define PODPROF_TRACE_HLO_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trace/hlo_proto_writer.h"

namespace podprof::trace::hlo {

struct InstructionText {
  std::string name;  // "send.101", without the `%`
  // The result's shape; has_shape false when it could not be read (an element type this
  // parser does not know, a damaged shape): then `shape` is empty and the rest may still be.
  Shape shape;
  bool has_shape = false;
  std::string opcode;  // "send", "recv-done", ...; empty when the text has none
  // The operands, in order: their names (without `%`) and shapes as the text gives them
  // (has_shape false where a shape could not be read).
  struct Operand {
    std::string name;
    Shape shape;
    bool has_shape = false;
  };
  std::vector<Operand> operands;
  int64_t channel_id = 0;  // `channel_id=`; 0 when absent
  bool is_host_transfer = false;
  // `frontend_attributes={...}` in the text's order, values unescaped; a damaged group is
  // dropped whole.
  std::vector<std::pair<std::string, std::string>> frontend_attributes;
  std::string op_name;  // `metadata={op_name="..."}`; empty when absent
};

// Parses `text` (an optional `ROOT `, then `%name = SHAPE opcode(operands), attributes`).
// False when not even the name, `=` and opcode can be found; any other part that cannot be
// read is left at its default.
bool ParseInstructionText(std::string_view text, InstructionText* out);

// A frontend attribute's value by key; nullptr when absent.
const std::string* FrontendAttribute(const InstructionText& in, std::string_view key);

// `_xla_send_recv_source_target_pairs`' value, `{{0,16},{16,32}}`: the (source, target)
// pairs; false (pairs cleared) for anything else. `{}` is no pairs.
bool ParseSourceTargetPairs(std::string_view value,
                            std::vector<std::pair<int64_t, int64_t>>* pairs);

// The shape's size as XLA's ShapeUtil::ByteSizeOf counts an array (elements x element bytes,
// or packed to Shape::element_bits), or a tuple's elements summed (a token 0): what XProf's DCN
// analysis takes as a host transfer's size.
int64_t ShapeByteSize(const Shape& shape);

// Bits of one element of `type` as XLA stores it unpacked (a byte for the sub-byte types);
// 0 for tuple and token.
int ElementBits(PrimitiveType type);

}  // namespace podprof::trace::hlo

#endif  // PODPROF_TRACE_HLO_TEXT_H_
