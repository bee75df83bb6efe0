// The C API's engine calls (include/idem/c.h): open and close, processing,
// reads and maintenance, stats and the outbox.

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "c/c_internal.h"

namespace idem::c_api {
namespace {

idem_result MakeResult(idem::Result result) {
  idem_result r;
  r.error_message = std::string(result.error.message());
  r.result = std::move(result);
  return r;
}

// The index in `views` of the message the engine hands a handler: the
// engine passes references to the elements of the span it was given.
size_t IndexOf(const std::vector<idem::Message>& views,
               const idem::Message& m) {
  if (&m >= views.data() && &m < views.data() + views.size()) {
    return static_cast<size_t>(&m - views.data());
  }
  for (size_t i = 0; i < views.size(); ++i) {
    if (views[i].id.data() == m.id.data()) return i;
  }
  return views.size();
}

// Checks a process call's arguments other than the engine.
idem_code CheckHandlerArgs(const char* what, idem_handler handler,
                           const void* out) {
  if (handler == nullptr) {
    return InvalidArgument(std::string(what) + ": handler is NULL");
  }
  if (out == nullptr) {
    return InvalidArgument(std::string(what) + ": result pointer is NULL");
  }
  return IDEM_OK;
}

void FillStats(const idem::Stats& s, idem_stats* out) {
  out->processed = s.processed;
  out->duplicates = s.duplicates;
  out->failed = s.failed;
  out->conflicts = s.conflicts;
  out->handler_reruns = s.handler_reruns;
  out->late_duplicates = s.late_duplicates;
  out->outbox_pending = s.outbox_pending;
  out->outbox_emitted = s.outbox_emitted;
  out->outbox_acknowledged = s.outbox_acknowledged;
  out->expired_dropped = s.expired_dropped;
  out->user_bytes = s.user_bytes;
  out->wal_bytes = s.wal_bytes;
  out->flush_bytes = s.flush_bytes;
  out->compaction_bytes = s.compaction_bytes;
  out->write_amplification = s.write_amplification;
  out->live_sst_bytes = s.live_sst_bytes;
  out->estimated_live_records = s.estimated_live_records;
  out->memtable_bytes = s.memtable_bytes;
  out->block_cache_bytes = s.block_cache_bytes;
  out->commits = s.commit_durations.count;
  out->commit_seconds = s.commit_durations.sum_seconds;
  out->timers_fired = s.timers_fired;
  out->timers_dead_lettered = s.timers_dead_lettered;
  out->timer_failures = s.timer_failures;
}

const idem::OutboxEntry* EntryAt(const idem_outbox_batch* batch, size_t i) {
  if (batch == nullptr || i >= batch->entries.size()) return nullptr;
  return &batch->entries[i];
}

}  // namespace
}  // namespace idem::c_api

using idem::c_api::ActiveCall;
using idem::c_api::CheckBytes;
using idem::c_api::Fail;
using idem::c_api::Guarded;
using idem::c_api::InvalidArgument;

// Declared extern "C" in idem/c.h, so defined with C linkage.

idem_code idem_engine_open(const char* path, const idem_options* options,
                           idem_engine** engine) {
  if (engine == nullptr) return InvalidArgument("engine_open: engine is NULL");
  *engine = nullptr;
  if (path == nullptr) return InvalidArgument("engine_open: path is NULL");
  return Guarded("engine_open", [&] {
    const idem::Options opts =
        options == nullptr ? idem::Options() : options->options;
    absl::StatusOr<std::unique_ptr<idem::Engine>> opened =
        idem::Engine::Open(path, opts);
    if (!opened.ok()) return Fail(opened.status());
    auto handle = std::make_unique<idem_engine>();
    {
      absl::MutexLock lock(&handle->mu);
      handle->engine = std::move(*opened);
    }
    *engine = handle.release();
    return IDEM_OK;
  });
}

