// The targets of each layout (bench/idem_bench/targets.h): the engine, and
// RocksDB opened directly with the engine's schema.

#include "bench/idem_bench/targets.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "bench/idem_bench/layout_options.h"
#include "engine/coding.h"
#include "engine/commit_batch.h"
#include "engine/latency_histogram.h"
#include "engine/record.h"
#include "engine/store.h"
#include "idem/engine.h"
#include "rocksdb/db.h"
#include "rocksdb/write_batch.h"

namespace idem::bench {
namespace {

// The state key a message's handler writes: one of `state_keys` keys, chosen
// by the ID's hash, so every layout writes the same keys.
std::string StateKey(std::string_view id, int64_t state_keys) {
  const DedupeKey key = HashMessageId(id);
  const uint64_t h = GetBigEndian64(key.data());
  return absl::StrCat("state/", h % static_cast<uint64_t>(state_keys));
}

// ---- kEngine ----

class EngineTarget : public Target {
 public:
  EngineTarget(std::unique_ptr<Engine> engine, const TargetOptions& options)
      : options_(options),
        engine_(std::move(engine)),
        state_value_(static_cast<size_t>(options.state_bytes), 's'),
        emit_value_(static_cast<size_t>(options.emit_bytes), 'e') {}

  absl::StatusOr<BatchOutcome> ProcessBatch(
      absl::Span<const Delivery> batch) override {
    std::vector<Message> messages;
    messages.reserve(batch.size());
    for (const Delivery& d : batch) {
      // The ID as the payload: what Options::detect_conflicts hashes.
      Message m{.id = d.id, .payload = d.id};
      if (d.offset >= 0) {
        m.source = kBenchTopic;
        m.partition = d.partition;
        m.offset = d.offset;
      }
      messages.push_back(m);
    }
    auto handler = [this](const Message& m, Txn& txn) {
      if (options_.state_bytes > 0) {
        txn.Put(StateKey(m.id, options_.state_keys), state_value_);
      }
      for (int i = 0; i < options_.emit; ++i) {
        txn.Emit(kEmitDestination, m.id, emit_value_);
      }
      return absl::OkStatus();
    };
    absl::StatusOr<std::vector<Result>> results =
        engine_->ProcessBatch(messages, handler);
    if (!results.ok()) return results.status();
    BatchOutcome outcome;
    uint64_t sequence = 0;
    for (size_t i = 0; i < results->size(); ++i) {
      const Result& r = (*results)[i];
      if (r.outcome == Outcome::kFailed) {
        return absl::InternalError(
            absl::StrCat("a message failed: ", r.error.ToString()));
      }
      const bool duplicate = r.outcome == Outcome::kDuplicate;
      (duplicate ? outcome.duplicates : outcome.processed)++;
      if (duplicate && !batch[i].expect_duplicate) ++outcome.false_duplicates;
      if (!duplicate && batch[i].expect_duplicate) ++outcome.missed_duplicates;
      sequence = std::max(sequence, r.sequence);
    }
    if (options_.durability == Durability::kBuffered && options_.ack_durable &&
        sequence > 0) {
      if (absl::Status s = engine_->WaitDurable(sequence); !s.ok()) return s;
    }
    if (options_.emit > 0) {
      if (absl::Status s = AfterCommit(outcome.processed); !s.ok()) return s;
    }
    return outcome;
  }

  absl::StatusOr<TargetCounters> Counters() override {
    absl::StatusOr<Stats> stats = engine_->GetStats();
    if (!stats.ok()) return stats.status();
    TargetCounters c;
    c.user_bytes = stats->user_bytes;
    c.wal_bytes = stats->wal_bytes;
    c.flush_bytes = stats->flush_bytes;
    c.compaction_bytes = stats->compaction_bytes;
    c.expired_dropped = stats->expired_dropped;
    c.expired_dropped_whole = stats->expiry_bucket_records_dropped;
    c.live_sst_bytes = stats->live_sst_bytes;
    c.estimated_records = stats->estimated_live_records;
    return c;
  }

  // From idem::Stats: the engine's own RocksDB figures, no replica needed.
  std::optional<InternalFigures> Internals() override {
    absl::StatusOr<Stats> stats = engine_->GetStats();
    if (!stats.ok()) return std::nullopt;
    InternalFigures f;
    if (stats->dedupe_compaction_write_amplification > 0) {
      f.rocksdb_sum_wamp = stats->dedupe_compaction_write_amplification;
    }
    f.memtable_bytes = stats->memtable_bytes;
    f.table_readers_bytes = stats->table_reader_bytes;
    f.block_cache_usage = stats->block_cache_bytes;
    return f;
  }

