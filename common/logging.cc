#include "common/logging.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace podprof {
namespace {

std::atomic<int> min_severity{static_cast<int>(LogSeverity::kInfo)};

// True when stderr is the stream systemd handed us for the journal. systemd
// sets JOURNAL_STREAM="<device>:<inode>" of that stream; comparing it with
// fd 2 (rather than trusting the variable alone) avoids journal prefixes in
// a child process or a shell that inherited the variable but redirected
// stderr. Checked per line: one fstat is cheap next to the write, and a
// cached answer would go stale after a dup2 onto fd 2.
bool StderrIsJournal() {
  const char* env = std::getenv("JOURNAL_STREAM");
  if (env == nullptr) return false;
  std::pair<absl::string_view, absl::string_view> parts =
      absl::StrSplit(env, absl::MaxSplits(':', 1));
  uint64_t device;
  uint64_t inode;
  if (!absl::SimpleAtoi(parts.first, &device) || !absl::SimpleAtoi(parts.second, &inode)) {
    return false;
  }
  struct stat st;
  if (fstat(STDERR_FILENO, &st) != 0) return false;
  return static_cast<uint64_t>(st.st_dev) == device && static_cast<uint64_t>(st.st_ino) == inode;
}

char SeverityLetter(LogSeverity severity) {
  switch (severity) {
    case LogSeverity::kDebug:
      return 'D';
    case LogSeverity::kInfo:
      return 'I';
    case LogSeverity::kWarning:
      return 'W';
    case LogSeverity::kError:
      return 'E';
  }
  return '?';
}

absl::string_view BaseName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

// Writes all of `line` to stderr. A line this short normally goes out in
// one write(2), which the kernel keeps whole against other writers; the
// loop only matters for EINTR and for lines longer than a pipe buffer.
// Errors are dropped: there is nowhere left to report them.
void WriteToStderr(absl::string_view line) {
  while (!line.empty()) {
    const ssize_t n = write(STDERR_FILENO, line.data(), line.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    line.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

void SetMinLogSeverity(LogSeverity severity) {
  min_severity.store(static_cast<int>(severity), std::memory_order_relaxed);
}

LogSeverity MinLogSeverity() {
  return static_cast<LogSeverity>(min_severity.load(std::memory_order_relaxed));
}

bool ShouldLog(LogSeverity severity) {
  // Lower syslog priority numbers are more severe.
  return static_cast<int>(severity) <= min_severity.load(std::memory_order_relaxed);
}

namespace logging_internal {

LogMessage::LogMessage(const char* file, int line, LogSeverity severity)
    : file_(file), line_(line), severity_(severity) {}

LogMessage::~LogMessage() {
  const std::string text = stream_.str();
  std::string line;
  if (StderrIsJournal()) {
    line = absl::StrCat("<", static_cast<int>(severity_), ">", text, "\n");
  } else {
    // Logging is exempt from the rule that time comes from an injected
    // Clock: a log timestamp is for people reading the log, must be the
    // real time, and logging has to work before any Clock exists.
    const std::string time =
        absl::FormatTime("%m%d %H:%M:%E3S", absl::Now(), absl::LocalTimeZone());
    line = absl::StrCat(std::string(1, SeverityLetter(severity_)), time, " ", BaseName(file_), ":",
                        line_, "] ", text, "\n");
  }
  WriteToStderr(line);
}

}  // namespace logging_internal
}  // namespace podprof
