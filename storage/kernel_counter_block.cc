#include "storage/kernel_counter_block.h"

#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/zstd_codec.h"
#include "trace/varint.h"

namespace podprof::storage::internal {
namespace {

constexpr uint8_t kFormat = 1;
// Level 1: the blob is compressed on the store's one writer thread, once per host (a few tens
// of kilobytes before compression).
constexpr int kLevel = 1;
// The fewest bytes a row takes: four one-byte varints, the flags byte, the integral's 8 and
// one more varint.
constexpr uint64_t kMinRowBytes = 14;
// What a blob may decompress to: a host of 64 chips, 10,000 kernels and 64 counters is 40
// million rows; a blob claiming more is damage, not a host.
constexpr uint64_t kMaxRawBytes = uint64_t{1} << 30;

bool GetBytes(absl::string_view* in, size_t n, std::string* out) {
  if (in->size() < n) return false;
  out->assign(in->data(), n);
  in->remove_prefix(n);
  return true;
}

}  // namespace

absl::StatusOr<std::string> EncodeKernelCounterBlock(const std::string& host,
                                                     const std::vector<trace::KernelCounter>& rows,
                                                     const std::vector<trace::Chip>& chips,
                                                     const std::vector<int64_t>& kernel_ids) {
  // Counter names are few (a chip's series) and repeat on every kernel: stored once each.
  absl::flat_hash_map<absl::string_view, uint64_t> name_index;
  std::vector<absl::string_view> names;
  for (const trace::KernelCounter& k : rows) {
    if (name_index.try_emplace(k.counter, names.size()).second) names.push_back(k.counter);
  }
  std::string raw;
  raw.reserve(16 + rows.size() * 20);
  raw.push_back(static_cast<char>(kFormat));
  trace::PutVarint(names.size(), &raw);
  for (absl::string_view n : names) {
    trace::PutVarint(n.size(), &raw);
    raw.append(n.data(), n.size());
  }
  trace::PutVarint(rows.size(), &raw);
  for (const trace::KernelCounter& k : rows) {
    if (k.chip < 0 || static_cast<size_t>(k.chip) >= chips.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("host ", host, ": chip index ", k.chip, " of ", chips.size()));
    }
    if (k.kernel >= kernel_ids.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("host ", host, ": kernel index ", k.kernel, " of ", kernel_ids.size()));
    }
    trace::PutVarint(trace::ZigZag(chips[k.chip].ordinal), &raw);
    trace::PutVarint(static_cast<uint64_t>(kernel_ids[k.kernel]), &raw);
    trace::PutVarint(name_index.at(k.counter), &raw);
    raw.push_back(k.kind == trace::CounterKind::kCumulative ? 1 : 0);
    char bytes[8];
    std::memcpy(bytes, &k.integral, 8);
    raw.append(bytes, 8);
    trace::PutVarint(trace::ZigZag(k.covered_ps), &raw);
    trace::PutVarint(trace::ZigZag(k.executions), &raw);
  }
  std::string out = ZstdCompress(raw, kLevel);
  if (out.empty()) return absl::InternalError(absl::StrCat("host ", host, ": zstd failed"));
  return out;
}

absl::StatusOr<std::vector<StoredKernelCounter>> DecodeKernelCounterBlock(absl::string_view blob) {
  constexpr absl::string_view kWhat = "kernel counter block";
  ASSIGN_OR_RETURN(const std::string raw, ZstdDecompress(blob, kMaxRawBytes, kWhat));
  absl::string_view in(raw);
  auto damaged = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat(kWhat, ": ", why));
  };
  if (in.empty() || static_cast<uint8_t>(in[0]) != kFormat) return damaged("unknown format");
  in.remove_prefix(1);
  uint64_t n_names;
  if (!trace::GetVarint(&in, &n_names) || n_names > in.size()) return damaged("names' count");
  std::vector<std::string> names(n_names);
  for (std::string& name : names) {
    uint64_t len;
    if (!trace::GetVarint(&in, &len) || !GetBytes(&in, len, &name)) return damaged("a name");
  }
  uint64_t n_rows;
  if (!trace::GetVarint(&in, &n_rows) || n_rows > in.size() / kMinRowBytes) {
    return damaged("rows' count");
  }
  std::vector<StoredKernelCounter> out(n_rows);
  for (StoredKernelCounter& r : out) {
    uint64_t chip, kernel, name, covered, executions;
    if (!trace::GetVarint(&in, &chip) || !trace::GetVarint(&in, &kernel) ||
        !trace::GetVarint(&in, &name) || in.size() < 9) {
      return damaged("a row is truncated");
    }
    if (name >= names.size()) return damaged("a row names no counter");
    const int64_t ordinal = trace::UnZigZag(chip);
    if (ordinal < INT32_MIN || ordinal > INT32_MAX) return damaged("a chip ordinal");
    r.chip_ordinal = static_cast<int>(ordinal);
    r.kernel_id = static_cast<int64_t>(kernel);
    r.counter = names[name];
    r.cumulative = in[0] == 1;
    std::memcpy(&r.integral, in.data() + 1, 8);
    in.remove_prefix(9);
    if (!trace::GetVarint(&in, &covered) || !trace::GetVarint(&in, &executions)) {
      return damaged("a row is truncated");
    }
    r.covered_ps = trace::UnZigZag(covered);
    r.executions = trace::UnZigZag(executions);
  }
  if (!in.empty()) return damaged("bytes after the last row");
  return out;
}

}  // namespace podprof::storage::internal
