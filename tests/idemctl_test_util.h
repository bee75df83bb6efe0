// What the idemctl tests share (tests/idemctl_test.cc and the files beside
// it, one per group of subcommands): a store with records, state, an offset
// and an outbox entry (IdemctlTest), two partition-scoped stores
// (IdemctlPartitionTest), and running RunIdemctl to strings.

#ifndef IDEM_TESTS_IDEMCTL_TEST_UTIL_H_
#define IDEM_TESTS_IDEMCTL_TEST_UTIL_H_

#include <algorithm>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/idemctl.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "idem/partition_snapshot.h"
#include "idem/partition_state.h"
#include "nlohmann/json.hpp"
#include "tests/testing/json_bytes.h"
#include "util/temp_dir.h"

namespace idem::cli::ctl_test {

using json = nlohmann::json;

using ::idem::test::Latin1Bytes;

// A state key and value with every awkward byte class: quote, backslash,
// control characters, NUL and non-ASCII.
inline const std::string kBinaryKey("bin\"\\\n\x00\x7f\xff", 9);
inline const std::string kBinaryValue("\x01\xc3\xa9z", 4);

inline absl::Status Record(const Message& m, Txn& txn) {
  txn.Put(absl::StrCat("state/", std::string(m.id)), "v");
  if (m.id == "order-1") txn.Put(kBinaryKey, kBinaryValue);
  if (m.id == "order-2") {
    const Txn::Header headers[] = {{"trace", kBinaryValue}};
    txn.EmitWithHeaders("shipments", kBinaryKey, "ship", headers);
  }
  txn.SetResult(absl::StrCat("ok:", std::string(m.id)));
  return absl::OkStatus();
}

// The bytes of the string member `key` of `v`, written in JsonQuoteBytes's
// one-code-point-per-byte convention; "" if it is missing or not a string.
inline std::string BytesAt(const json& v, const char* key) {
  const auto it = v.find(key);
  if (it == v.end() || !it->is_string()) return "";
  return Latin1Bytes(it->get<std::string>());
}

struct CtlOutput {
  int code = -1;
  std::string out;
  std::string err;
};

inline CtlOutput RunArgs(const IdemctlArgs& args) {
  std::ostringstream out, err;
  CtlOutput result;
  result.code = RunIdemctl(args, out, err);
  result.out = out.str();
  result.err = err.str();
  return result;
}

// Parses `out` as exactly one JSON object on one line.
inline json ParseObjectLine(const std::string& out) {
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  json v = json::parse(out, /*cb=*/nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(v.is_discarded()) << "not JSON: " << out;
  if (v.is_discarded()) return json();
  EXPECT_TRUE(v.is_object()) << out;
  return v;
}

class IdemctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A store holding two live records, one expired record, three state
    // entries plus the binary one, one offset and one outbox entry. The expired
    // record is written through a clock a day behind, so it has already expired
    // by the system clock that idemctl uses.
    ManualClock past(absl::Now() - absl::Hours(24));
    Options options;
    options.clock = &past;
    auto engine = Engine::Open(db(), options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    ASSERT_TRUE((*engine)
                    ->Process({.id = "stale", .ttl = absl::Hours(1)}, Record)
                    .ok());
    ASSERT_TRUE((*engine)
                    ->Process({.id = "order-1",
                               .source = "orders",
                               .partition = 3,
                               .offset = 41},
                              Record)
                    .ok());
    ASSERT_TRUE((*engine)
                    ->Process({.id = "order-2",
                               .source = "orders",
                               .partition = 3,
                               .offset = 42},
                              Record)
                    .ok());
  }

  std::string db() const { return dir_.Sub("db"); }

  CtlOutput Run(std::vector<std::string> command, bool json = false,
                std::optional<std::string> db_path = std::nullopt) {
    IdemctlArgs args;
    args.store = db_path.has_value() ? *db_path : db();
    args.json = json;
    args.command = std::move(command);
    return RunArgs(args);
  }

  util::TempDir dir_;
};

// Stores whose dedupe records are kept per partition (DedupeScope::kPartition):
// the source store holds partition ("orders", 3) and ("orders", 4).
class IdemctlPartitionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto engine = Engine::Open(source(), ScopedOptions());
    ASSERT_TRUE(engine.ok()) << engine.status();
    for (int64_t offset = 0; offset < 3; ++offset) {
      const std::string id = absl::StrCat("m", offset);
      for (int32_t partition : {3, 4}) {
        ASSERT_TRUE((*engine)
                        ->Process({.id = id,
                                   .source = "orders",
                                   .partition = partition,
                                   .offset = offset},
                                  Write)
                        .ok());
      }
    }
  }

  // Writes the partition's "last" (the message ID) and a binary key, and
  // returns a binary result.
  static absl::Status Write(const Message& m, Txn& txn) {
    PartitionTxn state(txn, m.source, m.partition);
    state.Put("last", m.id);
    state.Put(kBinaryKey, kBinaryValue);
    state.SetResult(kBinaryValue + std::string(m.id));
    return absl::OkStatus();
  }

  static Options ScopedOptions() {
    Options options;
    options.dedupe_scope = DedupeScope::kPartition;
    return options;
  }

  std::string source() const { return dir_.Sub("source"); }
  std::string target() const { return dir_.Sub("target"); }

  // An empty partition-scoped store at target().
  void CreateTarget() {
    auto engine = Engine::Open(target(), ScopedOptions());
    ASSERT_TRUE(engine.ok()) << engine.status();
  }

  static CtlOutput Run(const std::string& store,
                       std::vector<std::string> command,
                       std::optional<std::string> partition = std::nullopt,
                       bool json = false) {
    IdemctlArgs args;
    args.store = store;
    args.json = json;
    args.partition = std::move(partition);
    args.command = std::move(command);
    return RunArgs(args);
  }

  static PartitionSnapshot Export(const std::string& store, int32_t partition) {
    Options options;
    options.read_only = true;
    auto engine = Engine::Open(store, options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return {};
    absl::StatusOr<PartitionSnapshot> snapshot =
        (*engine)->ExportPartition("orders", partition);
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    return snapshot.ok() ? *snapshot : PartitionSnapshot{};
  }

  util::TempDir dir_;
};

}  // namespace idem::cli::ctl_test

#endif  // IDEM_TESTS_IDEMCTL_TEST_UTIL_H_
