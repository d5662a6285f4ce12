// The segment files that hold timelines and counters (storage/segments.h), on their own and
// under the store: written once and read back exactly, a torn tail cut at start-up, rows whose
// bytes are gone dropped with a warning naming the capture, retention deleting whole files,
// and rows from before segments read as they were.
#include "storage/segments.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "ingest/capture_ingest.h"
#include "storage/health.h"
#include "storage/retention.h"
#include "storage/store.h"
#include "tests/util/status_matchers.h"
#include "tests/util/temp_database.h"
#include "tests/util/trace_fixtures.h"
#include "trace/xspace_reader.h"

namespace podprof::storage {
namespace {

namespace fs = std::filesystem;

// A read's bytes, or a failure of the test and "<error>".
std::string Got(const absl::StatusOr<std::string>& read) {
  EXPECT_OK(read);
  return read.ok() ? *read : "<error>";
}

TEST(Crc32cTest, MatchesThePolynomialsCheckValueAndContinues) {
  EXPECT_EQ(Crc32c("123456789"), 0xe3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32c("56789", Crc32c("1234")), 0xe3069283u);
  // Lengths around the 8-byte step of the hardware path agree with a byte at a time.
  std::string s;
  for (int i = 0; i < 37; ++i) {
    s.push_back(static_cast<char>(i * 37 + 11));
    uint32_t bytewise = 0;
    for (char c : s) bytewise = Crc32c(absl::string_view(&c, 1), bytewise);
    EXPECT_EQ(Crc32c(s), bytewise) << s.size();
  }
}

class SegmentFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/segments_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
           std::to_string(getpid());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(SegmentFilesTest, RecordsReadBackExactlyAndDamageIsDataLoss) {
  ASSERT_OK_AND_ASSIGN(auto files, SegmentFiles::Open(dir_, false));
  ASSERT_OK_AND_ASSIGN(const SegmentRef a, files->Append(7, "first record"));
  ASSERT_OK_AND_ASSIGN(const SegmentRef b, files->Append(7, std::string(100000, 'x')));
  ASSERT_OK_AND_ASSIGN(const SegmentRef empty, files->Append(7, ""));
  ASSERT_OK(files->Sync());
  EXPECT_EQ(a.offset, static_cast<int64_t>(kSegmentMagic.size()) + kRecordHeaderBytes);
  EXPECT_EQ(b.offset, a.offset + a.bytes + kRecordHeaderBytes);
  EXPECT_EQ(Got(files->Read(a)), std::string("first record"));
  EXPECT_EQ(Got(files->Read(b)), std::string(100000, 'x'));
  EXPECT_EQ(Got(files->Read(empty)), std::string());
  ASSERT_OK_AND_ASSIGN(const int64_t sealed, files->Seal(7));
  EXPECT_EQ(sealed, empty.offset);
  EXPECT_EQ(fs::file_size(files->PathOf(7)), static_cast<uintmax_t>(sealed));

  SegmentRef wrong = a;
  wrong.crc ^= 1;
  absl::Status s = files->Read(wrong).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "checksum")) << s;
  SegmentRef past = b;
  past.offset += 50;
  s = files->Read(past).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  SegmentRef gone = a;
  gone.segment = 8;
  s = files->Read(gone).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), files->PathOf(8))) << s;

  // Appending after a seal opens the file again, at its end.
  ASSERT_OK_AND_ASSIGN(const SegmentRef later, files->Append(7, "later"));
  EXPECT_EQ(later.offset, sealed + kRecordHeaderBytes);
  EXPECT_EQ(Got(files->Read(later)), std::string("later"));
  ASSERT_OK_AND_ASSIGN(const std::vector<int64_t> listed, files->List());
  EXPECT_EQ(listed, std::vector<int64_t>{7});
  ASSERT_OK(files->Remove(7));
  ASSERT_OK_AND_ASSIGN(const int64_t disk, files->DiskBytes());
  EXPECT_EQ(disk, 0);
}

