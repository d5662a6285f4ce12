#include "trace/hlo_host_transfer.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace podprof::trace::hlo {
namespace {

bool IsDone(const std::string& opcode) { return opcode == "send-done" || opcode == "recv-done"; }
// The start op a -done takes its context from.
std::string StartOf(const std::string& done) { return done == "send-done" ? "send" : "recv"; }

// A send's data: its tuple's first element (XLA's send shape is (data, u32[], token[])).
Shape DataShape(const InstructionText& send) {
  if (send.shape.element_type == PrimitiveType::kTuple && !send.shape.tuple_shapes.empty()) {
    return send.shape.tuple_shapes.front();
  }
  return Shape::Array(PrimitiveType::kS32, {});
}

std::string DataName(const InstructionText& send) {
  if (!send.operands.empty() && !send.operands.front().name.empty()) {
    return send.operands.front().name;
  }
  return absl::StrCat(send.name, ".data");
}

// The start a -done lacks: a send of a scalar, or a recv of what the recv-done holds.
InstructionText MadeUpStart(const InstructionText& done) {
  InstructionText start;
  start.opcode = StartOf(done.opcode);
  start.name = absl::StrCat(start.opcode, ".", done.channel_id, ".start");
  start.has_shape = true;
  Shape data = Shape::Array(PrimitiveType::kS32, {});
  if (done.opcode == "recv-done" && done.shape.element_type == PrimitiveType::kTuple &&
      !done.shape.tuple_shapes.empty()) {
    data = done.shape.tuple_shapes.front();
  }
  start.shape = Shape::Tuple({data, Shape::Array(PrimitiveType::kU32, {}), Shape::Token()});
  start.channel_id = done.channel_id;
  start.is_host_transfer = done.is_host_transfer;
  start.frontend_attributes = done.frontend_attributes;
  return start;
}

}  // namespace

bool IsHostTransferOpcode(std::string_view opcode) {
  return opcode == "send" || opcode == "recv" || opcode == "send-done" || opcode == "recv-done";
}

// Long: one pass numbering the instructions in dependency order (parameters, tokens, each start
// before its -done, the root last); its steps share the id maps it fills.
Module HostTransferModule(const std::string& name, int64_t id,
                          const std::vector<InstructionText>& ops) {
  // The instructions kept, a made-up start before any -done whose start is missing.
  std::vector<InstructionText> kept;
  std::set<std::string> names;
  std::set<std::pair<std::string, int64_t>> starts;  // (opcode, channel)
  for (const InstructionText& in : ops) {
    if (!IsHostTransferOpcode(in.opcode) || !in.has_shape) continue;
    if (!IsDone(in.opcode)) starts.emplace(in.opcode, in.channel_id);
  }
  for (const InstructionText& in : ops) {
    if (!IsHostTransferOpcode(in.opcode) || !in.has_shape || !names.insert(in.name).second) {
      continue;
    }
    if (IsDone(in.opcode) && starts.emplace(StartOf(in.opcode), in.channel_id).second) {
      kept.push_back(MadeUpStart(in));
      names.insert(kept.back().name);
    }
    kept.push_back(in);
  }

  Module module;
  module.name = name;
  module.id = id;
  Computation entry;
  entry.name = "main";
  int64_t next_id = 1;
  // A parameter per distinct data operand of the sends, first.
  std::map<std::string, int64_t> param_of;
  for (const InstructionText& in : kept) {
    if (in.opcode != "send" || param_of.count(DataName(in)) != 0) continue;
    Instruction p;
    p.name = DataName(in);
    p.opcode = "parameter";
    p.shape = DataShape(in);
    p.id = next_id++;
    p.parameter_number = static_cast<int64_t>(module.parameters.size());
    param_of[p.name] = p.id;
    module.parameters.push_back(p.shape);
    module.parameter_names.push_back(p.name);
    entry.instructions.push_back(std::move(p));
  }

  std::map<int64_t, int64_t> token_of;                          // channel -> after-all id
  std::map<std::pair<std::string, int64_t>, int64_t> start_id;  // (opcode, channel) -> id
  const Instruction* last_recv_done = nullptr;
  size_t last_recv_done_at = 0;
  auto emit = [&](const InstructionText& in) {
    Instruction out;
    out.name = in.name;
    out.opcode = in.opcode;
    out.shape = in.shape;
    out.channel_id = in.channel_id;
    out.is_host_transfer = in.is_host_transfer;
    out.frontend_attributes = in.frontend_attributes;
    out.op_name = in.op_name;
    if (IsDone(in.opcode)) {
      out.operand_ids = {start_id.at({StartOf(in.opcode), in.channel_id})};
    } else {
      auto [token, fresh] = token_of.try_emplace(in.channel_id, 0);
      if (fresh) {
        Instruction t;
        t.name = absl::StrCat("after-all.", in.channel_id);
        t.opcode = "after-all";
        t.shape = Shape::Token();
        t.id = token->second = next_id++;
        entry.instructions.push_back(std::move(t));
      }
      if (in.opcode == "send") out.operand_ids.push_back(param_of.at(DataName(in)));
      out.operand_ids.push_back(token->second);
    }
    out.id = next_id++;
    if (!IsDone(in.opcode)) start_id[{in.opcode, in.channel_id}] = out.id;
    if (in.opcode == "recv-done") last_recv_done_at = entry.instructions.size() + 1;
    entry.instructions.push_back(std::move(out));
  };
  // In the order given; a -done before its start waits for it.
  std::vector<const InstructionText*> waiting;
  for (const InstructionText& in : kept) {
    if (IsDone(in.opcode) && start_id.count({StartOf(in.opcode), in.channel_id}) == 0) {
      waiting.push_back(&in);
      continue;
    }
    emit(in);
    if (IsDone(in.opcode)) continue;
    for (auto it = waiting.begin(); it != waiting.end();) {
      if (StartOf((*it)->opcode) == in.opcode && (*it)->channel_id == in.channel_id) {
        emit(**it);
        it = waiting.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (last_recv_done_at > 0) last_recv_done = &entry.instructions[last_recv_done_at - 1];

  if (last_recv_done != nullptr && last_recv_done->shape.element_type == PrimitiveType::kTuple &&
      !last_recv_done->shape.tuple_shapes.empty()) {
    Instruction result;
    result.name = "get-tuple-element.dcn";
    result.opcode = "get-tuple-element";
    result.shape = last_recv_done->shape.tuple_shapes.front();
    result.id = next_id++;
    result.operand_ids = {last_recv_done->id};
    entry.instructions.push_back(std::move(result));
  }
  if (!entry.instructions.empty()) {
    entry.root_id = entry.instructions.back().id;
    module.result = entry.instructions.back().shape;
  }
  entry.id = next_id++;
  module.computations.push_back(std::move(entry));
  return module;
}

}  // namespace podprof::trace::hlo
