// idemctl export and import (cli/idemctl_partition.cc), and seen and forget on
// a partition-scoped store.
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/idemctl.h"
#include "cli/partition_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/partition_snapshot.h"
#include "tests/idemctl_test_util.h"
#include "util/temp_dir.h"

namespace idem::cli {
namespace {

using ctl_test::BytesAt;
using ctl_test::CtlOutput;
using ctl_test::IdemctlPartitionTest;
using ctl_test::IdemctlTest;
using ctl_test::json;
using ctl_test::ParseObjectLine;
using ctl_test::RunArgs;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST_F(IdemctlTest, ExportOfAnEmptyPartitionWritesNothing) {
  const std::string file = dir_.Sub("empty.jsonl");
  IdemctlArgs args;
  args.store = db();
  args.partition = "orders:4";
  args.command = {"export", file};
  CtlOutput r = RunArgs(args);
  EXPECT_EQ(r.code, kExitNotFound);
  EXPECT_THAT(r.err, HasSubstr("nothing stored for orders:4"));
  EXPECT_FALSE(std::filesystem::exists(file));
}

TEST_F(IdemctlTest, ExportIntoAnExistingFileFails) {
  IdemctlArgs args;
  args.store = db();
  args.source = "orders";
  args.partition = "3";
  args.command = {"export", dir_.path()};
  CtlOutput r = RunArgs(args);
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("already exists"));
}

TEST_F(IdemctlPartitionTest, SeenAndForgetNameThePartition) {
  // Without it the command line is incomplete: a usage error.
  CtlOutput r = Run(source(), {"seen", "m1"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("--source=S --partition=P"));
  EXPECT_EQ(Run(source(), {"forget", "m1"}).code, kExitUsage);
  EXPECT_EQ(Run(source(), {"seen", "m1"}, "orders:3").code, kExitOk);
  EXPECT_EQ(Run(source(), {"seen", "m1"}, "orders:5").code, kExitNotFound);

  // Writable: the store's scope is found, not assumed.
  r = Run(source(), {"forget", "m1"}, "orders:3", /*json=*/true);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const json v = ParseObjectLine(r.out);
  EXPECT_EQ(BytesAt(v, "source"), "orders");
  EXPECT_EQ(v.value("partition", json()), 3);
  EXPECT_EQ(v.value("was_seen", json()), true);
  EXPECT_EQ(Run(source(), {"seen", "m1"}, "orders:3").code, kExitNotFound);
  EXPECT_EQ(Run(source(), {"seen", "m1"}, "orders:4").code, kExitOk);
}

TEST_F(IdemctlPartitionTest, WritableSubcommandsOpenAPartitionScopedStore) {
  EXPECT_EQ(Run(source(), {"compact"}).code, kExitOk);
  EXPECT_EQ(Run(source(), {"set-offset", "orders", "3", "0"}).code, kExitOk);
  EXPECT_EQ(Run(source(), {"checkpoint", dir_.Sub("copy")}).code, kExitOk);
}

TEST_F(IdemctlPartitionTest, ExportThenImportMovesThePartitionExactly) {
  const std::string file = dir_.Sub("orders-3.jsonl");
  CtlOutput r = Run(source(), {"export", file}, "orders:3", /*json=*/true);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  json v = ParseObjectLine(r.out);
  EXPECT_EQ(v.value("state_entries", json()), 2);
  EXPECT_EQ(v.value("dedupe_records", json()), 3);
  EXPECT_EQ(v.value("offset", json()), 2);

  ASSERT_NO_FATAL_FAILURE(CreateTarget());
  r = Run(target(), {"import", file}, std::nullopt, /*json=*/true);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  v = ParseObjectLine(r.out);
  EXPECT_EQ(v.value("already_imported", json()), false);

  const PartitionSnapshot want = Export(source(), 3);
  const PartitionSnapshot got = Export(target(), 3);
  EXPECT_EQ(got.offset, std::optional<int64_t>(2));
  EXPECT_EQ(got.entries, want.entries);
  // Every record, byte for byte; the import adds its own (ImportPartition).
  EXPECT_EQ(got.records.size(), want.records.size() + 1);
  for (const PartitionRecord& w : want.records) {
    EXPECT_TRUE(std::any_of(got.records.begin(), got.records.end(),
                            [&w](const PartitionRecord& g) {
                              return g.id_hash == w.id_hash &&
                                     g.expires_at == w.expires_at &&
                                     g.result == w.result;
                            }))
        << "record missing: result " << w.result;
  }
  EXPECT_EQ(Export(target(), 4).offset, std::nullopt);  // only partition 3

  r = Run(target(), {"import", file});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("already imported"));
}

TEST(PartitionFileTest, CarriesTheStreamTimeAndTimersExactly) {
  util::TempDir dir;
  PartitionSnapshot snapshot;
  snapshot.source = "orders";
  snapshot.partition = 3;
  snapshot.offset = 9;
  snapshot.stream_time = absl::FromUnixMicros(1'700'000'000'123'456);
  snapshot.timers = {
      TimerFire{.source = "orders",
                .partition = 3,
                .domain = TimeDomain::kEvent,
                .timer_key = std::string("w\0\xff", 3),
                .fire_at = absl::FromUnixMicros(1'700'000'060'000'000),
                .payload = "close"},
      TimerFire{.source = "orders",
                .partition = 3,
                .domain = TimeDomain::kProcessing,
                .timer_key = "remind",
                .fire_at = absl::FromUnixMicros(-5),
                .payload = ""}};
  const std::string file = dir.Sub("p.jsonl");
  ASSERT_TRUE(WritePartitionFile(snapshot, file).ok());
  absl::StatusOr<PartitionSnapshot> read = ReadPartitionFile(file);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->stream_time, snapshot.stream_time);
  ASSERT_EQ(read->timers.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(read->timers[i].source, "orders");
    EXPECT_EQ(read->timers[i].partition, 3);
    EXPECT_EQ(read->timers[i].domain, snapshot.timers[i].domain);
    EXPECT_EQ(read->timers[i].timer_key, snapshot.timers[i].timer_key);
    EXPECT_EQ(read->timers[i].fire_at, snapshot.timers[i].fire_at);
    EXPECT_EQ(read->timers[i].payload, snapshot.timers[i].payload);
  }
  // A file without them has neither kind of line, as before timers.
  snapshot.stream_time = absl::InfinitePast();
  snapshot.timers.clear();
  const std::string plain = dir.Sub("plain.jsonl");
  ASSERT_TRUE(WritePartitionFile(snapshot, plain).ok());
  std::ifstream in(plain);
  const std::string text((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  EXPECT_THAT(text, ::testing::Not(HasSubstr("timer")));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("stream_time")));
}

TEST(PartitionFileTest, RefusesATimerOfAnUnknownDomain) {
  util::TempDir dir;
  const std::string file = dir.Sub("bad.jsonl");
  std::ofstream(file)
      << R"({"kind":"partition","source":"o","partition":0,"offset":null})"
      << "\n"
      << R"({"kind":"timer","domain":"lunar","timer_key":"k",)"
      << R"("fire_at_unix_micros":1,"payload":""})"
      << "\n"
      << R"({"kind":"end","state_entries":0,"dedupe_records":0})"
      << "\n";
  absl::StatusOr<PartitionSnapshot> read = ReadPartitionFile(file);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("line 2"));
}

TEST_F(IdemctlPartitionTest, ImportOverAHigherOffsetFails) {
  const std::string file = dir_.Sub("orders-3.jsonl");
  ASSERT_EQ(Run(source(), {"export", file}, "orders:3").code, kExitOk);
  ASSERT_EQ(Run(source(), {"set-offset", "orders", "3", "7"}).code, kExitOk);
  CtlOutput r = Run(source(), {"import", file});
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(r.err, HasSubstr("nothing imported"));
}

struct BadImport {
  std::string name;
  // The file's lines; "$P" stands for a valid partition line, "$END" for a
  // valid end line of a file with one state entry.
  std::vector<std::string> lines;
  std::string message;  // names the line
};

class IdemctlBadImportTest : public IdemctlPartitionTest,
                             public ::testing::WithParamInterface<BadImport> {};

TEST_P(IdemctlBadImportTest, ExitsThreeNamingTheLineAndImportsNothing) {
  ASSERT_NO_FATAL_FAILURE(CreateTarget());
  const std::string file = dir_.Sub("bad.jsonl");
  {
    std::ofstream out(file, std::ios::binary);
    for (std::string line : GetParam().lines) {
      if (line == "$P") {
        line = R"({"kind":"partition","source":"orders","partition":3,)"
               R"("offset":9})";
      } else if (line == "$END") {
        line = R"({"kind":"end","state_entries":1,"dedupe_records":0})";
      }
      out << line << "\n";
    }
  }
  CtlOutput r = Run(target(), {"import", file});
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr(GetParam().message));
  EXPECT_THAT(r.err, HasSubstr("nothing imported"));
  EXPECT_THAT(r.out, IsEmpty());
  const PartitionSnapshot after = Export(target(), 3);
  EXPECT_EQ(after.offset, std::nullopt);
  EXPECT_THAT(after.entries, IsEmpty());
}

