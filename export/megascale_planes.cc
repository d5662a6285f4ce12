#include "export/megascale_planes.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "export/plane_stats.h"
#include "trace/hlo_host_transfer.h"
#include "trace/hlo_proto_writer.h"
#include "trace/hlo_text.h"
#include "trace/varint.h"
#include "trace/xspace_schema.h"

namespace podprof::exporter {
namespace {

namespace xp = tensorflow::profiler;
using trace::xspace::Stat;

constexpr Stat kHostMetadataStats[] = {Stat::kHloProto, Stat::kProgramId};
constexpr PlaneStats kHostMetadata(kHostMetadataStats);

// tensorflow.profiler.DcnCollectiveInfoProto (plugin/xprof/protobuf/dcn_collective_info.proto):
// transfer_type = 1 (ONE_TO_ONE = 2), one_to_one_groups = 3.
constexpr uint32_t kTransferTypeField = 1, kOneToOneGroupsField = 3;
constexpr uint64_t kOneToOne = 2;

}  // namespace

bool IsHostTransferKernel(const trace::KernelDef& k) {
  return k.category == "host send" || k.category == "host send-done" || k.category == "host recv" ||
         k.category == "host recv-done";
}

bool HasHostTransferKernels(const trace::HostCapture& capture) {
  for (const trace::KernelDef& k : capture.kernels) {
    if (IsHostTransferKernel(k)) return true;
  }
  return false;
}

std::string DcnCollectiveInfoOf(const trace::KernelDef& k) {
  if (k.category != "host send" || k.hlo_text.empty()) return "";
  trace::hlo::InstructionText in;
  if (!trace::hlo::ParseInstructionText(k.hlo_text, &in) || in.opcode != "send") return "";
  const std::string* type = trace::hlo::FrontendAttribute(in, "_xla_megascale_transfer_type");
  const std::string* pairs_text =
      trace::hlo::FrontendAttribute(in, "_xla_send_recv_source_target_pairs");
  std::vector<std::pair<int64_t, int64_t>> pairs;
  if (type == nullptr || *type != "ONE_TO_ONE" || pairs_text == nullptr ||
      !trace::hlo::ParseSourceTargetPairs(*pairs_text, &pairs) || pairs.empty()) {
    return "";
  }
  std::string out;
  trace::PutVarint(uint64_t{kTransferTypeField} << 3, &out);
  trace::PutVarint(kOneToOne, &out);
  for (size_t i = 0; i < pairs.size(); ++i) {
    trace::PutVarint(uint64_t{kOneToOneGroupsField} << 3 | 2, &out);
    trace::PutVarint(0, &out);  // an OneToOneGroup whose endpoints are not known
  }
  return out;
}

void WriteMegaScaleHostPlane(int64_t id, xp::XPlane* plane) {
  plane->set_id(id);
  plane->set_name(std::string(trace::xspace::kHostCpuPlane));
  auto& m = (*plane->mutable_event_metadata())[1];
  m.set_id(1);
  m.set_name(std::string(trace::xspace::kMegaScaleSendEvent));
}

bool WriteHostMetadataPlane(const trace::HostCapture& capture, int64_t id, xp::XPlane* plane) {
  // The instructions of each program, in the order of the capture's kernels.
  std::map<std::pair<std::string, uint64_t>, std::vector<trace::hlo::InstructionText>> programs;
  for (const trace::KernelDef& k : capture.kernels) {
    if (!IsHostTransferKernel(k) || k.module.empty() || k.hlo_text.empty()) continue;
    trace::hlo::InstructionText in;
    if (!trace::hlo::ParseInstructionText(k.hlo_text, &in)) continue;
    if (in.op_name.empty()) in.op_name = k.tf_op;
    programs[{k.module, k.program_id}].push_back(std::move(in));
  }
  plane->set_id(id);
  plane->set_name(std::string(trace::xspace::kHostMetadataPlane));
  if (programs.empty()) return false;
  kHostMetadata.Declare(plane);
  int64_t meta_id = 0;
  for (const auto& [program, ops] : programs) {
    const auto& [module, program_id] = program;
    auto& m = (*plane->mutable_event_metadata())[++meta_id];
    m.set_id(meta_id);
    m.set_name(module);
    // The module's id in the proto: the program id where it fits, as XLA numbers them.
    const int64_t module_id =
        program_id > 0 && program_id <= INT64_MAX ? static_cast<int64_t>(program_id) : meta_id;
    kHostMetadata.Add(m.mutable_stats(), Stat::kHloProto)
        ->set_bytes_value(
            trace::hlo::EncodeHloProto(trace::hlo::HostTransferModule(module, module_id, ops)));
    if (program_id != 0) {
      kHostMetadata.Add(m.mutable_stats(), Stat::kProgramId)->set_uint64_value(program_id);
    }
  }
  return true;
}

}  // namespace podprof::exporter
