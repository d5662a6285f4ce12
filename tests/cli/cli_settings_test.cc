// Where each setting of `podprof` comes from: its flag (before or after the subcommand), else
// its environment variable, else the CLI profile, else the default (cli/cli_profile.h). The
// real binary against a real podprof-aggregator on loopback and against addresses nothing
// listens on; which one was talked to, or which file was read, shows in the exit status and
// the error. Regression tests for issue #35: $PODPROF_AGGREGATOR and $PODPROF_TLS_* used to
// beat the flags given after the subcommand.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/captures_command.h"
#include "gtest/gtest.h"
#include "harness/clickhouse_server.h"
#include "nlohmann/json.hpp"
#include "tests/util/child_process.h"
#include "tests/util/run_podprof.h"
#include "tests/util/status_matchers.h"
#include "tests/util/trace_fixtures.h"

namespace podprof::cli {
namespace {

namespace fs = std::filesystem;
using testing::PodprofResult;
using testing::RunPodprof;

// Nothing listens on these: a dial is refused at once, and the error names the address.
constexpr char kDeadA[] = "127.0.0.1:1";
constexpr char kDeadB[] = "127.0.0.1:2";
constexpr char kDeadC[] = "127.0.0.1:3";

// Whether `r` failed to reach the aggregator at `address` (exit 3, the address named).
::testing::AssertionResult Unreachable(const PodprofResult& r, const std::string& address) {
  if (r.exit_code == 3 && absl::StrContains(r.err, "no aggregator answers at " + address + " ")) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "want unreachable " << address << ", got exit " << r.exit_code << ": " << r.err;
}

::testing::AssertionResult Succeeded(const PodprofResult& r) {
  if (r.exit_code == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "exit " << r.exit_code << ": " << r.err;
}

// One real aggregator for the suite, holding one imported capture.
class CliSettingsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::path(::testing::TempDir()) / absl::StrCat("cli_settings_", getpid()));
    fs::remove_all(*dir_);
    aggregator_ = testing::StartBuiltAggregator(*dir_ / "agg").release();
    if (!aggregator_->ready()) return;
    address_ = new std::string(absl::StrCat("127.0.0.1:", aggregator_->info()["port"].get<int>()));
  }
  static void TearDownTestSuite() {
    delete aggregator_;
    fs::remove_all(*dir_);
    delete dir_;
    delete address_;
    delete capture_;
  }
  void SetUp() override {
    ASSERT_NE(address_, nullptr) << "the aggregator did not start";
    config_ =
        (*dir_ /
         (std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ".toml"))
            .string();
    fs::remove(config_);
  }

  // The environment of a run with none of the variables set but those in `more`, and the
  // configuration file at config_ (which need not exist).
  std::string Env(const std::string& more = "") const {
    return absl::StrCat(
        "PODPROF_AGGREGATOR= PODPROF_TLS_CERT= PODPROF_TLS_KEY= PODPROF_TLS_CA= PODPROF_PROFILE= ",
        "PODPROF_CLICKHOUSE= PODPROF_CLICKHOUSE_USER= PODPROF_CLICKHOUSE_PASSWORD_FILE= ",
        "PODPROF_CLICKHOUSE_PASSWORD= PODPROF_CLI_CONFIG=", config_, " ", more);
  }
  void WriteConfig(const std::string& toml) const { std::ofstream(config_) << toml; }
  static std::string Path(const std::string& name) { return (*dir_ / name).string(); }
  // A file that holds PEM-looking text, so that reading it succeeds.
  static std::string Pem(const std::string& name) {
    std::ofstream(*dir_ / name) << "-----BEGIN CERTIFICATE-----\n";
    return Path(name);
  }
  // The capture imported into the aggregator (once).
  std::string Capture() {
    if (capture_ == nullptr) {
      PodprofResult r = RunPodprof("import --format json --aggregator " + *address_ + " '" +
                                       testing::FixturePath(testing::kTpuFixture) + "'",
                                   Env());
      nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      if (j.is_discarded() || !j.contains("capture")) return "";
      capture_ = new std::string(j["capture"].get<std::string>());
    }
    return *capture_;
  }

