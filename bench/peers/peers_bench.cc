// idem_peers_bench: runs one seeded message stream, with the same logical work
// per message (drop the message if its ID was seen, else record the ID and add
// the message's amount to one account balance, atomically), through idem and
// through the systems users would pick instead, and prints one table.
//
// Peers (each in the configuration its users would deploy for this job):
//   postgres  inbox table + state table, one statement per message that
//             inserts the ID with ON CONFLICT DO NOTHING and updates the
//             balance only if the row was inserted; synchronous_commit on and
//             off; one message per transaction, or one pipelined transaction
//             per poll; 1 client and N clients.
//   redis     a Lua script: SET inbox:<id> 1 NX EX <ttl>, then INCRBY on the
//             account if the SET succeeded; appendfsync always and no
//             persistence; one round trip per message, or pipelined per poll.
//   rocksdb   Get of the ID, then Put of the ID and the balance in one
//             WriteBatch per poll, with and without sync; the same on
//             rocksdb::DBWithTTL.
//   idem      Engine::ProcessBatch under kSync, kBuffered + WaitDurable and
//             kBuffered without waiting.
//   ceiling   RocksDB Put of the same bytes with no lookup, a write+fdatasync
//             loop of 8 KiB, and pg_test_fsync's fdatasync figure.
//
// Servers are not started here: bench/peers/run.sh starts PostgreSQL and two
// Redis servers on loopback and passes their addresses. Every run is checked:
// the number of messages that did the work and the sum of the balances must
// equal what the stream implies.

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "idem/engine.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/statistics.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/db_ttl.h"

ABSL_FLAG(int64_t, messages, 50000, "Messages in the stream (per config).");
ABSL_FLAG(int64_t, slow_messages, 10000,
          "Messages for the configs that sync once per message (at most "
          "--messages).");
ABSL_FLAG(double, duplicate_rate, 0.1,
          "Fraction of deliveries that redeliver a recent message.");
ABSL_FLAG(uint64_t, seed, 42, "Seed of the message stream.");
ABSL_FLAG(int, accounts, 10000, "Distinct state keys (account balances).");
ABSL_FLAG(int, batch, 500, "Messages per poll for the batched configs.");
ABSL_FLAG(int, clients, 16,
          "Concurrent clients for the multi-client rows (postgres and idem); "
          "0 or 1 leaves those rows out.");
ABSL_FLAG(double, time_cap_s, 20,
          "Seconds after which a config stops early (the rate is then over "
          "the messages it did).");
ABSL_FLAG(double, fsync_seconds, 3, "Duration of the write+fdatasync loop.");
ABSL_FLAG(std::string, only, "",
          "Comma-separated peers to run: postgres, redis, rocksdb, idem, "
          "ceiling. Empty: all.");
ABSL_FLAG(bool, json, false, "Print the results as one JSON object.");
ABSL_FLAG(std::string, dir, "",
          "Scratch directory for the embedded stores and the fsync file "
          "(empty: a new directory under $TMPDIR or /tmp, removed at the "
          "end). Put it on the device you want to measure.");
ABSL_FLAG(std::string, pg,
          "host=127.0.0.1 port=55432 user=postgres dbname=postgres "
          "connect_timeout=3",
          "libpq connection string of the PostgreSQL server.");
ABSL_FLAG(std::string, redis_durable, "127.0.0.1:56379",
          "host:port of a Redis server with appendonly yes, appendfsync "
          "always.");
ABSL_FLAG(std::string, redis_memory, "127.0.0.1:56380",
          "host:port of a Redis server with no persistence.");
ABSL_FLAG(std::string, pg_test_fsync, "",
          "Path of pg_test_fsync to add its fdatasync figure (empty: skip).");

namespace idem::peers {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr int kDedupeTtlSeconds = 7 * 24 * 3600;
// Redeliveries pick one of the last kRedeliveryWindow new messages.
constexpr size_t kRedeliveryWindow = 2000;
// Bytes of a balance, as counted in the logical user bytes.
constexpr uint64_t kBalanceBytes = 8;

// ---------------------------------------------------------------------------
// The message stream.

struct StreamMessage {
  std::string id;       // UUID text, 36 bytes
  std::string account;  // "acct-00042"
  int64_t amount = 0;   // 1..1000
  std::string payload;  // "acct-00042:123", what a consumer would parse
  bool first = false;   // the first delivery of this ID
  uint32_t origin = 0;  // index of the first delivery of this ID
};

std::string RandomUuid(std::mt19937_64& rng) {
  const uint64_t hi = (rng() & ~uint64_t{0xF000}) | 0x4000;  // version 4
  const uint64_t lo = (rng() & ~(uint64_t{3} << 62)) | (uint64_t{2} << 62);
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08" PRIx64 "-%04" PRIx64 "-%04" PRIx64
                "-%04" PRIx64 "-%012" PRIx64,
                hi >> 32, (hi >> 16) & 0xFFFF, hi & 0xFFFF, lo >> 48,
                lo & uint64_t{0xFFFFFFFFFFFF});
  return buf;
}

std::vector<StreamMessage> MakeStream(size_t n, double duplicate_rate,
                                      uint64_t seed, int accounts) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::vector<StreamMessage> out;
  out.reserve(n);
  std::vector<uint32_t> firsts;
  for (size_t i = 0; i < n; ++i) {
    if (!firsts.empty() && coin(rng) < duplicate_rate) {
      const size_t window = std::min(firsts.size(), kRedeliveryWindow);
      const uint32_t origin = firsts[firsts.size() - 1 - rng() % window];
      StreamMessage m = out[origin];  // a redelivery carries the same payload
      m.first = false;
      out.push_back(std::move(m));
      continue;
    }
    StreamMessage m;
    m.id = RandomUuid(rng);
    char account[16];
    std::snprintf(account, sizeof(account), "acct-%05d",
                  static_cast<int>(rng() % static_cast<uint64_t>(accounts)));
    m.account = account;
    m.amount = 1 + static_cast<int64_t>(rng() % 1000);
    m.payload = m.account + ":" + std::to_string(m.amount);
    m.first = true;
    m.origin = static_cast<uint32_t>(i);
    firsts.push_back(m.origin);
    out.push_back(std::move(m));
  }
  return out;
}

// Splits the first `count` messages over `clients` like a keyed topic over
// partitions: every delivery of an ID goes to the same client, in order.
std::vector<std::vector<uint32_t>> Partition(
    const std::vector<StreamMessage>& stream, size_t count, int clients) {
  std::vector<std::vector<uint32_t>> parts(static_cast<size_t>(clients));
  for (size_t i = 0; i < count; ++i) {
    parts[stream[i].origin % static_cast<uint32_t>(clients)].push_back(
        static_cast<uint32_t>(i));
  }
  return parts;
}

std::string EncodeBalance(int64_t balance) {
  std::string out(sizeof(balance), '\0');
  std::memcpy(out.data(), &balance, sizeof(balance));
  return out;
}

int64_t DecodeBalance(std::string_view bytes) {
  int64_t balance = 0;
  if (bytes.size() == sizeof(balance)) {
    std::memcpy(&balance, bytes.data(), sizeof(balance));
  }
  return balance;
}

std::string AccountName(int i) {
  char account[16];
  std::snprintf(account, sizeof(account), "acct-%05d", i);
  return account;
}

// ---------------------------------------------------------------------------
// Filesystem helpers.

uint64_t DirectoryBytes(const std::string& path) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(path, ec);
       !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const uintmax_t size = it->file_size(size_ec);
      if (!size_ec) total += size;
    }
  }
  return total;
}

class ScratchDir {
 public:
  // Uses `path` if non-empty (kept), else a new temporary directory (removed).
  explicit ScratchDir(const std::string& path) {
    if (!path.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(path, ec);
      path_ = path;
      return;
    }
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base != nullptr && *base != '\0' ? base
                                                                     : "/tmp") +
                        "/idem_peers_XXXXXX";
    if (mkdtemp(templ.data()) != nullptr) {
      path_ = templ;
      owned_ = true;
    }
  }
  ~ScratchDir() {
    std::error_code ignored;  // cleanup is best effort
    if (owned_) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool owned_ = false;
};

// A fresh subdirectory path of the scratch directory for one config.
std::string FreshPath(const std::string& scratch, const std::string& name) {
  static int counter = 0;
  std::string path = absl::StrFormat("%s/%s-%d", scratch, name, ++counter);
  std::error_code ignored;
  std::filesystem::remove_all(path, ignored);
  return path;
}

// ---------------------------------------------------------------------------
// What a peer implements.

// One consumer connection/thread. Not thread-safe: one thread each.
class Client {
 public:
  virtual ~Client() = default;
  // Processes `batch` as one poll and returns how many messages did the work
  // (were new). On return the work is committed with the target's durability.
  virtual absl::StatusOr<uint64_t> Run(
      absl::Span<const StreamMessage* const> batch) = 0;
};

