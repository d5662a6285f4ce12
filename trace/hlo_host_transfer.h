// The program a set of host-transfer (DCN) instructions belongs to, as an HloProto XLA can
// rebuild (`HloModule::CreateFromProto`, which XProf's `megascale_stats` calls before it looks
// an op's channel, rendezvous and size up in it; docs/MEGASCALE.md 1.3): the instructions as
// their texts give them, with what XLA wants around them made up: a parameter for each send's
// data, a token per channel, and a root.
//
// Written by the simulator for its multi-slice step (sim/dcn_program.h) and by the XProf
// exporter for a stored capture's host-transfer kernels (export/xspace_export.cc), both from
// the instructions' HLO texts (trace/hlo_text.h).
#ifndef PODPROF_TRACE_HLO_HOST_TRANSFER_H_
#define PODPROF_TRACE_HLO_HOST_TRANSFER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trace/hlo_proto_writer.h"
#include "trace/hlo_text.h"

namespace podprof::trace::hlo {

// True for the host-transfer opcodes: send, recv, send-done, recv-done.
bool IsHostTransferOpcode(std::string_view opcode);

// The module `name` (id `id`) of `ops`, host-transfer instructions parsed from their texts
// (others, and those without a readable shape, are left out; a name seen twice is kept once).
// Each keeps its name, opcode, shape, channel, host-transfer flag, frontend attributes and op
// name. Around them, in the order given (a -done waits for its start, found by opcode and
// channel): one parameter per distinct name of a send's data operand (its shape the send's
// tuple's first element), an `after-all.<channel>` token per channel before its first send or
// recv, a start made up for a -done whose start is missing (`<opcode>.<channel>.start`, its
// data a scalar s32 for a send), and a root: element 0 of the last recv-done
// (`get-tuple-element.dcn`), else the last instruction.
Module HostTransferModule(const std::string& name, int64_t id,
                          const std::vector<InstructionText>& ops);

}  // namespace podprof::trace::hlo

#endif  // PODPROF_TRACE_HLO_HOST_TRANSFER_H_