  absl::StatusOr<std::optional<OutboxFigures>> Outbox() override {
    absl::StatusOr<Stats> stats = engine_->GetStats();
    if (!stats.ok()) return stats.status();
    OutboxFigures f;
    f.emitted = stats->outbox_emitted;
    f.acknowledged = stats->outbox_acknowledged;
    f.pending = stats->outbox_pending;
    absl::MutexLock lock(&ack_mu_);
    f.ack_latency = ack_latency_.Summary();
    return f;
  }

  absl::Status Close() override {
    engine_.reset();
    return absl::OkStatus();
  }

 private:
  // Counts the entries a commit of `processed` messages emitted and, every
  // outbox_ack_every batches, acknowledges every entry committed so far.
  // The store is fresh and positions are consecutive from 1, so the entries
  // of the batches counted are positions 1 to `committed`; a count taken
  // after this batch's commit never exceeds the last position issued, with
  // any number of threads.
  absl::Status AfterCommit(int processed) {
    const uint64_t emitted =
        static_cast<uint64_t>(processed) * static_cast<uint64_t>(options_.emit);
    const uint64_t committed =
        committed_emits_.fetch_add(emitted, std::memory_order_relaxed) +
        emitted;
    const int64_t batch = batches_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (options_.outbox_ack_every == 0 ||
        batch % options_.outbox_ack_every != 0 || committed == 0) {
      return absl::OkStatus();
    }
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status s = engine_->AckOutbox(committed);
    const double micros = std::chrono::duration<double, std::micro>(
                              std::chrono::steady_clock::now() - t0)
                              .count();
    absl::MutexLock lock(&ack_mu_);
    ack_latency_.Add(micros);
    return s;
  }

  const TargetOptions options_;
  std::unique_ptr<Engine> engine_;
  const std::string state_value_;
  const std::string emit_value_;
  // The outbox: entries of the commits counted so far, batches committed,
  // and the acknowledgements' latencies.
  std::atomic<uint64_t> committed_emits_{0};
  std::atomic<int64_t> batches_{0};
  absl::Mutex ack_mu_;
  LatencyHistogram ack_latency_ ABSL_GUARDED_BY(ack_mu_);
};

// ---- RocksDB layouts ----

class RawTarget : public Target {
 public:
  RawTarget(const TargetOptions& options, RawParts parts)
      : options_(options),
        parts_(std::move(parts)),
        record_options_(EngineOptions(options)),
        fifo_slack_us_(FifoSlackSeconds(options.window) * 1000000),
        state_value_(static_cast<size_t>(options.state_bytes), 's') {}

  ~RawTarget() override { Close().IgnoreError(); }

  absl::Status Open(const std::string& path) {
    absl::MutexLock lock(&mu_);
    rocksdb::DBOptions db_options =
        RawDbOptions(options_, options_.env, parts_);
    db_options.create_if_missing = true;
    db_options.create_missing_column_families = true;
    const std::vector<std::string> names = {
        rocksdb::kDefaultColumnFamilyName, kStateColumnFamily,
        kOffsetsColumnFamily, kDedupeColumnFamily};
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (const std::string& name : names) {
      descriptors.emplace_back(name, RawOptionsFor(name, options_, parts_));
    }
    rocksdb::Status s =
        rocksdb::DB::Open(db_options, path, descriptors, &handles_, &db_);
    if (!s.ok()) return FromRocks(s, "opening " + path);
    state_ = handles_[1];
    offsets_ = handles_[2];
    dedupe_ = handles_[3];
    last_flush_us_ = TimeToMicros(options_.clock->Now());
    return absl::OkStatus();
  }