// What a target reports after a run.
struct Final {
  std::optional<int64_t> balance_sum;    // sum of all balances as stored
  std::optional<uint64_t> stored_ids;    // dedupe records as stored
  std::optional<uint64_t> written_bytes;  // bytes written for the run
  std::optional<uint64_t> disk_bytes;    // bytes on disk at the end
  std::string note;
};

// One peer configuration: a fresh store per Setup.
class Target {
 public:
  virtual ~Target() = default;
  virtual absl::Status Setup() = 0;
  virtual absl::StatusOr<std::unique_ptr<Client>> NewClient() = 0;
  // Called once all clients are gone. Tears the store down.
  virtual absl::StatusOr<Final> Finish(int accounts) = 0;
};

// ---------------------------------------------------------------------------
// PostgreSQL.

using PgResultPtr = std::unique_ptr<PGresult, decltype(&PQclear)>;

class PgConn {
 public:
  static absl::StatusOr<PgConn> Connect(const std::string& conninfo) {
    PGconn* conn = PQconnectdb(conninfo.c_str());
    if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
      std::string error = conn != nullptr ? PQerrorMessage(conn) : "no memory";
      if (conn != nullptr) PQfinish(conn);
      while (!error.empty() && error.back() == '\n') error.pop_back();
      return absl::UnavailableError(absl::StrFormat(
          "cannot reach PostgreSQL at '%s': %s", conninfo, error));
    }
    // Drop NOTICEs (e.g. DROP TABLE IF EXISTS on a missing table).
    PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
    return PgConn(conn);
  }
  PgConn(PgConn&& other) noexcept : conn_(other.conn_) { other.conn_ = nullptr; }
  PgConn& operator=(PgConn&&) = delete;
  ~PgConn() {
    if (conn_ != nullptr) PQfinish(conn_);
  }
  PGconn* get() const { return conn_; }

  // Runs `sql` (no parameters); returns the first value of the first row, if
  // any.
  absl::StatusOr<std::string> Exec(const std::string& sql) {
    PgResultPtr r(PQexec(conn_, sql.c_str()), &PQclear);
    const ExecStatusType st = PQresultStatus(r.get());
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      return absl::InternalError(
          absl::StrFormat("postgres: %s: %s", sql, PQresultErrorMessage(r.get())));
    }
    if (st == PGRES_TUPLES_OK && PQntuples(r.get()) > 0 &&
        PQnfields(r.get()) > 0) {
      return std::string(PQgetvalue(r.get(), 0, 0));
    }
    return std::string();
  }

 private:
  explicit PgConn(PGconn* conn) : conn_(conn) {}
  PGconn* conn_;
};

// One statement per message: the inbox insert and, only if it inserted, the
// balance upsert. One round trip; atomic as one statement.
constexpr char kPgDedupeSql[] =
    "WITH inserted AS ("
    " INSERT INTO inbox (message_id) VALUES ($1)"
    " ON CONFLICT (message_id) DO NOTHING RETURNING 1) "
    "INSERT INTO state (account, balance) SELECT $2, $3::bigint FROM inserted "
    "ON CONFLICT (account) DO UPDATE SET balance = state.balance + "
    "EXCLUDED.balance";

class PgClient : public Client {
 public:
  PgClient(PgConn conn, bool pipelined)
      : conn_(std::move(conn)), pipelined_(pipelined) {}

  absl::StatusOr<uint64_t> Run(
      absl::Span<const StreamMessage* const> batch) override {
    if (!pipelined_) {
      uint64_t news = 0;
      for (const StreamMessage* m : batch) {
        const std::string amount = std::to_string(m->amount);
        const char* values[3] = {m->id.c_str(), m->account.c_str(),
                                 amount.c_str()};
        PgResultPtr r(PQexecPrepared(conn_.get(), "dedupe", 3, values, nullptr,
                                     nullptr, 0),
                      &PQclear);
        if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
          return absl::InternalError(absl::StrFormat(
              "postgres: %s", PQresultErrorMessage(r.get())));
        }
        if (std::strcmp(PQcmdTuples(r.get()), "1") == 0) ++news;
      }
      return news;
    }
    // One transaction per poll, sent as one pipeline: BEGIN, the statements,
    // COMMIT, sync. One network round trip and one commit per poll.
    PGconn* c = conn_.get();
    bool sent = PQsendQueryParams(c, "BEGIN", 0, nullptr, nullptr, nullptr,
                                  nullptr, 0) == 1;
    std::vector<std::string> amounts;
    amounts.reserve(batch.size());
    for (const StreamMessage* m : batch) {
      amounts.push_back(std::to_string(m->amount));
      const char* values[3] = {m->id.c_str(), m->account.c_str(),
                               amounts.back().c_str()};
      sent = sent && PQsendQueryPrepared(c, "dedupe", 3, values, nullptr,
                                         nullptr, 0) == 1;
    }
    sent = sent && PQsendQueryParams(c, "COMMIT", 0, nullptr, nullptr, nullptr,
                                     nullptr, 0) == 1;
    sent = sent && PQpipelineSync(c) == 1;
    if (!sent) {
      return absl::InternalError(
          absl::StrFormat("postgres: sending a pipeline: %s", PQerrorMessage(c)));
    }
    uint64_t news = 0;
    std::string error;
    const size_t statements = batch.size() + 2;
    for (size_t i = 0; i < statements; ++i) {
      PgResultPtr r(PQgetResult(c), &PQclear);
      if (r == nullptr) {
        if (error.empty()) error = "pipeline ended early";
        break;
      }
      if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
        if (error.empty()) error = PQresultErrorMessage(r.get());
      } else if (i > 0 && i + 1 < statements &&
                 std::strcmp(PQcmdTuples(r.get()), "1") == 0) {
        ++news;
      }
      PgResultPtr end(PQgetResult(c), &PQclear);  // NULL after each result
    }
    // The sync point.
    for (int i = 0; i < 4; ++i) {
      PgResultPtr r(PQgetResult(c), &PQclear);
      if (r != nullptr && PQresultStatus(r.get()) == PGRES_PIPELINE_SYNC) break;
    }
    if (!error.empty()) {
      return absl::InternalError(absl::StrFormat("postgres: %s", error));
    }
    return news;
  }

 private:
  PgConn conn_;
  const bool pipelined_;
};

class PgTarget : public Target {
 public:
  PgTarget(std::string conninfo, bool synchronous_commit, bool pipelined)
      : conninfo_(std::move(conninfo)),
        synchronous_commit_(synchronous_commit),
        pipelined_(pipelined) {}

  absl::Status Setup() override {
    absl::StatusOr<PgConn> admin = PgConn::Connect(conninfo_);
    if (!admin.ok()) return admin.status();
    for (const char* sql : {
             "DROP TABLE IF EXISTS inbox, state",
             "CREATE TABLE inbox (message_id text PRIMARY KEY, processed_at "
             "timestamptz NOT NULL DEFAULT now())",
             "CREATE TABLE state (account text PRIMARY KEY, balance bigint NOT "
             "NULL)",
             // Every run starts right after a checkpoint, so each pays the
             // same full-page images.
             "CHECKPOINT",
         }) {
      if (absl::StatusOr<std::string> r = admin->Exec(sql); !r.ok()) {
        return r.status();
      }
    }
    absl::StatusOr<std::string> lsn = admin->Exec("SELECT pg_current_wal_lsn()");
    if (!lsn.ok()) return lsn.status();
    start_lsn_ = *lsn;
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<Client>> NewClient() override {
    absl::StatusOr<PgConn> conn = PgConn::Connect(conninfo_);
    if (!conn.ok()) return conn.status();
    absl::StatusOr<std::string> set = conn->Exec(
        synchronous_commit_ ? "SET synchronous_commit = on"
                            : "SET synchronous_commit = off");
    if (!set.ok()) return set.status();
    PgResultPtr prepared(
        PQprepare(conn->get(), "dedupe", kPgDedupeSql, 3, nullptr), &PQclear);
    if (PQresultStatus(prepared.get()) != PGRES_COMMAND_OK) {
      return absl::InternalError(absl::StrFormat(
          "postgres: prepare: %s", PQresultErrorMessage(prepared.get())));
    }
    if (pipelined_ && PQenterPipelineMode(conn->get()) != 1) {
      return absl::InternalError("postgres: cannot enter pipeline mode");
    }
    return std::unique_ptr<Client>(
        std::make_unique<PgClient>(std::move(*conn), pipelined_));
  }

  absl::StatusOr<Final> Finish(int /*accounts*/) override {
    absl::StatusOr<PgConn> admin = PgConn::Connect(conninfo_);
    if (!admin.ok()) return admin.status();
    Final final;
    absl::StatusOr<std::string> count = admin->Exec("SELECT count(*) FROM inbox");
    absl::StatusOr<std::string> sum =
        admin->Exec("SELECT coalesce(sum(balance), 0) FROM state");
    absl::StatusOr<std::string> wal = admin->Exec(absl::StrFormat(
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '%s')::bigint",
        start_lsn_));
    absl::StatusOr<std::string> size = admin->Exec(
        "SELECT pg_total_relation_size('inbox') + "
        "pg_total_relation_size('state')");
    for (const auto* r : {&count, &sum, &wal, &size}) {
      if (!r->ok()) return r->status();
    }
    final.stored_ids = std::strtoull(count->c_str(), nullptr, 10);
    final.balance_sum = std::strtoll(sum->c_str(), nullptr, 10);
    final.written_bytes = std::strtoull(wal->c_str(), nullptr, 10);
    final.disk_bytes = std::strtoull(size->c_str(), nullptr, 10);
    final.note = "WA: WAL bytes only; disk: tables+indexes, WAL excluded";
    if (absl::StatusOr<std::string> r =
            admin->Exec("DROP TABLE IF EXISTS inbox, state");
        !r.ok()) {
      return r.status();
    }
    return final;
  }

