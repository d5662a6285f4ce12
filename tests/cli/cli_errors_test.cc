// What `podprof` says when something is wrong, and its exit codes (cli/exit_codes.h, README.md
// "Exit codes"): the real binary, against a real podprof-aggregator on loopback (plaintext, and
// one with mutual TLS and an operator allow list), or against an address nothing listens on.
// Regression tests for issue #35: raw gRPC and CLI11 messages, `history nosuch` exiting 0, a
// bare `podprof` saying only "A subcommand is required".
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/util/child_process.h"
#include "tests/util/run_podprof.h"

namespace podprof::cli {
namespace {

namespace fs = std::filesystem;
using testing::PodprofResult;
using testing::RunPodprof;

// The documented codes (README.md, "Exit codes").
constexpr int kUsage = 2, kNotFound = 2, kUnreachable = 3, kDenied = 4;

// Runs with none of the CLI's environment variables and no configuration file.
PodprofResult Podprof(const std::string& args) {
  return RunPodprof(args,
                    "PODPROF_AGGREGATOR= PODPROF_TLS_CERT= PODPROF_TLS_KEY= PODPROF_TLS_CA= "
                    "PODPROF_PROFILE= PODPROF_CLI_CONFIG=/nonexistent/cli.toml");
}

class CliErrorsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::path(::testing::TempDir()) / absl::StrCat("cli_errors_", getpid()));
    fs::remove_all(*dir_);
    plain_ = testing::StartBuiltAggregator(*dir_ / "plain").release();
  }
  static void TearDownTestSuite() {
    delete plain_;
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string Plain() {
    return absl::StrCat("127.0.0.1:", plain_->info()["port"].get<int>());
  }
  static std::string P(const std::string& f) { return (*dir_ / f).string(); }
  // Certificates from scripts/make-certs.sh, as a deployment's would be.
  static void MakeCerts(const std::string& args) {
    const std::string cmd =
        absl::StrCat(PODPROF_SOURCE_DIR, "/scripts/make-certs.sh --dir ", dir_->string(),
                     " --ca ca --days 2 ", args, " >/dev/null 2>&1");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static std::string TlsFlags(const std::string& who) {
    return absl::StrCat(" --tls-cert ", P(who + ".crt"), " --tls-key ", P(who + ".key"),
                        " --tls-ca ", P("ca.crt"));
  }

  static fs::path* dir_;
  static testing::ChildProcess* plain_;
};

fs::path* CliErrorsTest::dir_ = nullptr;
testing::ChildProcess* CliErrorsTest::plain_ = nullptr;

TEST_F(CliErrorsTest, AnUnreachableAggregatorSaysWhatToDo) {
  PodprofResult r = Podprof("captures --aggregator 127.0.0.1:1");
  EXPECT_EQ(r.exit_code, kUnreachable);
  EXPECT_EQ(r.err,
            "podprof captures: no aggregator answers at 127.0.0.1:1 (connection refused); is "
            "podprof-aggregator running there? set --aggregator or $PODPROF_AGGREGATOR\n");
  // With TLS too: the TCP connection was refused, no certificate was looked at.
  MakeCerts("ca");
  MakeCerts("operator ops-alice");
  r = Podprof("captures --aggregator 127.0.0.1:1" + TlsFlags("ops-alice"));
  EXPECT_EQ(r.exit_code, kUnreachable);
  EXPECT_TRUE(absl::StrContains(r.err, "no aggregator answers at 127.0.0.1:1 (connection refused)"))
      << r.err;
  EXPECT_FALSE(absl::StrContains(r.err, "TLS")) << r.err;
  EXPECT_FALSE(absl::StrContains(r.err, "failed to connect to all addresses")) << r.err;
}

TEST_F(CliErrorsTest, AFlagOfFewValuesListsThemPlainly) {
  for (const auto& [args, want] : {
           std::pair<std::string, std::string>{
               "stats cap-1 --by foo",
               "podprof stats: --by: \"foo\" is not one of kernel, chip, host, category; see "
               "`podprof stats --help`\n"},
           {"stats cap-1 --sort fast",
            "podprof stats: --sort: \"fast\" is not one of total, count, mean, p50, p99, max, "
            "name; see `podprof stats --help`\n"},
           {"captures --format xml",
            "podprof captures: --format: \"xml\" is not one of table, json, csv; see `podprof "
            "captures --help`\n"},
           {"export cap-1 --format pdf",
            "podprof export: --format: \"pdf\" is not one of perfetto, chrome, xprof, csv; see "
            "`podprof export --help`\n"},
           {"fleet top --by chip",
            "podprof fleet top: --by: \"chip\" is not one of kernel, pod, host; see `podprof "
            "fleet top --help`\n"},
       }) {
    PodprofResult r = Podprof(args + " --aggregator 127.0.0.1:1");
    EXPECT_EQ(r.exit_code, kUsage) << args;
    EXPECT_EQ(r.err, want) << args;
  }
  // Case does not matter to the names.
  EXPECT_EQ(Podprof("captures --format JSON --aggregator " + Plain()).exit_code, 0);
}

TEST_F(CliErrorsTest, OtherUsageErrorsNameTheCommandAndItsHelp) {
  for (const auto& [args, words] : {
           std::pair<std::string, std::string>{"captures --timeout 5parsecs", "--timeout"},
           {"captures --timeout 0s", "must be positive"},
           {"stats", "capture is required"},
           {"captures --bogus", "--bogus"},
       }) {
    PodprofResult r = Podprof(args);
    EXPECT_EQ(r.exit_code, kUsage) << args;
    const std::string name = "podprof " + args.substr(0, args.find(' '));
    EXPECT_TRUE(absl::StartsWith(r.err, name + ": ")) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, words)) << r.err;
    EXPECT_TRUE(absl::EndsWith(r.err, "; see `" + name + " --help`\n")) << r.err;
    EXPECT_EQ(testing::Lines(r.err).size(), 1u) << r.err;
  }
}

