#include "sim/training_step.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace podprof::sim {
namespace {

// Builds the step's kernels with costs given as target times on a generation, so that the
// roofline decides which bound each kernel hits.
class StepBuilder {
 public:
  explicit StepBuilder(const trace::ChipGeneration& g)
      : peak_flops_(g.peak_tflops * 1e12), peak_bytes_(g.peak_hbm_gbps * 1e9) {}

  // A compute kernel taking `flop_us` of the peak's FLOPs and `byte_us` of its HBM bandwidth,
  // reaching `eff` of its roofline, from model line `line`.
  void Compute(std::string name, std::string category, double flop_us, double byte_us, double eff,
               int line, UnitProfile units, std::string expected) {
    OpTemplate op;
    op.name = name;
    op.category = std::move(category);
    op.flops = static_cast<int64_t>(flop_us * 1e-6 * peak_flops_);
    op.bytes = static_cast<int64_t>(byte_us * 1e-6 * peak_bytes_);
    op.efficiency = eff;
    op.hlo_text = absl::StrCat("%", name,
                               " = bf16[8192,4096]{1,0:T(8,128)(2,1)} fusion(bf16[8192,"
                               "4096]{1,0} %param.",
                               line % 7, "), kind=kOutput, calls=%", name, ".computation");
    op.source = absl::StrCat("train.py:", line);
    op.tf_op = absl::StrCat("jit(train_step)/jit(main)/layer/", op.category);
    op.source_stack = absl::StrCat("train.py:", line, "\nmodel.py:", 100 + line, "\nmain.py:12");
    op.units = units;
    op.expected_bound = std::move(expected);
    ops_.push_back(std::move(op));
  }

  // A collective moving `mbytes` MB.
  void Collective(std::string name, std::string category, double mbytes, int line) {
    OpTemplate op;
    op.name = name;
    op.category = category;
    op.bytes = static_cast<int64_t>(mbytes * 1e6);
    op.flops = category == "all-reduce" || category == "reduce-scatter" ? op.bytes / 2 : 0;
    op.collective = true;
    op.efficiency = 0.8;
    op.hlo_text = absl::StrCat("%", name, " = bf16[", static_cast<int64_t>(mbytes * 5e5), "]{0} ",
                               category, "(bf16[...] %fusion), replica_groups={}");
    op.source = absl::StrCat("train.py:", line);
    op.tf_op = absl::StrCat("jit(train_step)/jit(main)/", category);
    op.units = {0, 0.05, 0.02, 0.6, 0, 0};
    op.expected_bound = "communication";
    ops_.push_back(std::move(op));
  }

  std::vector<OpTemplate>& ops() { return ops_; }

 private:
  const double peak_flops_;  // FLOP/s
  const double peak_bytes_;  // B/s
  std::vector<OpTemplate> ops_;
};

// A Pallas attention kernel: a Mosaic custom call whose MLIR the capture carries.
void AddFlashAttention(StepBuilder& step) {
  step.Compute("flash_attention", "custom-call", 150, 25, 0.6, 50,
               {0.6, 0.25, 0.05, 0.25, 0.04, 0.03}, "compute bound");
  OpTemplate& fa = step.ops().back();
  fa.hlo_text =
      "%flash_attention = bf16[8,2048,128]{2,1,0} custom-call(bf16[8,2048,128]{2,1,0} %q, "
      "bf16[8,2048,128]{2,1,0} %k, bf16[8,2048,128]{2,1,0} %v), "
      "custom_call_target=\"tpu_custom_call\", "
      "backend_config={\"custom_call_config\": {\"kernel_name\": \"flash_attention\"}}";
  fa.tf_op = "jit(train_step)/jit(main)/pallas_call[name=flash_attention]";
  fa.scopes = {{"flash_attention/load_qkv", 0.15},
               {"flash_attention/qk_matmul", 0.55},
               {"flash_attention/softmax_pv", 0.3}};
  fa.mlir =
      "module attributes {stable_mosaic.version = 3 : i64} {\n"
      "  func.func @flash_attention(%arg0: i32, %arg1: memref<1x2048x128xbf16, "
      "#tpu.memory_space<vmem>>, %arg2: memref<1x2048x128xbf16, #tpu.memory_space<vmem>>, "
      "%arg3: memref<1x2048x128xbf16, #tpu.memory_space<vmem>>, %arg4: "
      "memref<1x2048x128xbf16, #tpu.memory_space<vmem>>) {\n"
      "    %c0 = arith.constant 0 : index\n"
      "    %0 = vector.load %arg1[%c0, %c0, %c0] : memref<1x2048x128xbf16, "
      "#tpu.memory_space<vmem>>, vector<1x2048x128xbf16>\n"
      "    %1 = tpu.matmul %0, %0, %cst {dimension_numbers = #tpu.dot_dimension_numbers<[1], "
      "[1], [0], [0], [0, 0, 1, 0], [], []>} : vector<1x2048x128xbf16>, "
      "vector<1x2048x128xbf16>, vector<2048x2048xf32> -> vector<2048x2048xf32>\n"
      "    return\n  }\n}\n";
  fa.primitives = {{"dma_start", 0.03, 31, false},
                   {"dma_wait", 0.12, 32, true},
                   {"matmul", 0.55, 35, false},
                   {"matmul", 0.18, 38, false},
                   {"store", 0.12, 40, false}};
}

// The injected "MXU waits on HBM" kernel of generations with kernel profiling (v7x): a
// paged-attention decode kernel that streams KV pages from HBM and spends most of its time in
// dma_wait (SyncWait on the Tensor Core Sync Flag line, 55% of the kernel), so its MXU is
// busy 12% of its cycles while it moves HBM bytes at close to the roofline. Tests and the
// analysis side assert these numbers (docs/INSIGHT.md, "Simulated hosts").
void AddPagedAttention(StepBuilder& step) {
  step.Compute("paged_attention", "custom-call", 10, 120, 0.7, 52,
               {0.12, 0.1, 0.06, 0.85, 0.5, 0.1}, "stalled");
  OpTemplate& pa = step.ops().back();
  pa.hlo_text =
      "%paged_attention = bf16[8,1,128]{2,1,0} custom-call(bf16[8,1,128]{2,1,0} %q, "
      "bf16[64,16,128]{2,1,0} %k_pages, bf16[64,16,128]{2,1,0} %v_pages), "
      "custom_call_target=\"tpu_custom_call\", "
      "backend_config={\"custom_call_config\": {\"kernel_name\": \"paged_attention\"}}";
  pa.tf_op = "jit(train_step)/jit(main)/pallas_call[name=paged_attention]";
  pa.scopes = {{"paged_attention/fetch_pages", 0.35},
               {"paged_attention/qk", 0.42},
               {"paged_attention/softmax_store", 0.23}};
  pa.primitives = {{"dma_start", 0.05, 20, false}, {"dma_wait", 0.30, 21, true},
                   {"matmul", 0.08, 24, false},    {"dma_start", 0.02, 20, false},
                   {"dma_wait", 0.25, 21, true},   {"matmul", 0.07, 24, false},
                   {"softmax", 0.13, 27, false},   {"store", 0.10, 29, false}};
}

}  // namespace