 private:
  const std::string conninfo_;
  const bool synchronous_commit_;
  const bool pipelined_;
  std::string start_lsn_;
};

// ---------------------------------------------------------------------------
// Redis.

using RedisReplyPtr = std::unique_ptr<redisReply, void (*)(void*)>;

// Returns SET NX EX's outcome: 1 if the ID was new (and the balance updated).
constexpr char kRedisScript[] =
    "if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then "
    "redis.call('INCRBY', KEYS[2], ARGV[2]) return 1 end return 0";

struct RedisAddress {
  std::string host;
  int port = 0;
};

absl::StatusOr<RedisAddress> ParseRedisAddress(const std::string& text) {
  const size_t colon = text.rfind(':');
  RedisAddress address;
  if (colon == std::string::npos ||
      std::from_chars(text.data() + colon + 1, text.data() + text.size(),
                      address.port)
              .ec != std::errc()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bad Redis address '%s' (want host:port)", text));
  }
  address.host = text.substr(0, colon);
  return address;
}

class RedisConn {
 public:
  static absl::StatusOr<RedisConn> Connect(const RedisAddress& address) {
    timeval timeout{3, 0};
    redisContext* c =
        redisConnectWithTimeout(address.host.c_str(), address.port, timeout);
    if (c == nullptr || c->err != 0) {
      std::string error = c != nullptr ? c->errstr : "no memory";
      if (c != nullptr) redisFree(c);
      return absl::UnavailableError(absl::StrFormat(
          "cannot reach Redis at %s:%d: %s", address.host, address.port, error));
    }
    return RedisConn(c);
  }
  RedisConn(RedisConn&& other) noexcept : c_(other.c_) { other.c_ = nullptr; }
  RedisConn& operator=(RedisConn&&) = delete;
  ~RedisConn() {
    if (c_ != nullptr) redisFree(c_);
  }
  redisContext* get() const { return c_; }

  absl::StatusOr<RedisReplyPtr> Command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* reply = static_cast<redisReply*>(redisCommandArgv(
        c_, static_cast<int>(argv.size()), argv.data(), lens.data()));
    return Check(reply, args[0]);
  }

  absl::StatusOr<RedisReplyPtr> Check(redisReply* reply,
                                      const std::string& what) {
    if (reply == nullptr) {
      return absl::UnavailableError(
          absl::StrFormat("redis %s: %s", what, c_->errstr));
    }
    RedisReplyPtr owned(reply, freeReplyObject);
    if (reply->type == REDIS_REPLY_ERROR) {
      return absl::InternalError(absl::StrFormat(
          "redis %s: %s", what, std::string(reply->str, reply->len)));
    }
    return owned;
  }

  // The value of `field` in INFO `section`, or "" if absent.
  absl::StatusOr<std::string> Info(const std::string& section,
                                   const std::string& field) {
    absl::StatusOr<RedisReplyPtr> r = Command({"INFO", section});
    if (!r.ok()) return r.status();
    const std::string text((*r)->str, (*r)->len);
    const std::string key = "\n" + field + ":";
    size_t at = ("\n" + text).find(key);
    if (at == std::string::npos) return std::string();
    at += key.size() - 1;
    const size_t end = text.find_first_of("\r\n", at);
    return text.substr(at, end == std::string::npos ? end : end - at);
  }

 private:
  explicit RedisConn(redisContext* c) : c_(c) {}
  redisContext* c_;
};

class RedisClient : public Client {
 public:
  RedisClient(RedisConn conn, std::string sha)
      : conn_(std::move(conn)), sha_(std::move(sha)) {}

  absl::StatusOr<uint64_t> Run(
      absl::Span<const StreamMessage* const> batch) override {
    // Sends the whole poll before reading a reply (pipelining); a poll of one
    // is one round trip.
    const std::string ttl = std::to_string(kDedupeTtlSeconds);
    for (const StreamMessage* m : batch) {
      const std::string key = "inbox:" + m->id;
      const std::string state = "state:" + m->account;
      const std::string amount = std::to_string(m->amount);
      const char* argv[] = {"EVALSHA",   sha_.c_str(), "2",           key.c_str(),
                            state.c_str(), ttl.c_str(),  amount.c_str()};
      const size_t lens[] = {7,           sha_.size(), 1,           key.size(),
                             state.size(), ttl.size(),  amount.size()};
      if (redisAppendCommandArgv(conn_.get(), 7, argv, lens) != REDIS_OK) {
        return absl::UnavailableError(
            absl::StrFormat("redis: %s", conn_.get()->errstr));
      }
    }
    uint64_t news = 0;
    absl::Status first_error;
    for (size_t i = 0; i < batch.size(); ++i) {
      void* raw = nullptr;
      if (redisGetReply(conn_.get(), &raw) != REDIS_OK) {
        return absl::UnavailableError(
            absl::StrFormat("redis: %s", conn_.get()->errstr));
      }
      absl::StatusOr<RedisReplyPtr> r =
          conn_.Check(static_cast<redisReply*>(raw), "EVALSHA");
      if (!r.ok()) {
        if (first_error.ok()) first_error = r.status();
        continue;
      }
      if ((*r)->type == REDIS_REPLY_INTEGER && (*r)->integer == 1) ++news;
    }
    if (!first_error.ok()) return first_error;
    return news;
  }

 private:
  RedisConn conn_;
  const std::string sha_;
};

class RedisTarget : public Target {
 public:
  RedisTarget(RedisAddress address, bool aof)
      : address_(std::move(address)), aof_(aof) {}

  absl::Status Setup() override {
    absl::StatusOr<RedisConn> c = RedisConn::Connect(address_);
    if (!c.ok()) return c.status();
    if (auto r = c->Command({"FLUSHALL"}); !r.ok()) return r.status();
    if (aof_) {
      // Start from a compact AOF so its growth is this run's writes.
      if (auto r = c->Command({"BGREWRITEAOF"}); !r.ok()) return r.status();
      if (absl::Status s = WaitForRewrite(*c); !s.ok()) return s;
      absl::StatusOr<std::string> size = c->Info("persistence", "aof_current_size");
      if (!size.ok()) return size.status();
      start_aof_bytes_ = std::strtoull(size->c_str(), nullptr, 10);
    }
    absl::StatusOr<std::string> mem = c->Info("memory", "used_memory");
    if (!mem.ok()) return mem.status();
    start_memory_ = std::strtoull(mem->c_str(), nullptr, 10);
    absl::StatusOr<RedisReplyPtr> sha = c->Command({"SCRIPT", "LOAD", kRedisScript});
    if (!sha.ok()) return sha.status();
    sha_ = std::string((*sha)->str, (*sha)->len);
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<Client>> NewClient() override {
    absl::StatusOr<RedisConn> c = RedisConn::Connect(address_);
    if (!c.ok()) return c.status();
    return std::unique_ptr<Client>(
        std::make_unique<RedisClient>(std::move(*c), sha_));
  }

  absl::StatusOr<Final> Finish(int accounts) override {
    absl::StatusOr<RedisConn> c = RedisConn::Connect(address_);
    if (!c.ok()) return c.status();
    Final final;
    int64_t sum = 0;
    uint64_t present = 0;
    constexpr int kChunk = 1000;
    for (int start = 0; start < accounts; start += kChunk) {
      std::vector<std::string> args = {"MGET"};
      for (int i = start; i < std::min(accounts, start + kChunk); ++i) {
        args.push_back("state:" + AccountName(i));
      }
      absl::StatusOr<RedisReplyPtr> r = c->Command(args);
      if (!r.ok()) return r.status();
      for (size_t i = 0; i < (*r)->elements; ++i) {
        const redisReply* e = (*r)->element[i];
        if (e->type != REDIS_REPLY_STRING) continue;
        ++present;
        sum += std::strtoll(std::string(e->str, e->len).c_str(), nullptr, 10);
      }
    }
    absl::StatusOr<RedisReplyPtr> dbsize = c->Command({"DBSIZE"});
    if (!dbsize.ok()) return dbsize.status();
    final.balance_sum = sum;
    final.stored_ids = static_cast<uint64_t>((*dbsize)->integer) - present;
    absl::StatusOr<std::string> mem = c->Info("memory", "used_memory");
    if (!mem.ok()) return mem.status();
    const double memory_mib =
        (static_cast<double>(std::strtoull(mem->c_str(), nullptr, 10)) -
         static_cast<double>(start_memory_)) /
        (1 << 20);
    if (aof_) {
      absl::StatusOr<std::string> size = c->Info("persistence", "aof_current_size");
      if (!size.ok()) return size.status();
      const uint64_t now = std::strtoull(size->c_str(), nullptr, 10);
      final.written_bytes = now - start_aof_bytes_;
      final.disk_bytes = now;
      final.note = absl::StrFormat("disk: AOF; RAM +%.1f MiB", memory_mib);
    } else {
      final.disk_bytes = 0;
      final.note = absl::StrFormat("memory only; RAM +%.1f MiB", memory_mib);
    }
    if (auto r = c->Command({"FLUSHALL"}); !r.ok()) return r.status();
    return final;
  }

 private:
  static absl::Status WaitForRewrite(RedisConn& c) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      absl::StatusOr<std::string> running =
          c.Info("persistence", "aof_rewrite_in_progress");
      absl::StatusOr<std::string> scheduled =
          c.Info("persistence", "aof_rewrite_scheduled");
      if (!running.ok()) return running.status();
      if (!scheduled.ok()) return scheduled.status();
      if (*running == "0" && *scheduled == "0") return absl::OkStatus();
      absl::SleepFor(absl::Milliseconds(20));
    }
    return absl::DeadlineExceededError("redis: BGREWRITEAOF did not finish");
  }

  const RedisAddress address_;
  const bool aof_;
  std::string sha_;
  uint64_t start_aof_bytes_ = 0;
  uint64_t start_memory_ = 0;
};

