#include "common/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"

namespace podprof {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

constexpr char kName[] = "agent.toml";

// Line numbers below are relied on by the tests.
constexpr char kConfig[] = R"(title = "podprof"
port = 8080
ratio = 0.25
whole = 3
enabled = true
interval = "250ms"
bad_interval = "2x"
big = 3000000000
names = ["a", "b"]
mixed = ["a", 1]

[agent]
listen = "[::]:7000"
period = 5

[agent.labels]
zone = "eu-1"
rack = "r7"

[bad_labels]
zone = "eu-1"
count = 3
)";

ConfigFile ParseOrDie(const char* text) {
  absl::StatusOr<ConfigFile> file = ConfigFile::Parse(text, kName);
  EXPECT_OK(file);
  return *std::move(file);
}

// Checks that `status` is InvalidArgument and its message contains every
// piece of `parts`.
void ExpectInvalid(const absl::Status& status, const std::vector<std::string>& parts) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  for (const std::string& part : parts) {
    EXPECT_THAT(status.message(), HasSubstr(part));
  }
}

TEST(ConfigFileTest, ReadsEachType) {
  const ConfigFile file = ParseOrDie(kConfig);
  EXPECT_EQ(file.name(), kName);

  int64_t port = 0;
  ASSERT_OK(file.GetInt("port", &port));
  EXPECT_EQ(port, 8080);

  int32_t period = 0;
  ASSERT_OK(file.GetInt("agent.period", &period));
  EXPECT_EQ(period, 5);

  double ratio = 0;
  ASSERT_OK(file.GetDouble("ratio", &ratio));
  EXPECT_DOUBLE_EQ(ratio, 0.25);

  double whole = 0;
  ASSERT_OK(file.GetDouble("whole", &whole));
  EXPECT_DOUBLE_EQ(whole, 3.0);

  bool enabled = false;
  ASSERT_OK(file.GetBool("enabled", &enabled));
  EXPECT_TRUE(enabled);

  std::string listen;
  ASSERT_OK(file.GetString("agent.listen", &listen));
  EXPECT_EQ(listen, "[::]:7000");

  int64_t interval_ns = 0;
  ASSERT_OK(file.GetDurationNs("interval", &interval_ns));
  EXPECT_EQ(interval_ns, 250'000'000);

  std::vector<std::string> names = {"old"};
  ASSERT_OK(file.GetStringList("names", &names));
  EXPECT_THAT(names, ElementsAre("a", "b"));

  std::map<std::string, std::string> labels = {{"old", "x"}};
  ASSERT_OK(file.GetStringMap("agent.labels", &labels));
  EXPECT_THAT(labels, UnorderedElementsAre(Pair("zone", "eu-1"), Pair("rack", "r7")));
}

TEST(ConfigFileTest, AbsentKeysLeaveDefaults) {
  const ConfigFile file = ParseOrDie(kConfig);
  int64_t i = 42;
  int32_t i32 = 43;
  double d = 1.5;
  bool b = true;
  std::string s = "default";
  int64_t ns = 7;
  std::vector<std::string> list = {"x"};
  std::map<std::string, std::string> map = {{"k", "v"}};
  EXPECT_OK(file.GetInt("nope", &i));
  EXPECT_OK(file.GetInt("agent.nope", &i32));
  EXPECT_OK(file.GetDouble("nope.deeper", &d));
  EXPECT_OK(file.GetBool("agent.labels.nope", &b));
  EXPECT_OK(file.GetString("nope", &s));
  EXPECT_OK(file.GetDurationNs("nope", &ns));
  EXPECT_OK(file.GetStringList("nope", &list));
  EXPECT_OK(file.GetStringMap("nope", &map));
  EXPECT_EQ(i, 42);
  EXPECT_EQ(i32, 43);
  EXPECT_EQ(d, 1.5);
  EXPECT_TRUE(b);
  EXPECT_EQ(s, "default");
  EXPECT_EQ(ns, 7);
  EXPECT_THAT(list, ElementsAre("x"));
  EXPECT_THAT(map, ElementsAre(Pair("k", "v")));
}

TEST(ConfigFileTest, WrongTypeNamesFileKeyLineAndExpectedType) {
  const ConfigFile file = ParseOrDie(kConfig);
  int64_t i = 42;
  ExpectInvalid(file.GetInt("title", &i),
                {"agent.toml: key 'title' (line 1) must be an integer, got "
                 "string"});
  EXPECT_EQ(i, 42);

  double d = 0;
  ExpectInvalid(file.GetDouble("enabled", &d),
                {"agent.toml: key 'enabled' (line 5) must be a number, got "
                 "boolean"});

  bool b = false;
  ExpectInvalid(file.GetBool("port", &b), {"agent.toml: key 'port' (line 2) must be a boolean, got "
                                           "integer"});

  std::string s;
  ExpectInvalid(file.GetString("agent.period", &s),
                {"agent.toml: key 'agent.period' (line 14) must be a string, "
                 "got integer"});
  ExpectInvalid(file.GetString("agent", &s), {"key 'agent' (line 12) must be a string, got table"});

  int64_t ns = 0;
  ExpectInvalid(file.GetDurationNs("port", &ns),
                {"agent.toml: key 'port' (line 2) must be a duration like "
                 "\"100ms\", got integer"});

  std::vector<std::string> list;
  ExpectInvalid(file.GetStringList("title", &list),
                {"agent.toml: key 'title' (line 1) must be a list of strings, "
                 "got string"});

  std::map<std::string, std::string> map;
  ExpectInvalid(file.GetStringMap("names", &map),
                {"agent.toml: key 'names' (line 9) must be a table of strings, "
                 "got array"});
}

