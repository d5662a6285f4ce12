#include "aggregator/api/service.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "aggregator/api/utf8_fields.h"
#include "podprof_version.h"
#include "proto/grpc_status.h"
#include "security/rpc_guard.h"
#include "security/tls.h"

namespace podprof::aggregator {

namespace {

// The reads: the query layer's answer, as it is.
template <typename Response>
grpc::Status Answer(absl::StatusOr<Response> answer, Response* response) {
  if (!answer.ok()) return ToGrpc(answer.status());
  *response = *std::move(answer);
  EscapeInvalidUtf8Fields(response);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status AggregatorService::Refuse(const grpc::ServerContext& context,
                                       const absl::Status& denied) {
  refusals_.Note(context.peer(), denied.message());
  return ToGrpc(denied);
}

namespace {

// InvalidArgument naming the rule a host name breaks. Host names become file names (XProf
// exports, `podprof export -o DIR`), log lines and table cells, so in every mode, TLS or not,
// they are what DNS allows and underscores: 1 to 253 bytes of letters, digits, '-', '_' and
// '.', not starting with '.' and without "..".
absl::Status CheckHostName(const std::string& name) {
  if (name.empty() || name.size() > 253) {
    return absl::InvalidArgumentError(
        absl::StrCat("host name of ", name.size(), " bytes: a host name has 1 to 253"));
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return absl::InvalidArgumentError(
          absl::StrCat("host name \"", absl::CEscape(name),
                       "\": a host name holds only letters, digits, '-', '_' and '.'"));
    }
  }
  if (name.front() == '.' || absl::StrContains(name, "..")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "host name \"", name, "\": a host name does not start with '.' or hold \"..\""));
  }
  return absl::OkStatus();
}

}  // namespace

grpc::Status AggregatorService::Register(grpc::ServerContext* context,
                                         const podprof::v1::RegisterRequest* req,
                                         podprof::v1::RegisterResponse* resp) {
  return GuardRpc("Aggregator.Register", [&]() -> grpc::Status {
    if (absl::Status a = Access()->agents.Check(*context, "an agent"); !a.ok()) {
      return Refuse(*context, a);
    }
    if (req->host().host_name().empty() || req->host().agent_address().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "a registration needs the host name and the agent's address");
    }
    if (absl::Status s = CheckHostName(req->host().host_name()); !s.ok()) return ToGrpc(s);
    if (absl::Status s = registry_->Register(*req, security::PeerIdentities(*context)); !s.ok()) {
      return Refuse(*context, s);
    }
    resp->set_heartbeat_interval_ms(
        static_cast<uint32_t>(registry_->heartbeat_interval_ns() / 1'000'000));
    resp->set_aggregator_version(absl::StrCat("podprof-aggregator ", kVersion));
    return grpc::Status::OK;
  });
}

grpc::Status AggregatorService::Heartbeat(grpc::ServerContext* context,
                                          const podprof::v1::HeartbeatRequest* req,
                                          podprof::v1::HeartbeatResponse* resp) {
  return GuardRpc("Aggregator.Heartbeat", [&]() -> grpc::Status {
    if (absl::Status a = Access()->agents.Check(*context, "an agent"); !a.ok()) {
      return Refuse(*context, a);
    }
    absl::StatusOr<bool> known = registry_->Heartbeat(*req, security::PeerIdentities(*context));
    if (!known.ok()) return Refuse(*context, known.status());
    resp->set_reregister(!*known);
    resp->set_heartbeat_interval_ms(
        static_cast<uint32_t>(registry_->heartbeat_interval_ns() / 1'000'000));
    return grpc::Status::OK;
  });
}

