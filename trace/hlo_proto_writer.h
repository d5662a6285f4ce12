// A small encoder of XLA's HloProto (the bytes of a `/host:metadata` event metadata's
// `Hlo Proto` stat), for writers of XSpace that describe a program: the simulated host's
// multi-slice step (sim/dcn_program.h) and the XProf exporter, through trace/hlo_host_transfer.h.
//
// It writes the fields XLA needs to rebuild the module (`HloModule::CreateFromProto`, which
// XProf's tools call): the module's name, id, entry computation and host program shape; each
// computation's instructions in dependency order with ids, operands, shapes (with layouts for
// arrays), channel ids, host-transfer flags, tuple indices, parameter numbers, frontend
// attributes and the framework op name. Nothing else of the message is written. Field numbers
// are those of openxla/xla `xla/service/hlo.proto` at bfbc776e6233f97b5fb13bbc6022834f61646b62
// and `xla/xla_data.proto` at 3eaf5bb47ac1db378a834ab1f5df8627c0545fa7; trace/hlo_proto.h reads
// the same numbers back.
#ifndef PODPROF_TRACE_HLO_PROTO_WRITER_H_
#define PODPROF_TRACE_HLO_PROTO_WRITER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace podprof::trace::hlo {

// xla.PrimitiveType values (xla_data.proto): the array types HLO text names most, tuple and
// token.
enum class PrimitiveType : int {
  kPred = 1,
  kS8 = 2,
  kS16 = 3,
  kS32 = 4,
  kS64 = 5,
  kU8 = 6,
  kU16 = 7,
  kU32 = 8,
  kU64 = 9,
  kF16 = 10,
  kF32 = 11,
  kF64 = 12,
  kTuple = 13,
  kC64 = 15,
  kBf16 = 16,
  kToken = 17,
  kC128 = 18,
  kF8E5M2 = 19,
  kF8E4M3FN = 20,
  kS4 = 21,
  kU4 = 22,
  kF8E4M3B11FNUZ = 23,
  kF8E5M2FNUZ = 24,
  kF8E4M3FNUZ = 25,
  kS2 = 26,
  kU2 = 27,
  kF8E4M3 = 28,
  kF8E3M4 = 29,
  kF4E2M1FN = 32,
  kF8E8M0FNU = 33,
};

// xla.ShapeProto: an array (element type and dimensions, written with the default layout,
// minor-to-major = the dimensions in reverse), a tuple of shapes, or a token.
struct Shape {
  PrimitiveType element_type = PrimitiveType::kTuple;
  std::vector<int64_t> dimensions;
  std::vector<Shape> tuple_shapes;
  // An array's elements packed to this many bits each (the layout's element_size_in_bits,
  // HLO text `E(n)`); 0: unpacked.
  int64_t element_bits = 0;

  static Shape Array(PrimitiveType type, std::vector<int64_t> dims) {
    return Shape{type, std::move(dims), {}, 0};
  }
  static Shape Tuple(std::vector<Shape> elements) {
    return Shape{PrimitiveType::kTuple, {}, std::move(elements), 0};
  }
  static Shape Token() { return Shape{PrimitiveType::kToken, {}, {}, 0}; }
};

// xla.HloInstructionProto, the fields written.
struct Instruction {
  std::string name;    // "send.101"
  std::string opcode;  // "send", "recv-done", "parameter", "after-all", ...
  Shape shape;
  int64_t id = 0;  // unique in the module, > 0
  std::vector<int64_t> operand_ids;
  int64_t channel_id = 0;         // 0: none
  bool is_host_transfer = false;  // send, recv and their -done partners
  int64_t parameter_number = 0;   // kParameter
  int64_t tuple_index = 0;        // kGetTupleElement
  std::vector<std::pair<std::string, std::string>> frontend_attributes;
  std::string op_name;  // OpMetadata.op_name; "" writes no metadata
};

// xla.HloComputationProto.
struct Computation {
  std::string name;
  int64_t id = 0;
  std::vector<Instruction> instructions;  // operands before their users
  int64_t root_id = 0;
};

// xla.HloModuleProto inside an xla.HloProto.
struct Module {
  std::string name;  // "jit_train_step"
  int64_t id = 0;
  std::vector<Computation> computations;  // callees before callers; the entry last
  // The entry computation's parameters, their names and its result (host_program_shape; XLA
  // wants a name for every parameter).
  std::vector<Shape> parameters;
  std::vector<std::string> parameter_names;
  Shape result;
};

// The serialized xla.HloProto holding `module`; its entry computation is the last one.
std::string EncodeHloProto(const Module& module);

// A serialized xla.ShapeProto (exposed for tests).
std::string EncodeShape(const Shape& shape);

}  // namespace podprof::trace::hlo

#endif  // PODPROF_TRACE_HLO_PROTO_WRITER_H_
