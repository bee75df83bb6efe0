// The idem peer (bench/peers/idem_peer.h).

#include "bench/peers/idem_peer.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "bench/peers/scratch.h"
#include "bench/peers/stream.h"
#include "examples/ledger.h"
#include "idem/engine.h"
#include "util/directory.h"

namespace idem::peers {
namespace {

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
    absl::StatusOr<std::vector<Result>> results = engine_->ProcessBatch(
        messages_, [this, batch](const Message& m, Txn& txn) {
          return ApplyPayment(batch, m, txn);
        });
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
  // The handler: the payment's amount added to its account's balance,
  // stored as 8 bytes under the account's name, with no result: what the
  // RocksDB loop stores. Like every other peer it takes the account and
  // amount the stream parsed up front (StreamMessage), not the payload:
  // parsing and formatting them per delivery is work the others skip.
  // `m` is an element of messages_, made from the same index of `batch`.
  absl::Status ApplyPayment(absl::Span<const StreamMessage* const> batch,
                            const Message& m, Txn& txn) const {
    const std::less<const Message*> before;
    if (before(&m, messages_.data()) ||
        !before(&m, messages_.data() + messages_.size())) {
      return absl::InternalError(
          "the handler was given a message outside the batch");
    }
    const StreamMessage& delivery = *batch[&m - messages_.data()];
    absl::StatusOr<std::optional<std::string>> current =
        txn.Get(delivery.account);
    if (!current.ok()) return current.status();
    const int64_t balance =
        (current->has_value() ? DecodeBalance(**current) : 0) +
        delivery.payment.amount;
    txn.Put(delivery.account, EncodeBalance(balance));
    return absl::OkStatus();
  }

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
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(path_, options);
    if (!engine.ok()) return engine.status();
    engine_ = std::move(*engine);
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<Client>> NewClient() override {
    return std::unique_ptr<Client>(std::make_unique<IdemClient>(
        engine_.get(), mode_ == IdemMode::kBufferedWait));
  }

  absl::StatusOr<FinalState> Finish(int accounts) override {
    FinalState final;
    int64_t sum = 0;
    for (int i = 0; i < accounts; ++i) {
      absl::StatusOr<std::optional<std::string>> v =
          engine_->GetState(examples::AccountName(i));
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
    final.disk_bytes = util::DirectoryBytes(path_);
    engine_.reset();
    util::RemoveTree(path_);
    return final;
  }

 private:
  const std::string scratch_;
  const IdemMode mode_;
  std::string path_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace

std::unique_ptr<Target> NewIdemTarget(std::string scratch, IdemMode mode) {
  return std::make_unique<IdemTarget>(std::move(scratch), mode);
}

}  // namespace idem::peers
