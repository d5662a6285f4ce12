// What podprof reads of a serialized XLA HloProto: each instruction's opcode and framework op
// name, by instruction name.
//
// JAX on CPU records XLA ops as host-thread events that carry only the instruction's name
// (`hlo_op`) and module; the opcode (which ops are collectives) and the user's named scopes
// (`jit(step)/dense/dot_general`, the instruction's OpMetadata.op_name) are in the module's
// HloProto, which the profiler stores once per program on the `/host:metadata` plane (event
// metadata per program, stat `Hlo Proto`). Field numbers are xla/service/hlo.proto's.
#ifndef PODPROF_TRACE_HLO_PROTO_H_
#define PODPROF_TRACE_HLO_PROTO_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace podprof::trace {

struct HloOpInfo {
  std::string opcode;   // "all-reduce", "fusion", "dot", ...
  std::string op_name;  // OpMetadata.op_name: the framework op path with named scopes
};

struct HloModuleOps {
  std::string name;                                 // HloModuleProto.name, e.g. "jit_train_step"
  absl::flat_hash_map<std::string, HloOpInfo> ops;  // by instruction name, every computation
};

// Reads `bytes` (a serialized HloProto). DataLoss naming the field when it is damaged.
absl::Status ReadHloModuleOps(absl::string_view bytes, HloModuleOps* out);

// True for the opcodes of cross-device collectives (their "-start" forms included).
bool IsCollectiveOpcode(absl::string_view opcode);

}  // namespace podprof::trace

#endif  // PODPROF_TRACE_HLO_PROTO_H_