// A transformer-like step: per layer a forward matmul fusion, an elementwise fusion and an
// all-gather of the next layer's weights; then backward matmuls with a reduce-scatter of the
// gradients; finally an all-reduce of the loss and the optimizer update.
std::vector<OpTemplate> TrainingStep(const trace::ChipGeneration& generation) {
  StepBuilder step(generation);
  // Unit profiles by kind: matmuls keep the MXU busy; elementwise fusions and copies move
  // data; a gather waits on its DMAs; a scalar add is over before its work shows.
  const UnitProfile matmul{0.72, 0.15, 0.04, 0.2, 0.05, 0.02};
  const UnitProfile elementwise{0.0, 0.55, 0.05, 0.85, 0.12, 0.03};
  const UnitProfile copy{0.0, 0.1, 0.02, 0.9, 0.08, 0.02};
  const UnitProfile gather{0.0, 0.08, 0.1, 0.3, 0.1, 0.52};
  const UnitProfile scalar{0.0, 0.04, 0.6, 0.02, 0.03, 0.02};
  int fusion = 0;
  for (int layer = 0; layer < 4; ++layer) {
    step.Compute(absl::StrCat("fusion.", ++fusion), "convolution fusion", 180, 40, 0.72, 40 + layer,
                 matmul, "compute bound");
    step.Compute(absl::StrCat("loop_fusion.", layer), "loop fusion", 2, 30, 0.85, 41 + layer,
                 elementwise, "memory bound");
    step.Collective(absl::StrCat("all-gather.", layer), "all-gather", 6, 42 + layer);
    step.Compute(absl::StrCat("copy.", layer), "copy", 0, 8, 0.9, 43 + layer, copy, "memory bound");
    step.Compute(absl::StrCat("gather_fusion.", layer), "data formatting", 0.5, 12, 0.3, 44 + layer,
                 gather, "stalled");
    step.Compute(absl::StrCat("add.", layer), "non-fusion elementwise", 0.01, 0.05, 0.02,
                 45 + layer, scalar, "launch/overhead bound");
  }
  AddFlashAttention(step);
  if (generation.kernel_profiling) AddPagedAttention(step);
  for (int layer = 3; layer >= 0; --layer) {
    step.Compute(absl::StrCat("fusion.", ++fusion), "convolution fusion", 240, 60, 0.7, 60 + layer,
                 matmul, "compute bound");
    step.Collective(absl::StrCat("reduce-scatter.", layer), "reduce-scatter", 8, 61 + layer);
  }
  step.Collective("all-reduce.0", "all-reduce", 0.5, 80);
  step.Compute("loop_fusion.opt", "loop fusion", 1, 90, 0.85, 81, elementwise, "memory bound");
  return std::move(step.ops());
}

}  // namespace podprof::sim
