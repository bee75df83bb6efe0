// LoopConsumer is what every broker adapter's Consumer (idem::redis::Consumer,
// idem::nats::Consumer, ...) shares on top of its brokers::Broker: PollBatch
// through the DeliveryLoop, Run until Stop (retrying after a lost
// connection), Close. An adapter derives from it, naming its public
// interface (a BrokerConsumer, idem/brokers/consumer.h), its Broker and its
// options (which hold `delivery` and `reconnect_backoff`), and adds Start()
// and set_hooks(); stats() adds the broker's counters to the loop's.
// CreateLoopConsumer validates, constructs and starts one. Not thread-safe, as
// the interfaces say; Stop may be called from any thread.

#ifndef IDEM_BROKERS_LOOP_CONSUMER_H_
#define IDEM_BROKERS_LOOP_CONSUMER_H_

#include <atomic>
#include <memory>
#include <type_traits>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "brokers/run_until_stopped.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/engine.h"

namespace idem::brokers {

// REQUIRES: BrokerType(const Options&) keeps a reference to the options it
// is given, and has Close() (idempotent) and CountInto(Stats*) const, which
// sets the adapter's own fields of its Stats.
template <typename Interface, typename BrokerType, typename Options>
class LoopConsumer : public Interface {
 public:
  // The adapter's ConsumerStats (a LoopStats), as Interface::stats() has it.
  using Stats =
      std::remove_cvref_t<decltype(std::declval<const Interface&>().stats())>;

  LoopConsumer(Engine* engine, const Options& options, const LoopHooks& hooks)
      : engine_(engine),
        options_(options),
        broker_(options_),
        loop_(engine, &broker_, options_.delivery, hooks) {}
  ~LoopConsumer() override { broker_.Close(); }

  absl::StatusOr<BatchReport> PollBatch(Handler handler) override {
    if (closed_) return absl::FailedPreconditionError("consumer is closed");
    return loop_.PollBatch(handler);
  }

  absl::Status Run(Handler handler) override {
    return RunUntilStopped([&] { return PollBatch(handler); }, stop_,
                           options_.reconnect_backoff);
  }

  void Stop() override { stop_.store(true, std::memory_order_relaxed); }

  absl::Status Close() override {
    closed_ = true;
    broker_.Close();
    return absl::OkStatus();
  }

  // The loop's totals, then the broker's own counters.
  Stats stats() const override {
    Stats stats;
    static_cast<LoopStats&>(stats) = loop_.stats();
    broker_.CountInto(&stats);
    return stats;
  }

 protected:
  Engine* const engine_;
  const Options options_;
  BrokerType broker_;
  DeliveryLoop loop_;

 private:
  std::atomic<bool> stop_{false};
  bool closed_ = false;
};

// Validates `options` with `validate` (then the loop's options), constructs
// an Impl(engine, options, hooks), starts it and, once its Start() is OK,
// gives it the adapter's own test hooks (Impl::set_hooks(adapter_hooks)).
template <typename Interface, typename Impl, typename Options,
          typename AdapterHooks, typename Validate>
absl::StatusOr<std::unique_ptr<Interface>> CreateLoopConsumer(
    Engine* engine, const Options& options, const LoopHooks& hooks,
    const AdapterHooks& adapter_hooks, Validate validate) {
  if (engine == nullptr) return absl::InvalidArgumentError("engine is null");
  if (engine->shard_count() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the engine has ", engine->shard_count(),
        " shards (Options::shards); a broker consumer relays one outbox, "
        "so it takes an engine with one shard"));
  }
  if (absl::Status s = validate(options); !s.ok()) return s;
  if (absl::Status s = DeliveryLoop::Validate(options.delivery); !s.ok()) {
    return s;
  }
  auto consumer = std::make_unique<Impl>(engine, options, hooks);
  if (absl::Status s = consumer->Start(); !s.ok()) return s;
  consumer->set_hooks(adapter_hooks);
  return std::unique_ptr<Interface>(std::move(consumer));
}

}  // namespace idem::brokers

#endif  // IDEM_BROKERS_LOOP_CONSUMER_H_
