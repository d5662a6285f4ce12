// Minimal logging to stderr.
//
//   PODPROF_LOG(INFO) << "listening on " << address;
//   PODPROF_LOG(WARNING) << "reconnecting in " << delay_ms << " ms";
//
// Each statement produces exactly one line, written with a single write(2)
// when the statement ends, so lines from concurrent threads never
// interleave. Under systemd (stderr connected to the journal, as announced
// by $JOURNAL_STREAM) a line reads "<6>text": the journal adds time and
// source itself and takes the syslog priority from the prefix. Otherwise it
// reads "I1129 22:53:17.123 file.cc:42] text" (local time).
//
// Thread-safe. Nothing here allocates or formats for a statement whose
// severity is filtered out: its stream operands are not evaluated.

#ifndef PODPROF_COMMON_LOGGING_H_
#define PODPROF_COMMON_LOGGING_H_

#include <ostream>
#include <sstream>

namespace podprof {

// Severities; the values are the syslog priorities the journal expects.
enum class LogSeverity {
  kDebug = 7,
  kInfo = 6,
  kWarning = 4,
  kError = 3,
};

// Drops, from now on, statements less severe than `severity` (the default is
// kInfo, so DEBUG lines are dropped). May be called from any thread at any
// time.
void SetMinLogSeverity(LogSeverity severity);

// Returns the severity last passed to SetMinLogSeverity (kInfo if none).
LogSeverity MinLogSeverity();

// Returns whether a statement of `severity` would be written now.
bool ShouldLog(LogSeverity severity);

namespace logging_internal {

// The severity names accepted by PODPROF_LOG.
constexpr LogSeverity kLogSeverity_DEBUG = LogSeverity::kDebug;
constexpr LogSeverity kLogSeverity_INFO = LogSeverity::kInfo;
constexpr LogSeverity kLogSeverity_WARNING = LogSeverity::kWarning;
constexpr LogSeverity kLogSeverity_ERROR = LogSeverity::kError;

// One log line under construction; written to stderr by the destructor.
// Lives for one statement on one thread.
class LogMessage {
 public:
  // `file` must be a string literal (__FILE__); only its base name is kept.
  LogMessage(const char* file, int line, LogSeverity severity);
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  ~LogMessage();

  // The stream that collects the text of the line.
  std::ostream& stream() { return stream_; }

 private:
  const char* const file_;
  const int line_;
  const LogSeverity severity_;
  std::ostringstream stream_;
};

// Turns `stream << ...` into a void expression so that PODPROF_LOG can be
// the second operand of ?: (both operands must be void). operator& binds
// more loosely than << and more tightly than ?:.
struct LogMessageVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace logging_internal
}  // namespace podprof

// Logs one line at DEBUG, INFO, WARNING or ERROR. The ?: keeps the operands
// of << unevaluated when the severity is filtered out, and makes the macro a
// single expression, safe in an unbraced if/else.
#define PODPROF_LOG(severity)                                                             \
  !::podprof::ShouldLog(::podprof::logging_internal::kLogSeverity_##severity)             \
      ? (void)0                                                                           \
      : ::podprof::logging_internal::LogMessageVoidify() &                                \
            ::podprof::logging_internal::LogMessage(                                      \
                __FILE__, __LINE__, ::podprof::logging_internal::kLogSeverity_##severity) \
                .stream()

#endif  // PODPROF_COMMON_LOGGING_H_
