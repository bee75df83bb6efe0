#include "idem/nats/consumer.h"

#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "brokers/loop_consumer.h"
#include "brokers/option_checks.h"
#include "nats/consumer_hooks.h"
#include "nats/jetstream_broker.h"

namespace idem::nats {
namespace {

// At most one way to log in; an NKey needs both its halves; the files
// named are readable. The message names the fields.
absl::Status CheckAuthentication(const ConsumerOptions& options) {
  const bool nkey = !options.nkey.empty() || !options.nkey_seed_file.empty();
  const int ways = !options.user.empty() + !options.token.empty() + nkey +
                   !options.credentials_file.empty();
  if (ways > 1) {
    return absl::InvalidArgumentError(
        "user, token, nkey and credentials_file are exclusive");
  }
  if (nkey && (options.nkey.empty() || options.nkey_seed_file.empty())) {
    return absl::InvalidArgumentError("nkey and nkey_seed_file go together");
  }
  if (nkey && options.nkey[0] != 'U') {
    return absl::InvalidArgumentError(
        "nkey must be a user's public key (starting with 'U')");
  }
  for (const std::string* file :
       {&options.nkey_seed_file, &options.credentials_file}) {
    if (file->empty()) continue;
    if (std::FILE* f = std::fopen(file->c_str(), "r"); f != nullptr) {
      std::fclose(f);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(file == &options.nkey_seed_file ? "nkey_seed_file"
                                                       : "credentials_file",
                       " cannot be read: ", *file));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateOptions(const ConsumerOptions& options) {
  auto invalid = [](std::string_view what) {
    return brokers::InvalidOption("nats", what);
  };
  auto positive = [](absl::Duration d) {
    return d > absl::ZeroDuration() && d != absl::InfiniteDuration();
  };
  if (options.url.empty()) return invalid("url is required");
  if (absl::Status s = CheckAuthentication(options); !s.ok()) {
    return invalid(std::string(s.message()));
  }
  if (!options.tls_ca_file.empty() && !options.tls) {
    return invalid("tls_ca_file needs tls");
  }
  if (options.stream.empty()) return invalid("stream is required");
  if (absl::Status s = CheckStreamName(options.stream); !s.ok()) {
    return invalid(absl::StrCat("stream ", s.message()));
  }
  if (options.subject.empty()) return invalid("subject is required");
  if (options.durable.empty()) return invalid("durable is required");
  if (absl::Status s = CheckStreamName(options.durable); !s.ok()) {
    return invalid(absl::StrCat("durable ", s.message()));
  }
  if (!options.delivery.dead_letter_destination.empty()) {
    if (absl::Status s = CheckSubject(options.delivery.dead_letter_destination);
        !s.ok()) {
      return invalid(
          absl::StrCat("delivery.dead_letter_destination: ", s.message()));
    }
  }
  if (!positive(options.duplicate_window)) {
    return invalid("duplicate_window must be > 0 and finite");
  }
  if (!positive(options.ack_wait)) {
    return invalid("ack_wait must be > 0 and finite");
  }
  if (options.max_deliver < 0 || options.max_deliver == 1) {
    return invalid("max_deliver must be 0 (no limit) or at least 2");
  }
  if (options.max_deliver > 0 &&
      options.max_deliver <= static_cast<int64_t>(options.backoff.size())) {
    return invalid("max_deliver must be more than backoff.size()");
  }
  for (absl::Duration d : options.backoff) {
    if (!positive(d)) return invalid("backoff entries must be > 0 and finite");
  }
  if (const std::string problem = brokers::ConnectionTimesProblem(options);
      !problem.empty()) {
    return invalid(problem);
  }
  return absl::OkStatus();
}

class ConsumerImpl
    : public brokers::LoopConsumer<Consumer, JetStreamBroker, ConsumerOptions> {
 public:
  using LoopConsumer::LoopConsumer;

  // Binds the durable consumer, created from the engine's offset + 1 when
  // it has one for the stream.
  absl::Status Start() {
    absl::StatusOr<std::optional<int64_t>> offset =
        engine_->CommittedOffset(options_.stream, 0);
    if (!offset.ok()) return offset.status();
    std::optional<uint64_t> start;
    if (offset->has_value()) start = static_cast<uint64_t>(**offset) + 1;
    return broker_.Start(start);
  }

  void set_hooks(const NatsHooks& hooks) {
    broker_.set_keep_prefetched_on_close(hooks.keep_prefetched_on_close);
    if (hooks.no_in_progress_acks) broker_.StopInProgress();
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Consumer>> CreateConsumerWithHooks(
    Engine* engine, const ConsumerOptions& options,
    const brokers::LoopHooks& hooks, const NatsHooks& nats_hooks) {
  return brokers::CreateLoopConsumer<Consumer, ConsumerImpl>(
      engine, options, hooks, nats_hooks, ValidateOptions);
}

absl::StatusOr<std::unique_ptr<Consumer>> Consumer::Create(
    Engine* engine, const ConsumerOptions& options) {
  return CreateConsumerWithHooks(engine, options, {});
}

}  // namespace idem::nats