grpc::Status AggregatorService::ReportTelemetry(grpc::ServerContext* context,
                                                const podprof::v1::ReportTelemetryRequest* req,
                                                podprof::v1::ReportTelemetryResponse*) {
  return GuardRpc("Aggregator.ReportTelemetry", [&]() -> grpc::Status {
    if (absl::Status a = Access()->agents.Check(*context, "an agent"); !a.ok()) {
      return Refuse(*context, a);
    }
    if (telemetry_ == nullptr) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this aggregator keeps no telemetry");
    }
    std::vector<int32_t> chips;
    absl::Status s =
        registry_->CheckSender(req->host_name(), security::PeerIdentities(*context), &chips);
    if (absl::IsPermissionDenied(s)) return Refuse(*context, s);
    if (s.ok()) s = CheckTelemetryReport(*req, chips);
    if (!s.ok()) return ToGrpc(s);
    // The host's slice names it in a DCN trigger's cause.
    std::vector<std::string> missing;
    const std::vector<Registry::Handle> handle =
        registry_->Select({req->host_name()}, {}, &missing);
    telemetry_->Ingest(*req, clock_->NowNs(), handle.empty() ? -1 : handle[0].slice);
    return grpc::Status::OK;
  });
}

grpc::Status AggregatorService::GetTelemetry(grpc::ServerContext*,
                                             const podprof::v1::GetTelemetryRequest* req,
                                             podprof::v1::GetTelemetryResponse* resp) {
  return GuardRpc("Aggregator.GetTelemetry",
                  [&]() -> grpc::Status { return Answer(queries_->Telemetry(*req), resp); });
}

grpc::Status AggregatorService::ListAgents(grpc::ServerContext*,
                                           const podprof::v1::ListAgentsRequest* req,
                                           podprof::v1::ListAgentsResponse* resp) {
  return GuardRpc("Aggregator.ListAgents", [&]() -> grpc::Status {
    *resp = queries_->Agents(*req);
    EscapeInvalidUtf8Fields(resp);
    return grpc::Status::OK;
  });
}

grpc::Status AggregatorService::StartCapture(grpc::ServerContext* context,
                                             const podprof::v1::StartCaptureRequest* req,
                                             podprof::v1::StartCaptureResponse* resp) {
  return GuardRpc("Aggregator.StartCapture", [&]() -> grpc::Status {
    if (absl::Status a = Access()->operators.Check(*context, "an operator"); !a.ok()) {
      return Refuse(*context, a);
    }
    absl::StatusOr<podprof::v1::StartCaptureResponse> r = orchestrator_->Start(*req);
    if (!r.ok()) return ToGrpc(r.status());
    *resp = std::move(*r);
    EscapeInvalidUtf8Fields(resp);
    return grpc::Status::OK;
  });
}

grpc::Status AggregatorService::WatchCapture(
    grpc::ServerContext* context, const podprof::v1::WatchCaptureRequest* req,
    grpc::ServerWriter<podprof::v1::CaptureProgress>* writer) {
  return GuardRpc("Aggregator.WatchCapture", [&]() -> grpc::Status {
    absl::StatusOr<StreamSlots::Ticket> slot = long_calls_.Take(ClientOf(*context));
    if (!slot.ok()) return ToGrpc(slot.status());
    // A watch may wait minutes for news; only a progress event its client leaves untaken
    // counts against it.
    ClientWaitWatchdog watchdog(context, *clock_, kExportWriteLimitNs);
    return ToGrpc(orchestrator_->Watch(
        req->capture_id(),
        [writer, &watchdog](const podprof::v1::CaptureProgress& p) {
          podprof::v1::CaptureProgress safe = p;  // small: a host's line at most
          EscapeInvalidUtf8Fields(&safe);
          watchdog.Arm();
          const bool sent = writer->Write(safe);
          watchdog.Disarm();
          return sent;
        },
        [context] { return context->IsCancelled(); }));
  });
}

grpc::Status AggregatorService::CancelCapture(grpc::ServerContext* context,
                                              const podprof::v1::CancelCaptureRequest* req,
                                              podprof::v1::CancelCaptureResponse* resp) {
  return GuardRpc("Aggregator.CancelCapture", [&]() -> grpc::Status {
    if (absl::Status a = Access()->operators.Check(*context, "an operator"); !a.ok()) {
      return Refuse(*context, a);
    }
    absl::StatusOr<podprof::v1::CaptureStatus> s = orchestrator_->Cancel(req->capture_id());
    if (!s.ok()) return ToGrpc(s.status());
    resp->set_status(*s);
    return grpc::Status::OK;
  });
}

