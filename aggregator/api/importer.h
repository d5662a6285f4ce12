// An import of existing XProf captures (`podprof import`, ImportXSpace): files uploaded host by
// host in chunks, each spooled to disk while it arrives so that memory stays bounded by a
// chunk, then read, analysed and stored as one capture. A damaged or oversized file is
// reported by its name and the others stored (the capture is then partial).
#ifndef PODPROF_AGGREGATOR_API_IMPORTER_H_
#define PODPROF_AGGREGATOR_API_IMPORTER_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "aggregator/api/queries.h"
#include "common/clock.h"
#include "ingest/capture_ingest.h"
#include "proto/podprof_aggregator.pb.h"
#include "storage/capture_writer.h"

namespace podprof::aggregator {

struct ImportLimits {
  // Largest single file accepted, bytes.
  int64_t max_file_bytes = int64_t{8} << 30;
  // Where uploads are spooled while they arrive (bounded memory); empty = $TMPDIR or /tmp.
  std::string spool_dir;
};

class Spool;

// One import, fed chunk by chunk from one thread. It stores the capture through `writer` (the
// store's writer role) and reads back what it prints through `queries`; both must outlive it.
class Importer {
 public:
  Importer(storage::CaptureWriter& writer, Queries& queries, Clock& clock, ImportLimits limits);
  ~Importer();
  Importer(const Importer&) = delete;
  Importer& operator=(const Importer&) = delete;

  // The next chunk of the upload. InvalidArgument when the upload cannot go on (a first chunk
  // without a host name, a host twice); the error of writing the spool.
  absl::Status Add(const v1::ImportXSpaceChunk& chunk);
  // Stores what arrived as one capture: its id and summary, its top kernels, and the files
  // that could not be imported. InvalidArgument when no file could be.
  absl::StatusOr<v1::ImportXSpaceResponse> Finish();

 private:
  // Reads the spooled file of the current host into the capture, or records why it could not.
  void FinishFile();

  storage::CaptureWriter& writer_;
  Queries& queries_;
  const ImportLimits limits_;
  const std::string dir_;
  ingest::CaptureInput capture_;
  std::set<std::string> seen_;
  std::vector<std::string> errors_;
  std::string host_;
  std::unique_ptr<Spool> spool_;
  bool first_ = true;
  bool too_big_ = false;
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_API_IMPORTER_H_