TEST_F(SegmentFilesTest, RecoveryCutsATornTailAndKeepsEveryWholeRecord) {
  std::string path;
  SegmentRef a, b;
  {
    ASSERT_OK_AND_ASSIGN(auto files, SegmentFiles::Open(dir_, false));
    ASSERT_OK_AND_ASSIGN(a, files->Append(1, "alpha"));
    ASSERT_OK_AND_ASSIGN(b, files->Append(1, "bravo"));
    ASSERT_OK(files->Sync());
    path = files->PathOf(1);
  }
  const int64_t whole = b.offset + b.bytes;
  // A record header that promises more than was written, as a crash mid-append leaves it.
  {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    const char torn[] = {40, 0, 0, 0, 1, 2, 3, 4, 'p', 'a', 'r'};
    out.write(torn, sizeof(torn));
  }
  ASSERT_OK_AND_ASSIGN(auto files, SegmentFiles::Open(dir_, false));
  ASSERT_OK_AND_ASSIGN(SegmentScan scan, files->Recover(1));
  EXPECT_TRUE(scan.exists);
  EXPECT_EQ(scan.records, 2);
  EXPECT_EQ(scan.valid_bytes, whole);
  EXPECT_EQ(scan.file_bytes, whole + 11);
  EXPECT_EQ(fs::file_size(path), static_cast<uintmax_t>(whole));
  EXPECT_EQ(Got(files->Read(b)), std::string("bravo"));

  // A whole-length record whose bytes changed is cut too, with everything after it.
  ASSERT_OK_AND_ASSIGN(const SegmentRef c, files->Append(1, "charlie"));
  ASSERT_OK_AND_ASSIGN(const SegmentRef d, files->Append(1, "delta"));
  ASSERT_OK(files->Seal(1).status());
  {
    const int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, "C", 1, c.offset), 1);
    ::close(fd);
  }
  ASSERT_OK_AND_ASSIGN(scan, files->Recover(1));
  EXPECT_EQ(scan.records, 2);
  EXPECT_EQ(scan.valid_bytes, whole);
  EXPECT_EQ(files->Read(d).status().code(), absl::StatusCode::kDataLoss);

  // A file that is not a segment at all keeps nothing.
  {
    std::ofstream out(files->PathOf(2), std::ios::binary);
    out << "not a segment file";
  }
  ASSERT_OK_AND_ASSIGN(scan, files->Recover(2));
  EXPECT_EQ(scan.valid_bytes, 0);
  ASSERT_OK_AND_ASSIGN(scan, files->Recover(3));
  EXPECT_FALSE(scan.exists);
}

// The store's side: captures are written to segments, read back, recovered and deleted.
class SegmentStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<Store> Open() {
    auto s = Store::Open(db_.path());
    EXPECT_OK(s);
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::string Folder() const { return SegmentFolder(db_.path()); }
  static int Files(const std::string& dir) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".seg";
    return n;
  }
  podprof::testing::TempDatabase db_{"segments"};
};

ingest::CaptureInput FromFixture(const std::string& id, const char* fixture, int64_t start_ns) {
  ingest::CaptureInput w;
  w.id = id;
  w.start_ns = start_ns;
  w.end_ns = start_ns + 1'000'000'000;
  w.source = CaptureSource::kImport;
  ingest::HostInput h;
  auto c = trace::ReadXSpaceFile(podprof::testing::FixturePath(fixture));
  EXPECT_OK(c);
  if (!c.ok()) return w;
  h.host = c->host.name;
  h.capture = std::move(*c);
  w.hosts.push_back(std::move(h));
  return w;
}

// Every timeline event and counter sample of the capture's hosts, keyed by chip and line or
// name, as the store reads them back.
std::map<std::string, std::vector<int64_t>> ReadBack(Store& store, const std::string& id) {
  std::map<std::string, std::vector<int64_t>> out;
  EXPECT_OK(store.captures().ForEachHost(id, [&](StoredHost& h) {
    for (const trace::EventBlock& b : h.capture.blocks) {
      auto& v = out[absl::StrCat(h.row.host, "/", b.chip, "/", b.line)];
      for (size_t i = 0; i < b.size(); ++i) {
        v.push_back(b.start_ps[i]);
        v.push_back(b.duration_ps[i]);
      }
    }
    for (const trace::CounterSeries& s : h.capture.counters) {
      auto& v = out[absl::StrCat(h.row.host, "/", s.chip, "/", s.name)];
      for (size_t i = 0; i < s.value.size(); ++i) {
        v.push_back(s.time_ns[i]);
        int64_t bits;
        std::memcpy(&bits, &s.value[i], sizeof(bits));
        v.push_back(bits);
      }
    }
    return absl::OkStatus();
  }));
  return out;
}