  absl::StatusOr<BatchOutcome> ProcessBatch(
      absl::Span<const Delivery> batch) override {
    BatchOutcome outcome;
    rocksdb::DB* db = nullptr;  // for the sync, outside the lock
    {
      absl::MutexLock lock(&mu_);
      if (db_ == nullptr) return absl::FailedPreconditionError("closed");
      const int64_t now_us = TimeToMicros(options_.clock->Now());
      if (absl::Status s = MaintainLocked(now_us); !s.ok()) return s;

      // The engine's commit path (engine/commit_batch.h): one lookup of
      // the batch's keys and stored offsets, then CommitBuilder's sorted
      // WriteBatch. The handler's only work is the state write.
      const size_t n = batch.size();
      std::vector<Message> messages(n);
      std::vector<DedupeKey> keys(n);
      for (size_t i = 0; i < n; ++i) {
        messages[i].id = batch[i].id;
        if (batch[i].offset >= 0) {
          messages[i].source = kBenchTopic;
          messages[i].partition = batch[i].partition;
          messages[i].offset = batch[i].offset;
        }
        keys[i] = HashMessageId(batch[i].id);
      }
      auto live =
          LookupLive(db_, absl::MakeConstSpan(&dedupe_, 1), keys, now_us);
      if (!live.ok()) return live.status();
      absl::StatusOr<StoredOffsets> stored =
          ReadStoredOffsets(db_, offsets_, messages);
      if (!stored.ok()) return stored.status();

      CommitBuilder commit(state_, offsets_);
      absl::flat_hash_set<DedupeKey> in_batch;
      for (size_t i = 0; i < n; ++i) {
        const bool duplicate =
            (*live)[i].has_value() || in_batch.contains(keys[i]);
        if (duplicate) {
          ++outcome.duplicates;
          if (!batch[i].expect_duplicate) ++outcome.false_duplicates;
        } else {
          ++outcome.processed;
          if (batch[i].expect_duplicate) ++outcome.missed_duplicates;
          in_batch.insert(keys[i]);
          if (options_.state_bytes > 0) {
            commit.state().Put(StateKey(batch[i].id, options_.state_keys),
                               state_value_);
          }
          commit.AddRecord(
              dedupe_, keys[i],
              EncodeDedupeRecord(
                  RecordExpiry(record_options_, messages[i], now_us), ""));
        }
        commit.AddOutcome(
            messages[i], duplicate ? Outcome::kDuplicate : Outcome::kProcessed);
      }
      rocksdb::WriteBatch wb;
      if (absl::Status s = commit.Build(*stored, OutboxCursor{}, wb, wb);
          !s.ok()) {
        return s;
      }
      rocksdb::WriteOptions write;
      write.sync = options_.durability == Durability::kSync;
      rocksdb::Status s = db_->Write(write, &wb);
      if (!s.ok()) return FromRocks(s, "committing");
      user_bytes_.fetch_add(wb.GetDataSize(), std::memory_order_relaxed);
      db = db_;
    }
    if (options_.durability == Durability::kBuffered && options_.ack_durable) {
      rocksdb::Status s = db->SyncWAL();
      if (!s.ok()) return FromRocks(s, "syncing the WAL");
    }
    return outcome;
  }

  absl::StatusOr<TargetCounters> Counters() override {
    absl::MutexLock lock(&mu_);
    if (db_ == nullptr) return absl::FailedPreconditionError("closed");
    TargetCounters c;
    const rocksdb::Statistics& t = *parts_.statistics;
    c.user_bytes = user_bytes_.load(std::memory_order_relaxed);
    c.wal_bytes = t.getTickerCount(rocksdb::WAL_FILE_BYTES);
    c.flush_bytes = t.getTickerCount(rocksdb::FLUSH_WRITE_BYTES);
    c.compaction_bytes = t.getTickerCount(rocksdb::COMPACT_WRITE_BYTES);
    c.expired_dropped = parts_.filter->dropped();
    if (parts_.fifo_drops != nullptr) {
      c.expired_dropped_whole = parts_.fifo_drops->dropped();
    }
    db_->GetAggregatedIntProperty(rocksdb::DB::Properties::kLiveSstFilesSize,
                                  &c.live_sst_bytes);
    db_->GetIntProperty(dedupe_, rocksdb::DB::Properties::kEstimateNumKeys,
                        &c.estimated_records);
    return c;
  }

  absl::StatusOr<std::optional<OutboxFigures>> Outbox() override {
    return std::nullopt;  // no outbox in these layouts
  }

  std::optional<InternalFigures> Internals() override {
    absl::MutexLock lock(&mu_);
    if (db_ == nullptr) return std::nullopt;
    InternalFigures f;
    db_->GetProperty(dedupe_, rocksdb::DB::Properties::kStats,
                     &f.rocksdb_stats);
    f.rocksdb_sum_wamp = ParseSumWriteAmp(f.rocksdb_stats);
    db_->GetAggregatedIntProperty(rocksdb::DB::Properties::kCurSizeAllMemTables,
                                  &f.memtable_bytes);
    db_->GetAggregatedIntProperty(
        rocksdb::DB::Properties::kEstimateTableReadersMem,
        &f.table_readers_bytes);
    db_->GetIntProperty(rocksdb::DB::Properties::kBlockCacheUsage,
                        &f.block_cache_usage);
    return f;
  }