idem_code idem_engine_close(idem_engine* engine) {
  if (engine == nullptr) return InvalidArgument("engine_close: engine is NULL");
  if (idem::c_api::InHandlerOf(engine)) {
    return Fail(absl::FailedPreconditionError(
        "engine_close: called from inside one of the engine's handlers"));
  }
  return Guarded("engine_close", [&] {
    std::unique_ptr<idem::Engine> closing;
    {
      absl::MutexLock lock(&engine->mu);
      if (engine->closed) return IDEM_OK;
      engine->closed = true;
      engine->mu.Await(absl::Condition(
          +[](int* active) { return *active == 0; }, &engine->active));
      closing = std::move(engine->engine);
    }
    closing.reset();  // syncs the log and releases the store
    return IDEM_OK;
  });
}

void idem_engine_free(idem_engine* engine) {
  if (engine == nullptr) return;
  idem_engine_close(engine);
  delete engine;
}

idem_code idem_engine_process(idem_engine* engine, const idem_message* message,
                              idem_handler handler, void* user,
                              idem_result** result) {
  if (result != nullptr) *result = nullptr;
  if (idem_code c =
          idem::c_api::CheckHandlerArgs("engine_process", handler, result);
      c != IDEM_OK) {
    return c;
  }
  if (message == nullptr) {
    return InvalidArgument("engine_process: message is NULL");
  }
  ActiveCall call(engine);
  if (idem_code c = call.Acquire("engine_process"); c != IDEM_OK) return c;
  return Guarded("engine_process", [&] {
    absl::StatusOr<idem::Result> processed = call.engine().Process(
        message->View(), [&](const idem::Message&, idem::Txn& txn) {
          return idem::c_api::RunCHandler(engine, handler, user, message, txn);
        });
    if (!processed.ok()) return Fail(processed.status());
    *result = new idem_result(idem::c_api::MakeResult(std::move(*processed)));
    return IDEM_OK;
  });
}

idem_code idem_engine_process_batch(idem_engine* engine,
                                    const idem_message* const* messages,
                                    size_t count, idem_handler handler,
                                    void* user, idem_result_list** results) {
  if (results != nullptr) *results = nullptr;
  if (idem_code c = idem::c_api::CheckHandlerArgs("engine_process_batch",
                                                  handler, results);
      c != IDEM_OK) {
    return c;
  }
  if (messages == nullptr && count != 0) {
    return InvalidArgument("engine_process_batch: messages is NULL");
  }
  ActiveCall call(engine);
  if (idem_code c = call.Acquire("engine_process_batch"); c != IDEM_OK) {
    return c;
  }
  return Guarded("engine_process_batch", [&] {
    std::vector<idem::Message> views;
    views.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      if (messages[i] == nullptr) {
        return InvalidArgument(
            absl::StrCat("engine_process_batch: message ", i, " is NULL"));
      }
      views.push_back(messages[i]->View());
    }
    absl::StatusOr<std::vector<idem::Result>> processed =
        call.engine().ProcessBatch(
            views, [&](const idem::Message& m, idem::Txn& txn) {
              const size_t i = idem::c_api::IndexOf(views, m);
              if (i == views.size()) {
                return absl::InternalError("handler given an unknown message");
              }
              return idem::c_api::RunCHandler(engine, handler, user,
                                              messages[i], txn);
            });
    if (!processed.ok()) return Fail(processed.status());
    auto list = std::make_unique<idem_result_list>();
    list->results.reserve(processed->size());
    for (idem::Result& r : *processed) {
      list->results.push_back(idem::c_api::MakeResult(std::move(r)));
    }
    *results = list.release();
    return IDEM_OK;
  });
}

void idem_result_free(idem_result* result) { delete result; }

void idem_result_list_free(idem_result_list* results) { delete results; }

size_t idem_result_list_size(const idem_result_list* results) {
  return results == nullptr ? 0 : results->results.size();
}

const idem_result* idem_result_list_get(const idem_result_list* results,
                                        size_t i) {
  if (results == nullptr || i >= results->results.size()) return nullptr;
  return &results->results[i];
}

idem_outcome idem_result_outcome(const idem_result* result) {
  if (result == nullptr) return IDEM_OUTCOME_FAILED;
  switch (result->result.outcome) {
    case idem::Outcome::kProcessed:
      return IDEM_OUTCOME_PROCESSED;
    case idem::Outcome::kDuplicate:
      return IDEM_OUTCOME_DUPLICATE;
    case idem::Outcome::kConflict:
      return IDEM_OUTCOME_CONFLICT;
    case idem::Outcome::kFailed:
      break;
  }
  return IDEM_OUTCOME_FAILED;
}

