// The runtime status line a snapshot carries: each core's step and instruction in core-id
// order, an error in place of the rest, and a cut after the most cores described.
#include "agent/runtime_status.h"

#include "gtest/gtest.h"

namespace podprof::agent {
namespace {

namespace rt = tpu::monitoring::runtime;

rt::CoreStateSummary& Core(rt::GetTpuRuntimeStatusResponse& r, int id, int chip, int64_t run,
                           const std::string& hlo, int64_t tag) {
  rt::CoreStateSummary& c = (*r.mutable_core_states())[id];
  c.mutable_core_id()->set_global_core_id(id);
  c.mutable_core_id()->set_chip_id(chip);
  rt::SequencerState* s = c.add_sequencer_info();
  s->set_sequencer_type(rt::TPU_SEQUENCER_TYPE_TENSOR_CORE_SEQUENCER);
  s->set_run_id(run);
  s->set_tag(tag);
  s->set_pc(4096);
  if (!hlo.empty()) s->set_hlo_location(hlo);
  return c;
}

TEST(RuntimeStatusTest, EachCoreInOrderWithItsStepAndWhereItIs) {
  rt::GetTpuRuntimeStatusResponse r;
  Core(r, 5, 2, 1234, "", 0).add_queued_program_info()->set_run_id(1235);
  Core(r, 4, 2, 1234, "all-reduce.7", 3);
  Core(r, 6, 3, 1234, "", 9);
  Core(r, 7, 3, 0, "", 0).set_error_message("halted: HBM ECC error");
  EXPECT_EQ(DescribeRuntimeStatus(r),
            "runtime status: core 4 (chip 2) step 1234 in all-reduce.7; core 5 (chip 2) step 1234 "
            "between kernels, 1 queued; core 6 (chip 3) step 1234 in kernel 9 (pc 4096); core 7 "
            "(chip 3) error: halted: HBM ECC error");
}

TEST(RuntimeStatusTest, ManyCoresAreCutAndNoneIsSaid) {
  rt::GetTpuRuntimeStatusResponse r;
  EXPECT_EQ(DescribeRuntimeStatus(r), "runtime status: no cores reported");
  for (int i = 0; i < 20; ++i) Core(r, i, i, 7, "", 0);
  const std::string line = DescribeRuntimeStatus(r, 2);
  EXPECT_EQ(line,
            "runtime status: core 0 (chip 0) step 7 between kernels; core 1 (chip 1) step 7 "
            "between kernels; and 18 more cores");
}

}  // namespace
}  // namespace podprof::agent
