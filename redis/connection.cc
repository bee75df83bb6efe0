#include "redis/connection.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "brokers/no_sigpipe.h"

namespace idem::redis {
namespace {

timeval AsTimeval(absl::Duration d) { return absl::ToTimeval(d); }

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

Connection::Connection(std::string host, int port, absl::Duration timeout)
    : host_(std::move(host)), port_(port), timeout_(timeout) {}

Connection::~Connection() { Close(); }

void Connection::Close() {
  if (context_ != nullptr) redisFree(context_);
  context_ = nullptr;
}

absl::Status Connection::Connect() {
  context_ = redisConnectWithTimeout(host_.c_str(), port_, AsTimeval(timeout_));
  if (context_ == nullptr) {
    return absl::UnavailableError("redis: cannot allocate a connection");
  }
  if (context_->err != 0) {
    return Drop(absl::StrCat("connecting to ", host_, ":", port_));
  }
  ++connects_;
  return absl::OkStatus();
}

absl::Status Connection::Drop(std::string_view what) {
  std::string reason = context_ != nullptr && context_->err != 0
                           ? std::string(context_->errstr)
                           : std::string("no reply");
  if (context_ != nullptr) redisFree(context_);
  context_ = nullptr;
  return absl::UnavailableError(absl::StrCat(
      "redis ", absl::string_view(what.data(), what.size()), ": ", reason));
}

absl::StatusOr<Reply> Connection::Command(const std::vector<std::string>& argv,
                                          absl::Duration extra_wait) {
  if (context_ == nullptr) {
    if (absl::Status s = Connect(); !s.ok()) return s;
  }
  redisSetTimeout(context_, AsTimeval(timeout_ + extra_wait));
  std::vector<const char*> args;
  std::vector<size_t> lengths;
  for (const std::string& arg : argv) {
    args.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  std::optional<brokers::NoSigpipe> no_sigpipe;
  if (!let_sigpipe_through_) no_sigpipe.emplace();
  Reply reply(static_cast<redisReply*>(redisCommandArgv(
      context_, static_cast<int>(args.size()), args.data(), lengths.data())));
  no_sigpipe.reset();
  if (reply == nullptr) return Drop(argv.empty() ? "" : argv[0]);
  if (reply->type == REDIS_REPLY_ERROR) {
    std::string text(reply->str, reply->len);
    std::string message = absl::StrCat("redis ", argv[0], ": ", text);
    if (absl::StartsWith(text, "LOADING") || absl::StartsWith(text, "BUSY ") ||
        absl::StartsWith(text, "TRYAGAIN")) {
      return absl::UnavailableError(message);
    }
    return absl::FailedPreconditionError(message);
  }
  return reply;
}

}  // namespace idem::redis