const char* idem_result_value(const idem_result* result, size_t* size) {
  return idem::c_api::ViewBytes(
      result == nullptr ? nullptr : &result->result.result, size);
}

idem_code idem_result_error_code(const idem_result* result) {
  return result == nullptr ? IDEM_OK
                           : idem::c_api::ToCode(result->result.error.code());
}

const char* idem_result_error_message(const idem_result* result) {
  return result == nullptr ? "" : result->error_message.c_str();
}

int idem_result_permanent(const idem_result* result) {
  return result != nullptr && result->result.permanent ? 1 : 0;
}

uint64_t idem_result_sequence(const idem_result* result) {
  return result == nullptr ? 0 : result->result.sequence;
}

int64_t idem_result_first_processed_at_us(const idem_result* result) {
  if (result == nullptr ||
      result->result.first_processed_at == absl::InfinitePast()) {
    return INT64_MIN;
  }
  return absl::ToUnixMicros(result->result.first_processed_at);
}

idem_code idem_engine_scan_state(idem_engine* engine, const void* begin,
                                 size_t begin_size, const void* end,
                                 size_t end_size, int reverse, size_t limit,
                                 idem_scan_visitor visit, void* user) {
  if (idem_code c = idem::c_api::CheckScan(begin, begin_size, end, end_size,
                                           visit, "engine_scan_state");
      c != IDEM_OK) {
    return c;
  }
  ActiveCall call(engine);
  if (idem_code c = call.Acquire("engine_scan_state"); c != IDEM_OK) return c;
  return Guarded("engine_scan_state", [&] {
    absl::Status s = idem::c_api::RunScan(
        [&](idem::ScanVisitor v, const idem::ScanOptions& options) {
          return call.engine().ScanState(idem::c_api::Bytes(begin, begin_size),
                                         idem::c_api::Bytes(end, end_size), v,
                                         options);
        },
        reverse, limit, visit, user);
    return s.ok() ? IDEM_OK : Fail(s);
  });
}

idem_code idem_engine_get_state(idem_engine* engine, const void* key,
                                size_t key_size, char** value,
                                size_t* value_size, int* found) {
  if (value == nullptr || value_size == nullptr || found == nullptr) {
    return InvalidArgument(
        "engine_get_state: value, value_size or found is "
        "NULL");
  }
  *value = nullptr;
  *value_size = 0;
  *found = 0;
  if (idem_code c = CheckBytes(key, key_size, "engine_get_state: key");
      c != IDEM_OK) {
    return c;
  }
  ActiveCall call(engine);
  if (idem_code c = call.Acquire("engine_get_state"); c != IDEM_OK) return c;
  return Guarded("engine_get_state", [&] {
    absl::StatusOr<std::optional<std::string>> got =
        call.engine().GetState(idem::c_api::Bytes(key, key_size));
    if (!got.ok()) return Fail(got.status());
    if (!got->has_value()) return IDEM_OK;
    const std::string& bytes = **got;
    char* copy = static_cast<char*>(std::malloc(bytes.size() + 1));
    if (copy == nullptr) {
      return Fail(
          absl::ResourceExhaustedError("engine_get_state: out of "
                                       "memory"));
    }
    std::memcpy(copy, bytes.data(), bytes.size());
    copy[bytes.size()] = '\0';
    *value = copy;
    *value_size = bytes.size();
    *found = 1;
    return IDEM_OK;
  });
}

idem_code idem_engine_seen(idem_engine* engine, const void* id, size_t size,
                           int* seen) {
  if (seen == nullptr) return InvalidArgument("engine_seen: seen is NULL");
  *seen = 0;
  if (idem_code c = CheckBytes(id, size, "engine_seen: id"); c != IDEM_OK) {
    return c;
  }
  ActiveCall call(engine);
  if (idem_code c = call.Acquire("engine_seen"); c != IDEM_OK) return c;
  return Guarded("engine_seen", [&] {
    absl::StatusOr<bool> got = call.engine().Seen(idem::c_api::Bytes(id, size));
    if (!got.ok()) return Fail(got.status());
    *seen = *got ? 1 : 0;
    return IDEM_OK;
  });
}