const char kState[] = R"({"kind":"state","key":"k","value":"v"})";

INSTANTIATE_TEST_SUITE_P(
    MalformedFiles, IdemctlBadImportTest,
    ::testing::Values(
        BadImport{"Empty", {}, "line 1: missing the \"end\" line"},
        BadImport{
            "NotJson", {"$P", "{\"kind\":", "$END"}, "line 2: not a JSON"},
        BadImport{"NoPartitionLine", {kState, "$END"}, "line 1: the first"},
        BadImport{"TwoPartitionLines",
                  {"$P", "$P", kState, "$END"},
                  "line 2: a second \"partition\" line"},
        BadImport{"Truncated", {"$P", kState}, "line 3: missing the \"end\""},
        BadImport{
            "Miscounted", {"$P", kState, kState, "$END"}, "line 4: counts"},
        BadImport{"AfterEnd", {"$P", kState, "$END", kState}, "line 4: a line"},
        BadImport{"UnknownKind",
                  {"$P", R"({"kind":"outbox"})", "$END"},
                  "line 2: unknown kind \"outbox\""},
        BadImport{"UnknownMember",
                  {"$P", R"({"kind":"state","key":"k","vaule":"v"})", "$END"},
                  "line 2: missing member \"value\""},
        BadImport{
            "ExtraMember",
            {"$P", R"({"kind":"state","key":"k","value":"v","x":1})", "$END"},
            "line 2: unexpected member \"x\""},
        BadImport{
            "NotAByte",
            {"$P", R"({"kind":"state","key":"k","value":"\u0100"})", "$END"},
            "line 2: \"value\" must be a string of code points up to"},
        BadImport{"ValueNotAString",
                  {"$P", R"({"kind":"state","key":"k","value":1})", "$END"},
                  "line 2: \"value\" must be a string"},
        BadImport{"BadIdHash",
                  {"$P", kState,
                   R"({"kind":"dedupe","id_hash":"00ff","result":"",)"
                   R"("expires_at_unix_micros":1})",
                   R"({"kind":"end","state_entries":1,"dedupe_records":1})"},
                  "line 3: \"id_hash\" must be 32 lowercase hex digits"},
        BadImport{"BadExpiry",
                  {"$P", kState,
                   R"({"kind":"dedupe","id_hash":")" + std::string(32, 'a') +
                       R"(","result":"","expires_at_unix_micros":"soon"})",
                   R"({"kind":"end","state_entries":1,"dedupe_records":1})"},
                  "line 3: \"expires_at_unix_micros\" must be an integer"},
        BadImport{"NegativeOffset",
                  {R"({"kind":"partition","source":"orders","partition":3,)"
                   R"("offset":-1})",
                   kState, "$END"},
                  "line 1: \"offset\" must be an integer from 0"},
        BadImport{"PartitionOutOfRange",
                  {R"({"kind":"partition","source":"orders",)"
                   R"("partition":4294967296,"offset":null})",
                   kState, "$END"},
                  "line 1: \"partition\" must be an integer"},
        BadImport{"OffsetWithoutASuccessor",
                  {R"({"kind":"partition","source":"orders","partition":3,)"
                   R"("offset":9223372036854775807})",
                   kState, "$END"},
                  "line 1: \"offset\" must be an integer from 0"},
        BadImport{
            "RepeatedMember",
            {"$P", R"({"kind":"end","kind":"state","key":"k","value":"v"})",
             "$END"},
            "line 2: a member appears twice"},
        BadImport{"RepeatedStateKey",
                  {"$P", kState, kState,
                   R"({"kind":"end","state_entries":2,"dedupe_records":0})"},
                  "appears twice"},
        BadImport{"EmptySource",
                  {R"({"kind":"partition","source":"","partition":3,)"
                   R"("offset":null})",
                   kState, "$END"},
                  "line 1: \"source\" must not be empty"}),
    [](const ::testing::TestParamInfo<BadImport>& info) {
      return info.param.name;
    });