// ---------------------------------------------------------------------------
// RocksDB used directly.

enum class RocksMode { kGetPut, kTtl, kPutOnly };

absl::Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("rocksdb %s: %s", what, s.ToString()));
}

// The same tuning idem gives its own column families (engine/store.cc):
// 64 MiB memtables, 10-bit Bloom filters (also on the memtable), dynamic
// level sizes, no compression, a 64 MiB block cache, 2 background jobs.
rocksdb::ColumnFamilyOptions TunedColumnFamily(
    const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions cf;
  cf.write_buffer_size = size_t{64} << 20;
  cf.level_compaction_dynamic_level_bytes = true;
  cf.compression = rocksdb::kNoCompression;
  cf.memtable_prefix_bloom_size_ratio = 0.02;
  cf.memtable_whole_key_filtering = true;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return cf;
}

class RocksClient : public Client {
 public:
  RocksClient(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* inbox,
              rocksdb::ColumnFamilyHandle* state, RocksMode mode, bool sync)
      : db_(db), inbox_(inbox), state_(state), mode_(mode) {
    write_options_.sync = sync;
  }

  absl::StatusOr<uint64_t> Run(
      absl::Span<const StreamMessage* const> batch) override {
    rocksdb::WriteBatch wb;
    uint64_t news = 0;
    if (mode_ == RocksMode::kPutOnly) {
      // The ceiling: the bytes the Get+Put loop writes, without any lookup.
      for (const StreamMessage* m : batch) {
        if (!m->first) continue;
        wb.Put(inbox_, m->id, rocksdb::Slice());
        wb.Put(state_, m->account, EncodeBalance(m->amount));
        ++news;
      }
    } else {
      // IDs and balances written earlier in this poll are not in the DB yet.
      absl::flat_hash_set<std::string_view> seen;
      absl::flat_hash_map<std::string_view, int64_t> balances;
      std::string value;
      for (const StreamMessage* m : batch) {
        if (seen.contains(m->id)) continue;
        rocksdb::Status s = db_->Get(read_options_, inbox_, m->id, &value);
        if (s.ok()) continue;  // duplicate
        if (!s.IsNotFound()) return FromRocks(s, "Get");
        seen.insert(m->id);
        auto it = balances.find(m->account);
        int64_t balance = 0;
        if (it != balances.end()) {
          balance = it->second;
        } else {
          s = db_->Get(read_options_, state_, m->account, &value);
          if (s.ok()) {
            balance = DecodeBalance(value);
          } else if (!s.IsNotFound()) {
            return FromRocks(s, "Get");
          }
        }
        balance += m->amount;
        balances[m->account] = balance;
        wb.Put(inbox_, m->id, rocksdb::Slice());
        wb.Put(state_, m->account, EncodeBalance(balance));
        ++news;
      }
    }
    if (wb.Count() > 0) {
      if (absl::Status s = FromRocks(db_->Write(write_options_, &wb), "Write");
          !s.ok()) {
        return s;
      }
    }
    return news;
  }

 private:
  rocksdb::DB* const db_;
  rocksdb::ColumnFamilyHandle* const inbox_;
  rocksdb::ColumnFamilyHandle* const state_;
  const RocksMode mode_;
  rocksdb::ReadOptions read_options_;
  rocksdb::WriteOptions write_options_;
};

class RocksTarget : public Target {
 public:
  RocksTarget(std::string scratch, RocksMode mode, bool sync)
      : scratch_(std::move(scratch)), mode_(mode), sync_(sync) {}
  ~RocksTarget() override { Close(); }

  absl::Status Setup() override {
    path_ = FreshPath(scratch_, "rocksdb");
    statistics_ = rocksdb::CreateDBStatistics();
    statistics_->set_stats_level(rocksdb::StatsLevel::kExceptHistogramOrTimers);
    rocksdb::DBOptions db_options;
    db_options.create_if_missing = true;
    db_options.create_missing_column_families = true;
    db_options.max_background_jobs = 2;
    db_options.statistics = statistics_;
    db_options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
    const std::shared_ptr<rocksdb::Cache> cache =
        rocksdb::NewLRUCache(size_t{64} << 20);
    const rocksdb::ColumnFamilyOptions cf = TunedColumnFamily(cache);
    std::vector<rocksdb::ColumnFamilyDescriptor> families = {
        {rocksdb::kDefaultColumnFamilyName, cf}, {"inbox", cf}};
    rocksdb::Status s;
    if (mode_ == RocksMode::kTtl) {
      // State never expires (ttl 0); the inbox forgets IDs after 7 days.
      rocksdb::DBWithTTL* db = nullptr;
      s = rocksdb::DBWithTTL::Open(db_options, path_, families, &handles_, &db,
                                   {0, kDedupeTtlSeconds});
      db_ = db;
    } else {
      s = rocksdb::DB::Open(db_options, path_, families, &handles_, &db_);
    }
    return FromRocks(s, "Open");
  }

  absl::StatusOr<std::unique_ptr<Client>> NewClient() override {
    return std::unique_ptr<Client>(std::make_unique<RocksClient>(
        db_, handles_[1], handles_[0], mode_, sync_));
  }

  absl::StatusOr<Final> Finish(int accounts) override {
    Final final;
    if (mode_ != RocksMode::kPutOnly) {
      int64_t sum = 0;
      std::string value;
      for (int i = 0; i < accounts; ++i) {
        rocksdb::Status s =
            db_->Get(rocksdb::ReadOptions(), handles_[0], AccountName(i), &value);
        if (s.ok()) {
          sum += DecodeBalance(value);
        } else if (!s.IsNotFound()) {
          return FromRocks(s, "Get");
        }
      }
      final.balance_sum = sum;
    }
    uint64_t ids = 0;
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), handles_[1]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++ids;
    if (absl::Status s = FromRocks(it->status(), "Iterator"); !s.ok()) return s;
    it.reset();
    final.stored_ids = ids;
    final.written_bytes =
        statistics_->getTickerCount(rocksdb::WAL_FILE_BYTES) +
        statistics_->getTickerCount(rocksdb::FLUSH_WRITE_BYTES) +
        statistics_->getTickerCount(rocksdb::COMPACT_WRITE_BYTES);
    final.disk_bytes = DirectoryBytes(path_);
    Close();
    std::error_code ignored;  // best effort
    std::filesystem::remove_all(path_, ignored);
    return final;
  }

 private:
  void Close() {
    if (db_ == nullptr) return;
    for (rocksdb::ColumnFamilyHandle* h : handles_) {
      db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    }
    handles_.clear();
    db_->Close().PermitUncheckedError();
    delete db_;
    db_ = nullptr;
  }

  const std::string scratch_;
  const RocksMode mode_;
  const bool sync_;
  std::string path_;
  std::shared_ptr<rocksdb::Statistics> statistics_;
  rocksdb::DB* db_ = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

// ---------------------------------------------------------------------------
// idem.

enum class IdemMode { kSync, kBufferedWait, kBuffered };