  static fs::path* dir_;
  static testing::ChildProcess* aggregator_;
  static std::string* address_;
  static std::string* capture_;
  std::string config_;
};

fs::path* CliSettingsTest::dir_ = nullptr;
testing::ChildProcess* CliSettingsTest::aggregator_ = nullptr;
std::string* CliSettingsTest::address_ = nullptr;
std::string* CliSettingsTest::capture_ = nullptr;

TEST_F(CliSettingsTest, AggregatorFlagBeatsEnvironmentBeatsProfileBeatsDefault) {
  const std::string real = *address_;
  WriteConfig(absl::StrCat("aggregator = \"", kDeadC, "\"\n"));
  // The flag wins over the environment, after the subcommand and before it, either way round.
  EXPECT_TRUE(Succeeded(RunPodprof("captures --aggregator " + real,
                                   Env(absl::StrCat("PODPROF_AGGREGATOR=", kDeadA)))));
  EXPECT_TRUE(Succeeded(RunPodprof("--aggregator " + real + " captures",
                                   Env(absl::StrCat("PODPROF_AGGREGATOR=", kDeadA)))));
  EXPECT_TRUE(Unreachable(
      RunPodprof(absl::StrCat("captures --aggregator ", kDeadB), Env("PODPROF_AGGREGATOR=" + real)),
      kDeadB));
  EXPECT_TRUE(Unreachable(RunPodprof(absl::StrCat("--aggregator ", kDeadB, " captures"),
                                     Env("PODPROF_AGGREGATOR=" + real)),
                          kDeadB));
  // The environment wins over the profile.
  EXPECT_TRUE(Succeeded(RunPodprof("captures", Env("PODPROF_AGGREGATOR=" + real))));
  EXPECT_TRUE(Unreachable(RunPodprof("captures", Env(absl::StrCat("PODPROF_AGGREGATOR=", kDeadA))),
                          kDeadA));
  // The profile wins over the default...
  EXPECT_TRUE(Unreachable(RunPodprof("captures", Env()), kDeadC));
  WriteConfig("aggregator = \"" + real + "\"\n");
  EXPECT_TRUE(Succeeded(RunPodprof("captures", Env())));
  // ...which is localhost:7100 (as --help shows the value the parse starts from).
  fs::remove(config_);
  EXPECT_TRUE(absl::StrContains(RunPodprof("captures --help", Env()).out, "localhost:7100"));
}

TEST_F(CliSettingsTest, TlsFilesFlagBeatsEnvironmentBeatsProfileBeatsDefault) {
  // Each file in turn, the other two readable: the error names the one that was read.
  const std::string pem = Pem("any.pem");
  for (const std::string file : {"cert", "key", "ca"}) {
    SCOPED_TRACE(file);
    const std::string flag = "--tls-" + file + " ";
    const std::string var = "PODPROF_TLS_" +
                            std::string(file == "cert"  ? "CERT"
                                        : file == "key" ? "KEY"
                                                        : "CA") +
                            "=";
    const std::string key = "tls_" + file;
    std::string others;
    for (const std::string other : {"cert", "key", "ca"}) {
      if (other != file) others += " --tls-" + other + " " + pem;
    }
    const std::string from_flag = Path("flag-" + file + ".pem"),
                      from_env = Path("env-" + file + ".pem"),
                      from_profile = Path("profile-" + file + ".pem");
    WriteConfig(key + " = \"" + from_profile + "\"\n");
    auto read = [&](const std::string& args, const std::string& env) {
      PodprofResult r = RunPodprof("captures --aggregator " + *address_ + others + args, Env(env));
      EXPECT_EQ(r.exit_code, 2) << r.err;
      return r.err;
    };
    for (const std::string& err :
         {read(" " + flag + from_flag, var + from_env),
          // Before the subcommand too.
          RunPodprof(flag + from_flag + " captures --aggregator " + *address_ + others,
                     Env(var + from_env))
              .err}) {
      EXPECT_TRUE(absl::StrContains(err, from_flag)) << err;
      EXPECT_FALSE(absl::StrContains(err, from_env)) << err;
    }
    EXPECT_TRUE(absl::StrContains(read("", var + from_env), from_env));
    EXPECT_TRUE(absl::StrContains(read("", ""), from_profile));
  }
  // By default there are no TLS files: plaintext, which this aggregator speaks.
  fs::remove(config_);
  EXPECT_TRUE(Succeeded(RunPodprof("captures --aggregator " + *address_, Env())));
}