idem_code idem_engine_forget(idem_engine* engine, const void* id, size_t size) {
  if (idem_code c = CheckBytes(id, size, "engine_forget: id"); c != IDEM_OK) {
    return c;
  }
  ActiveCall call(engine);
  if (idem_code c = call.Acquire("engine_forget"); c != IDEM_OK) return c;
  return Guarded("engine_forget", [&] {
    return Fail(call.engine().Forget(idem::c_api::Bytes(id, size)));
  });
}

idem_code idem_engine_forget_in_partition(idem_engine* engine, const void* id,
                                          size_t size, const void* source,
                                          size_t source_size,
                                          int32_t partition) {
  if (idem_code c = CheckBytes(id, size, "engine_forget_in_partition: id");
      c != IDEM_OK) {
    return c;
  }
  if (idem_code c =
          CheckBytes(source, source_size, "engine_forget_in_partition: source");
      c != IDEM_OK) {
    return c;
  }
  ActiveCall call(engine);
  if (idem_code c = call.Acquire("engine_forget_in_partition"); c != IDEM_OK) {
    return c;
  }
  return Guarded("engine_forget_in_partition", [&] {
    return Fail(call.engine().Forget(idem::c_api::Bytes(id, size),
                                     idem::c_api::Bytes(source, source_size),
                                     partition));
  });
}

idem_code idem_engine_committed_offset(idem_engine* engine, const void* source,
                                       size_t source_size, int32_t partition,
                                       int64_t* offset, int* found) {
  if (offset == nullptr || found == nullptr) {
    return InvalidArgument("engine_committed_offset: offset or found is NULL");
  }
  *offset = -1;
  *found = 0;
  if (idem_code c =
          CheckBytes(source, source_size, "engine_committed_offset: source");
      c != IDEM_OK) {
    return c;
  }
  ActiveCall call(engine);
  if (idem_code c = call.Acquire("engine_committed_offset"); c != IDEM_OK) {
    return c;
  }
  return Guarded("engine_committed_offset", [&] {
    absl::StatusOr<std::optional<int64_t>> got = call.engine().CommittedOffset(
        idem::c_api::Bytes(source, source_size), partition);
    if (!got.ok()) return Fail(got.status());
    if (got->has_value()) {
      *offset = **got;
      *found = 1;
    }
    return IDEM_OK;
  });
}

idem_code idem_engine_wait_durable(idem_engine* engine, uint64_t sequence) {
  ActiveCall call(engine);
  if (idem_code c = call.Acquire("engine_wait_durable"); c != IDEM_OK) return c;
  return Guarded("engine_wait_durable",
                 [&] { return Fail(call.engine().WaitDurable(sequence)); });
}

idem_code idem_engine_stats(idem_engine* engine, idem_stats* stats) {
  if (stats == nullptr) return InvalidArgument("engine_stats: stats is NULL");
  if (stats->struct_size < offsetof(idem_stats, processed) + sizeof(uint64_t)) {
    return InvalidArgument(absl::StrCat("engine_stats: struct_size ",
                                        stats->struct_size, " is too small"));
  }
  ActiveCall call(engine);
  if (idem_code c = call.Acquire("engine_stats"); c != IDEM_OK) return c;
  return Guarded("engine_stats", [&] {
    absl::StatusOr<idem::Stats> got = call.engine().GetStats();
    if (!got.ok()) return Fail(got.status());
    idem_stats full{};
    idem::c_api::FillStats(*got, &full);
    const size_t size = stats->struct_size;
    const size_t fill = size < sizeof(full) ? size : sizeof(full);
    const size_t skip = sizeof(full.struct_size);
    std::memcpy(reinterpret_cast<char*>(stats) + skip,
                reinterpret_cast<const char*>(&full) + skip, fill - skip);
    return IDEM_OK;
  });
}

