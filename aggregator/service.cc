#include "aggregator/service.h"

#include <utility>

#include "proto/grpc_status.h"
#include "security/tls.h"

namespace podprof::aggregator {

grpc::Status AggregatorService::Refuse(const grpc::ServerContext& context,
                                       const absl::Status& denied) {
  refusals_.Note(context.peer(), denied.message());
  return ToGrpc(denied);
}

grpc::Status AggregatorService::Register(grpc::ServerContext* context,
                                         const podprof::v1::RegisterRequest* req,
                                         podprof::v1::RegisterResponse* resp) {
  if (absl::Status a = Access()->agents.Check(*context, "an agent"); !a.ok()) {
    return Refuse(*context, a);
  }
  if (req->host().host_name().empty() || req->host().agent_address().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a registration needs the host name and the agent's address");
  }
  if (absl::Status s = registry_->Register(*req, security::PeerIdentities(*context)); !s.ok()) {
    return Refuse(*context, s);
  }
  resp->set_heartbeat_interval_ms(
      static_cast<uint32_t>(registry_->heartbeat_interval_ns() / 1'000'000));
  resp->set_aggregator_version("podprof-aggregator 0.1.0");
  return grpc::Status::OK;
}

grpc::Status AggregatorService::Heartbeat(grpc::ServerContext* context,
                                          const podprof::v1::HeartbeatRequest* req,
                                          podprof::v1::HeartbeatResponse* resp) {
  if (absl::Status a = Access()->agents.Check(*context, "an agent"); !a.ok()) {
    return Refuse(*context, a);
  }
  absl::StatusOr<bool> known = registry_->Heartbeat(*req, security::PeerIdentities(*context));
  if (!known.ok()) return Refuse(*context, known.status());
  resp->set_reregister(!*known);
  resp->set_heartbeat_interval_ms(
      static_cast<uint32_t>(registry_->heartbeat_interval_ns() / 1'000'000));
  return grpc::Status::OK;
}

grpc::Status AggregatorService::ReportTelemetry(grpc::ServerContext* context,
                                                const podprof::v1::ReportTelemetryRequest* req,
                                                podprof::v1::ReportTelemetryResponse*) {
  if (absl::Status a = Access()->agents.Check(*context, "an agent"); !a.ok()) {
    return Refuse(*context, a);
  }
  if (telemetry_ == nullptr) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this aggregator keeps no telemetry");
  }
  absl::Status s = registry_->CheckSender(req->host_name(), security::PeerIdentities(*context));
  if (absl::IsPermissionDenied(s)) return Refuse(*context, s);
  if (!s.ok()) return ToGrpc(s);
  telemetry_->Ingest(*req, clock_->NowNs());
  return grpc::Status::OK;
}

grpc::Status AggregatorService::GetTelemetry(grpc::ServerContext*,
                                             const podprof::v1::GetTelemetryRequest* req,
                                             podprof::v1::GetTelemetryResponse* resp) {
  storage::TelemetryFilter f;
  f.since_ns = req->since_ns();
  f.until_ns = req->until_ns() > 0 ? req->until_ns() : INT64_MAX;
  f.hosts.assign(req->hosts().begin(), req->hosts().end());
  if (req->limit() > 0) f.limit = req->limit();
  bool truncated = false;
  absl::StatusOr<std::vector<storage::TelemetryRecord>> rows =
      store_->telemetry().Read(f, &truncated);
  if (!rows.ok()) return ToGrpc(rows.status());
  for (const storage::TelemetryRecord& r : *rows) *resp->add_rows() = ToProto(r);
  resp->set_truncated(truncated);
  return grpc::Status::OK;
}

grpc::Status AggregatorService::ListAgents(grpc::ServerContext*,
                                           const podprof::v1::ListAgentsRequest* req,
                                           podprof::v1::ListAgentsResponse* resp) {
  *resp = queries_->Agents(*req);
  return grpc::Status::OK;
}