TEST_F(CliSettingsTest, FormatFlagBeatsProfileBeatsDefault) {
  ASSERT_FALSE(Capture().empty());
  const std::string captures = "captures --aggregator " + *address_;
  WriteConfig("format = \"csv\"\n");
  PodprofResult flag = RunPodprof(captures + " --format json", Env());
  ASSERT_TRUE(Succeeded(flag));
  EXPECT_TRUE(nlohmann::json::parse(flag.out, nullptr, false).is_array()) << flag.out;
  PodprofResult global = RunPodprof("--format json " + captures, Env());
  EXPECT_TRUE(nlohmann::json::parse(global.out, nullptr, false).is_array()) << global.out;
  PodprofResult profile = RunPodprof(captures, Env());
  ASSERT_TRUE(Succeeded(profile));
  EXPECT_EQ(testing::Lines(profile.out).at(0), kCapturesCsvHeader);
  fs::remove(config_);
  PodprofResult table = RunPodprof(captures, Env());
  ASSERT_TRUE(Succeeded(table));
  EXPECT_NE(testing::Lines(table.out).at(0), kCapturesCsvHeader);
  EXPECT_TRUE(nlohmann::json::parse(table.out, nullptr, false).is_discarded()) << table.out;
  EXPECT_TRUE(absl::StrContains(table.out, Capture())) << table.out;
}

// A loopback port that accepts connections (the kernel's backlog) and never answers: a call
// to it runs into its deadline, and the error names the deadline.
class SilentPort {
 public:
  SilentPort() : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    address_ = absl::StrCat("127.0.0.1:", ntohs(a.sin_port));
  }
  ~SilentPort() { close(fd_); }
  const std::string& address() const { return address_; }

 private:
  const int fd_;
  std::string address_;
};

TEST_F(CliSettingsTest, TimeoutFlagBeatsProfileBeatsDefault) {
  SilentPort silent;
  const std::string captures = "captures --aggregator " + silent.address();
  WriteConfig("timeout = \"700ms\"\n");
  PodprofResult flag = RunPodprof(captures + " --timeout 300ms", Env());
  EXPECT_EQ(flag.exit_code, 3);
  EXPECT_TRUE(absl::StrContains(flag.err, "within 300")) << flag.err;
  PodprofResult profile = RunPodprof(captures, Env());
  EXPECT_EQ(profile.exit_code, 3);
  EXPECT_TRUE(absl::StrContains(profile.err, "within 700")) << profile.err;
  // The default (30s) is not waited for here; --help names it.
  EXPECT_TRUE(absl::StrContains(RunPodprof("captures --help", Env()).out, "default 30s"));
  // Export's own default (10m) gives way to the profile's timeout too, and to the flag.
  const std::string exp =
      "export cap-x -o " + Path("x.pftrace") + " --aggregator " + silent.address();
  PodprofResult export_profile = RunPodprof(exp, Env());
  EXPECT_EQ(export_profile.exit_code, 3);
  EXPECT_TRUE(absl::StrContains(export_profile.err, "within 700")) << export_profile.err;
  PodprofResult export_flag = RunPodprof(exp + " --timeout 300ms", Env());
  EXPECT_TRUE(absl::StrContains(export_flag.err, "within 300")) << export_flag.err;
}