// The handler: add the message's amount to its account's balance.
absl::Status ApplyPayment(const Message& m, Txn& txn) {
  const size_t colon = m.payload.find(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError("payload without ':'");
  }
  const std::string_view account = m.payload.substr(0, colon);
  int64_t amount = 0;
  const std::string_view digits = m.payload.substr(colon + 1);
  if (std::from_chars(digits.data(), digits.data() + digits.size(), amount)
          .ec != std::errc()) {
    return absl::InvalidArgumentError("payload amount is not a number");
  }
  absl::StatusOr<std::optional<std::string>> current = txn.Get(account);
  if (!current.ok()) return current.status();
  const int64_t balance =
      (current->has_value() ? DecodeBalance(**current) : 0) + amount;
  txn.Put(account, EncodeBalance(balance));
  return absl::OkStatus();
}

class IdemClient : public Client {
 public:
  IdemClient(Engine* engine, bool wait) : engine_(engine), wait_(wait) {}

  absl::StatusOr<uint64_t> Run(
      absl::Span<const StreamMessage* const> batch) override {
    messages_.resize(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      messages_[i] = Message();
      messages_[i].id = batch[i]->id;
      messages_[i].payload = batch[i]->payload;
    }
    absl::StatusOr<std::vector<Result>> results =
        engine_->ProcessBatch(messages_, ApplyPayment);
    if (!results.ok()) return results.status();
    uint64_t news = 0;
    uint64_t last = 0;
    for (const Result& r : *results) {
      if (r.outcome == Outcome::kFailed) return r.error;
      if (r.outcome == Outcome::kProcessed) ++news;
      last = std::max(last, r.sequence);
    }
    if (wait_ && last > 0) {
      if (absl::Status s = engine_->WaitDurable(last); !s.ok()) return s;
    }
    return news;
  }

 private:
  Engine* const engine_;
  const bool wait_;
  std::vector<Message> messages_;
};

class IdemTarget : public Target {
 public:
  IdemTarget(std::string scratch, IdemMode mode)
      : scratch_(std::move(scratch)), mode_(mode) {}

  absl::Status Setup() override {
    path_ = FreshPath(scratch_, "idem");
    Options options;
    options.durability =
        mode_ == IdemMode::kSync ? Durability::kSync : Durability::kBuffered;
    options.dedupe_window = absl::Seconds(kDedupeTtlSeconds);
    absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Open(path_, options);
    if (!engine.ok()) return engine.status();
    engine_ = std::move(*engine);
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<Client>> NewClient() override {
    return std::unique_ptr<Client>(std::make_unique<IdemClient>(
        engine_.get(), mode_ == IdemMode::kBufferedWait));
  }

  absl::StatusOr<Final> Finish(int accounts) override {
    Final final;
    int64_t sum = 0;
    for (int i = 0; i < accounts; ++i) {
      absl::StatusOr<std::optional<std::string>> v =
          engine_->GetState(AccountName(i));
      if (!v.ok()) return v.status();
      if (v->has_value()) sum += DecodeBalance(**v);
    }
    final.balance_sum = sum;
    absl::StatusOr<Stats> stats = engine_->GetStats();
    if (!stats.ok()) return stats.status();
    uint64_t records = 0;
    if (absl::Status s = engine_->Dump([&](const DumpEntry& e) {
          if (e.kind == DumpEntry::Kind::kDedupe) ++records;
          return absl::OkStatus();
        });
        !s.ok()) {
      return s;
    }
    final.stored_ids = records;
    final.written_bytes =
        stats->wal_bytes + stats->flush_bytes + stats->compaction_bytes;
    final.disk_bytes = DirectoryBytes(path_);
    engine_.reset();
    std::error_code ignored;  // best effort
    std::filesystem::remove_all(path_, ignored);
    return final;
  }

 private:
  const std::string scratch_;
  const IdemMode mode_;
  std::string path_;
  std::unique_ptr<Engine> engine_;
};

// ---------------------------------------------------------------------------
// Configs, the driver and the results.

struct Spec {
  std::string peer;        // postgres, redis, rocksdb, idem, ceiling
  std::string name;        // the table's first column
  std::string durability;  // fsync, page cache, async commit, memory
  int batch = 1;
  int clients = 1;
  bool slow = false;       // one sync per message: --slow_messages
  bool check_sum = true;   // the store keeps balances to check
  bool reference = false;  // an idem row other rows are compared with
  std::function<std::unique_ptr<Target>()> make;
  bool durable() const { return durability == "fsync"; }
};

struct Row {
  Spec spec;
  uint64_t messages = 0;  // deliveries processed
  uint64_t news = 0;      // deliveries that did the work
  uint64_t expected_news = 0;
  uint64_t user_bytes = 0;  // logical bytes of the new messages
  double seconds = 0;
  double rate = 0;
  double p50_us = 0;
  double p99_us = 0;
  std::string latency_unit;  // msg, batch, op
  std::optional<double> write_amp;
  std::optional<uint64_t> written_bytes;
  std::optional<uint64_t> disk_bytes;
  std::optional<double> rate_ratio;
  std::optional<double> disk_ratio;
  std::string check = "ok";
  std::string note;
};

double Percentile(std::vector<double>& values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(
      values.size() - 1,
      static_cast<size_t>(std::ceil(p * static_cast<double>(values.size()))) -
          (p > 0 ? 1 : 0));
  return values[index];
}

struct RunLimits {
  size_t messages = 0;
  size_t slow_messages = 0;
  double time_cap_s = 0;
  int accounts = 0;
};

Row RunSpec(const Spec& spec, const std::vector<StreamMessage>& stream,
            const RunLimits& limits) {
  Row row;
  row.spec = spec;
  row.latency_unit = spec.batch == 1 ? "msg" : "batch";
  const size_t count = spec.slow ? std::min(limits.slow_messages, limits.messages)
                                 : limits.messages;
  std::unique_ptr<Target> target = spec.make();
  if (absl::Status s = target->Setup(); !s.ok()) {
    row.check = "ERROR: " + s.ToString();
    return row;
  }
  const std::vector<std::vector<uint32_t>> parts =
      Partition(stream, count, spec.clients);
  std::vector<std::unique_ptr<Client>> clients;
  for (int c = 0; c < spec.clients; ++c) {
    absl::StatusOr<std::unique_ptr<Client>> client = target->NewClient();
    if (!client.ok()) {
      row.check = "ERROR: " + client.status().ToString();
      clients.clear();
      (void)target->Finish(limits.accounts);  // tear down; the error is above
      return row;
    }
    clients.push_back(std::move(*client));
  }
  struct ClientOutcome {
    size_t processed = 0;
    uint64_t news = 0;
    std::vector<double> latencies_us;
    absl::Status status;
  };
  std::vector<ClientOutcome> outcomes(clients.size());
  const auto start = SteadyClock::now();
  const auto deadline =
      start + std::chrono::duration_cast<SteadyClock::duration>(
                  std::chrono::duration<double>(limits.time_cap_s));
  auto work = [&](size_t c) {
    ClientOutcome& out = outcomes[c];
    const std::vector<uint32_t>& mine = parts[c];
    std::vector<const StreamMessage*> batch;
    for (size_t at = 0; at < mine.size(); at += static_cast<size_t>(spec.batch)) {
      if (SteadyClock::now() > deadline) break;
      batch.clear();
      const size_t end = std::min(mine.size(), at + static_cast<size_t>(spec.batch));
      for (size_t i = at; i < end; ++i) batch.push_back(&stream[mine[i]]);
      const auto t0 = SteadyClock::now();
      absl::StatusOr<uint64_t> news = clients[c]->Run(batch);
      const auto t1 = SteadyClock::now();
      if (!news.ok()) {
        out.status = news.status();
        return;
      }
      out.news += *news;
      out.processed = end;
      out.latencies_us.push_back(
          std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
  };
  if (clients.size() == 1) {
    work(0);
  } else {
    std::vector<std::thread> threads;
    for (size_t c = 0; c < clients.size(); ++c) threads.emplace_back(work, c);
    for (std::thread& t : threads) t.join();
  }
  const auto stop = SteadyClock::now();
  clients.clear();

  std::vector<double> latencies;
  int64_t expected_sum = 0;
  absl::Status failure;
  for (size_t c = 0; c < outcomes.size(); ++c) {
    const ClientOutcome& out = outcomes[c];
    if (!out.status.ok() && failure.ok()) failure = out.status;
    row.messages += out.processed;
    row.news += out.news;
    latencies.insert(latencies.end(), out.latencies_us.begin(),
                     out.latencies_us.end());
    for (size_t i = 0; i < out.processed; ++i) {
      const StreamMessage& m = stream[parts[c][i]];
      if (!m.first) continue;
      ++row.expected_news;
      expected_sum += m.amount;
      row.user_bytes += m.id.size() + m.account.size() + kBalanceBytes;
    }
  }
  row.seconds = std::chrono::duration<double>(stop - start).count();
  row.rate = row.seconds > 0 ? static_cast<double>(row.messages) / row.seconds : 0;
  row.p50_us = Percentile(latencies, 0.50);
  row.p99_us = Percentile(latencies, 0.99);
  if (row.messages < count) {
    row.note = absl::StrFormat("stopped at the %.0f s cap after %d of %d msgs",
                               limits.time_cap_s, row.messages, count);
  }

  absl::StatusOr<Final> final = target->Finish(limits.accounts);
  if (!failure.ok()) {
    row.check = "ERROR: " + failure.ToString();
    return row;
  }
  if (!final.ok()) {
    row.check = "ERROR: " + final.status().ToString();
    return row;
  }
  row.written_bytes = final->written_bytes;
  row.disk_bytes = final->disk_bytes;
  if (final->written_bytes.has_value() && row.user_bytes > 0) {
    row.write_amp = static_cast<double>(*final->written_bytes) /
                    static_cast<double>(row.user_bytes);
  }
  if (!final->note.empty()) {
    row.note = row.note.empty() ? final->note : row.note + "; " + final->note;
  }
  std::vector<std::string> problems;
  if (row.news != row.expected_news) {
    problems.push_back(absl::StrFormat("%d new, expected %d", row.news,
                                       row.expected_news));
  }
  if (final->stored_ids.has_value() && *final->stored_ids != row.expected_news) {
    problems.push_back(absl::StrFormat("%d IDs stored, expected %d",
                                       *final->stored_ids, row.expected_news));
  }
  if (spec.check_sum && final->balance_sum.has_value() &&
      *final->balance_sum != expected_sum) {
    problems.push_back(absl::StrFormat("balance sum %d, expected %d",
                                       *final->balance_sum, expected_sum));
  }
  if (!problems.empty()) {
    std::string joined;
    for (const std::string& p : problems) joined += (joined.empty() ? "" : ", ") + p;
    row.check = "FAIL: " + joined;
  }
  return row;
}

// The device's sync rate: overwrite 8 KiB at offset 0 of a preallocated file
// and fdatasync, in a loop (what pg_test_fsync's fdatasync line measures).
Row RunFsyncLoop(const std::string& scratch, double seconds,
                 const std::string& when) {
  Row row;
  row.spec.peer = "ceiling";
  row.spec.name = "ceiling: write+fdatasync 8 KiB loop, " + when;
  row.spec.durability = "fsync";
  row.latency_unit = "op";
  row.check = "n/a";
  const std::string path = scratch + "/fsync_loop.tmp";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    row.check = "ERROR: cannot create " + path;
    return row;
  }
  std::vector<char> block(8192, 'x');
  bool ok = true;
  for (int i = 0; i < 16 * 128 && ok; ++i) {  // 16 MiB, like pg_test_fsync
    ok = ::write(fd, block.data(), block.size()) ==
         static_cast<ssize_t>(block.size());
  }
  ok = ok && ::fsync(fd) == 0;
  std::vector<double> latencies;
  const auto start = SteadyClock::now();
  const auto deadline =
      start + std::chrono::duration_cast<SteadyClock::duration>(
                  std::chrono::duration<double>(seconds));
  while (ok && SteadyClock::now() < deadline && latencies.size() < 1000000) {
    const auto t0 = SteadyClock::now();
    ok = ::pwrite(fd, block.data(), block.size(), 0) ==
             static_cast<ssize_t>(block.size()) &&
         ::fdatasync(fd) == 0;
    latencies.push_back(
        std::chrono::duration<double, std::micro>(SteadyClock::now() - t0).count());
  }
  const auto stop = SteadyClock::now();
  ::close(fd);
  ::unlink(path.c_str());
  if (!ok) {
    row.check = "ERROR: write or fdatasync failed";
    return row;
  }
  row.messages = latencies.size();
  row.seconds = std::chrono::duration<double>(stop - start).count();
  row.rate = static_cast<double>(row.messages) / row.seconds;
  row.p50_us = Percentile(latencies, 0.50);
  row.p99_us = Percentile(latencies, 0.99);
  row.note = "syncs/s, not messages";
  return row;
}

// Runs pg_test_fsync and reports its "one 8kB write" fdatasync line.
Row RunPgTestFsync(const std::string& binary, const std::string& scratch) {
  Row row;
  row.spec.peer = "ceiling";
  row.spec.name = "ceiling: pg_test_fsync fdatasync 8 kB";
  row.spec.durability = "fsync";
  row.latency_unit = "op (mean)";
  row.check = "n/a";
  const std::string command = absl::StrFormat(
      "'%s' -s 2 -f '%s/pg_test_fsync.tmp' 2>&1", binary, scratch);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    row.check = "ERROR: cannot run " + binary;
    return row;
  }
  char line[512];
  bool in_section = false;
  bool found = false;
  double ops = 0;
  double usecs = 0;
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    if (std::strstr(line, "one 8kB write") != nullptr) in_section = true;
    if (in_section && !found &&
        std::sscanf(line, " fdatasync %lf ops/sec %lf usecs/op", &ops, &usecs) ==
            2) {
      found = true;
    }
  }
  const int rc = ::pclose(pipe);
  if (!found || rc != 0) {
    row.check = "ERROR: no fdatasync figure from " + binary;
    return row;
  }
  row.rate = ops;
  row.p50_us = usecs;
  row.p99_us = usecs;
  row.note = "syncs/s, not messages; latency is the mean";
  return row;
}