// A line over the limit is refused once the limit is read past, not read
// whole into memory (a 1 GB line took 4 GB before the limit).
TEST_F(IdemctlPartitionTest, ImportRefusesALineOverTheLimit) {
  ASSERT_NO_FATAL_FAILURE(CreateTarget());
  const std::string file = dir_.Sub("long.jsonl");
  {
    std::ofstream out(file, std::ios::binary);
    out << R"({"kind":"partition","source":"orders","partition":3,)"
        << R"("offset":9})"
        << "\n";
    out << R"({"kind":"state","key":"k","value":")"
        << std::string(kMaxPartitionFileLineBytes, 'v') << "\"}\n";
    out << R"({"kind":"end","state_entries":1,"dedupe_records":0})"
        << "\n";
  }
  CtlOutput r = Run(target(), {"import", file});
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("line 2: longer than the limit of 67108864"));
  EXPECT_EQ(Export(target(), 3).offset, std::nullopt);
}

TEST_F(IdemctlPartitionTest, ImportOfAMissingFileFails) {
  ASSERT_NO_FATAL_FAILURE(CreateTarget());
  CtlOutput r = Run(target(), {"import", dir_.Sub("missing.jsonl")});
  EXPECT_EQ(r.code, kExitStoreFailure);
  EXPECT_THAT(r.err, HasSubstr("cannot open"));
}

}  // namespace
}  // namespace idem::cli
