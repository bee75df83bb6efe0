// Helpers shared by the engine's behaviour tests: EngineHarness (an engine on
// a manual clock, optionally on a fault-injecting file system, reopenable),
// BrokenVariant (the self-test of a check: a deliberately broken engine it
// must catch), a counting handler, outcome lists, directory snapshots (to
// show an operation changed nothing), a plain RocksDB database maker and the
// expected hex of an ID's hash.

#ifndef IDEM_TESTS_TESTING_ENGINE_TEST_UTIL_H_
#define IDEM_TESTS_TESTING_ENGINE_TEST_UTIL_H_

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/engine_hooks.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/crash/file_system.h"
#include "idem/engine.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "util/temp_dir.h"

namespace idem::test {

// Opens an engine or fails the test; `var` is a std::unique_ptr<Engine>.
#define ASSERT_OPEN(var, path, options)                    \
  auto var##_or = ::idem::Engine::Open((path), (options)); \
  ASSERT_TRUE(var##_or.ok()) << var##_or.status();         \
  std::unique_ptr<::idem::Engine> var = std::move(*var##_or)

// A fixed start time for ManualClocks.
inline const absl::Time kStart = absl::FromUnixSeconds(1700000000);

// An engine in a fresh temporary directory, on a ManualClock that starts at
// kStart, reopenable with changed options and always the same hooks; on the
// default file system or on a CrashFileSystem (for injected faults and
// power-loss images). Not thread-safe: the test's thread sets it up, opens
// and closes; engine() is as thread-safe as Engine.
class EngineHarness {
 public:
  enum class Storage { kDefault, kCrashFileSystem };

  // `options`: what each Open uses, but with the harness's clock (and, on a
  // CrashFileSystem, its Env). `hooks`: a deliberately broken engine
  // (engine/engine_hooks.h); none by default.
  explicit EngineHarness(const Options& options = {},
                         Storage storage = Storage::kDefault,
                         const EngineHooks& hooks = {});

  // For every later Open; may use clock() (a broken TTL filter reads it).
  void set_hooks(const EngineHooks& hooks) { hooks_ = hooks; }
  const EngineHooks& hooks() const { return hooks_; }
  // The options of every later Open, to change between opens.
  Options& options() { return options_; }

  // Closes the engine if open, then opens the store at path().
  absl::Status Open();
  void Close() { engine_.reset(); }

  // Opens, with the real engine, the default Env and only the clock set,
  // what a power loss now would leave of the store (a copy; see
  // CrashFileSystem::CopyDurableImage). REQUIRES: kCrashFileSystem.
  absl::StatusOr<std::unique_ptr<Engine>> OpenDurableImage();

  // REQUIRES: open.
  Engine& engine() { return *engine_; }
  ManualClock& clock() { return clock_; }
  // REQUIRES: kCrashFileSystem.
  crash::CrashFileSystem& fs() { return *fs_; }
  // The store.
  std::string path() const { return dir_.Sub("db"); }
  // Another path in the harness's directory.
  std::string Sub(const std::string& name) const { return dir_.Sub(name); }

 private:
  util::TempDir dir_;
  std::shared_ptr<crash::CrashFileSystem> fs_;  // kCrashFileSystem only
  std::unique_ptr<rocksdb::Env> env_;           // on fs_
  ManualClock clock_;
  Options options_;
  EngineHooks hooks_;
  std::unique_ptr<Engine> engine_;
  int images_ = 0;
};

// The self-test of a check: a deliberately broken engine that the check,
// which another test runs against the real engine, must catch. The
// parameter of a TEST_P that calls ExpectCaught.
struct BrokenVariant {
  std::string name;  // the parameter's name in the test's name
  // The broken engine's hooks, given the harness's clock.
  std::function<EngineHooks(Clock* clock)> hooks;
  std::function<::testing::AssertionResult(EngineHarness&)> check;
  std::string failure;  // what the check's failure message must contain
};
void PrintTo(const BrokenVariant& variant, std::ostream* os);
// For INSTANTIATE_TEST_SUITE_P: the variant's name.
std::string BrokenVariantName(
    const ::testing::TestParamInfo<BrokenVariant>& info);

// Runs `variant`'s check on an EngineHarness(options, storage) with the
// variant's hooks, and expects it to fail saying variant.failure.
void ExpectCaught(
    const BrokenVariant& variant, const Options& options,
    EngineHarness::Storage storage = EngineHarness::Storage::kDefault);

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

// Opens the store at `path` as a plain RocksDB database (every column family
// with default options) and calls `change` with it and the handle of the
// column family `family` (null if the store has none), then closes it.
void ChangeRawFamily(
    const std::string& path, const std::string& family,
    const std::function<void(rocksdb::DB*, rocksdb::ColumnFamilyHandle*)>&
        change);

// 32 lowercase hex digits of XXH3-128(id), high half first.
std::string HexOfIdHash(std::string_view id);

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_ENGINE_TEST_UTIL_H_