std::vector<Spec> MakeSpecs(const std::string& scratch, const std::string& pg,
                            const RedisAddress& redis_durable,
                            const RedisAddress& redis_memory, int batch,
                            int clients) {
  std::vector<Spec> specs;
  auto add = [&](Spec s) { specs.push_back(std::move(s)); };
  const std::string b = std::to_string(batch);

  // idem first: every other row is compared with it.
  auto idem = [&](IdemMode mode) {
    return [scratch, mode] { return std::make_unique<IdemTarget>(scratch, mode); };
  };
  add({"idem", "idem kSync", "fsync", 1, 1, true, true, true, idem(IdemMode::kSync)});
  add({"idem", "idem kSync", "fsync", batch, 1, false, true, true,
       idem(IdemMode::kSync)});
  add({"idem", "idem kBuffered + WaitDurable", "fsync", 1, 1, true, true, false,
       idem(IdemMode::kBufferedWait)});
  add({"idem", "idem kBuffered + WaitDurable", "fsync", batch, 1, false, true,
       false, idem(IdemMode::kBufferedWait)});
  if (clients > 1) {
    add({"idem", "idem kBuffered + WaitDurable", "fsync", 1, clients, false,
         true, true, idem(IdemMode::kBufferedWait)});
  }
  add({"idem", "idem kBuffered (no wait)", "page cache", 1, 1, false, true, true,
       idem(IdemMode::kBuffered)});
  add({"idem", "idem kBuffered (no wait)", "page cache", batch, 1, false, true,
       true, idem(IdemMode::kBuffered)});

  auto pgt = [&](bool sync, bool pipelined) {
    return [pg, sync, pipelined] {
      return std::make_unique<PgTarget>(pg, sync, pipelined);
    };
  };
  add({"postgres", "postgres synchronous_commit=on", "fsync", 1, 1, true, true,
       false, pgt(true, false)});
  add({"postgres", "postgres synchronous_commit=on, pipelined txn", "fsync",
       batch, 1, false, true, false, pgt(true, true)});
  if (clients > 1) {
    add({"postgres", "postgres synchronous_commit=on", "fsync", 1, clients,
         false, true, false, pgt(true, false)});
  }
  add({"postgres", "postgres synchronous_commit=off", "async commit", 1, 1,
       false, true, false, pgt(false, false)});
  add({"postgres", "postgres synchronous_commit=off, pipelined txn",
       "async commit", batch, 1, false, true, false, pgt(false, true)});

  auto redis = [&](bool aof) {
    const RedisAddress address = aof ? redis_durable : redis_memory;
    return [address, aof] { return std::make_unique<RedisTarget>(address, aof); };
  };
  add({"redis", "redis appendfsync=always", "fsync", 1, 1, true, true, false,
       redis(true)});
  add({"redis", "redis appendfsync=always, pipelined", "fsync", batch, 1, false,
       true, false, redis(true)});
  add({"redis", "redis no persistence", "memory", 1, 1, false, true, false,
       redis(false)});
  add({"redis", "redis no persistence, pipelined", "memory", batch, 1, false,
       true, false, redis(false)});

  auto rocks = [&](RocksMode mode, bool sync) {
    return [scratch, mode, sync] {
      return std::make_unique<RocksTarget>(scratch, mode, sync);
    };
  };
  add({"rocksdb", "rocksdb Get+Put, sync", "fsync", 1, 1, true, true, false,
       rocks(RocksMode::kGetPut, true)});
  add({"rocksdb", "rocksdb Get+Put, WriteBatch, sync", "fsync", batch, 1, false,
       true, false, rocks(RocksMode::kGetPut, true)});
  add({"rocksdb", "rocksdb Get+Put, no sync", "page cache", 1, 1, false, true,
       false, rocks(RocksMode::kGetPut, false)});
  add({"rocksdb", "rocksdb Get+Put, WriteBatch, no sync", "page cache", batch, 1,
       false, true, false, rocks(RocksMode::kGetPut, false)});
  add({"rocksdb", "rocksdb DBWithTTL Get+Put, WriteBatch, sync", "fsync", batch,
       1, false, true, false, rocks(RocksMode::kTtl, true)});
  add({"rocksdb", "rocksdb DBWithTTL Get+Put, WriteBatch, no sync", "page cache",
       batch, 1, false, true, false, rocks(RocksMode::kTtl, false)});

  add({"ceiling", "ceiling: rocksdb Put only (no lookup), sync", "fsync", batch,
       1, false, false, false, rocks(RocksMode::kPutOnly, true)});
  add({"ceiling", "ceiling: rocksdb Put only (no lookup), no sync", "page cache",
       batch, 1, false, false, false, rocks(RocksMode::kPutOnly, false)});
  return specs;
}

