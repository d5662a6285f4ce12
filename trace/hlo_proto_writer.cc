#include "trace/hlo_proto_writer.h"

#include <string>

#include "absl/strings/string_view.h"
#include "trace/varint.h"

namespace podprof::trace::hlo {
namespace {

// xla/service/hlo.proto @ bfbc776e6233f97b5fb13bbc6022834f61646b62.
constexpr uint32_t kHloProtoModule = 1;  // HloProto.hlo_module
struct ModuleField {                     // HloModuleProto
  static constexpr uint32_t kName = 1, kEntryComputationName = 2, kComputations = 3,
                            kHostProgramShape = 4, kId = 5, kEntryComputationId = 6;
};
struct ComputationField {  // HloComputationProto
  static constexpr uint32_t kName = 1, kInstructions = 2, kProgramShape = 4, kId = 5, kRootId = 6;
};
struct InstructionField {  // HloInstructionProto
  static constexpr uint32_t kName = 1, kOpcode = 2, kShape = 3, kMetadata = 7, kParameterNumber = 9,
                            kTupleIndex = 13, kChannelId = 26, kId = 35, kOperandIds = 36,
                            kIsHostTransfer = 47, kFrontendAttributes = 68;
};
// xla/xla_data.proto @ 3eaf5bb47ac1db378a834ab1f5df8627c0545fa7.
struct ShapeField {  // ShapeProto
  static constexpr uint32_t kElementType = 2, kDimensions = 3, kTupleShapes = 4, kLayout = 5;
};
constexpr uint32_t kLayoutMinorToMajor = 1;       // LayoutProto.minor_to_major
constexpr uint32_t kLayoutElementSizeInBits = 7;  // LayoutProto.element_size_in_bits
struct ProgramShapeField {                        // ProgramShapeProto
  static constexpr uint32_t kParameters = 1, kResult = 2, kParameterNames = 3;
};
constexpr uint32_t kOpMetadataOpName = 2;       // OpMetadata.op_name
constexpr uint32_t kFrontendAttributesMap = 1;  // FrontendAttributes.map (map<string, string>)
constexpr uint32_t kMapKey = 1, kMapValue = 2;  // a map entry

void PutTag(uint32_t field, uint32_t wire_type, std::string* out) {
  PutVarint(uint64_t{field} << 3 | wire_type, out);
}
void PutInt(uint32_t field, int64_t v, std::string* out) {
  PutTag(field, 0, out);
  PutVarint(static_cast<uint64_t>(v), out);
}
void PutBytes(uint32_t field, absl::string_view bytes, std::string* out) {
  PutTag(field, 2, out);
  PutVarint(bytes.size(), out);
  out->append(bytes.data(), bytes.size());
}
// Packed repeated int64 (proto3's default for repeated scalars).
void PutPacked(uint32_t field, const std::vector<int64_t>& values, std::string* out) {
  if (values.empty()) return;
  std::string packed;
  for (int64_t v : values) PutVarint(static_cast<uint64_t>(v), &packed);
  PutBytes(field, packed, out);
}

std::string ProgramShape(const Module& module) {
  std::string out;
  for (const Shape& p : module.parameters) {
    PutBytes(ProgramShapeField::kParameters, EncodeShape(p), &out);
  }
  PutBytes(ProgramShapeField::kResult, EncodeShape(module.result), &out);
  for (const std::string& name : module.parameter_names) {
    PutBytes(ProgramShapeField::kParameterNames, name, &out);
  }
  return out;
}

std::string EncodeInstruction(const Instruction& in) {
  std::string out;
  PutBytes(InstructionField::kName, in.name, &out);
  PutBytes(InstructionField::kOpcode, in.opcode, &out);
  PutBytes(InstructionField::kShape, EncodeShape(in.shape), &out);
  if (!in.op_name.empty()) {
    std::string metadata;
    PutBytes(kOpMetadataOpName, in.op_name, &metadata);
    PutBytes(InstructionField::kMetadata, metadata, &out);
  }
  if (in.parameter_number != 0)
    PutInt(InstructionField::kParameterNumber, in.parameter_number, &out);
  if (in.tuple_index != 0) PutInt(InstructionField::kTupleIndex, in.tuple_index, &out);
  if (in.channel_id != 0) PutInt(InstructionField::kChannelId, in.channel_id, &out);
  PutInt(InstructionField::kId, in.id, &out);
  PutPacked(InstructionField::kOperandIds, in.operand_ids, &out);
  if (in.is_host_transfer) PutInt(InstructionField::kIsHostTransfer, 1, &out);
  if (!in.frontend_attributes.empty()) {
    std::string attributes;
    for (const auto& [key, value] : in.frontend_attributes) {
      std::string entry;
      PutBytes(kMapKey, key, &entry);
      PutBytes(kMapValue, value, &entry);
      PutBytes(kFrontendAttributesMap, entry, &attributes);
    }
    PutBytes(InstructionField::kFrontendAttributes, attributes, &out);
  }
  return out;
}

}  // namespace

std::string EncodeShape(const Shape& shape) {
  std::string out;
  PutInt(ShapeField::kElementType, static_cast<int64_t>(shape.element_type), &out);
  PutPacked(ShapeField::kDimensions, shape.dimensions, &out);
  for (const Shape& t : shape.tuple_shapes)
    PutBytes(ShapeField::kTupleShapes, EncodeShape(t), &out);
  if (shape.element_type != PrimitiveType::kTuple && shape.element_type != PrimitiveType::kToken) {
    // The default layout: the last dimension is the most minor.
    std::vector<int64_t> minor_to_major;
    for (size_t i = shape.dimensions.size(); i > 0; --i) {
      minor_to_major.push_back(static_cast<int64_t>(i - 1));
    }
    std::string layout;
    PutPacked(kLayoutMinorToMajor, minor_to_major, &layout);
    if (shape.element_bits != 0) PutInt(kLayoutElementSizeInBits, shape.element_bits, &layout);
    PutBytes(ShapeField::kLayout, layout, &out);
  }
  return out;
}

std::string EncodeHloProto(const Module& module) {
  std::string m;
  PutBytes(ModuleField::kName, module.name, &m);
  if (!module.computations.empty()) {
    PutBytes(ModuleField::kEntryComputationName, module.computations.back().name, &m);
  }
  for (const Computation& c : module.computations) {
    std::string comp;
    PutBytes(ComputationField::kName, c.name, &comp);
    for (const Instruction& in : c.instructions) {
      PutBytes(ComputationField::kInstructions, EncodeInstruction(in), &comp);
    }
    if (&c == &module.computations.back()) {
      PutBytes(ComputationField::kProgramShape, ProgramShape(module), &comp);
    }
    PutInt(ComputationField::kId, c.id, &comp);
    PutInt(ComputationField::kRootId, c.root_id, &comp);
    PutBytes(ModuleField::kComputations, comp, &m);
  }
  PutBytes(ModuleField::kHostProgramShape, ProgramShape(module), &m);
  PutInt(ModuleField::kId, module.id, &m);
  if (!module.computations.empty()) {
    PutInt(ModuleField::kEntryComputationId, module.computations.back().id, &m);
  }
  std::string out;
  PutBytes(kHloProtoModule, m, &out);
  return out;
}

}  // namespace podprof::trace::hlo