TEST_F(CliSettingsTest, ExportMaxSizeFlagBeatsProfileBeatsDefault) {
  const std::string id = Capture();
  ASSERT_FALSE(id.empty());
  const std::string out = Path("export.json");
  const std::string exp =
      "export " + id + " --format chrome -o " + out + " --aggregator " + *address_;
  WriteConfig("max_size = \"2kB\"\n");
  PodprofResult flag = RunPodprof(exp + " --max-size 1kB", Env());
  EXPECT_EQ(flag.exit_code, 2) << flag.err;
  EXPECT_TRUE(absl::StrContains(flag.err, "over the 1 kB limit")) << flag.err;
  PodprofResult profile = RunPodprof(exp, Env());
  EXPECT_EQ(profile.exit_code, 2) << profile.err;
  EXPECT_TRUE(absl::StrContains(profile.err, "over the 2 kB limit")) << profile.err;
  fs::remove(config_);
  EXPECT_TRUE(Succeeded(RunPodprof(exp, Env())));  // 256MB: the fixture's JSON is far smaller
  EXPECT_TRUE(fs::exists(out));
}

TEST_F(CliSettingsTest, ProfileFlagBeatsEnvironmentBeatsTheTopLevelKeys) {
  WriteConfig(absl::StrCat("aggregator = \"", kDeadA, "\"\n[profiles.dead]\naggregator = \"",
                           kDeadB, "\"\n[profiles.real]\naggregator = \"", *address_, "\"\n"));
  EXPECT_TRUE(Succeeded(RunPodprof("--profile real captures", Env("PODPROF_PROFILE=dead"))));
  EXPECT_TRUE(Succeeded(RunPodprof("captures --profile=real", Env("PODPROF_PROFILE=dead"))));
  EXPECT_TRUE(
      Unreachable(RunPodprof("captures --profile dead", Env("PODPROF_PROFILE=real")), kDeadB));
  EXPECT_TRUE(Succeeded(RunPodprof("captures", Env("PODPROF_PROFILE=real"))));
  EXPECT_TRUE(Unreachable(RunPodprof("captures", Env()), kDeadA));
}

TEST_F(CliSettingsTest, ConfigFileFromTheEnvironmentBeatsXdgBeatsHome) {
  const fs::path home = *dir_ / "home", xdg = *dir_ / "xdg";
  fs::create_directories(home / ".config/podprof");
  fs::create_directories(xdg / "podprof");
  std::ofstream(home / ".config/podprof/cli.toml") << "aggregator = \"" << kDeadA << "\"\n";
  std::ofstream(xdg / "podprof/cli.toml") << "aggregator = \"" << kDeadB << "\"\n";
  WriteConfig(absl::StrCat("aggregator = \"", kDeadC, "\"\n"));
  const std::string dirs = "HOME=" + home.string() + " XDG_CONFIG_HOME=" + xdg.string();
  EXPECT_TRUE(Unreachable(RunPodprof("captures", Env(dirs)), kDeadC));
  // Env() names config_; an empty $PODPROF_CLI_CONFIG counts as unset.
  EXPECT_TRUE(Unreachable(RunPodprof("captures", Env(dirs + " PODPROF_CLI_CONFIG=")), kDeadB));
  EXPECT_TRUE(Unreachable(RunPodprof("captures", Env("HOME=" + home.string() +
                                                     " XDG_CONFIG_HOME= PODPROF_CLI_CONFIG=")),
                          kDeadA));
}

