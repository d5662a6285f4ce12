// Read-only access to a TOML configuration file.
//
// Daemons keep their settings in a plain struct whose members hold the
// documented defaults; loading a file overrides only the keys present in it:
//
//   ASSIGN_OR_RETURN(ConfigFile file, ConfigFile::Load(path));
//   RETURN_IF_ERROR(file.CheckKnownKeys({"agent.listen", "agent.labels.*"}));
//   RETURN_IF_ERROR(file.GetString("agent.listen", &config.listen));
//
// Every error is an absl::Status whose message names the file, the dotted
// key, its line and what was expected, so it can be shown to the operator
// as is. The TOML parser (toml++) stays out of this header, and its
// exceptions never leave config.cc.

#ifndef PODPROF_COMMON_CONFIG_H_
#define PODPROF_COMMON_CONFIG_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace podprof {

// A parsed TOML document. Immutable, so any number of threads may read one
// concurrently; copies are cheap and share the parsed document.
class ConfigFile {
 public:
  // Reads and parses the TOML file at `path`. Errors: the code from
  // ErrnoToStatus when the file cannot be read (NotFound, PermissionDenied,
  // ...), or InvalidArgument "<path>:<line>:<col>: <parse error>".
  static absl::StatusOr<ConfigFile> Load(const std::string& path);

  // Parses TOML `text`; `name` stands for the file in messages (a path, or
  // something like "<flags>"). Errors: InvalidArgument
  // "<name>:<line>:<col>: <parse error>".
  static absl::StatusOr<ConfigFile> Parse(absl::string_view text, std::string name);

  // The getters below read the value at a dotted key such as
  // "aggregator.listen". They share these rules:
  //  - Key absent: returns OK and leaves *out unchanged, because the caller's
  //    struct already holds the default.
  //  - Present with the wrong type: InvalidArgument "<file>: key 'a.b'
  //    (line N) must be <what>, got <type>", e.g. "must be an integer, got
  //    string". The same applies when a key on the way ('a' in 'a.b') is
  //    not a table.
  //  - On error *out is unchanged.

  // Reads an integer.
  absl::Status GetInt(absl::string_view key, int64_t* out) const;

  // Reads an integer that must fit in int32_t; a larger one is
  // InvalidArgument naming the key, its line and the allowed range.
  absl::Status GetInt(absl::string_view key, int32_t* out) const;

  // Reads a number: a float, or an integer converted to double.
  absl::Status GetDouble(absl::string_view key, double* out) const;

  // Reads a boolean.
  absl::Status GetBool(absl::string_view key, bool* out) const;

  // Reads a string.
  absl::Status GetString(absl::string_view key, std::string* out) const;

  // Reads a string such as "100ms" and converts it with ParseDurationNs
  // (common/clock.h). A string that does not parse is InvalidArgument
  // "<file>: key 'a.b' (line N): bad duration ...".
  absl::Status GetDurationNs(absl::string_view key, int64_t* out) const;

  // Reads an array whose elements are all strings, replacing *out.
  absl::Status GetStringList(absl::string_view key, std::vector<std::string>* out) const;

  // Reads a table whose values are all strings, replacing *out. A value of
  // another type is reported with its own key ('a.b.c').
  absl::Status GetStringMap(absl::string_view key, std::map<std::string, std::string>* out) const;

  // Whether the file sets dotted `key` (a value or a table, empty or not). A key under a value
  // that is not a table is absent. For checks of the file itself (that a shipped example names
  // every key); a daemon reads its keys with the getters above.
  bool Has(absl::string_view key) const;

  // Checks that every key in the file is one the program reads, so that a
  // typo does not silently leave a default in place. `known` lists dotted
  // keys; an entry ending in ".*" ("agent.labels.*") accepts that key and
  // everything below it, and is the only way to accept a table's contents
  // wholesale. A table is accepted when it is on the path to a known key
  // (an empty "[agent]" is fine if "agent.listen" is known); its entries are
  // then checked in turn. Arrays are checked as a whole, not their elements.
  // Returns InvalidArgument "<file>: unknown key 'x.y' (line N); known keys:
  // a, b, c" for the unknown key that comes first in the file, else OK.
  absl::Status CheckKnownKeys(const std::vector<std::string>& known) const;

  // The file name given to Load or Parse, as used in messages.
  const std::string& name() const;

 private:
  struct Impl;

  explicit ConfigFile(std::shared_ptr<const Impl> impl);

  std::shared_ptr<const Impl> impl_;
};

}  // namespace podprof

#endif  // PODPROF_COMMON_CONFIG_H_
