#include "insight/dcn_cells.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace podprof::insight {

DcnCells DcnSliceCells(const std::vector<DcnTransfer>& transfers, size_t max_slices,
                       size_t max_instances) {
  // Instances as JudgeDcn forms them: (rendezvous, step), at their first recv-done start.
  std::map<std::pair<std::string, int64_t>, int64_t> first;
  std::set<int> slices;
  for (const DcnTransfer& t : transfers) {
    if (t.src_slice < 0 || t.dst_slice < 0) continue;
    auto [it, inserted] = first.try_emplace({t.rendezvous, t.step}, t.recv_done_start_ns);
    if (!inserted) it->second = std::min(it->second, t.recv_done_start_ns);
    slices.insert(t.src_slice);
    slices.insert(t.dst_slice);
  }
  DcnCells out;
  for (int s : slices) {
    if (out.slices.size() == max_slices) {
      ++out.slices_left_out;
      continue;
    }
    out.slices.push_back(s);
  }
  std::vector<DcnInstance> order;
  order.reserve(first.size());
  for (const auto& [key, at] : first) order.push_back({key.first, key.second, at});
  std::stable_sort(order.begin(), order.end(), [](const DcnInstance& a, const DcnInstance& b) {
    return a.start_ns < b.start_ns;
  });
  if (order.size() > max_instances) {
    out.instances_left_out = order.size() - max_instances;
    order.resize(max_instances);
  }
  std::map<std::pair<std::string, int64_t>, size_t> column;
  for (size_t i = 0; i < order.size(); ++i) column[{order[i].rendezvous, order[i].step}] = i;
  std::map<int, size_t> row;
  for (size_t i = 0; i < out.slices.size(); ++i) row[out.slices[i]] = i;
  const size_t width = order.size();
  out.wait_ns.assign(out.slices.size() * width, 0);
  out.producer_ns.assign(out.slices.size() * width, 0);
  for (const DcnTransfer& t : transfers) {
    if (t.src_slice < 0 || t.dst_slice < 0) continue;
    auto c = column.find({t.rendezvous, t.step});
    if (c == column.end()) continue;
    if (auto r = row.find(t.dst_slice); r != row.end()) {
      out.wait_ns[r->second * width + c->second] += t.wait_ns;
    }
    if (auto r = row.find(t.src_slice); r != row.end()) {
      out.producer_ns[r->second * width + c->second] += t.producer_own_ns;
    }
  }
  out.instances = std::move(order);
  return out;
}

}  // namespace podprof::insight
