#include "tests/testing/engine_test_util.h"

#include <fstream>
#include <sstream>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "rocksdb/db.h"
#include "rocksdb/file_system.h"
#include "rocksdb/options.h"

namespace idem::test {

namespace fs = std::filesystem;

EngineHarness::EngineHarness(const Options& options, Storage storage,
                             const EngineHooks& hooks)
    : clock_(kStart), options_(options), hooks_(hooks) {
  options_.clock = &clock_;
  if (storage == Storage::kCrashFileSystem) {
    crash::CrashFsOptions fs_options;
    fs_options.journal_path = dir_.Sub("journal");
    fs_ = std::make_shared<crash::CrashFileSystem>(
        rocksdb::FileSystem::Default(), std::move(fs_options));
    EXPECT_TRUE(fs_->status().ok()) << fs_->status();
    env_ = rocksdb::NewCompositeEnv(fs_);
    options_.env = env_.get();
  }
}

absl::Status EngineHarness::Open() {
  engine_.reset();
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      OpenEngineWithHooks(path(), options_, hooks_);
  if (!engine.ok()) return engine.status();
  engine_ = std::move(*engine);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Engine>> EngineHarness::OpenDurableImage() {
  const std::string image = dir_.Sub(absl::StrCat("image-", images_++));
  if (absl::Status s = fs_->CopyDurableImage(path(), image); !s.ok()) {
    return s;
  }
  Options options;
  options.clock = &clock_;
  return Engine::Open(image, options);
}

void PrintTo(const BrokenVariant& variant, std::ostream* os) {
  *os << variant.name;
}

std::string BrokenVariantName(
    const ::testing::TestParamInfo<BrokenVariant>& info) {
  return info.param.name;
}

void ExpectCaught(const BrokenVariant& variant, const Options& options,
                  EngineHarness::Storage storage) {
  EngineHarness h(options, storage);
  h.set_hooks(variant.hooks(&h.clock()));
  const ::testing::AssertionResult result = variant.check(h);
  EXPECT_FALSE(result) << variant.name << " went unnoticed";
  EXPECT_THAT(result.message(), ::testing::HasSubstr(variant.failure));
}

absl::Status AddOne(const Message& m, Txn& txn) {
  auto v = txn.Get("counter");
  if (!v.ok()) return v.status();
  int n = 0;
  if (v->has_value() && !absl::SimpleAtoi(**v, &n)) {
    return absl::InternalError("bad counter");
  }
  txn.Put("counter", absl::StrCat(n + 1));
  txn.SetResult(absl::StrCat("done:", std::string(m.id)));
  return absl::OkStatus();
}

std::vector<Outcome> Outcomes(const std::vector<Result>& results) {
  std::vector<Outcome> out;
  for (const Result& r : results) out.push_back(r.outcome);
  return out;
}

Delivered Deliver(Engine& engine, const std::string& id,
                  const std::string& result, absl::Duration ttl) {
  Delivered delivered;
  absl::StatusOr<Result> r = engine.Process(Message{.id = id, .ttl = ttl},
                                            [&](const Message&, Txn& txn) {
                                              delivered.handler_ran = true;
                                              txn.SetResult(result);
                                              return absl::OkStatus();
                                            });
  if (!r.ok()) {
    delivered.status = r.status();
    return delivered;
  }
  delivered.outcome = r->outcome;
  delivered.result = r->result;
  return delivered;
}

std::map<std::string, FileSnapshot> SnapshotTree(const std::string& root) {
  std::map<std::string, FileSnapshot> out;
  if (fs::is_regular_file(root)) {
    std::ifstream in(root, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    out[""] = {ss.str(), fs::last_write_time(root)};
    return out;
  }
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(entry.path(), root).string();
    if (entry.is_directory()) {
      out[rel + "/"] = {"", fs::last_write_time(entry.path())};
      continue;
    }
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    out[rel] = {ss.str(), fs::last_write_time(entry.path())};
  }
  return out;
}

std::vector<std::string> Names(const std::map<std::string, FileSnapshot>& s) {
  std::vector<std::string> names;
  for (const auto& [name, unused] : s) names.push_back(name);
  return names;
}

void CreateRocksDb(const std::string& path,
                   const std::vector<std::string>& column_families) {
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : column_families) {
    descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      rocksdb::DB::Open(db_options, path, descriptors, &handles, &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "user-key", "user-value").ok());
  ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  }
  ASSERT_TRUE(db->Close().ok());
  delete db;
}

std::string HexOfIdHash(std::string_view id) {
  const XXH128_hash_t h = XXH3_128bits(id.data(), id.size());
  std::string hex;
  for (uint64_t half : {h.high64, h.low64}) {
    for (int shift = 60; shift >= 0; shift -= 4) {
      hex.push_back("0123456789abcdef"[(half >> shift) & 0xf]);
    }
  }
  return hex;
}

void ChangeRawFamily(
    const std::string& path, const std::string& family,
    const std::function<void(rocksdb::DB*, rocksdb::ColumnFamilyHandle*)>&
        change) {
  std::vector<std::string> names;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies({}, path, &names).ok());
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names) {
    descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open({}, path, descriptors, &handles, &db).ok());
  rocksdb::ColumnFamilyHandle* handle = nullptr;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == family) handle = handles[i];
  }
  change(db, handle);
  for (auto* h : handles) EXPECT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  delete db;
}

}  // namespace idem::test
