#include "crash/outbox_verifier.h"

#include <cstdint>
#include <limits>
#include <map>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "crash/relay.h"
#include "crash/stream.h"
#include "engine/outbox_record.h"
#include "engine/record.h"

namespace idem::crash {
namespace {

// Which stream message emits a message ID, and as which of its emits.
struct Emit {
  size_t message = 0;
  uint32_t index = 0;
};

// The message IDs of every stream message's emits: ids[i][j] is emit j of
// message i; `by_id` maps each back.
struct StreamEmits {
  std::vector<std::vector<std::string>> ids;
  absl::flat_hash_map<std::string, Emit> by_id;
};

// `partition_scope`: the upstream's dedupe records are partition-scoped, so
// a message's emits are named by its partition too (OutboxMessageId).
StreamEmits EmitsOf(const Stream& stream, const Downstream& downstream,
                    bool partition_scope) {
  std::vector<int32_t> partition_of(stream.messages.size(), 0);
  for (size_t p = 0; p < stream.partitions.size(); ++p) {
    for (uint32_t index : stream.partitions[p]) {
      partition_of[index] = static_cast<int32_t>(p);
    }
  }
  StreamEmits emits;
  emits.ids.resize(stream.messages.size());
  for (size_t i = 0; i < stream.messages.size(); ++i) {
    Message message;
    message.id = stream.messages[i].id;
    message.source = kStreamSource;
    message.partition = partition_of[i];
    const RecordKey key =
        RecordKeyFor(partition_scope, message, HashMessageId(message.id));
    const uint32_t count = downstream.EmitCount(stream.messages[i]);
    for (uint32_t j = 0; j < count; ++j) {
      emits.ids[i].push_back(OutboxMessageId(key, j));
      emits.by_id.emplace(emits.ids[i].back(), Emit{i, j});
    }
  }
  return emits;
}

std::string Describe(const Stream& stream, const Emit& emit) {
  return absl::StrCat("emit ", emit.index, " of ",
                      stream.messages[emit.message].id);
}

// The downstream's records of what it applied, by message ID.
absl::StatusOr<std::map<std::string, AppliedRecord>> ReadApplied(
    Engine& downstream) {
  std::map<std::string, AppliedRecord> applied;
  absl::Status s = downstream.Dump([&](const DumpEntry& e) -> absl::Status {
    if (e.kind != DumpEntry::Kind::kState ||
        !absl::StartsWith(e.key, kAppliedPrefix)) {
      return absl::OkStatus();
    }
    std::optional<AppliedRecord> record = DecodeAppliedRecord(e.value);
    if (!record.has_value()) {
      return absl::DataLossError(absl::StrCat("bad record at ", e.key));
    }
    applied.emplace(e.key.substr(sizeof(kAppliedPrefix) - 1),
                    *std::move(record));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return applied;
}

// Reports under one_content_per_id a `content` that `where` holds for
// `message_id` and that differs from what was published under it, or from
// what `seen` holds for it.
void CheckContent(const std::string& where, const std::string& message_id,
                  const std::string& content,
                  const PublishedContents* published,
                  const absl::flat_hash_map<std::string, std::string>& seen,
                  Checker& check) {
  for (const auto* contents : {published, &seen}) {
    if (contents == nullptr) continue;
    auto it = contents->find(message_id);
    if (it != contents->end() && it->second != content) {
      check.Violation(
          "one_content_per_id",
          absl::StrCat(message_id, ": ", where, " holds ",
                       DescribeContent(content), " but ",
                       contents == published ? "it was published as "
                                             : "the outbox holds ",
                       DescribeContent(it->second)));
    }
  }
}

}  // namespace

std::string AddPublished(
    const std::vector<std::pair<std::string, std::string>>& published,
    PublishedContents& contents) {
  std::string conflict;
  for (const auto& [message_id, content] : published) {
    auto [it, added] = contents.emplace(message_id, content);
    if (!added && it->second != content && conflict.empty()) {
      conflict = absl::StrCat(message_id, " was published as ",
                              DescribeContent(it->second), " and as ",
                              DescribeContent(content));
    }
  }
  return conflict;
}

void CheckOutbox(Engine& upstream, const VerifyInput& in,
                 const std::vector<bool>& committed, Checker& check) {
  const Stream& stream = *in.stream;
  const Downstream& downstream = *in.workload->downstream();
  for (const char* name : kOutboxInvariantNames) check.Evaluated(name);
  const StreamEmits emits =
      EmitsOf(stream, downstream, in.dedupe_scope == DedupeScope::kPartition);
  auto committed_emit = [&](const std::string& message_id) -> const Emit* {
    auto it = emits.by_id.find(message_id);
    return it != emits.by_id.end() && committed[it->second.message]
               ? &it->second
               : nullptr;
  };
  auto uncommitted = [&](const std::string& message_id) {
    auto it = emits.by_id.find(message_id);
    return it == emits.by_id.end()
               ? std::string("no stream message emits it")
               : absl::StrCat("it is ", Describe(stream, it->second),
                              ", which is not committed upstream");
  };

  // The outbox.
  absl::StatusOr<std::vector<OutboxEntry>> pending =
      upstream.ReadOutbox(std::numeric_limits<size_t>::max());
  if (!pending.ok()) {
    check.Violation("no_lost_emit", absl::StrCat("reading the outbox: ",
                                                 pending.status().ToString()));
    return;
  }
  absl::flat_hash_map<std::string, std::string> pending_contents;
  for (const OutboxEntry& e : *pending) {
    const std::string content = EntryContent(e);
    CheckContent(absl::StrCat("the outbox entry at position ", e.position),
                 e.message_id, content, in.published, pending_contents, check);
    pending_contents.emplace(e.message_id, content);
    if (committed_emit(e.message_id) == nullptr) {
      check.Violation(
          "downstream_exactly_once",
          absl::StrCat(
              "the outbox entry at position ", e.position, " (", e.message_id,
              ") has no committed input: ", uncommitted(e.message_id)));
    }
  }
  if (in.final_check && !pending->empty()) {
    check.Violation(
        "final_complete",
        absl::StrCat("the outbox still holds ", pending->size(),
                     " entries after the crash-free run (the first at "
                     "position ",
                     pending->front().position, ")"));
  }

  // The downstream.
  Options options;
  options.create_if_missing = false;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(in.downstream_path, options);
  if (!engine.ok() && !absl::IsNotFound(engine.status())) {
    check.Violation("recovery_opens", absl::StrCat("the downstream store: ",
                                                   engine.status().ToString()));
    return;
  }
  std::map<std::string, AppliedRecord> applied;
  if (engine.ok()) {
    absl::StatusOr<std::map<std::string, AppliedRecord>> read =
        ReadApplied(**engine);
    if (!read.ok()) {
      check.Violation(
          "downstream_exactly_once",
          absl::StrCat("reading the downstream: ", read.status().ToString()));
      return;
    }
    applied = *std::move(read);
  }
  std::vector<AppliedEntry> entries;
  for (const auto& [message_id, record] : applied) {
    CheckContent("the downstream", message_id, record.content, in.published,
                 pending_contents, check);
    const Emit* emit = committed_emit(message_id);
    if (emit == nullptr) {
      check.Violation("downstream_exactly_once",
                      absl::StrCat(message_id, " is applied downstream but ",
                                   uncommitted(message_id)));
    }
    if (record.count != 1) {
      check.Violation("downstream_exactly_once",
                      absl::StrCat(message_id, " was applied ", record.count,
                                   " times downstream"));
    }
    std::optional<OutboxEntry> entry =
        ParseEntryContent(message_id, record.content);
    if (!entry.has_value()) {
      check.Violation("downstream_exactly_once",
                      absl::StrCat("the downstream's record of ", message_id,
                                   " does not decode"));
      continue;
    }
    AppliedEntry& a = entries.emplace_back();
    a.entry = *std::move(entry);
    if (emit != nullptr) {
      a.input = &stream.messages[emit->message];
      a.emit_index = emit->index;
    }
  }
  if (engine.ok()) {
    if (absl::Status s = downstream.VerifyDownstream(**engine, entries);
        !s.ok()) {
      check.Violation("downstream_exactly_once", s.ToString());
    }
  }

  // Every emit of every committed message: applied, or still in the outbox
  // (a crash-free run leaves nothing there).
  for (size_t i = 0; i < stream.messages.size(); ++i) {
    if (!committed[i]) continue;
    for (size_t j = 0; j < emits.ids[i].size(); ++j) {
      const std::string& id = emits.ids[i][j];
      if (applied.contains(id)) continue;
      if (!in.final_check && pending_contents.contains(id)) continue;
      check.Violation(
          "no_lost_emit",
          absl::StrCat("emit ", j, " of ", stream.messages[i].id, " (", id,
                       in.final_check
                           ? ") is not applied downstream after the "
                             "crash-free run"
                           : ") was committed but is neither in the outbox "
                             "nor applied downstream"));
      return;
    }
  }
}

}  // namespace idem::crash