// Fills rate_ratio and disk_ratio: each row against the idem reference row of
// the same durability class (durable or not), batch size and client count
// (falling back to one client).
void AddRatios(std::vector<Row>& rows) {
  auto find_ref = [&](bool durable, int batch, int clients) -> const Row* {
    for (const Row& r : rows) {
      if (r.spec.reference && r.spec.durable() == durable &&
          r.spec.batch == batch && r.spec.clients == clients &&
          r.check == "ok") {
        return &r;
      }
    }
    return nullptr;
  };
  for (Row& row : rows) {
    if (row.check.rfind("ERROR", 0) == 0) continue;
    const Row* ref =
        find_ref(row.spec.durable(), row.spec.batch, row.spec.clients);
    if (ref == nullptr) ref = find_ref(row.spec.durable(), row.spec.batch, 1);
    if (ref == nullptr) continue;
    if (ref->rate > 0) row.rate_ratio = row.rate / ref->rate;
    // Per processed message, so a run stopped at the time cap compares.
    if (row.disk_bytes.has_value() && *row.disk_bytes > 0 &&
        ref->disk_bytes.has_value() && *ref->disk_bytes > 0 &&
        row.messages > 0 && ref->messages > 0 && row.spec.peer != "ceiling") {
      row.disk_ratio = (static_cast<double>(*row.disk_bytes) /
                        static_cast<double>(row.messages)) /
                       (static_cast<double>(*ref->disk_bytes) /
                        static_cast<double>(ref->messages));
    }
  }
}

std::string Thousands(double value) {
  std::string digits = absl::StrFormat("%.0f", value);
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    out += digits[i];
    if ((n - i - 1) % 3 == 0 && i + 1 < n) out += ',';
  }
  return out;
}

std::string Latency(double us) {
  if (us >= 1000) return absl::StrFormat("%.1f ms", us / 1000);
  return absl::StrFormat("%.0f µs", us);
}

std::string Bytes(uint64_t bytes) {
  if (bytes == 0) return "0";
  if (bytes < (1 << 20)) return absl::StrFormat("%.0f KiB", bytes / 1024.0);
  return absl::StrFormat("%.1f MiB", bytes / 1048576.0);
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

template <typename T>
std::string JsonOptional(const std::optional<T>& v) {
  if (!v.has_value()) return "null";
  std::ostringstream out;
  out << *v;
  return out.str();
}

struct Header {
  std::string date;
  std::string machine;
  size_t messages = 0;
  size_t slow_messages = 0;
  double duplicate_rate = 0;
  uint64_t seed = 0;
  int accounts = 0;
  size_t stream_duplicates = 0;
};

void PrintJson(const Header& h, const std::vector<Row>& rows, std::ostream& out) {
  out << "{\"date\": " << JsonString(h.date)
      << ", \"machine\": " << JsonString(h.machine)
      << ", \"messages\": " << h.messages
      << ", \"slow_messages\": " << h.slow_messages
      << ", \"duplicate_rate\": " << h.duplicate_rate << ", \"seed\": " << h.seed
      << ", \"accounts\": " << h.accounts
      << ", \"stream_duplicates\": " << h.stream_duplicates << ", \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    out << (i == 0 ? "\n  " : ",\n  ") << "{\"peer\": " << JsonString(r.spec.peer)
        << ", \"config\": " << JsonString(r.spec.name)
        << ", \"durability\": " << JsonString(r.spec.durability)
        << ", \"batch\": " << r.spec.batch << ", \"clients\": " << r.spec.clients
        << ", \"messages\": " << r.messages << ", \"new\": " << r.news
        << ", \"expected_new\": " << r.expected_news
        << ", \"seconds\": " << r.seconds
        << ", \"messages_per_second\": " << r.rate
        << ", \"latency_unit\": " << JsonString(r.latency_unit)
        << ", \"p50_us\": " << r.p50_us << ", \"p99_us\": " << r.p99_us
        << ", \"user_bytes\": " << r.user_bytes
        << ", \"written_bytes\": " << JsonOptional(r.written_bytes)
        << ", \"write_amplification\": " << JsonOptional(r.write_amp)
        << ", \"disk_bytes\": " << JsonOptional(r.disk_bytes)
        << ", \"rate_vs_idem\": " << JsonOptional(r.rate_ratio)
        << ", \"disk_vs_idem\": " << JsonOptional(r.disk_ratio)
        << ", \"check\": " << JsonString(r.check)
        << ", \"note\": " << JsonString(r.note) << "}";
  }
  out << "\n]}\n";
}

void PrintTable(const Header& h, const std::vector<Row>& rows,
                std::ostream& out) {
  out << absl::StrFormat(
      "idem peers benchmark, %s, %s\n%d messages per config (%d for configs "
      "that sync once per message), %d of them redeliveries (%.0f%%), seed "
      "%d, %d accounts\n\n",
      h.date, h.machine, h.messages, h.slow_messages, h.stream_duplicates,
      100.0 * h.duplicate_rate, h.seed, h.accounts);
  out << "| peer / config | durability | batch | clients | msgs/s | p99 latency "
         "| write amp | disk at end | msgs/s vs idem | disk vs idem | check |\n"
         "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n";
  std::vector<std::string> notes;
  for (const Row& r : rows) {
    std::string name = r.spec.name;
    if (!r.note.empty()) {
      notes.push_back(r.note);
      name += absl::StrFormat(" [%d]", notes.size());
    }
    const bool error = r.check.rfind("ERROR", 0) == 0;
    out << absl::StrFormat(
        "| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s |\n", name,
        r.spec.durability, r.spec.batch, r.spec.clients,
        error ? "-" : Thousands(r.rate),
        error ? "-" : Latency(r.p99_us) + "/" + r.latency_unit,
        r.write_amp.has_value() ? absl::StrFormat("%.2f", *r.write_amp) : "n/a",
        r.disk_bytes.has_value() ? Bytes(*r.disk_bytes) : "n/a",
        r.rate_ratio.has_value() ? absl::StrFormat("%.2fx", *r.rate_ratio) : "n/a",
        r.disk_ratio.has_value() ? absl::StrFormat("%.2fx", *r.disk_ratio) : "n/a",
        r.check);
  }
  out << "\n";
  for (size_t i = 0; i < notes.size(); ++i) {
    out << absl::StrFormat("[%d] %s\n", i + 1, notes[i]);
  }
  out << "\nDurability: fsync = on stable storage before the call returns; "
         "page cache = survives a process crash, not a power loss; async "
         "commit = PostgreSQL may lose the last ~0.6 s of commits on any "
         "crash; memory = lost on restart.\n"
         "p99 latency is per message for batch 1 and per poll (batch) "
         "otherwise.\n"
         "write amp = bytes written (RocksDB/idem: WAL + flush + compaction "
         "tickers; PostgreSQL: WAL; Redis: AOF) / logical bytes (ID + account "
         "+ 8-byte balance per new message).\n"
         "vs idem = this row / the idem row of the same durability "
         "(fsync: kSync, or kBuffered + WaitDurable for many clients; "
         "otherwise kBuffered without waiting), batch and clients; disk vs "
         "idem compares bytes per processed message.\n";
}

// OK if a Redis server answers at `address` (and, if `durable`, has the AOF
// on with appendfsync always).
absl::Status RedisReachable(const RedisAddress& address, bool durable) {
  absl::StatusOr<RedisConn> c = RedisConn::Connect(address);
  if (!c.ok()) return c.status();
  absl::StatusOr<RedisReplyPtr> pong = c->Command({"PING"});
  if (!pong.ok()) return pong.status();
  if (!durable) return absl::OkStatus();
  absl::StatusOr<RedisReplyPtr> fsync =
      c->Command({"CONFIG", "GET", "appendfsync"});
  if (!fsync.ok()) return fsync.status();
  absl::StatusOr<std::string> aof = c->Info("persistence", "aof_enabled");
  if (!aof.ok()) return aof.status();
  const redisReply* r = fsync->get();
  const bool always = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                      std::string(r->element[1]->str, r->element[1]->len) ==
                          "always";
  if (*aof != "1" || !always) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "Redis at %s:%d must run with appendonly yes and appendfsync always",
        address.host, address.port));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ParseOnly(const std::string& only) {
  const std::vector<std::string> known = {"postgres", "redis", "rocksdb", "idem",
                                          "ceiling"};
  if (only.empty()) return known;
  std::vector<std::string> out;
  for (absl::string_view piece : absl::StrSplit(only, ',', absl::SkipEmpty())) {
    const std::string name(piece.data(), piece.size());
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--only: unknown peer '%s' (known: postgres, redis, rocksdb, idem, "
          "ceiling)",
          name));
    }
    out.push_back(name);
  }
  return out;
}