TEST_F(CliErrorsTest, DemoRefusesAnUnknownGenerationBeforeStartingAnything) {
  const std::string dir = P("demo");
  PodprofResult r = Podprof("demo --generation v9 --dir " + dir);
  EXPECT_EQ(r.exit_code, kUsage);
  EXPECT_EQ(r.err,
            "podprof demo: --generation v9: no such TPU generation; use one of v4, v5e, v5p, v6e, "
            "v7x\n");
  EXPECT_FALSE(fs::exists(dir)) << "nothing was started";
}

TEST_F(CliErrorsTest, NoSuchKernelOrCaptureIsTheSameExitAndSaysHowToList) {
  for (const auto& [args, hint] : {
           std::pair<std::string, std::string>{"history nosuch", "`podprof stats CAPTURE`"},
           {"history nosuch --format json", "`podprof stats CAPTURE`"},
           {"kernel nosuch", "`podprof stats CAPTURE`"},
           {"stats nosuch", "`podprof captures`"},
           {"stragglers nosuch", "`podprof captures`"},
           {"dcn nosuch", "`podprof captures`"},
       }) {
    PodprofResult r = Podprof(args + " --aggregator " + Plain());
    EXPECT_EQ(r.exit_code, kNotFound) << args << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "nosuch")) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, hint)) << r.err;
    EXPECT_EQ(testing::Lines(r.err).size(), 1u) << r.err;
    EXPECT_TRUE(r.out.empty()) << args << ": " << r.out;
  }
}

TEST_F(CliErrorsTest, NoCommandPrintsTheShortUsage) {
  for (const std::string args : {"", "--aggregator 127.0.0.1:1"}) {
    PodprofResult r = Podprof(args);
    EXPECT_EQ(r.exit_code, kUsage);
    EXPECT_TRUE(absl::StartsWith(r.err, "usage: podprof ")) << r.err;
    for (const char* command : {"inspect", "captures", "stats", "capture", "export", "demo"}) {
      EXPECT_TRUE(absl::StrContains(r.err, absl::StrCat("\n  ", command, " "))) << command;
    }
    EXPECT_TRUE(absl::StrContains(r.err, "Start with `podprof demo`")) << r.err;
    EXPECT_FALSE(absl::StrContains(r.err, "A subcommand is required")) << r.err;
  }
  PodprofResult typo = Podprof("caputre");
  EXPECT_EQ(typo.exit_code, kUsage);
  EXPECT_TRUE(absl::StartsWith(typo.err, "podprof: no command \"caputre\"\nusage: podprof "))
      << typo.err;
  PodprofResult fleet = Podprof("fleet");
  EXPECT_EQ(fleet.exit_code, kUsage);
  EXPECT_TRUE(absl::StartsWith(fleet.err, "usage: podprof fleet COMMAND")) << fleet.err;
  EXPECT_TRUE(absl::StrContains(fleet.err, "\n  regressions ")) << fleet.err;
  // --help's footer points to the exit codes.
  EXPECT_TRUE(absl::StrContains(Podprof("--help").out, "Exit codes:"));
}

TEST_F(CliErrorsTest, ExitCodesAreTheDocumentedOnes) {
  EXPECT_EQ(Podprof("captures --no-such-flag").exit_code, kUsage);
  EXPECT_EQ(Podprof("stats nosuch --aggregator " + Plain()).exit_code, kNotFound);
  EXPECT_EQ(Podprof("captures --aggregator 127.0.0.1:1").exit_code, kUnreachable);
  // Denied: a TLS aggregator whose operators are ops-alice only; viewer-bob may read, not
  // capture.
  MakeCerts("ca");
  MakeCerts("aggregator aggregator 127.0.0.1");
  MakeCerts("operator ops-alice");
  MakeCerts("operator viewer-bob");
  fs::create_directories(*dir_ / "tls");
  std::ofstream(*dir_ / "tls" / "aggregator.toml")
      << "listen = \"127.0.0.1:0\"\n[tls]\ncert = \"" << P("aggregator.crt") << "\"\nkey = \""
      << P("aggregator.key") << "\"\nca = \"" << P("ca.crt")
      << "\"\nallowed_operators = [\"ops-alice\"]\n[http]\nlisten = \"127.0.0.1:0\"\n";
  testing::ChildProcess tls(
      {std::string(PODPROF_BIN_DIR) + "/podprof-aggregator", "--config=" + P("tls/aggregator.toml"),
       "--db=" + P("tls/pod.db"), "--ready-file=" + P("tls/agg.json")},
      P("tls/agg.json"));
  ASSERT_TRUE(tls.ready());
  const std::string addr = absl::StrCat(" --aggregator 127.0.0.1:", tls.info()["port"].get<int>());
  EXPECT_EQ(Podprof("captures" + addr + TlsFlags("viewer-bob")).exit_code, 0);
  PodprofResult denied = Podprof("capture --duration 100ms" + addr + TlsFlags("viewer-bob"));
  EXPECT_EQ(denied.exit_code, kDenied) << denied.err;
  EXPECT_TRUE(absl::StrContains(denied.err, "tls.allowed_operators")) << denied.err;
}

}  // namespace
}  // namespace podprof::cli