idem_code idem_engine_read_outbox(idem_engine* engine, uint64_t after,
                                  size_t max_entries,
                                  idem_outbox_batch** batch) {
  if (batch == nullptr) {
    return InvalidArgument("engine_read_outbox: batch is NULL");
  }
  *batch = nullptr;
  ActiveCall call(engine);
  if (idem_code c = call.Acquire("engine_read_outbox"); c != IDEM_OK) return c;
  return Guarded("engine_read_outbox", [&] {
    absl::StatusOr<std::vector<idem::OutboxEntry>> got =
        after == 0 ? call.engine().ReadOutbox(max_entries)
                   : call.engine().ReadOutboxAfter(after, max_entries);
    if (!got.ok()) return Fail(got.status());
    auto out = std::make_unique<idem_outbox_batch>();
    out->entries = std::move(*got);
    *batch = out.release();
    return IDEM_OK;
  });
}

void idem_outbox_batch_free(idem_outbox_batch* batch) { delete batch; }

size_t idem_outbox_batch_size(const idem_outbox_batch* batch) {
  return batch == nullptr ? 0 : batch->entries.size();
}

uint64_t idem_outbox_position(const idem_outbox_batch* batch, size_t i) {
  const idem::OutboxEntry* e = idem::c_api::EntryAt(batch, i);
  return e == nullptr ? 0 : e->position;
}

const char* idem_outbox_message_id(const idem_outbox_batch* batch, size_t i,
                                   size_t* size) {
  const idem::OutboxEntry* e = idem::c_api::EntryAt(batch, i);
  return idem::c_api::ViewBytes(e == nullptr ? nullptr : &e->message_id, size);
}

const char* idem_outbox_destination(const idem_outbox_batch* batch, size_t i,
                                    size_t* size) {
  const idem::OutboxEntry* e = idem::c_api::EntryAt(batch, i);
  return idem::c_api::ViewBytes(e == nullptr ? nullptr : &e->destination, size);
}

const char* idem_outbox_key(const idem_outbox_batch* batch, size_t i,
                            size_t* size) {
  const idem::OutboxEntry* e = idem::c_api::EntryAt(batch, i);
  return idem::c_api::ViewBytes(e == nullptr ? nullptr : &e->key, size);
}

const char* idem_outbox_value(const idem_outbox_batch* batch, size_t i,
                              size_t* size) {
  const idem::OutboxEntry* e = idem::c_api::EntryAt(batch, i);
  return idem::c_api::ViewBytes(e == nullptr ? nullptr : &e->value, size);
}

int32_t idem_outbox_partition(const idem_outbox_batch* batch, size_t i) {
  const idem::OutboxEntry* e = idem::c_api::EntryAt(batch, i);
  return e == nullptr ? 0 : e->partition;
}

int idem_outbox_tombstone(const idem_outbox_batch* batch, size_t i) {
  const idem::OutboxEntry* e = idem::c_api::EntryAt(batch, i);
  return e != nullptr && e->tombstone ? 1 : 0;
}

size_t idem_outbox_header_count(const idem_outbox_batch* batch, size_t i) {
  const idem::OutboxEntry* e = idem::c_api::EntryAt(batch, i);
  return e == nullptr ? 0 : e->headers.size();
}

const char* idem_outbox_header_name(const idem_outbox_batch* batch, size_t i,
                                    size_t h, size_t* size) {
  const idem::OutboxEntry* e = idem::c_api::EntryAt(batch, i);
  const bool in_range = e != nullptr && h < e->headers.size();
  return idem::c_api::ViewBytes(in_range ? &e->headers[h].first : nullptr,
                                size);
}

const char* idem_outbox_header_value(const idem_outbox_batch* batch, size_t i,
                                     size_t h, size_t* size) {
  const idem::OutboxEntry* e = idem::c_api::EntryAt(batch, i);
  const bool in_range = e != nullptr && h < e->headers.size();
  return idem::c_api::ViewBytes(in_range ? &e->headers[h].second : nullptr,
                                size);
}

idem_code idem_engine_ack_outbox(idem_engine* engine, uint64_t position) {
  ActiveCall call(engine);
  if (idem_code c = call.Acquire("engine_ack_outbox"); c != IDEM_OK) return c;
  return Guarded("engine_ack_outbox",
                 [&] { return Fail(call.engine().AckOutbox(position)); });
}