std::string MachineDescription() {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const double memory_gib = static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                            static_cast<double>(sysconf(_SC_PAGESIZE)) /
                            (1024.0 * 1024.0 * 1024.0);
  return absl::StrFormat("%d cores, %.0f GiB", cores, memory_gib);
}

struct Args {
  size_t messages = 0;
  size_t slow_messages = 0;
  double duplicate_rate = 0;
  uint64_t seed = 0;
  int accounts = 0;
  int batch = 0;
  int clients = 0;
  double time_cap_s = 0;
  double fsync_seconds = 0;
  std::string only;
  bool json = false;
  std::string dir;
  std::string pg;
  std::string redis_durable;
  std::string redis_memory;
  std::string pg_test_fsync;
};

// Runs the benchmark; returns the process exit code (0: every run checked
// out, 1: a run failed or a check did not hold, 2: bad arguments or a server
// not reachable).
int RunPeersBench(const Args& args, std::ostream& out, std::ostream& err) {
  if (args.messages == 0 || args.batch < 1 || args.accounts < 1 ||
      args.duplicate_rate < 0 || args.duplicate_rate >= 1 ||
      args.time_cap_s <= 0) {
    err << "peers_bench: need --messages > 0, --batch >= 1, --accounts >= 1, "
           "0 <= --duplicate_rate < 1, --time_cap_s > 0\n";
    return 2;
  }
  absl::StatusOr<std::vector<std::string>> only = ParseOnly(args.only);
  if (!only.ok()) {
    err << "peers_bench: " << only.status().message() << "\n";
    return 2;
  }
  auto wanted = [&](const std::string& peer) {
    return std::find(only->begin(), only->end(), peer) != only->end();
  };
  absl::StatusOr<RedisAddress> redis_durable = ParseRedisAddress(args.redis_durable);
  absl::StatusOr<RedisAddress> redis_memory = ParseRedisAddress(args.redis_memory);
  if (!redis_durable.ok() || !redis_memory.ok()) {
    err << "peers_bench: "
        << (redis_durable.ok() ? redis_memory : redis_durable).status().message()
        << "\n";
    return 2;
  }

  // Reach every selected server before running anything.
  std::vector<std::string> unreachable;
  if (wanted("postgres")) {
    absl::StatusOr<PgConn> c = PgConn::Connect(args.pg);
    if (!c.ok()) unreachable.push_back(std::string(c.status().message()));
  }
  if (wanted("redis")) {
    for (const RedisAddress& a : {*redis_durable, *redis_memory}) {
      absl::Status reached = RedisReachable(a, &a == &*redis_durable);
      if (!reached.ok()) unreachable.push_back(std::string(reached.message()));
    }
  }
  if (!unreachable.empty()) {
    for (const std::string& u : unreachable) err << "peers_bench: " << u << "\n";
    err << "peers_bench: start the servers with bench/peers/run.sh (it starts "
           "and stops them), point --pg/--redis_durable/--redis_memory at "
           "yours, or leave those peers out with --only=rocksdb,idem,ceiling\n";
    return 2;
  }

  ScratchDir scratch(args.dir);
  if (scratch.path().empty()) {
    err << "peers_bench: cannot create a scratch directory\n";
    return 2;
  }

  const std::vector<StreamMessage> stream =
      MakeStream(args.messages, args.duplicate_rate, args.seed, args.accounts);
  Header header;
  header.date = absl::FormatTime("%Y-%m-%d %H:%M %Z", absl::Now(),
                                 absl::LocalTimeZone());
  header.machine = MachineDescription();
  header.messages = args.messages;
  header.slow_messages = std::min(args.slow_messages, args.messages);
  header.duplicate_rate = args.duplicate_rate;
  header.seed = args.seed;
  header.accounts = args.accounts;
  for (const StreamMessage& m : stream) header.stream_duplicates += m.first ? 0 : 1;

  RunLimits limits;
  limits.messages = args.messages;
  limits.slow_messages = args.slow_messages;
  limits.time_cap_s = args.time_cap_s;
  limits.accounts = args.accounts;

  std::vector<Spec> specs =
      MakeSpecs(scratch.path(), args.pg, *redis_durable, *redis_memory,
                args.batch, args.clients);
  size_t total = 0;
  for (const Spec& s : specs) total += wanted(s.peer) ? 1 : 0;
  if (wanted("ceiling")) total += args.pg_test_fsync.empty() ? 2 : 3;

  std::vector<Row> rows;
  size_t done = 0;
  auto report = [&](const Row& r) {
    err << absl::StrFormat("[%d/%d] %s, batch %d, %d client(s): ", ++done, total,
                           r.spec.name, r.spec.batch, r.spec.clients);
    if (r.check.rfind("ERROR", 0) == 0) {
      err << r.check << "\n";
    } else {
      err << absl::StrFormat("%s/s, p99 %s/%s, %s\n", Thousands(r.rate),
                             Latency(r.p99_us), r.latency_unit, r.check);
    }
  };
  // The device's sync rate before and after the peers: on a shared machine it
  // drifts, and the rows that sync once per message follow it.
  if (wanted("ceiling")) {
    rows.push_back(RunFsyncLoop(scratch.path(), args.fsync_seconds, "first"));
    report(rows.back());
  }
  for (const Spec& spec : specs) {
    if (!wanted(spec.peer)) continue;
    rows.push_back(RunSpec(spec, stream, limits));
    report(rows.back());
  }
  if (wanted("ceiling")) {
    rows.push_back(RunFsyncLoop(scratch.path(), args.fsync_seconds, "last"));
    report(rows.back());
    if (!args.pg_test_fsync.empty()) {
      rows.push_back(RunPgTestFsync(args.pg_test_fsync, scratch.path()));
      report(rows.back());
    }
  }
  AddRatios(rows);
  if (args.json) {
    PrintJson(header, rows, out);
  } else {
    PrintTable(header, rows, out);
  }
  for (const Row& r : rows) {
    if (r.check != "ok" && r.check != "n/a") return 1;
  }
  return 0;
}

}  // namespace
}  // namespace idem::peers

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs one seeded message stream with the same work per message (dedupe "
      "by ID, then one balance update, atomically) through idem, PostgreSQL, "
      "Redis and RocksDB used directly, and prints one table. The servers "
      "must be running: bench/peers/run.sh starts them on loopback, runs "
      "this and stops them.\n"
      "Example: idem_peers_bench --messages=50000 --only=idem,rocksdb");
  // --help lists this file's flags (the binary's name does not match it).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "peers_bench.cc");
  };
  absl::SetFlagsUsageConfig(usage);
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::cerr << "peers_bench: unexpected argument '" << rest[1]
              << "' (see --help)\n";
    return 2;
  }
  idem::peers::Args args;
  const int64_t messages = absl::GetFlag(FLAGS_messages);
  const int64_t slow_messages = absl::GetFlag(FLAGS_slow_messages);
  args.messages = messages > 0 ? static_cast<size_t>(messages) : 0;
  args.slow_messages = slow_messages > 0 ? static_cast<size_t>(slow_messages) : 1;
  args.duplicate_rate = absl::GetFlag(FLAGS_duplicate_rate);
  args.seed = absl::GetFlag(FLAGS_seed);
  args.accounts = absl::GetFlag(FLAGS_accounts);
  args.batch = absl::GetFlag(FLAGS_batch);
  args.clients = absl::GetFlag(FLAGS_clients);
  args.time_cap_s = absl::GetFlag(FLAGS_time_cap_s);
  args.fsync_seconds = absl::GetFlag(FLAGS_fsync_seconds);
  args.only = absl::GetFlag(FLAGS_only);
  args.json = absl::GetFlag(FLAGS_json);
  args.dir = absl::GetFlag(FLAGS_dir);
  args.pg = absl::GetFlag(FLAGS_pg);
  args.redis_durable = absl::GetFlag(FLAGS_redis_durable);
  args.redis_memory = absl::GetFlag(FLAGS_redis_memory);
  args.pg_test_fsync = absl::GetFlag(FLAGS_pg_test_fsync);
  return idem::peers::RunPeersBench(args, std::cout, std::cerr);
}