grpc::Status AggregatorService::StartCapture(grpc::ServerContext* context,
                                             const podprof::v1::StartCaptureRequest* req,
                                             podprof::v1::StartCaptureResponse* resp) {
  if (absl::Status a = Access()->operators.Check(*context, "an operator"); !a.ok()) {
    return Refuse(*context, a);
  }
  absl::StatusOr<podprof::v1::StartCaptureResponse> r = orchestrator_->Start(*req);
  if (!r.ok()) return ToGrpc(r.status());
  *resp = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status AggregatorService::WatchCapture(
    grpc::ServerContext* context, const podprof::v1::WatchCaptureRequest* req,
    grpc::ServerWriter<podprof::v1::CaptureProgress>* writer) {
  return ToGrpc(orchestrator_->Watch(
      req->capture_id(),
      [writer](const podprof::v1::CaptureProgress& p) { return writer->Write(p); },
      [context] { return context->IsCancelled(); }));
}

grpc::Status AggregatorService::CancelCapture(grpc::ServerContext* context,
                                              const podprof::v1::CancelCaptureRequest* req,
                                              podprof::v1::CancelCaptureResponse* resp) {
  if (absl::Status a = Access()->operators.Check(*context, "an operator"); !a.ok()) {
    return Refuse(*context, a);
  }
  absl::StatusOr<podprof::v1::CaptureStatus> s = orchestrator_->Cancel(req->capture_id());
  if (!s.ok()) return ToGrpc(s.status());
  resp->set_status(*s);
  return grpc::Status::OK;
}

namespace {

// The reads: the query layer's answer, as it is.
template <typename Response>
grpc::Status Answer(absl::StatusOr<Response> answer, Response* response) {
  if (!answer.ok()) return ToGrpc(answer.status());
  *response = *std::move(answer);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status AggregatorService::ImportXSpace(
    grpc::ServerContext* context, grpc::ServerReader<podprof::v1::ImportXSpaceChunk>* reader,
    podprof::v1::ImportXSpaceResponse* response) {
  if (absl::Status a = Access()->operators.Check(*context, "an operator"); !a.ok()) {
    return Refuse(*context, a);
  }
  Importer import(*queries_, *clock_, limits_);
  podprof::v1::ImportXSpaceChunk chunk;
  while (reader->Read(&chunk)) {
    if (absl::Status s = import.Add(chunk); !s.ok()) return ToGrpc(s);
  }
  absl::StatusOr<podprof::v1::ImportXSpaceResponse> done = import.Finish();
  if (!done.ok()) return ToGrpc(done.status());
  *response = *std::move(done);
  return grpc::Status::OK;
}

grpc::Status AggregatorService::ListCaptures(grpc::ServerContext*,
                                             const podprof::v1::ListCapturesRequest* req,
                                             podprof::v1::ListCapturesResponse* resp) {
  return Answer(queries_->ListCaptures(*req), resp);
}

grpc::Status AggregatorService::GetKernelStats(grpc::ServerContext*,
                                               const podprof::v1::GetKernelStatsRequest* req,
                                               podprof::v1::GetKernelStatsResponse* resp) {
  return Answer(queries_->KernelStats(*req), resp);
}

grpc::Status AggregatorService::KernelHistory(grpc::ServerContext*,
                                              const podprof::v1::KernelHistoryRequest* req,
                                              podprof::v1::KernelHistoryResponse* resp) {
  return Answer(queries_->KernelHistory(*req), resp);
}

grpc::Status AggregatorService::CompareCaptures(grpc::ServerContext*,
                                                const podprof::v1::CompareCapturesRequest* req,
                                                podprof::v1::CompareCapturesResponse* resp) {
  return Answer(queries_->Compare(*req), resp);
}

grpc::Status AggregatorService::DescribeKernel(grpc::ServerContext*,
                                               const podprof::v1::DescribeKernelRequest* req,
                                               podprof::v1::DescribeKernelResponse* resp) {
  return Answer(queries_->DescribeKernel(*req), resp);
}

grpc::Status AggregatorService::GetStragglers(grpc::ServerContext*,
                                              const podprof::v1::GetStragglersRequest* req,
                                              podprof::v1::GetStragglersResponse* resp) {
  return Answer(queries_->Stragglers(*req), resp);
}

}  // namespace podprof::aggregator