// The fleet command's ClickHouse settings have no profile keys: flag, environment, default.
TEST_F(CliSettingsTest, ClickHouseUrlAndPasswordFileFlagBeatsEnvironment) {
  const std::string top = "fleet top --since 1h";
  PodprofResult flag = RunPodprof(top + " --clickhouse http://127.0.0.1:1",
                                  Env("PODPROF_CLICKHOUSE=http://127.0.0.1:2"));
  EXPECT_EQ(flag.exit_code, 3) << flag.err;
  EXPECT_TRUE(absl::StrContains(flag.err, "127.0.0.1:1")) << flag.err;
  PodprofResult env = RunPodprof(top, Env("PODPROF_CLICKHOUSE=http://127.0.0.1:2"));
  EXPECT_TRUE(absl::StrContains(env.err, "127.0.0.1:2")) << env.err;
  PodprofResult none = RunPodprof(top, Env());
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(none.err, "no ClickHouse to ask")) << none.err;

  // The password file is read before anything is dialled: the error names the file read.
  const std::string url = " PODPROF_CLICKHOUSE=http://127.0.0.1:1";
  const std::string flag_pw = Path("flag.pw"), env_pw = Path("env.pw");
  PodprofResult file_flag = RunPodprof(top + " --clickhouse-password-file " + flag_pw,
                                       Env("PODPROF_CLICKHOUSE_PASSWORD_FILE=" + env_pw + url));
  EXPECT_EQ(file_flag.exit_code, 2) << file_flag.err;
  EXPECT_TRUE(absl::StrContains(file_flag.err, flag_pw)) << file_flag.err;
  // The file from the environment wins over $PODPROF_CLICKHOUSE_PASSWORD.
  PodprofResult file_env = RunPodprof(top, Env("PODPROF_CLICKHOUSE_PASSWORD_FILE=" + env_pw +
                                               " PODPROF_CLICKHOUSE_PASSWORD=x" + url));
  EXPECT_EQ(file_env.exit_code, 2) << file_env.err;
  EXPECT_TRUE(absl::StrContains(file_env.err, env_pw)) << file_env.err;
}

// The user and the password, which only a real ClickHouse tells apart.
TEST_F(CliSettingsTest, ClickHouseUserAndPasswordFlagBeatsEnvironmentBeatsDefault) {
  if (!testing::HaveClickHouse()) GTEST_SKIP() << "no " << testing::kClickHouseBinary;
  testing::ClickHouseServer ch(*dir_ / "ch", testing::FreePorts());
  ASSERT_OK(ch.started());
  ASSERT_EQ(ch.Sql("CREATE DATABASE podprof"), "");
  std::ofstream(*dir_ / "reader.pw") << "r-secret\n";
  const std::string top = "fleet top --since 1h --format json";
  const std::string url = " PODPROF_CLICKHOUSE=" + ch.url();
  auto refused = [](const PodprofResult& r, const std::string& user) {
    return r.exit_code == 4 && absl::StrContains(r.err, user);
  };
  // Past the login: the query reaches the database, which holds no fleet tables yet.
  auto admitted = [](const PodprofResult& r) {
    if (r.exit_code == 2 && absl::StrContains(r.err, "doesn't exist")) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "exit " << r.exit_code << ": " << r.err;
  };
  // User: flag, else environment, else ClickHouse's default user (no password, may read).
  PodprofResult flag = RunPodprof(top + " --clickhouse-user nobody-flag",
                                  Env("PODPROF_CLICKHOUSE_USER=nobody-env" + url));
  EXPECT_TRUE(refused(flag, "nobody-flag")) << flag.exit_code << ": " << flag.err;
  PodprofResult env = RunPodprof(top, Env("PODPROF_CLICKHOUSE_USER=nobody-env" + url));
  EXPECT_TRUE(refused(env, "nobody-env")) << env.exit_code << ": " << env.err;
  EXPECT_TRUE(admitted(RunPodprof(top, Env(url))));
  // Password: the file (flag or environment), else $PODPROF_CLICKHOUSE_PASSWORD.
  const std::string reader = " PODPROF_CLICKHOUSE_USER=reader" + url;
  EXPECT_TRUE(admitted(RunPodprof(top + " --clickhouse-password-file " + Path("reader.pw"),
                                  Env("PODPROF_CLICKHOUSE_PASSWORD=wrong" + reader))));
  EXPECT_TRUE(admitted(RunPodprof(top, Env("PODPROF_CLICKHOUSE_PASSWORD=r-secret" + reader))));
  EXPECT_TRUE(
      refused(RunPodprof(top, Env("PODPROF_CLICKHOUSE_PASSWORD=wrong" + reader)), "reader"));
}

}  // namespace
}  // namespace podprof::cli
