#include "common/logging.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace podprof {
namespace {

using ::testing::ContainsRegex;
using ::testing::MatchesRegex;
using ::testing::SizeIs;

// Points fd 2 at a fresh temporary file for the lifetime of the object, so
// that what PODPROF_LOG writes can be read back. Also restores the minimum
// severity and JOURNAL_STREAM.
class CapturedStderr {
 public:
  CapturedStderr() {
    path_ = absl::StrCat(::testing::TempDir(), "/logging_test_XXXXXX");
    fd_ = mkstemp(path_.data());
    EXPECT_GE(fd_, 0);
    saved_stderr_ = dup(STDERR_FILENO);
    EXPECT_GE(saved_stderr_, 0);
    EXPECT_EQ(dup2(fd_, STDERR_FILENO), STDERR_FILENO);
    unsetenv("JOURNAL_STREAM");
  }

  ~CapturedStderr() {
    dup2(saved_stderr_, STDERR_FILENO);
    close(saved_stderr_);
    close(fd_);
    unlink(path_.c_str());
    unsetenv("JOURNAL_STREAM");
    SetMinLogSeverity(LogSeverity::kInfo);
  }

  // Sets JOURNAL_STREAM the way systemd does: "<device>:<inode>" of the
  // stream that stderr is connected to.
  void PretendStderrIsJournal() {
    struct stat st;
    ASSERT_EQ(fstat(fd_, &st), 0);
    setenv("JOURNAL_STREAM", absl::StrCat(st.st_dev, ":", st.st_ino).c_str(), 1);
  }

  // Returns everything written to stderr so far.
  std::string Contents() {
    std::string contents;
    char buf[4096];
    ssize_t n;
    off_t offset = 0;
    while ((n = pread(fd_, buf, sizeof(buf), offset)) > 0) {
      contents.append(buf, static_cast<size_t>(n));
      offset += n;
    }
    return contents;
  }

 private:
  std::string path_;
  int fd_ = -1;
  int saved_stderr_ = -1;
};

TEST(LoggingTest, JournalFormatHasPriorityPrefix) {
  CapturedStderr captured;
  captured.PretendStderrIsJournal();
  PODPROF_LOG(INFO) << "listening on " << 7000;
  PODPROF_LOG(WARNING) << "slow";
  PODPROF_LOG(ERROR) << "failed: " << 1.5;
  EXPECT_EQ(captured.Contents(), "<6>listening on 7000\n<4>slow\n<3>failed: 1.5\n");
}

TEST(LoggingTest, HumanFormatWhenNotOnJournal) {
  CapturedStderr captured;
  PODPROF_LOG(INFO) << "hello " << 42;
  PODPROF_LOG(ERROR) << "bad";
  const std::vector<std::string> lines =
      absl::StrSplit(captured.Contents(), '\n', absl::SkipEmpty());
  ASSERT_THAT(lines, SizeIs(2));
  EXPECT_THAT(lines[0], MatchesRegex("I[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3} "
                                     "logging_test\\.cc:[0-9]+\\] hello 42"));
  EXPECT_THAT(lines[1], ContainsRegex("^E.* logging_test\\.cc:[0-9]+\\] bad$"));
}

TEST(LoggingTest, JournalStreamOfAnotherFileIsIgnored) {
  CapturedStderr captured;
  // Inherited from a parent whose stderr was the journal, but ours is not.
  setenv("JOURNAL_STREAM", "1:1", 1);
  PODPROF_LOG(WARNING) << "redirected";
  EXPECT_THAT(captured.Contents(), ContainsRegex("^W.* logging_test\\.cc:[0-9]+\\] redirected\n$"));
}

TEST(LoggingTest, DropsLinesBelowMinimumSeverity) {
  CapturedStderr captured;
  captured.PretendStderrIsJournal();
  EXPECT_EQ(MinLogSeverity(), LogSeverity::kInfo);
  PODPROF_LOG(DEBUG) << "hidden by default";

  SetMinLogSeverity(LogSeverity::kWarning);
  EXPECT_EQ(MinLogSeverity(), LogSeverity::kWarning);
  PODPROF_LOG(INFO) << "hidden";
  PODPROF_LOG(WARNING) << "shown warning";
  PODPROF_LOG(ERROR) << "shown error";

  SetMinLogSeverity(LogSeverity::kDebug);
  PODPROF_LOG(DEBUG) << "shown debug";
  EXPECT_EQ(captured.Contents(), "<4>shown warning\n<3>shown error\n<7>shown debug\n");
}

TEST(LoggingTest, FilteredStatementDoesNotEvaluateOperands) {
  CapturedStderr captured;
  int calls = 0;
  auto count = [&calls] { return ++calls; };
  PODPROF_LOG(DEBUG) << count();
  EXPECT_EQ(calls, 0);
  PODPROF_LOG(INFO) << count();
  EXPECT_EQ(calls, 1);
}

TEST(LoggingTest, UsableAsBodyOfUnbracedIfElse) {
  CapturedStderr captured;
  captured.PretendStderrIsJournal();
  for (int i = 0; i < 2; ++i) {
    if (i == 0)
      PODPROF_LOG(INFO) << "zero";
    else
      PODPROF_LOG(INFO) << "one";
  }
  EXPECT_EQ(captured.Contents(), "<6>zero\n<6>one\n");
}

TEST(LoggingTest, ConcurrentLinesDoNotInterleave) {
  CapturedStderr captured;
  captured.PretendStderrIsJournal();
  constexpr int kThreads = 4;
  constexpr int kLines = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kLines; ++i) {
        PODPROF_LOG(INFO) << "thread " << t << " line " << i << " " << std::string(100, 'x');
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const std::vector<std::string> lines =
      absl::StrSplit(captured.Contents(), '\n', absl::SkipEmpty());
  ASSERT_THAT(lines, SizeIs(kThreads * kLines));
  for (const std::string& line : lines) {
    EXPECT_THAT(line, MatchesRegex("<6>thread [0-9] line [0-9]+ x+"));
  }
}

}  // namespace
}  // namespace podprof