TEST_F(SegmentStoreTest, BlobsGoToSegmentsOnceAndReadBackExactly) {
  auto store = Open();
  ASSERT_OK(
      ingest::StoreCapture(store->writer(), FromFixture("tpu", podprof::testing::kTpuFixture, 1)));
  const auto got = ReadBack(*store, "tpu");
  ASSERT_FALSE(got.empty());
  // Every row points into a segment and keeps no bytes of its own (the fixture has
  // timelines; counters where it has them).
  int kinds = 0;
  {
    auto c = Connection::Open(db_.path(), false);
    ASSERT_OK(c);
    for (const char* table : {"timeline_blocks", "counter_series"}) {
      auto s = Statement::Prepare(**c, absl::StrCat("SELECT COUNT(*), SUM(segment IS NULL), "
                                                    "SUM(LENGTH(data)), SUM(seg_bytes) FROM ",
                                                    table));
      ASSERT_OK(s);
      ASSERT_OK_AND_ASSIGN(bool row, (*s)->Step());
      ASSERT_TRUE(row);
      if (absl::string_view(table) == "timeline_blocks") {
        EXPECT_GT((*s)->Int(0), 0);
      }
      if ((*s)->Int(0) == 0) continue;
      ++kinds;
      EXPECT_EQ((*s)->Int(1), 0) << table;
      EXPECT_EQ((*s)->Int(2), 0) << table;
      EXPECT_GT((*s)->Int(3), 0) << table;
    }
  }
  // One file for the timelines, one for the counters if any.
  EXPECT_EQ(Files(Folder()), kinds);
  ASSERT_OK(CheckIntegrity(store->database()));
  // What was read equals what a second store over the same files reads.
  store.reset();
  store = Open();
  EXPECT_EQ(ReadBack(*store, "tpu"), got);
  auto blocks = store->captures().Timelines("tpu");
  ASSERT_OK(blocks);
  EXPECT_FALSE(blocks->empty());
}

TEST_F(SegmentStoreTest, RowsFromBeforeSegmentsAreReadAsTheyWere) {
  auto store = Open();
  ASSERT_OK(
      ingest::StoreCapture(store->writer(), FromFixture("gpu", podprof::testing::kGpuFixture, 1)));
  const auto want = ReadBack(*store, "gpu");
  store.reset();
  // Turn every row back into what a version 11 store held: its bytes inline, no segment.
  {
    ASSERT_OK_AND_ASSIGN(auto files, SegmentFiles::Open(Folder(), true));
    auto c = Connection::Open(db_.path(), false);
    ASSERT_OK(c);
    for (const char* table : {"timeline_blocks", "counter_series"}) {
      auto rows = Statement::Prepare(**c, absl::StrCat("SELECT rowid, segment, seg_offset, "
                                                       "seg_bytes, seg_crc FROM ",
                                                       table));
      ASSERT_OK(rows);
      std::vector<std::pair<int64_t, std::string>> inline_rows;
      ASSERT_OK((*rows)->ForEachRow([&](const Statement& r) -> absl::Status {
        SegmentRef ref{r.Int(1), r.Int(2), r.Int(3), static_cast<uint32_t>(r.Int(4))};
        ASSIGN_OR_RETURN(std::string bytes, files->Read(ref));
        inline_rows.emplace_back(r.Int(0), std::move(bytes));
        return absl::OkStatus();
      }));
      auto put = Statement::Prepare(**c, absl::StrCat("UPDATE ", table,
                                                      " SET data = ?, segment = NULL, seg_offset "
                                                      "= NULL, seg_bytes = NULL, seg_crc = NULL "
                                                      "WHERE rowid = ?"));
      ASSERT_OK(put);
      for (const auto& [rowid, bytes] : inline_rows) {
        (*put)->Reset();
        (*put)->BindBlob(1, bytes).Bind(2, rowid);
        ASSERT_OK((*put)->Run());
      }
    }
    ASSERT_OK((*c)->Exec("DELETE FROM segments"));
  }
  fs::remove_all(Folder());
  store = Open();
  EXPECT_EQ(ReadBack(*store, "gpu"), want);
  ASSERT_OK(CheckIntegrity(store->database()));
}