grpc::Status AggregatorService::ImportXSpace(
    grpc::ServerContext* context, grpc::ServerReader<podprof::v1::ImportXSpaceChunk>* reader,
    podprof::v1::ImportXSpaceResponse* response) {
  return GuardRpc("Aggregator.ImportXSpace", [&]() -> grpc::Status {
    if (absl::Status a = Access()->operators.Check(*context, "an operator"); !a.ok()) {
      return Refuse(*context, a);
    }
    absl::StatusOr<StreamSlots::Ticket> slot = long_calls_.Take(ClientOf(*context));
    if (!slot.ok()) return ToGrpc(slot.status());
    Importer import(*writer_, *queries_, *clock_, limits_);
    // An import whose client stops sending is cancelled: it held a thread and a spool file.
    ClientWaitWatchdog watchdog(context, *clock_, kImportReadLimitNs);
    podprof::v1::ImportXSpaceChunk chunk;
    for (;;) {
      watchdog.Arm();
      const bool more = reader->Read(&chunk);
      watchdog.Disarm();
      if (!more) break;
      if (absl::Status s = import.Add(chunk); !s.ok()) return ToGrpc(s);
    }
    if (watchdog.fired()) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          "the import's client sent nothing for 60 s");
    }
    absl::StatusOr<podprof::v1::ImportXSpaceResponse> done = import.Finish();
    if (!done.ok()) return ToGrpc(done.status());
    *response = *std::move(done);
    EscapeInvalidUtf8Fields(response);
    return grpc::Status::OK;
  });
}

grpc::Status AggregatorService::ListCaptures(grpc::ServerContext*,
                                             const podprof::v1::ListCapturesRequest* req,
                                             podprof::v1::ListCapturesResponse* resp) {
  return GuardRpc("Aggregator.ListCaptures",
                  [&]() -> grpc::Status { return Answer(queries_->ListCaptures(*req), resp); });
}

grpc::Status AggregatorService::GetKernelStats(grpc::ServerContext*,
                                               const podprof::v1::GetKernelStatsRequest* req,
                                               podprof::v1::GetKernelStatsResponse* resp) {
  return GuardRpc("Aggregator.GetKernelStats",
                  [&]() -> grpc::Status { return Answer(queries_->KernelStats(*req), resp); });
}

grpc::Status AggregatorService::KernelHistory(grpc::ServerContext*,
                                              const podprof::v1::KernelHistoryRequest* req,
                                              podprof::v1::KernelHistoryResponse* resp) {
  return GuardRpc("Aggregator.KernelHistory",
                  [&]() -> grpc::Status { return Answer(queries_->KernelHistory(*req), resp); });
}

grpc::Status AggregatorService::CompareCaptures(grpc::ServerContext*,
                                                const podprof::v1::CompareCapturesRequest* req,
                                                podprof::v1::CompareCapturesResponse* resp) {
  return GuardRpc("Aggregator.CompareCaptures",
                  [&]() -> grpc::Status { return Answer(queries_->Compare(*req), resp); });
}

grpc::Status AggregatorService::DescribeKernel(grpc::ServerContext*,
                                               const podprof::v1::DescribeKernelRequest* req,
                                               podprof::v1::DescribeKernelResponse* resp) {
  return GuardRpc("Aggregator.DescribeKernel",
                  [&]() -> grpc::Status { return Answer(queries_->DescribeKernel(*req), resp); });
}

grpc::Status AggregatorService::GetStragglers(grpc::ServerContext*,
                                              const podprof::v1::GetStragglersRequest* req,
                                              podprof::v1::GetStragglersResponse* resp) {
  return GuardRpc("Aggregator.GetStragglers",
                  [&]() -> grpc::Status { return Answer(queries_->Stragglers(*req), resp); });
}

grpc::Status AggregatorService::GetDcn(grpc::ServerContext*, const podprof::v1::GetDcnRequest* req,
                                       podprof::v1::GetDcnResponse* resp) {
  return GuardRpc("Aggregator.GetDcn",
                  [&]() -> grpc::Status { return Answer(queries_->Dcn(*req), resp); });
}

grpc::Status AggregatorService::Sql(grpc::ServerContext*, const podprof::v1::SqlRequest* req,
                                    podprof::v1::SqlResponse* resp) {
  return GuardRpc("Aggregator.Sql",
                  [&]() -> grpc::Status { return Answer(queries_->Sql(*req), resp); });
}

}  // namespace podprof::aggregator
