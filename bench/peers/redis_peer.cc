// The Redis peer (bench/peers/redis_peer.h).

#include "bench/peers/redis_peer.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "examples/ledger.h"

namespace idem::peers {
namespace {

using RedisReplyPtr = std::unique_ptr<redisReply, void (*)(void*)>;

// Returns SET NX EX's outcome: 1 if the ID was new (and the balance updated).
constexpr char kRedisScript[] =
    "if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then "
    "redis.call('INCRBY', KEYS[2], ARGV[2]) return 1 end return 0";

class RedisConn {
 public:
  static absl::StatusOr<RedisConn> Connect(const RedisAddress& address) {
    timeval timeout{3, 0};
    redisContext* c =
        redisConnectWithTimeout(address.host.c_str(), address.port, timeout);
    if (c == nullptr || c->err != 0) {
      std::string error = c != nullptr ? c->errstr : "no memory";
      if (c != nullptr) redisFree(c);
      return absl::UnavailableError(
          absl::StrFormat("cannot reach Redis at %s:%d: %s", address.host,
                          address.port, error));
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
      const std::string amount = std::to_string(m->payment.amount);
      const char* argv[] = {"EVALSHA",     sha_.c_str(),  "2",
                            key.c_str(),   state.c_str(), ttl.c_str(),
                            amount.c_str()};
      const size_t lens[] = {
          7,          sha_.size(),  1, key.size(), state.size(),
          ttl.size(), amount.size()};
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
      absl::StatusOr<std::string> size =
          c->Info("persistence", "aof_current_size");
      if (!size.ok()) return size.status();
      start_aof_bytes_ = std::strtoull(size->c_str(), nullptr, 10);
    }
    absl::StatusOr<std::string> mem = c->Info("memory", "used_memory");
    if (!mem.ok()) return mem.status();
    start_memory_ = std::strtoull(mem->c_str(), nullptr, 10);
    absl::StatusOr<RedisReplyPtr> sha =
        c->Command({"SCRIPT", "LOAD", kRedisScript});
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

  absl::StatusOr<FinalState> Finish(int accounts) override {
    absl::StatusOr<RedisConn> c = RedisConn::Connect(address_);
    if (!c.ok()) return c.status();
    FinalState final;
    int64_t sum = 0;
    uint64_t present = 0;
    constexpr int kChunk = 1000;
    for (int start = 0; start < accounts; start += kChunk) {
      std::vector<std::string> args = {"MGET"};
      for (int i = start; i < std::min(accounts, start + kChunk); ++i) {
        args.push_back("state:" + examples::AccountName(i));
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
      absl::StatusOr<std::string> size =
          c->Info("persistence", "aof_current_size");
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

}  // namespace

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

std::unique_ptr<Target> NewRedisTarget(RedisAddress address, bool aof) {
  return std::make_unique<RedisTarget>(std::move(address), aof);
}

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
  const bool always =
      r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
      std::string(r->element[1]->str, r->element[1]->len) == "always";
  if (*aof != "1" || !always) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "Redis at %s:%d must run with appendonly yes and appendfsync always",
        address.host, address.port));
  }
  return absl::OkStatus();
}

}  // namespace idem::peers