TEST(ConfigFileTest, WrongTypeOfEnclosingTable) {
  const ConfigFile file = ParseOrDie(kConfig);
  std::string s;
  ExpectInvalid(file.GetString("port.host", &s),
                {"agent.toml: key 'port' (line 2) must be a table, got "
                 "integer"});
  ExpectInvalid(file.GetString("agent.period.x.y", &s),
                {"key 'agent.period' (line 14) must be a table, got integer"});
}

TEST(ConfigFileTest, Int32OutOfRange) {
  const ConfigFile file = ParseOrDie(kConfig);
  int32_t value = 9;
  ExpectInvalid(file.GetInt("big", &value), {"agent.toml: key 'big' (line 8) must be an integer in "
                                             "[-2147483648, 2147483647], got 3000000000"});
  EXPECT_EQ(value, 9);
  int64_t wide = 0;
  EXPECT_OK(file.GetInt("big", &wide));
  EXPECT_EQ(wide, 3'000'000'000);
}

TEST(ConfigFileTest, BadDurationNamesKeyAndText) {
  const ConfigFile file = ParseOrDie(kConfig);
  int64_t ns = 5;
  ExpectInvalid(file.GetDurationNs("bad_interval", &ns),
                {"agent.toml: key 'bad_interval' (line 7): bad duration "
                 "\"2x\": unknown unit \"x\""});
  EXPECT_EQ(ns, 5);
}

TEST(ConfigFileTest, MixedListNamesElement) {
  const ConfigFile file = ParseOrDie(kConfig);
  std::vector<std::string> list = {"keep"};
  ExpectInvalid(file.GetStringList("mixed", &list),
                {"agent.toml: key 'mixed' (line 10) must be a list of "
                 "strings, got integer at index 1"});
  EXPECT_THAT(list, ElementsAre("keep"));
}

TEST(ConfigFileTest, StringMapNamesBadEntry) {
  const ConfigFile file = ParseOrDie(kConfig);
  std::map<std::string, std::string> map;
  ExpectInvalid(file.GetStringMap("bad_labels", &map),
                {"agent.toml: key 'bad_labels.count' (line 22) must be a "
                 "string, got integer"});
  EXPECT_TRUE(map.empty());
}

TEST(ConfigFileTest, ParseErrorNamesFileLineAndColumn) {
  absl::StatusOr<ConfigFile> file = ConfigFile::Parse("a = 1\nb = = 2\n", "broken.toml");
  ASSERT_FALSE(file.ok());
  ExpectInvalid(file.status(), {"broken.toml:2:"});
}

TEST(ConfigFileTest, DuplicateKeyIsParseError) {
  absl::StatusOr<ConfigFile> file = ConfigFile::Parse("a = 1\n\na = 2\n", "dup.toml");
  ASSERT_FALSE(file.ok());
  ExpectInvalid(file.status(), {"dup.toml:3:"});
}

TEST(ConfigFileTest, EmptyTextIsAnEmptyConfig) {
  const ConfigFile file = ParseOrDie("");
  int64_t value = 1;
  EXPECT_OK(file.GetInt("a", &value));
  EXPECT_EQ(value, 1);
  EXPECT_OK(file.CheckKnownKeys({}));
}

TEST(ConfigFileTest, CopiesShareTheDocument) {
  ConfigFile copy = ParseOrDie(kConfig);
  {
    const ConfigFile original = ParseOrDie("port = 1\n");
    copy = original;
  }
  int64_t port = 0;
  ASSERT_OK(copy.GetInt("port", &port));
  EXPECT_EQ(port, 1);
}

TEST(CheckKnownKeysTest, AcceptsListedKeys) {
  const ConfigFile file = ParseOrDie(R"(
top = 1
[agent]
listen = "x"
[agent.labels]
zone = "a"
anything = "b"
[empty_section]
)");
  EXPECT_OK(file.CheckKnownKeys({"top", "agent.listen", "agent.labels.*", "empty_section.value"}));
  EXPECT_OK(file.CheckKnownKeys({"*"}));
  EXPECT_OK(file.CheckKnownKeys({"top", "agent.*", "empty_section.*"}));
}

TEST(CheckKnownKeysTest, ReportsFirstUnknownKeyInFileOrder) {
  const ConfigFile file = ParseOrDie(R"(top = 1
zzz = 2
[agent]
listen = "x"
lisen = "typo"
)");
  ExpectInvalid(file.CheckKnownKeys({"top", "agent.listen"}),
                {"agent.toml: unknown key 'zzz' (line 2); known keys: top, "
                 "agent.listen"});
  ExpectInvalid(file.CheckKnownKeys({"top", "zzz", "agent.listen"}),
                {"unknown key 'agent.lisen' (line 5)"});
}

TEST(CheckKnownKeysTest, TableNeedsWildcardForItsContents) {
  const ConfigFile file = ParseOrDie(R"(
[agent.labels]
zone = "a"
)");
  // Naming the table itself does not accept its entries.
  ExpectInvalid(file.CheckKnownKeys({"agent.labels"}),
                {"unknown key 'agent.labels.zone' (line 3)"});
  EXPECT_OK(file.CheckKnownKeys({"agent.labels.*"}));
}

TEST(CheckKnownKeysTest, ReportsUnknownSectionByItsName) {
  const ConfigFile file = ParseOrDie(R"(
[agnet]
listen = "x"
)");
  ExpectInvalid(file.CheckKnownKeys({"agent.listen"}),
                {"unknown key 'agnet' (line 2); known keys: agent.listen"});
}

TEST(CheckKnownKeysTest, ValueWhereTableIsKnownIsUnknown) {
  const ConfigFile file = ParseOrDie("agent = 5\n");
  ExpectInvalid(file.CheckKnownKeys({"agent.listen"}), {"unknown key 'agent' (line 1)"});
}

TEST(CheckKnownKeysTest, WildcardDoesNotMatchPartialName) {
  const ConfigFile file = ParseOrDie("[agent]\nlabels_extra = 1\n");
  ExpectInvalid(file.CheckKnownKeys({"agent.labels.*"}),
                {"unknown key 'agent.labels_extra' (line 2)"});
}

class ConfigLoadTest : public ::testing::Test {
 protected:
  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = absl::StrCat(::testing::TempDir(), "/", name);
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(fd);
    return path;
  }
};