  absl::Status Close() override {
    absl::MutexLock lock(&mu_);
    if (db_ == nullptr) return absl::OkStatus();
    for (rocksdb::ColumnFamilyHandle* h : handles_) {
      db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    }
    handles_.clear();
    rocksdb::Status s = db_->Close();
    delete db_;
    db_ = nullptr;
    return FromRocks(s, "closing");
  }

 private:
  // FIFO: flush at least once per slack.
  absl::Status MaintainLocked(int64_t now_us)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (options_.layout == Layout::kFifo &&
        now_us - last_flush_us_ >= fifo_slack_us_) {
      rocksdb::FlushOptions flush;
      flush.wait = false;
      flush.allow_write_stall = true;
      rocksdb::Status s = db_->Flush(flush, dedupe_);
      if (!s.ok()) return FromRocks(s, "flushing");
      last_flush_us_ = now_us;
    }
    return absl::OkStatus();
  }

  const TargetOptions options_;
  const RawParts parts_;
  // The engine's Options for this layout's window (record expiry).
  const Options record_options_;
  const int64_t fifo_slack_us_;
  const std::string state_value_;
  std::atomic<uint64_t> user_bytes_{0};

  absl::Mutex mu_;
  rocksdb::DB* db_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_ ABSL_GUARDED_BY(mu_);
  rocksdb::ColumnFamilyHandle* state_ ABSL_GUARDED_BY(mu_) = nullptr;
  rocksdb::ColumnFamilyHandle* offsets_ ABSL_GUARDED_BY(mu_) = nullptr;
  rocksdb::ColumnFamilyHandle* dedupe_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t last_flush_us_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

const char* LayoutName(Layout layout) {
  switch (layout) {
    case Layout::kEngine:
      return "engine";
    case Layout::kLeveled:
      return "leveled";
    case Layout::kUniversal:
      return "universal";
    case Layout::kFifo:
      return "fifo";
  }
  return "?";
}

absl::StatusOr<Layout> ParseLayout(std::string_view name) {
  for (Layout l :
       {Layout::kEngine, Layout::kLeveled, Layout::kUniversal, Layout::kFifo}) {
    if (name == LayoutName(l)) return l;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown layout '", std::string(name),
                   "' (expected engine, leveled, universal or fifo)"));
}

absl::StatusOr<std::unique_ptr<Target>> OpenTarget(
    const std::string& path, const TargetOptions& options) {
  if (options.clock == nullptr || options.env == nullptr) {
    return absl::InvalidArgumentError("TargetOptions needs a clock and an env");
  }
  if (options.emit > 0 && options.layout != Layout::kEngine) {
    return absl::InvalidArgumentError(
        absl::StrCat("--emit needs --layout=engine: the ",
                     LayoutName(options.layout), " layout has no outbox"));
  }
  if (options.layout == Layout::kEngine) {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(path, EngineOptions(options));
    if (!engine.ok()) return engine.status();
    return std::unique_ptr<Target>(
        new EngineTarget(std::move(*engine), options));
  }
  auto target = std::make_unique<RawTarget>(options, MakeRawParts(options));
  if (absl::Status s = target->Open(path); !s.ok()) return s;
  return std::unique_ptr<Target>(std::move(target));
}

std::optional<double> ParseSumWriteAmp(std::string_view text) {
  // Header: "Level Files Size Score Read(GB) ... W-Amp ..."; in data rows
  // the Size column is two tokens ("1.22 MB").
  int wamp_column = -1;
  int size_column = -1;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    std::vector<absl::string_view> tokens =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (tokens.empty()) continue;
    if (tokens[0] == "Level") {
      wamp_column = size_column = -1;
      for (size_t i = 0; i < tokens.size(); ++i) {
        if (tokens[i] == "W-Amp") wamp_column = static_cast<int>(i);
        if (absl::StartsWith(tokens[i], "Size")) {
          size_column = static_cast<int>(i);
        }
      }
      continue;
    }
    if (tokens[0] == "Sum" && wamp_column >= 0) {
      const size_t index = static_cast<size_t>(
          wamp_column +
          (size_column >= 0 && size_column < wamp_column ? 1 : 0));
      double value = 0;
      if (index < tokens.size() && absl::SimpleAtod(tokens[index], &value)) {
        return value;
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace idem::bench
