// Helpers shared by the engine's behaviour tests: a counting handler, outcome
// lists, directory snapshots (to show an operation changed nothing), a plain
// RocksDB database maker and the expected hex of an ID's hash.

#ifndef IDEM_TESTS_TESTING_ENGINE_TEST_UTIL_H_
#define IDEM_TESTS_TESTING_ENGINE_TEST_UTIL_H_

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "idem/engine.h"

namespace idem::test {

// Opens an engine or fails the test; `var` is a std::unique_ptr<Engine>.
#define ASSERT_OPEN(var, path, options)                    \
  auto var##_or = ::idem::Engine::Open((path), (options)); \
  ASSERT_TRUE(var##_or.ok()) << var##_or.status();         \
  std::unique_ptr<::idem::Engine> var = std::move(*var##_or)

// A fixed start time for ManualClocks.
inline const absl::Time kStart = absl::FromUnixSeconds(1700000000);

// Increments state key "counter" and sets the result "done:<id>".
absl::Status AddOne(const Message& m, Txn& txn);

std::vector<Outcome> Outcomes(const std::vector<Result>& results);

// What one delivery through Deliver did.
struct Delivered {
  absl::Status status;
  Outcome outcome = Outcome::kFailed;
  std::string result;
  bool handler_ran = false;
};

// Delivers message `id` (with `ttl`; zero: the window) through Process; a
// handler that runs sets `result` as the message's result and writes
// nothing else.
Delivered Deliver(Engine& engine, const std::string& id,
                  const std::string& result,
                  absl::Duration ttl = absl::ZeroDuration());

// Every file under `root` (relative path -> contents and modification time).
struct FileSnapshot {
  std::string contents;
  std::filesystem::file_time_type mtime;
  bool operator==(const FileSnapshot& o) const {
    return contents == o.contents && mtime == o.mtime;
  }
};
std::map<std::string, FileSnapshot> SnapshotTree(const std::string& root);
std::vector<std::string> Names(const std::map<std::string, FileSnapshot>& s);

// Creates a plain RocksDB database at `path` with `column_families` and a
// key in the default column family, then closes it (fails the test on error).
void CreateRocksDb(const std::string& path,
                   const std::vector<std::string>& column_families);

// 32 lowercase hex digits of XXH3-128(id), high half first.
std::string HexOfIdHash(std::string_view id);

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_ENGINE_TEST_UTIL_H_
