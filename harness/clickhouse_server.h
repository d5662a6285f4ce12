// Real ClickHouse servers for tests: each runs from a temporary folder with a generated
// configuration (loopback ports chosen at run time, its own data, no system service touched),
// is waited for on /ping, and is stopped when the object goes, also when a test fails (a
// Subprocess dies with its test). Users: `default` (no password, may write), `writer`
// (password "w-secret") and `reader` (password "r-secret", read-only: profile readonly = 2).
// Servers given each other's ports know each other as the shards of cluster `podprof_fleet`.
// Free of gtest, for bench_fleet too: failures are Status.
#ifndef PODPROF_HARNESS_CLICKHOUSE_SERVER_H_
#define PODPROF_HARNESS_CLICKHOUSE_SERVER_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/subprocess.h"
#include "fleet/clickhouse.h"

namespace podprof::testing {

inline constexpr char kClickHouseBinary[] = "/usr/sbin/clickhouse-server";

// Whether the server binary is installed (scripts/install-deps.sh installs it).
inline bool HaveClickHouse() { return std::filesystem::exists(kClickHouseBinary); }

// A loopback port nothing listens on now.
inline int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

class ClickHouseServer {
 public:
  struct Ports {
    int http = 0, tcp = 0;
  };

  // `shards`: every server of the cluster (this one included), for remote_servers.
  ClickHouseServer(const std::filesystem::path& dir, Ports ports,
                   const std::vector<Ports>& shards = {})
      : dir_(dir), ports_(ports) {
    std::filesystem::create_directories(dir_ / "data");
    WriteConfig(shards);
    started_ = Start();
  }
  ~ClickHouseServer() { Stop(); }

  std::string url() const { return absl::StrCat("http://127.0.0.1:", ports_.http); }
  const Ports& ports() const { return ports_; }
  bool running() const { return process_.has_value(); }
  // How the first start went.
  const absl::Status& started() const { return started_; }

  // A client as `user` (password as the class comment says).
  fleet::ClickHouse Client(const std::string& user = "default") const {
    fleet::ClickHouseOptions o;
    o.url = url();
    o.user = user;
    o.password = user == "writer" ? "w-secret" : user == "reader" ? "r-secret" : "";
    o.timeout_ns = 20'000'000'000;
    return *fleet::ClickHouse::Create(o);
  }
  // Runs `sql` as `default`; the answer, or the error's text.
  std::string Sql(const std::string& sql) const {
    absl::StatusOr<std::string> r = Client().Query(sql);
    return r.ok() ? *r : absl::StrCat("error: ", r.status().message());
  }

  absl::Status Start() {
    SubprocessOptions o;
    o.argv = {kClickHouseBinary, "--config-file=" + (dir_ / "config.xml").string()};
    o.stdout_path = (dir_ / "stdout.log").string();
    o.stderr_path = o.stdout_path;
    o.working_dir = dir_.string();
    absl::StatusOr<Subprocess> p = Subprocess::Start(o);
    if (!p.ok()) return p.status();
    process_.emplace(*std::move(p));
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (absl::Now() < give_up) {
      if (Client().Ping().ok()) return absl::OkStatus();
      if (process_->TryWait().has_value()) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return absl::UnavailableError(absl::StrCat("clickhouse-server in ", dir_.string(),
                                               " did not answer /ping; see ", dir_.string(),
                                               "/stdout.log and error.log"));
  }
  // SIGKILL: as a crash or an OOM kill leaves it.
  void Kill() {
    if (!process_) return;
    process_->Signal(SIGKILL).IgnoreError();
    process_->Wait();
    process_.reset();
  }
  void Stop() {
    if (!process_) return;
    process_->Terminate(absl::Seconds(20));
    process_.reset();
  }

 private:
  void WriteConfig(const std::vector<Ports>& shards) {
    std::string cluster;
    for (const Ports& s : shards) {
      cluster += absl::StrCat("<shard><replica><host>127.0.0.1</host><port>", s.tcp,
                              "</port></replica></shard>");
    }
    const std::string d = dir_.string();
    std::ofstream(dir_ / "config.xml") << absl::StrCat(
        "<?xml version=\"1.0\"?>\n<yandex>\n<logger><level>warning</level><log>", d,
        "/server.log</log><errorlog>", d, "/error.log</errorlog><console>0</console></logger>\n",
        "<http_port>", ports_.http, "</http_port><tcp_port>", ports_.tcp, "</tcp_port>\n",
        "<listen_host>127.0.0.1</listen_host>\n<path>", d, "/data/</path><tmp_path>", d,
        "/tmp/</tmp_path><user_files_path>", d, "/user_files/</user_files_path>",
        "<format_schema_path>", d, "/format_schemas/</format_schema_path>\n",
        "<mark_cache_size>67108864</mark_cache_size><uncompressed_cache_size>0",
        "</uncompressed_cache_size><max_concurrent_queries>50</max_concurrent_queries>\n",
        "<users_config>users.xml</users_config><default_profile>default</default_profile>",
        "<default_database>default</default_database><timezone>UTC</timezone>\n",
        shards.empty()
            ? ""
            : "<remote_servers><podprof_fleet>" + cluster + "</podprof_fleet></remote_servers>\n",
        "</yandex>\n");
    auto user = [](const char* name, const char* password, const char* profile) {
      return absl::StrCat("<", name, "><password>", password, "</password><networks><ip>",
                          "127.0.0.1</ip></networks><profile>", profile,
                          "</profile><quota>default</quota></", name, ">");
    };
    std::ofstream(dir_ / "users.xml") << absl::StrCat(
        "<?xml version=\"1.0\"?>\n<yandex>\n<profiles><default/><readonly><readonly>2",
        "</readonly></readonly></profiles>\n<users>", user("default", "", "default"),
        user("writer", "w-secret", "default"), user("reader", "r-secret", "readonly"),
        "</users>\n<quotas><default/></quotas>\n</yandex>\n");
  }

  std::filesystem::path dir_;
  Ports ports_;
  std::optional<Subprocess> process_;
  absl::Status started_;
};

// Ports for a server, free now.
inline ClickHouseServer::Ports FreePorts() { return {FreePort(), FreePort()}; }

}  // namespace podprof::testing

#endif  // PODPROF_HARNESS_CLICKHOUSE_SERVER_H_
