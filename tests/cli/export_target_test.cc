// Issue #54: `podprof export -o` renamed its finished temporary file over any target, so
// `-o /dev/null` as root replaced the device with a regular file. A device or FIFO is now
// written in place and a directory refused; a regular file is still replaced whole. The real
// CLI against a real aggregator holding one imported capture.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/util/child_process.h"
#include "tests/util/files.h"
#include "tests/util/run_podprof.h"
#include "tests/util/trace_fixtures.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
using testing::RunPodprof;

TEST(ExportTargetTest, AFifoIsWrittenInPlaceAndADirectoryRefused) {
  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("export_target_", getpid());
  fs::remove_all(dir);
  auto agg = testing::StartBuiltAggregator(dir / "agg");
  ASSERT_TRUE(agg->ready());
  const std::string address =
      absl::StrCat("--aggregator 127.0.0.1:", agg->info()["port"].get<int>());
  testing::PodprofResult imported = RunPodprof(absl::StrCat(
      "import ", address, " --format json ", testing::FixturePath(testing::kTpuFixture)));
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  const std::string id = nlohmann::json::parse(imported.out)["capture"];

  // A FIFO read by `cat`: the export's bytes arrive through it and it stays a FIFO. (The old
  // code renamed a regular file over it; `timeout` keeps the reader from waiting forever.)
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const fs::path got = dir / "got.csv";
  SubprocessOptions reader_options;
  reader_options.argv = {"/usr/bin/timeout", "60", "/bin/cat", fifo.string()};
  reader_options.stdout_path = got.string();
  absl::StatusOr<Subprocess> reader = Subprocess::Start(reader_options);
  ASSERT_TRUE(reader.ok()) << reader.status();
  testing::PodprofResult r =
      RunPodprof(absl::StrCat("export ", id, " ", address, " --format csv -o ", fifo.string()));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_fifo(fifo)) << "the FIFO was replaced";
  reader->Wait();  // `cat` ends at the export's end of file
  EXPECT_FALSE(testing::ReadTestFile(got.string()).empty());

  // /dev/null is a character device: written in place (as any user), still a device after.
  r = RunPodprof(absl::StrCat("export ", id, " ", address, " --format csv -o /dev/null"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  struct stat st;
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));

  // A directory is refused, by name, and left as it was.
  const fs::path folder = dir / "folder";
  fs::create_directories(folder);
  r = RunPodprof(absl::StrCat("export ", id, " ", address, " --format csv -o ", folder.string()));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "is a directory")) << r.err;
  EXPECT_TRUE(fs::is_directory(folder));
  EXPECT_TRUE(fs::is_empty(folder));

  // A regular file is replaced whole, as before.
  const fs::path file = dir / "out.csv";
  std::ofstream(file) << "old";
  r = RunPodprof(absl::StrCat("export ", id, " ", address, " --format csv -o ", file.string()));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(testing::ReadTestFile(file.string()), "old");
  agg.reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace podprof
