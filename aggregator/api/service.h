// podprof.v1.Aggregator: the agent registry; pod captures (started, watched and cancelled
// through the Orchestrator); the reads of the query layer (queries.h: captures, kernel
// statistics, history, comparison, stragglers, DCN, agents); imports (importer.h) and exports.
// Handlers check the caller and convert; the work is the layers'.
#ifndef PODPROF_AGGREGATOR_API_SERVICE_H_
#define PODPROF_AGGREGATOR_API_SERVICE_H_

#include <memory>
#include <string>

#include "aggregator/api/access_control.h"
#include "aggregator/api/importer.h"
#include "aggregator/api/queries.h"
#include "aggregator/api/store_reads.h"
#include "aggregator/api/stream_guard.h"
#include "aggregator/capture/orchestrator.h"
#include "aggregator/capture/registry.h"
#include "aggregator/recorder/telemetry.h"
#include "common/clock.h"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "security/refusal_log.h"
#include "storage/capture_writer.h"

namespace podprof::aggregator {

// The long calls (exports, watches, imports) held at once, and by one client; how long an export's
// client may leave a chunk untaken, and an import's client keep the next chunk coming, before the
// call is cancelled (the HTTP downloads' figures: docs/RELIABILITY.md).
inline constexpr int kMaxLongCalls = 32;
inline constexpr int kMaxLongCallsPerClient = 8;
inline constexpr int64_t kExportWriteLimitNs = 20'000'000'000;
inline constexpr int64_t kImportReadLimitNs = 60'000'000'000;

// Thread-safe (the layers are). Everything passed in must outlive the service.
class AggregatorService final : public podprof::v1::Aggregator::Service {
 public:
  // `queries` answers the reads, `reads` feeds the exports, `writer` takes the imports;
  // `access` says who may do what, and may be replaced while serving (a reload).
  AggregatorService(Queries* queries, StoreReads reads, storage::CaptureWriter* writer,
                    Registry* registry, Orchestrator* orchestrator, Clock* clock,
                    ImportLimits limits, const AccessRules* access)
      : queries_(queries),
        reads_(reads),
        writer_(writer),
        registry_(registry),
        orchestrator_(orchestrator),
        clock_(clock),
        limits_(std::move(limits)),
        access_(access),
        refusals_(*clock) {}

  // Where refusals are logged; the daemon routes gRPC's failed handshakes here too.
  security::RefusalLog& refusals() { return refusals_; }

  grpc::Status StartCapture(grpc::ServerContext* context,
                            const podprof::v1::StartCaptureRequest* request,
                            podprof::v1::StartCaptureResponse* response) override;
  grpc::Status WatchCapture(grpc::ServerContext* context,
                            const podprof::v1::WatchCaptureRequest* request,
                            grpc::ServerWriter<podprof::v1::CaptureProgress>* writer) override;
  grpc::Status CancelCapture(grpc::ServerContext* context,
                             const podprof::v1::CancelCaptureRequest* request,
                             podprof::v1::CancelCaptureResponse* response) override;

  grpc::Status Register(grpc::ServerContext* context, const podprof::v1::RegisterRequest* request,
                        podprof::v1::RegisterResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const podprof::v1::HeartbeatRequest* request,
                         podprof::v1::HeartbeatResponse* response) override;
  grpc::Status ReportTelemetry(grpc::ServerContext* context,
                               const podprof::v1::ReportTelemetryRequest* request,
                               podprof::v1::ReportTelemetryResponse* response) override;
  grpc::Status GetTelemetry(grpc::ServerContext* context,
                            const podprof::v1::GetTelemetryRequest* request,
                            podprof::v1::GetTelemetryResponse* response) override;
  // Where agents' telemetry goes (set before serving; without it reports are refused as
  // UNIMPLEMENTED and reads come from the store only).
  void SetTelemetry(TelemetryHub* hub) { telemetry_ = hub; }
  grpc::Status ListAgents(grpc::ServerContext* context,
                          const podprof::v1::ListAgentsRequest* request,
                          podprof::v1::ListAgentsResponse* response) override;

  grpc::Status ListCaptures(grpc::ServerContext* context,
                            const podprof::v1::ListCapturesRequest* request,
                            podprof::v1::ListCapturesResponse* response) override;
  grpc::Status GetKernelStats(grpc::ServerContext* context,
                              const podprof::v1::GetKernelStatsRequest* request,
                              podprof::v1::GetKernelStatsResponse* response) override;
  grpc::Status DescribeKernel(grpc::ServerContext* context,
                              const podprof::v1::DescribeKernelRequest* request,
                              podprof::v1::DescribeKernelResponse* response) override;
  grpc::Status GetStragglers(grpc::ServerContext* context,
                             const podprof::v1::GetStragglersRequest* request,
                             podprof::v1::GetStragglersResponse* response) override;
  grpc::Status GetDcn(grpc::ServerContext* context, const podprof::v1::GetDcnRequest* request,
                      podprof::v1::GetDcnResponse* response) override;
  grpc::Status Sql(grpc::ServerContext* context, const podprof::v1::SqlRequest* request,
                   podprof::v1::SqlResponse* response) override;
  grpc::Status KernelHistory(grpc::ServerContext* context,
                             const podprof::v1::KernelHistoryRequest* request,
                             podprof::v1::KernelHistoryResponse* response) override;
  grpc::Status CompareCaptures(grpc::ServerContext* context,
                               const podprof::v1::CompareCapturesRequest* request,
                               podprof::v1::CompareCapturesResponse* response) override;
  grpc::Status ExportCapture(grpc::ServerContext* context,
                             const podprof::v1::ExportCaptureRequest* request,
                             grpc::ServerWriter<podprof::v1::ExportChunk>* writer) override;
  grpc::Status ImportXSpace(grpc::ServerContext* context,
                            grpc::ServerReader<podprof::v1::ImportXSpaceChunk>* reader,
                            podprof::v1::ImportXSpaceResponse* response) override;

 private:
  Queries* const queries_;
  const StoreReads reads_;
  storage::CaptureWriter* const writer_;
  TelemetryHub* telemetry_ = nullptr;
  Registry* const registry_;
  Orchestrator* const orchestrator_;
  Clock* const clock_;
  const ImportLimits limits_;
  // Who may do what now: a call checks the rules it started with.
  std::shared_ptr<const AccessControl> Access() const { return access_->Get(); }
  const AccessRules* const access_;
  security::RefusalLog refusals_;
  // ExportCapture, WatchCapture and ImportXSpace: slots per client and in all, as HTTP's
  // downloads have (stream_guard.h); a call past them is RESOURCE_EXHAUSTED at once.
  StreamSlots long_calls_{kMaxLongCalls, kMaxLongCallsPerClient};
  // `denied` as the caller gets it, and logged with the caller's address (rate-limited).
  grpc::Status Refuse(const grpc::ServerContext& context, const absl::Status& denied);
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_API_SERVICE_H_