TEST_F(SegmentStoreTest, ACrashesTornTailIsCutAndRowsPastItAreDroppedNamingTheCapture) {
  auto store = Open();
  ingest::CaptureInput in = FromFixture("torn", podprof::testing::kTpuFixture, 1);
  ingest::PodAnalysis pod;
  auto analysed = ingest::AnalyseHost(store->writer(), 0, *in.hosts[0].capture, &pod);
  ASSERT_OK(analysed);
  analysed->write.host = in.hosts[0].host;
  CaptureWrite header;
  header.id = "torn";
  header.start_ns = 1;
  header.end_ns = 2;
  ASSERT_OK(store->writer().BeginCapture(header));
  ASSERT_OK(store->writer().WriteHostData("torn", &analysed->write));
  // A complete capture beside it, untouched by the crash.
  ASSERT_OK(ingest::StoreCapture(store->writer(),
                                 FromFixture("whole", podprof::testing::kGpuFixture, 5)));
  const auto whole = ReadBack(*store, "whole");
  store.reset();  // the aggregator dies with "torn" running

  // Its timelines' segment loses its last 100 bytes, and a stray file no row names appears.
  int64_t timeline_segment = 0, rows_before = 0;
  {
    auto c = Connection::Open(db_.path(), false);
    ASSERT_OK(c);
    auto s = Statement::Prepare(**c,
                                "SELECT s.id, (SELECT COUNT(*) FROM timeline_blocks t WHERE "
                                "t.segment = s.id) FROM segments s JOIN captures c ON c.seq = "
                                "s.capture WHERE c.id = 'torn' AND s.kind = 'timelines'");
    ASSERT_OK(s);
    ASSERT_OK_AND_ASSIGN(bool row, (*s)->Step());
    ASSERT_TRUE(row);
    timeline_segment = (*s)->Int(0);
    rows_before = (*s)->Int(1);
  }
  ASSERT_GT(rows_before, 1);
  ASSERT_OK_AND_ASSIGN(auto files, SegmentFiles::Open(Folder(), false));
  const std::string path = files->PathOf(timeline_segment);
  fs::resize_file(path, fs::file_size(path) - 100);
  { std::ofstream(files->PathOf(999999)) << "stray"; }

  store = Open();
  ASSERT_OK_AND_ASSIGN(const CaptureWriter::Recovery r, store->writer().Recover());
  EXPECT_EQ(r.interrupted, 1);
  EXPECT_EQ(r.rows_dropped, 1) << "the last block, whose bytes were cut";
  EXPECT_GT(r.bytes_truncated, 0);
  EXPECT_EQ(r.files_removed, 1);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_TRUE(absl::StrContains(r.warnings[0], "capture torn")) << r.warnings[0];
  EXPECT_FALSE(fs::exists(files->PathOf(999999)));
  // No row points at missing bytes; the other capture reads as before.
  ASSERT_OK(CheckIntegrity(store->database()));
  EXPECT_EQ(ReadBack(*store, "whole"), whole);
  auto torn = store->captures().Get("torn");
  ASSERT_OK(torn);
  EXPECT_EQ(torn->status, CaptureState::kInterrupted);
  // A second start finds nothing more to do.
  ASSERT_OK_AND_ASSIGN(const CaptureWriter::Recovery again, store->writer().Recover());
  EXPECT_EQ(again.rows_dropped, 0);
  EXPECT_EQ(again.bytes_truncated, 0);
}

TEST_F(SegmentStoreTest, ASealedFileLostSinceMakesItsCapturePartial) {
  auto store = Open();
  ASSERT_OK(
      ingest::StoreCapture(store->writer(), FromFixture("lost", podprof::testing::kTpuFixture, 1)));
  const int files = Files(Folder());
  for (const auto& e : fs::directory_iterator(Folder())) fs::remove(e.path());
  ASSERT_OK_AND_ASSIGN(const CaptureWriter::Recovery r, store->writer().Recover());
  EXPECT_GT(r.rows_dropped, 0);
  ASSERT_EQ(r.warnings.size(), static_cast<size_t>(files)) << "one per lost file";
  EXPECT_TRUE(absl::StrContains(r.warnings[0], "capture lost")) << r.warnings[0];
  auto lost = store->captures().Get("lost");
  ASSERT_OK(lost);
  EXPECT_EQ(lost->status, CaptureState::kPartial);
  ASSERT_OK(CheckIntegrity(store->database()));
}

TEST_F(SegmentStoreTest, RetentionDeletesWholeFiles) {
  auto store = Open();
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(ingest::StoreCapture(store->writer(),
                                   FromFixture(absl::StrCat("r", i), podprof::testing::kTpuFixture,
                                               int64_t{i} * 1'000'000'000)));
  }
  const int per_capture = Files(Folder()) / 3;
  ASSERT_GE(per_capture, 1);
  EXPECT_EQ(Files(Folder()), 3 * per_capture);
  ASSERT_OK_AND_ASSIGN(const int64_t before, UsedBytes(store->database()));
  RetentionPolicy timelines;
  timelines.keep_timelines_ns = 1'500'000'000;
  ASSERT_OK(ApplyRetention(store->database(), timelines, 3'000'000'000).status());
  EXPECT_EQ(Files(Folder()), 3 * per_capture - 2) << "the two oldest captures' timeline files";
  ASSERT_OK_AND_ASSIGN(const int64_t after, UsedBytes(store->database()));
  EXPECT_LT(after, before);
  RetentionPolicy age;
  age.max_age_ns = 1'500'000'000;
  ASSERT_OK(ApplyRetention(store->database(), age, 3'000'000'000).status());
  EXPECT_EQ(Files(Folder()), per_capture) << "the newest capture's";
  ASSERT_OK(CheckIntegrity(store->database()));
  ASSERT_EQ(ReadBack(*store, "r2").empty(), false);
}

}  // namespace
}  // namespace podprof::storage
