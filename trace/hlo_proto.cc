#include "trace/hlo_proto.h"

#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "trace/wire.h"

namespace podprof::trace {
namespace {

using wire::Span;
using wire::WireType;

// xla/service/hlo.proto and xla/xla_data.proto.
constexpr uint32_t kHloProtoModule = 1;           // HloProto.hlo_module
constexpr uint32_t kModuleName = 1;               // HloModuleProto.name
constexpr uint32_t kModuleComputations = 3;       // HloModuleProto.computations
constexpr uint32_t kComputationInstructions = 2;  // HloComputationProto.instructions
constexpr uint32_t kInstructionName = 1;          // HloInstructionProto.name
constexpr uint32_t kInstructionOpcode = 2;        // HloInstructionProto.opcode
constexpr uint32_t kInstructionMetadata = 7;      // HloInstructionProto.metadata (OpMetadata)
constexpr uint32_t kMetadataOpName = 2;           // OpMetadata.op_name

Span SpanOf(absl::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  return Span(p, p + bytes.size(), 0);
}

// Calls `field(number, wire type, span)` for each field of `msg`; `what` names it in errors.
template <typename Field>
absl::Status ForEachField(Span msg, const char* what, Field field) {
  while (!msg.done()) {
    uint32_t number;
    WireType wt;
    if (!msg.ReadTag(&number, &wt)) {
      return absl::DataLossError(
          absl::StrCat("HloProto: bad tag in ", what, " at byte ", msg.offset()));
    }
    if (wt == wire::kLengthDelimited) {
      Span sub;
      if (!msg.ReadSub(&sub)) {
        return absl::DataLossError(absl::StrCat("HloProto: truncated field ", number, " of ", what,
                                                " at byte ", msg.offset()));
      }
      if (absl::Status s = field(number, sub); !s.ok()) return s;
    } else if (!msg.Skip(wt)) {
      return absl::DataLossError(
          absl::StrCat("HloProto: bad field ", number, " of ", what, " at byte ", msg.offset()));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadInstruction(Span instruction, HloModuleOps* out) {
  std::string name;
  HloOpInfo info;
  absl::Status s = ForEachField(instruction, "HloInstructionProto", [&](uint32_t n, Span sub) {
    if (n == kInstructionName) {
      name = std::string(sub.rest());
    } else if (n == kInstructionOpcode) {
      info.opcode = std::string(sub.rest());
    } else if (n == kInstructionMetadata) {
      return ForEachField(sub, "OpMetadata", [&](uint32_t m, Span v) {
        if (m == kMetadataOpName) info.op_name = std::string(v.rest());
        return absl::OkStatus();
      });
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  if (!name.empty()) out->ops.insert_or_assign(std::move(name), std::move(info));
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadHloModuleOps(absl::string_view bytes, HloModuleOps* out) {
  return ForEachField(SpanOf(bytes), "HloProto", [&](uint32_t n, Span module) {
    if (n != kHloProtoModule) return absl::OkStatus();
    return ForEachField(module, "HloModuleProto", [&](uint32_t m, Span sub) {
      if (m == kModuleName) {
        out->name = std::string(sub.rest());
        return absl::OkStatus();
      }
      if (m != kModuleComputations) return absl::OkStatus();
      return ForEachField(sub, "HloComputationProto", [&](uint32_t c, Span instruction) {
        if (c != kComputationInstructions) return absl::OkStatus();
        return ReadInstruction(instruction, out);
      });
    });
  });
}

bool IsCollectiveOpcode(absl::string_view opcode) {
  absl::ConsumeSuffix(&opcode, "-start");
  for (absl::string_view c : {"all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                              "ragged-all-to-all", "collective-permute", "collective-broadcast"}) {
    if (opcode == c) return true;
  }
  return false;
}

}  // namespace podprof::trace
