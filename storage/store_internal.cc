#include "storage/store_internal.h"

#include "common/json_text.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace podprof::storage::internal {

std::string LabelsJson(const std::map<std::string, std::string>& labels) {
  return JsonText(nlohmann::json(labels));
}

std::map<std::string, std::string> ParseLabels(const std::string& text) {
  std::map<std::string, std::string> out;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) {
      if (v.is_string()) out[k] = v.get<std::string>();
    }
  }
  return out;
}

absl::Status Transaction(Connection& c, const std::function<absl::Status()>& body) {
  RETURN_IF_ERROR(c.Exec("BEGIN IMMEDIATE"));
  absl::Status s = body();
  if (s.ok()) s = c.Exec("COMMIT");
  if (!s.ok()) c.Exec("ROLLBACK").IgnoreError();
  return s;
}

absl::StatusOr<HostIds> HostIds::Prepare(Connection& c) {
  HostIds h;
  ASSIGN_OR_RETURN(h.insert_,
                   Statement::Prepare(c, "INSERT OR IGNORE INTO hosts (name) VALUES (?)"));
  ASSIGN_OR_RETURN(h.select_, Statement::Prepare(c, "SELECT id FROM hosts WHERE name = ?"));
  return h;
}

absl::StatusOr<int64_t> HostIds::Of(const std::string& name) {
  insert_->Reset();
  insert_->Bind(1, name);
  RETURN_IF_ERROR(insert_->Run());
  select_->Reset();
  select_->Bind(1, name);
  ASSIGN_OR_RETURN(bool found, select_->Step());
  if (!found) return absl::InternalError(absl::StrCat("host ", name, " vanished from hosts"));
  const int64_t id = select_->Int(0);
  select_->Reset();
  return id;
}

absl::StatusOr<CaptureRef> RequireCapture(Connection& c, const std::string& id) {
  ASSIGN_OR_RETURN(
      auto s,
      Statement::Prepare(c,
                         "SELECT seq, stats_first, stats_last, status = 'running' FROM captures "
                         "WHERE id = ?"));
  s->Bind(1, id);
  ASSIGN_OR_RETURN(bool found, s->Step());
  if (!found) return absl::NotFoundError(absl::StrCat("no capture with id \"", id, "\""));
  if (s->Int(3) != 0) return CaptureRef{s->Int(0), 0, -1};
  return CaptureRef{s->Int(0), s->Int(1), s->Int(2)};
}

}  // namespace podprof::storage::internal
