// A full file system: a caller that keeps retrying gets kResourceExhausted
// (never an abort: RocksDB's own info-log writer asserted on this path, so
// the engine routes the info log through its own logger), nothing
// acknowledged is lost, and the engine works again once space is freed.
//
// Runs on a small tmpfs, so it needs root (mount(2)); skipped otherwise.
// IDEM_FULL_DISK_SECONDS sets how long the retries go on (default 60).

#include <sys/mount.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "tests/testing/engine_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

namespace fs = std::filesystem;
using test::AddOne;

absl::Duration RetryTime() {
  const char* seconds = std::getenv("IDEM_FULL_DISK_SECONDS");
  return absl::Seconds(seconds != nullptr ? std::atoi(seconds) : 60);
}

class FullDiskTest : public ::testing::TestWithParam<Durability> {
 protected:
  void SetUp() override {
    mount_ = dir_.Sub("fs");
    fs::create_directory(mount_);
    if (::mount("tmpfs", mount_.c_str(), "tmpfs", 0, "size=24m") != 0) {
      GTEST_SKIP() << "mounting a tmpfs needs root";
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) ::umount2(mount_.c_str(), MNT_DETACH);
  }

  // Fills the file system with a file that can be deleted to free space.
  void FillWithBallast() {
    std::ofstream ballast(mount_ + "/ballast", std::ios::binary);
    const std::string chunk(1 << 16, 'b');
    while (ballast.write(chunk.data(), chunk.size())) {
    }
  }

  util::TempDir dir_;
  std::string mount_;
  bool mounted_ = false;
};

TEST_P(FullDiskTest, RetriesGetResourceExhaustedAndLoseNothingAcknowledged) {
  Options options;
  options.durability = GetParam();
  options.write_buffer_bytes = size_t{1} << 20;
  const std::string path = mount_ + "/db";
  ASSERT_OPEN(engine, path, options);
  FillWithBallast();

  // Commit (and, under kBuffered, make durable) until and through the full
  // disk, for the whole retry time; count what each attempt got.
  std::map<absl::StatusCode, int> codes;
  std::map<std::string, bool> acknowledged;  // id -> true
  const std::string payload(512, 'p');
  // One delivery of `ids`, made durable under kBuffered.
  auto deliver = [&](const std::vector<std::string>& ids) {
    std::vector<Message> batch;
    for (const std::string& id : ids) {
      batch.push_back({.id = id, .payload = payload});
    }
    auto results = engine->ProcessBatch(batch, [](const Message& m, Txn& txn) {
      txn.Put("value/" + std::string(m.id), m.payload);
      return AddOne(m, txn);
    });
    absl::Status status = results.status();
    if (status.ok() && options.durability == Durability::kBuffered) {
      status = engine->WaitDurable(results->back().sequence);
    }
    return status;
  };
  // The last attempt's messages while it failed: its outcome is unknown
  // (under kBuffered its commit may be written, only not synced, and a
  // reopen keeps it), so the consumer delivers them again.
  std::vector<std::string> unacknowledged;
  int next = 0;
  const absl::Time end = absl::Now() + RetryTime();
  while (absl::Now() < end) {
    std::vector<std::string> ids;
    for (int i = 0; i < 50; ++i) ids.push_back("m-" + std::to_string(next++));
    absl::Status status = deliver(ids);
    unacknowledged = status.ok() ? std::vector<std::string>() : ids;
    ++codes[status.code()];
    // Maintenance under a full disk fails the same way.
    if (next % 500 == 0) {
      absl::Status compact = engine->CompactExpired();
      ++codes[compact.code()];
      if (!compact.ok()) {
        EXPECT_EQ(compact.code(), absl::StatusCode::kResourceExhausted)
            << compact;
      }
    }
    if (status.ok()) {
      for (const std::string& id : ids) acknowledged[id] = true;
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
      next -= 50;  // retry the same messages, as a consumer would
    }
  }
  for (const auto& [code, count] : codes) {
    RecordProperty(std::string(absl::StatusCodeToString(code)), count);
  }
  EXPECT_GT(codes[absl::StatusCode::kResourceExhausted], 0)
      << "the file system never filled up";

  // Space comes back: the same engine commits again, and nothing
  // acknowledged is missing, then or after a reopen.
  fs::remove(mount_ + "/ballast");
  for (int attempt = 0; attempt < 50 && !unacknowledged.empty(); ++attempt) {
    if (deliver(unacknowledged).ok()) {
      for (const std::string& id : unacknowledged) acknowledged[id] = true;
      unacknowledged.clear();
    } else {
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
  ASSERT_TRUE(unacknowledged.empty()) << "the last batch never committed";
  absl::StatusOr<Result> after = absl::UnknownError("not tried");
  for (int attempt = 0; attempt < 50 && !after.ok(); ++attempt) {
    after = engine->Process({.id = "after"}, AddOne);
    if (!after.ok()) absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(after.ok()) << after.status();
  for (int round = 0; round < 2; ++round) {
    for (const auto& [id, unused] : acknowledged) {
      auto seen = engine->Seen(id);
      ASSERT_TRUE(seen.ok()) << seen.status();
      ASSERT_TRUE(*seen) << id << " was acknowledged and is lost";
    }
    auto counter = engine->GetState("counter");
    ASSERT_TRUE(counter.ok()) << counter.status();
    EXPECT_EQ(*counter, std::optional<std::string>(
                            std::to_string(acknowledged.size() + 1)));
    engine.reset();
    auto reopened = Engine::Open(path, options);
    ASSERT_TRUE(reopened.ok()) << reopened.status();
    engine = std::move(*reopened);
  }
}

INSTANTIATE_TEST_SUITE_P(Durabilities, FullDiskTest,
                         ::testing::Values(Durability::kSync,
                                           Durability::kBuffered),
                         [](const auto& info) {
                           return info.param == Durability::kSync
                                      ? std::string("Sync")
                                      : std::string("Buffered");
                         });

}  // namespace
}  // namespace idem
