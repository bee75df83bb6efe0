#include "redis/connection.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "brokers/no_sigpipe.h"

namespace idem::redis {
namespace {

// What one read takes from the transport at most.
constexpr size_t kReadChunkBytes = 16 << 10;

// proto-max-bulk-len's default (Redis 7).
constexpr int64_t kDefaultMaxBulkBytes = int64_t{512} << 20;
// Arguments no server refuses (proto-max-bulk-len is at least 1 MB): no
// need to know its limit.
constexpr size_t kSmallArgumentBytes = size_t{1} << 20;

// The code of an error reply, by its prefix (the error's name).
absl::StatusCode ErrorReplyCode(std::string_view text) {
  auto starts = [&](std::string_view prefix) {
    return text.substr(0, prefix.size()) == prefix;
  };
  if (starts("LOADING") || starts("BUSY ") || starts("TRYAGAIN") ||
      starts("MASTERDOWN") || starts("CLUSTERDOWN")) {
    return absl::StatusCode::kUnavailable;
  }
  // The server is over its maxmemory: writes wait until it has room.
  if (starts("OOM")) return absl::StatusCode::kResourceExhausted;
  if (starts("NOAUTH") || starts("WRONGPASS")) {
    return absl::StatusCode::kUnauthenticated;
  }
  if (starts("NOPERM")) return absl::StatusCode::kPermissionDenied;
  return absl::StatusCode::kFailedPrecondition;
}

}  // namespace

void ReplyDeleter::operator()(redisReply* reply) const {
  freeReplyObject(reply);
}

std::string_view ReplyString(const redisReply* reply) {
  if (reply == nullptr) return {};
  if (reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_STATUS) {
    return {};
  }
  return std::string_view(reply->str, reply->len);
}

Connection::Connection(std::string host, int port, absl::Duration timeout,
                       std::string user, std::string password, TlsSettings tls)
    : host_(std::move(host)),
      port_(port),
      timeout_(timeout),
      user_(std::move(user)),
      password_(std::move(password)),
      tls_(std::move(tls)) {}

Connection::~Connection() { Close(); }

void Connection::Close() {
  transport_.reset();
  if (reader_ != nullptr) redisReaderFree(reader_);
  reader_ = nullptr;
  max_argument_bytes_ = 0;
}

absl::Status Connection::Connect() {
  absl::StatusOr<std::unique_ptr<Transport>> transport =
      Transport::Connect(host_, port_, timeout_, tls_);
  if (!transport.ok()) return transport.status();
  reader_ = redisReaderCreate();
  if (reader_ == nullptr) {
    return absl::UnavailableError("redis: cannot allocate a reply reader");
  }
  transport_ = *std::move(transport);
  ++connects_;
  return Authenticate();
}

absl::Status Connection::Authenticate() {
  if (password_.empty()) return absl::OkStatus();
  std::vector<std::string> argv = {"AUTH"};
  if (!user_.empty()) argv.push_back(user_);
  argv.push_back(password_);
  absl::StatusOr<Reply> reply = Send(argv, absl::ZeroDuration());
  if (!reply.ok() && !absl::IsUnavailable(reply.status())) Close();
  return reply.status();
}

absl::Status Connection::Drop(absl::Status error) {
  Close();
  return error;
}

absl::StatusOr<int64_t> Connection::MaxArgumentBytes() {
  if (max_argument_bytes_ > 0 && transport_ != nullptr) {
    return max_argument_bytes_;
  }
  absl::StatusOr<Reply> reply =
      Send({"CONFIG", "GET", "proto-max-bulk-len"}, absl::ZeroDuration());
  if (!reply.ok() && absl::IsUnavailable(reply.status())) return reply.status();
  int64_t bytes = kDefaultMaxBulkBytes;  // CONFIG refused: the default
  if (reply.ok() && (*reply)->type == REDIS_REPLY_ARRAY &&
      (*reply)->elements == 2) {
    int64_t parsed = 0;
    if (absl::SimpleAtoi(std::string(ReplyString((*reply)->element[1])),
                         &parsed) &&
        parsed > 0) {
      bytes = parsed;
    }
  }
  max_argument_bytes_ = bytes;
  return bytes;
}

absl::StatusOr<Reply> Connection::Command(const std::vector<std::string>& argv,
                                          absl::Duration extra_wait) {
  size_t longest = 0;
  for (const std::string& arg : argv) longest = std::max(longest, arg.size());
  if (longest > kSmallArgumentBytes) {
    absl::StatusOr<int64_t> max = MaxArgumentBytes();
    if (!max.ok()) return max.status();
    if (static_cast<int64_t>(longest) > *max) {
      return absl::OutOfRangeError(absl::StrCat(
          "redis ", argv[0], ": an argument of ", longest,
          " bytes is over the server's proto-max-bulk-len of ", *max));
    }
  }
  return Send(argv, extra_wait);
}

absl::StatusOr<Reply> Connection::Send(const std::vector<std::string>& argv,
                                       absl::Duration extra_wait) {
  std::vector<const char*> args;
  std::vector<size_t> lengths;
  for (const std::string& arg : argv) {
    args.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  char* formatted = nullptr;
  const int formatted_bytes = redisFormatCommandArgv(
      &formatted, static_cast<int>(args.size()), args.data(), lengths.data());
  if (formatted_bytes < 0) {
    return absl::ResourceExhaustedError("redis: cannot format a command");
  }
  const std::string command(formatted, static_cast<size_t>(formatted_bytes));
  redisFreeCommand(formatted);
  std::optional<brokers::NoSigpipe> no_sigpipe;
  if (!let_sigpipe_through_) no_sigpipe.emplace();
  if (transport_ == nullptr) {
    if (absl::Status s = Connect(); !s.ok()) return s;
  }
  transport_->SetTimeout(timeout_ + extra_wait);
  absl::StatusOr<Reply> read = ReadReplyAfter(command);
  no_sigpipe.reset();
  if (!read.ok()) return read.status();
  Reply reply = *std::move(read);
  if (reply->type == REDIS_REPLY_ERROR) {
    std::string text(reply->str, reply->len);
    const absl::StatusCode code = ErrorReplyCode(text);
    std::string message = absl::StrCat("redis ", argv[0], ": ", text);
    if (code == absl::StatusCode::kUnauthenticated) {
      absl::StrAppend(&message, " (server ", host_, ":", port_, ")");
    }
    return absl::Status(code, message);
  }
  return reply;
}

absl::StatusOr<Reply> Connection::ReadReplyAfter(std::string_view command) {
  if (absl::Status s = transport_->Write(command); !s.ok()) return Drop(s);
  char chunk[kReadChunkBytes];
  while (true) {
    void* reply = nullptr;
    if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
      return Drop(absl::UnavailableError(
          absl::StrCat("redis ", host_, ":", port_,
                       ": unreadable reply: ", redisReaderGetError(reader_))));
    }
    if (reply != nullptr) return Reply(static_cast<redisReply*>(reply));
    absl::StatusOr<size_t> read = transport_->Read(chunk, sizeof(chunk));
    if (!read.ok()) return Drop(read.status());
    if (redisReaderFeed(reader_, chunk, *read) != REDIS_OK) {
      return Drop(absl::UnavailableError(
          absl::StrCat("redis ", host_, ":", port_, ": unreadable reply")));
    }
  }
}

}  // namespace idem::redis
