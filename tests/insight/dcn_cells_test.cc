// The slices x instances matrix of a capture's paired transfers (insight/dcn_cells.h): its rows
// and columns, what each cell sums, the instances in the verdict's order and the bounds.
#include "insight/dcn_cells.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace podprof::insight {
namespace {

DcnTransfer Transfer(const std::string& rendezvous, int64_t step, int src, int dst,
                     int64_t recv_done_start_ns, int64_t wait_ns, int64_t producer_own_ns) {
  DcnTransfer t;
  t.rendezvous = rendezvous;
  t.step = step;
  t.src_slice = src;
  t.dst_slice = dst;
  t.recv_done_start_ns = recv_done_start_ns;
  t.wait_ns = wait_ns;
  t.producer_own_ns = producer_own_ns;
  return t;
}

TEST(DcnSliceCells, ARowPerSliceAColumnPerInstanceInTimeOrder) {
  // Two rendezvous interleaved: "b" step 0 comes between "a" steps 0 and 1.
  const std::vector<DcnTransfer> transfers = {
      Transfer("a", 1, 0, 1, 3'000, 10, 1), Transfer("a", 0, 0, 1, 1'000, 20, 2),
      Transfer("a", 0, 1, 0, 1'100, 30, 3), Transfer("b", 0, 1, 0, 2'000, 40, 4),
      Transfer("a", 0, 0, 1, 900, 5, 7),     // a second chip's receive of the same instance
      Transfer("a", 0, -1, 1, 800, 99, 99),  // a host of unknown slice: no part
  };
  const DcnCells c = DcnSliceCells(transfers);
  EXPECT_EQ(c.slices, (std::vector<int>{0, 1}));
  ASSERT_EQ(c.instances.size(), 3u);
  EXPECT_EQ(c.instances[0].rendezvous, "a");
  EXPECT_EQ(c.instances[0].step, 0);
  EXPECT_EQ(c.instances[0].start_ns, 900);  // the instance's first recv-done of known slices
  EXPECT_EQ(c.instances[1].rendezvous, "b");
  EXPECT_EQ(c.instances[2].step, 1);
  // Receivers' waits by the receiving slice; producers' own lateness by the sending slice.
  EXPECT_EQ(c.wait_ns, (std::vector<int64_t>{30, 40, 0, 25, 0, 10}));
  EXPECT_EQ(c.producer_ns, (std::vector<int64_t>{9, 0, 1, 3, 4, 0}));
  EXPECT_EQ(c.instances_left_out, 0u);
  EXPECT_EQ(c.slices_left_out, 0u);
}

TEST(DcnSliceCells, BoundsKeepTheFirstInstancesAndTheLowestSlices) {
  std::vector<DcnTransfer> transfers;
  for (int step = 0; step < 10; ++step) {
    for (int s = 0; s < 5; ++s) {
      transfers.push_back(Transfer("r", step, s, (s + 1) % 5, step * 1'000 + s, 1, 0));
    }
  }
  const DcnCells c = DcnSliceCells(transfers, 3, 4);
  EXPECT_EQ(c.slices, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(c.slices_left_out, 2u);
  ASSERT_EQ(c.instances.size(), 4u);
  EXPECT_EQ(c.instances.back().step, 3);
  EXPECT_EQ(c.instances_left_out, 6u);
  EXPECT_EQ(c.wait_ns.size(), 12u);
  // Slice 0 receives from slice 4, which is cut: its receivers' wait still counts.
  EXPECT_EQ(c.wait_ns[0], 1);
}

TEST(DcnSliceCells, NoKnownSlicesIsAnEmptyMatrix) {
  const DcnCells c = DcnSliceCells({Transfer("r", 0, -1, -1, 0, 1, 1)});
  EXPECT_TRUE(c.slices.empty());
  EXPECT_TRUE(c.instances.empty());
  EXPECT_TRUE(c.wait_ns.empty());
}

}  // namespace
}  // namespace podprof::insight
