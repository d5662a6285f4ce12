// A client of ClickHouse's HTTP interface (port 8123): one POST per statement, Basic
// authentication, a deadline on the whole exchange. Errors are mapped to what a caller has to
// decide: whether to retry (Unavailable, DeadlineExceeded), whether the settings are wrong
// (PermissionDenied for refused credentials, NotFound for a missing database or table), or
// whether ClickHouse refused the data itself (InvalidArgument), each naming the server and
// quoting ClickHouse's message. Thread-safe: every call makes its own connection.
#ifndef PODPROF_FLEET_CLICKHOUSE_H_
#define PODPROF_FLEET_CLICKHOUSE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace podprof::fleet {

struct ClickHouseOptions {
  // http://host:port (a path or trailing slash is ignored); only plain HTTP: run ClickHouse's
  // https_port behind a local TLS terminator where the network needs it.
  std::string url;
  std::string user = "default";
  std::string password;
  // The deadline of one statement, from connecting to the last byte of the answer.
  int64_t timeout_ns = 30'000'000'000;
  // The largest answer accepted.
  uint64_t max_response_bytes = 256ull << 20;
};

class ClickHouse {
 public:
  // InvalidArgument naming the URL when it is not http://host[:port].
  static absl::StatusOr<ClickHouse> Create(const ClickHouseOptions& options);

  // Runs `sql` (a statement with its FORMAT clause, if any) and returns the answer's body.
  absl::StatusOr<std::string> Query(const std::string& sql) const;
  // Sends `data` (rows in the format `insert` names) as the body of `insert`
  // ("INSERT INTO t (a, b) FORMAT RowBinary"). One request: ClickHouse writes rows that fit
  // one block (and one partition) as one part, all or nothing.
  absl::Status Insert(const std::string& insert, const std::string& data) const;
  // SELECT 1 as the configured user: Unavailable when nothing answers, PermissionDenied when
  // the credentials are refused.
  absl::Status Ping() const;

  // The server, as messages name it (no credentials).
  const std::string& url() const { return url_; }
  const std::string& user() const { return options_.user; }

 private:
  ClickHouse(ClickHouseOptions options, std::string host, std::string port);
  // POSTs `body` with `query` (URL-encoded) as the statement's beginning and `settings`
  // ("&name=value...") for the statement.
  absl::StatusOr<std::string> Post(const std::string& query, const std::string& body,
                                   const std::string& settings) const;

  ClickHouseOptions options_;
  std::string host_, port_, url_;
};

// The status for ClickHouse's error answer (HTTP `http_status`, body "Code: N, e.displayText()
// = DB::Exception: ..."), naming `server`.
absl::Status ClickHouseError(const std::string& server, int http_status, const std::string& body);

// `text` as a ClickHouse string literal, quoted.
std::string Quote(const std::string& text);

}  // namespace podprof::fleet

#endif  // PODPROF_FLEET_CLICKHOUSE_H_
