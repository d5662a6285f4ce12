// Subprocess and ReadFile against real processes and files.
#include "common/subprocess.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;

// A fresh directory for one test.
std::string Scratch(const std::string& name) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / absl::StrCat("subprocess_", name, "_", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// Options to run `argv`, with every other field at its default.
SubprocessOptions Argv(std::vector<std::string> argv) {
  SubprocessOptions o;
  o.argv = std::move(argv);
  return o;
}

Subprocess MustStart(const SubprocessOptions& options) {
  absl::StatusOr<Subprocess> p = Subprocess::Start(options);
  EXPECT_OK(p);
  if (!p.ok()) std::abort();
  return *std::move(p);
}

// Whether `pid` has ended: gone, or a zombie nobody has reaped yet.
bool Ended(pid_t pid) {
  absl::StatusOr<std::string> stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat.ok()) return true;
  const size_t close = stat->rfind(')');
  return close != std::string::npos && close + 2 < stat->size() && (*stat)[close + 2] == 'Z';
}

// Waits up to `timeout` for `pid` to end.
bool EndsWithin(pid_t pid, absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (!Ended(pid)) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

TEST(SubprocessTest, ReportsExitCodes) {
  EXPECT_TRUE(MustStart(Argv({"/bin/true"})).Wait().success());
  const ExitStatus three = MustStart(Argv({"/bin/sh", "-c", "exit 3"})).Wait();
  EXPECT_TRUE(three.exited());
  EXPECT_EQ(three.code(), 3);
  EXPECT_EQ(three.signal(), 0);
  EXPECT_EQ(three.ToString(), "exit 3");
}

TEST(SubprocessTest, AMissingBinaryIsAClearError) {
  absl::StatusOr<Subprocess> p = Subprocess::Start(Argv({"/no/such/binary", "--flag"}));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(p.status().message(),
            "start /no/such/binary: exec: No such file or directory (errno 2)");
}

TEST(SubprocessTest, SetUpFailuresNameWhatFailed) {
  SubprocessOptions bad_dir = Argv({"/bin/true"});
  bad_dir.working_dir = "/no/such/dir";
  absl::StatusOr<Subprocess> no_dir = Subprocess::Start(bad_dir);
  ASSERT_FALSE(no_dir.ok());
  EXPECT_EQ(no_dir.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(no_dir.status().message(), "chdir /no/such/dir"))
      << no_dir.status();
  SubprocessOptions bad_log = Argv({"/bin/true"});
  bad_log.stdout_path = "/no/such/dir/out.log";
  absl::StatusOr<Subprocess> no_log = Subprocess::Start(bad_log);
  ASSERT_FALSE(no_log.ok());
  EXPECT_TRUE(absl::StrContains(no_log.status().message(), "open /no/such/dir/out.log"))
      << no_log.status();
  EXPECT_EQ(Subprocess::Start(SubprocessOptions()).status().code(),
            absl::StatusCode::kInvalidArgument);
  SubprocessOptions bad_env = Argv({"/bin/true"});
  bad_env.env = {"NOEQUALS"};
  EXPECT_EQ(Subprocess::Start(bad_env).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SubprocessTest, ExtraEnvironmentReachesTheChildAndOutputGoesToTheFile) {
  const std::string dir = Scratch("env");
  const std::string out = dir + "/out.txt";
  setenv("PODPROF_SUBPROCESS_TEST_OLD", "parent", 1);
  SubprocessOptions o = Argv({"/bin/sh", "-c",
                              "echo \"$PODPROF_SUBPROCESS_TEST_NEW $PODPROF_SUBPROCESS_TEST_OLD "
                              "$(pwd)\"; echo oops >&2"});
  o.env = {"PODPROF_SUBPROCESS_TEST_NEW=new", "PODPROF_SUBPROCESS_TEST_OLD=child"};
  o.stdout_path = out;
  o.stderr_path = out;
  o.working_dir = dir;
  Subprocess p = MustStart(o);
  EXPECT_TRUE(p.Wait().success());
  unsetenv("PODPROF_SUBPROCESS_TEST_OLD");
  absl::StatusOr<std::string> text = ReadFile(out);
  ASSERT_OK(text);
  EXPECT_EQ(*text, absl::StrCat("new child ", fs::canonical(dir).string(), "\noops\n"));
  fs::remove_all(dir);
}

TEST(SubprocessTest, TerminateStopsASleeperQuickly) {
  Subprocess p = MustStart(Argv({"/bin/sleep", "100"}));
  EXPECT_FALSE(p.TryWait().has_value());
  EXPECT_OK(p.Signal(0));
  const absl::Time t0 = absl::Now();
  const ExitStatus status = p.Terminate(absl::Seconds(20));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  EXPECT_EQ(status.signal(), SIGTERM) << status.ToString();
  EXPECT_EQ(p.Signal(SIGTERM).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(p.TryWait().has_value());
  EXPECT_EQ(p.TryWait()->signal(), SIGTERM);
}

TEST(SubprocessTest, TerminateKillsAChildThatIgnoresSigterm) {
  const std::string dir = Scratch("stubborn");
  // The shell writes the file once its trap is in place.
  Subprocess p = MustStart(
      Argv({"/bin/sh", "-c", "trap '' TERM; touch " + dir + "/armed; while :; do sleep 1; done"}));
  for (int i = 0; i < 250 && !fs::exists(dir + "/armed"); ++i)
    absl::SleepFor(absl::Milliseconds(20));
  ASSERT_TRUE(fs::exists(dir + "/armed"));
  EXPECT_EQ(p.Terminate(absl::Milliseconds(200)).signal(), SIGKILL);
  fs::remove_all(dir);
}

TEST(SubprocessTest, TheChildStartsWithSignalsUnblockedWhateverTheParentBlocks) {
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, &old);
  Subprocess p = MustStart(Argv({"/bin/sleep", "100"}));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  EXPECT_EQ(p.Terminate(absl::Seconds(20)).signal(), SIGTERM);
}

TEST(SubprocessTest, TheDestructorAndTerminateAllStopEveryChild) {
  pid_t lone;
  {
    Subprocess p = MustStart(Argv({"/bin/sleep", "100"}));
    lone = p.pid();
  }
  EXPECT_TRUE(Ended(lone));
  std::vector<Subprocess> many;
  for (int i = 0; i < 3; ++i) many.push_back(MustStart(Argv({"/bin/sleep", "100"})));
  many.push_back(MustStart(Argv({"/bin/true"})));
  ASSERT_TRUE(many.back().Wait().success());  // one already over: TerminateAll keeps its status
  const absl::Time t0 = absl::Now();
  Subprocess::TerminateAll(absl::MakeSpan(many), absl::Seconds(20));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(many[i].TryWait()->signal(), SIGTERM);
  EXPECT_TRUE(many[3].TryWait()->success());
}

TEST(SubprocessTest, MovedAndReleasedChildrenAreLeftAlone) {
  Subprocess a = MustStart(Argv({"/bin/sleep", "100"}));
  const pid_t pid = a.pid();
  Subprocess b = std::move(a);
  EXPECT_EQ(b.pid(), pid);
  EXPECT_EQ(a.pid(), -1);  // NOLINT(bugprone-use-after-move): moved-from is documented
  EXPECT_EQ(b.Release(), pid);
  EXPECT_EQ(b.pid(), -1);
  EXPECT_FALSE(Ended(pid));
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// An intermediate process starts `sleep 100` and then ends as `end` says; the sleep must not
// outlive it.
void ExpectGrandchildDiesWithItsParent(const std::string& name, bool killed) {
  const std::string dir = Scratch(name);
  const std::string pid_file = dir + "/pid";
  const pid_t middle = fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    absl::StatusOr<Subprocess> sleeper = Subprocess::Start(Argv({"/bin/sleep", "100"}));
    if (!sleeper.ok()) _exit(1);
    std::ofstream(pid_file + ".tmp") << sleeper->pid();
    rename((pid_file + ".tmp").c_str(), pid_file.c_str());
    if (killed) pause();  // until the test kills it
    _exit(0);             // no destructor runs: only the death signal can stop the sleep
  }
  for (int i = 0; i < 500 && !fs::exists(pid_file); ++i) absl::SleepFor(absl::Milliseconds(10));
  absl::StatusOr<std::string> text = ReadFile(pid_file);
  ASSERT_OK(text);
  const pid_t sleeper = std::atoi(text->c_str());
  ASSERT_GT(sleeper, 0);
  if (killed) kill(middle, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(middle, &status, 0), middle);
  EXPECT_TRUE(killed ? WIFSIGNALED(status) : WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(EndsWithin(sleeper, absl::Seconds(5))) << "the grandchild outlived its parent";
  if (!Ended(sleeper)) kill(sleeper, SIGKILL);
  fs::remove_all(dir);
}

TEST(SubprocessTest, AGrandchildDiesWhenItsParentExits) {
  ExpectGrandchildDiesWithItsParent("exit", false);
}

TEST(SubprocessTest, AGrandchildDiesWhenItsParentIsKilled) {
  ExpectGrandchildDiesWithItsParent("kill", true);
}

TEST(SubprocessTest, WithoutADeathSignalAGrandchildOutlivesItsParent) {
  const std::string dir = Scratch("orphan");
  const pid_t middle = fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    SubprocessOptions o = Argv({"/bin/sleep", "100"});
    o.death_signal = 0;
    absl::StatusOr<Subprocess> sleeper = Subprocess::Start(o);
    if (!sleeper.ok()) _exit(1);
    std::ofstream(dir + "/pid") << sleeper->Release();
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(middle, &status, 0), middle);
  absl::StatusOr<std::string> text = ReadFile(dir + "/pid");
  ASSERT_OK(text);
  const pid_t sleeper = std::atoi(text->c_str());
  ASSERT_GT(sleeper, 0);
  // On purpose: a death signal, were there one, would have killed it by now (it fires as the
  // parent exits); what is checked is that nothing happens.
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(Ended(sleeper));
  kill(sleeper, SIGKILL);
  fs::remove_all(dir);
}

TEST(ReadFileTest, ReadsWholeFilesAndNamesThePathOnError) {
  const std::string dir = Scratch("read");
  std::string bytes(200'000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  std::ofstream(dir + "/blob", std::ios::binary) << bytes;
  absl::StatusOr<std::string> read = ReadFile(dir + "/blob");
  ASSERT_OK(read);
  EXPECT_EQ(*read, bytes);
  // /proc files report size 0 and are read to their end all the same.
  absl::StatusOr<std::string> self = ReadFile("/proc/self/status");
  ASSERT_OK(self);
  EXPECT_TRUE(absl::StrContains(*self, "Pid:"));
  absl::StatusOr<std::string> missing = ReadFile(dir + "/missing");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            absl::StrCat("read ", dir, "/missing: No such file or directory (errno 2)"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace podprof