TEST_F(ConfigLoadTest, LoadsFile) {
  const std::string path = WriteFile("load_ok.toml", "[a]\nb = \"c\"\n");
  absl::StatusOr<ConfigFile> file = ConfigFile::Load(path);
  ASSERT_OK(file);
  EXPECT_EQ(file->name(), path);
  std::string value;
  ASSERT_OK(file->GetString("a.b", &value));
  EXPECT_EQ(value, "c");
}

TEST_F(ConfigLoadTest, MissingFileIsNotFound) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/does_not_exist.toml");
  absl::StatusOr<ConfigFile> file = ConfigFile::Load(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(file.status().message(), HasSubstr(path));
  EXPECT_THAT(file.status().message(), HasSubstr("(errno 2)"));
}

TEST_F(ConfigLoadTest, ParseErrorNamesPathAndLine) {
  const std::string path = WriteFile("load_bad.toml", "a = 1\n\n[b\n");
  absl::StatusOr<ConfigFile> file = ConfigFile::Load(path);
  ASSERT_FALSE(file.ok());
  ExpectInvalid(file.status(), {absl::StrCat(path, ":3:")});
}

TEST_F(ConfigLoadTest, ErrorsNamePath) {
  const std::string path = WriteFile("load_type.toml", "a = \"x\"\n");
  absl::StatusOr<ConfigFile> file = ConfigFile::Load(path);
  ASSERT_OK(file);
  int64_t a = 0;
  ExpectInvalid(file->GetInt("a", &a),
                {absl::StrCat(path, ": key 'a' (line 1) must be an integer")});
}

}  // namespace
}  // namespace podprof

namespace podprof {
namespace {

// Every hand-made hostile file (deep nesting, huge numbers, binary, bad UTF-8, duplicate keys,
// a 100 kB string, ...) parses or fails with a message naming the file; getters on it answer.
TEST(ConfigHostileTest, EveryHostileFileGivesAConfigOrANamedError) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(PODPROF_HOSTILE_CONFIG_DIR)) {
    ++files;
    absl::StatusOr<ConfigFile> f = ConfigFile::Load(e.path().string());
    if (!f.ok()) {
      EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << e.path();
      EXPECT_NE(f.status().message().find(e.path().filename().string()), std::string::npos)
          << f.status();
      continue;
    }
    std::string s;
    int64_t n = 0;
    f->GetString("listen", &s).IgnoreError();
    f->GetDurationNs("heartbeat.interval", &n).IgnoreError();
    f->GetInt("limits.max_message_bytes", &n).IgnoreError();
  }
  EXPECT_GE(files, 10);
}

}  // namespace
}  // namespace podprof
