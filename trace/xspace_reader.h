// Streaming reader for XSpace captures (`<host>.xplane.pb`).
//
// Walks the protobuf wire format directly instead of materialising the XSpace message: it keeps
// the device planes' kernel, module, step, scope and counter timelines (a TPU chip's SparseCore
// planes read onto its chip, sampled performance counters as perf/ series: docs/INTEROP.md,
// "Kernel profiling data"), the chips' plane stats, the `Task Environment` window and the
// Megascale runtime's action graph as megascale/ series of the TPU chips
// (trace/megascale_trace.h). A capture
// with no device plane (JAX on CPU) has its `/host:CPU` threads' XLA ops and steps read as one
// CPU device, with the programs' HLO from `/host:metadata` for the ops' categories; with a
// device plane the host planes are skipped, as is everything else, without copying it. Memory is
// the kept data plus one read buffer; offsets are 64-bit, so files larger than protobuf's 2 GiB
// message limit read as well as small ones. The format notes, and which file reads which kind of
// plane, are in trace/README.md.
#ifndef PODPROF_TRACE_XSPACE_READER_H_
#define PODPROF_TRACE_XSPACE_READER_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trace/byte_source.h"
#include "trace/model.h"

namespace podprof::trace {

struct ReadOptions {
  // Host name to use when the XSpace names none (XSpace.hostnames is often empty).
  std::string host_name;
  // Largest string a `compressed_str_value` may inflate to; larger ones are an error rather
  // than an unbounded allocation.
  size_t max_inflated_bytes = size_t{64} << 20;
  // The `scaling` the capture's performance counter sampling asked for (SamplingOptions,
  // trace/perf_counters.h): sampled values were shifted right by this many bits, and the
  // reader shifts them back. 0 (the default) when the capture sampled none or unscaled.
  int perf_counter_scaling = 0;
  // Read in pieces (ReadXSpaceInPieces): the most a plane's timelines and counter samples may
  // take in memory before what has been read of it goes to the sink as a piece of its own,
  // so that a plane of any size is streamed, never held whole. Its sampled performance
  // counters, which only make sense together, may take as much again; past that the read
  // fails naming the chip. Ignored by ReadXSpace, which returns the whole capture, except
  // that both bound by it the Megascale plane's samples, held until their chips' planes are
  // read (past it they are skipped with a warning; trace/megascale_trace.h).
  size_t max_piece_bytes = size_t{64} << 20;
};

// Reads one XSpace from `source`. Damaged input fails with DataLoss "malformed XSpace at byte
// offset N: ..."; an empty source fails with InvalidArgument. Never reads outside the source.
absl::StatusOr<HostCapture> ReadXSpace(ByteSource& source, const ReadOptions& options = {});

// Receives a capture plane by plane, as ReadXSpaceInPieces reads it.
class PieceSink {
 public:
  virtual ~PieceSink() = default;
  // The host with every chip and the profile's window, before any piece.
  virtual absl::Status OnHost(const Host& host) = 0;
  // One device plane read, or part of one larger than ReadOptions::max_piece_bytes (a plane's
  // later part then continues its lines in blocks and series of the same names):
  // `piece.blocks` and `piece.counters` are its data, on absolute times; `piece.kernels` are
  // every kernel so far, those from `first_new_kernel` on new with this piece. Blocks and
  // counters are dropped once this returns. An error stops the read.
  virtual absl::Status OnPlane(const HostCapture& piece, size_t first_new_kernel) = 0;
};

// ReadXSpace, handing each device plane's data to `sink` as soon as it is read: memory is one
// plane's data (a chip's), at most about options.max_piece_bytes of it, and the kernel table,
// not the whole capture's. Returns the capture
// without blocks or counters (host, kernels, warnings). A kernel takes its module from the
// planes read so far (each chip's plane names the modules it ran).
absl::StatusOr<HostCapture> ReadXSpaceInPieces(ByteSource& source, const ReadOptions& options,
                                               PieceSink* sink);

// Opens and reads `path` (in pieces when given a sink). Every error message starts with the
// path. The host name defaults to HostNameFromPath(path).
absl::StatusOr<HostCapture> ReadXSpaceFile(const std::string& path, ReadOptions options = {},
                                           PieceSink* sink = nullptr);

// The host a capture file names, as XProf reads it: the file name without directories and
// without the `.xplane.pb` suffix ("/r/run1/10.0.0.7_9999.xplane.pb" -> "10.0.0.7_9999").
std::string HostNameFromPath(absl::string_view path);

}  // namespace podprof::trace

#endif  // PODPROF_TRACE_XSPACE_READER_H_
