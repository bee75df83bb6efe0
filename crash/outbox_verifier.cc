#include "crash/outbox_verifier.h"

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
  const std::vector<int32_t> partition_of = MessagePartitions(stream);
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
absl::StatusOr<std::map<std::string, AppliedRecord>> AppliedRecords(
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

// Opens the downstream store at `path`; null if there is none yet.
absl::StatusOr<std::unique_ptr<Engine>> OpenDownstream(
    const std::string& path) {
  Options options;
  options.create_if_missing = false;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Open(path, options);
  if (absl::IsNotFound(engine.status())) return std::unique_ptr<Engine>();
  return engine;
}

// The outbox checks of one verification (CheckOutbox), over the outbox, the
// downstream's records of what it applied and every committed message's
// emits.
class OutboxChecker {
 public:
  OutboxChecker(const VerifyInput& in, const std::vector<bool>& committed,
                Checker& check)
      : in_(in),
        stream_(*in.stream),
        downstream_(*in.workload->downstream()),
        committed_(committed),
        check_(check),
        emits_(EmitsOf(stream_, downstream_,
                       in.dedupe_scope == DedupeScope::kPartition)) {}

  // The outbox, then the downstream (none yet: nothing applied), then every
  // committed emit; the checks stop where what they read cannot be read.
  void Run(Engine& upstream) {
    if (!CheckPending(upstream)) return;
    absl::StatusOr<std::unique_ptr<Engine>> downstream =
        OpenDownstream(in_.downstream_path);
    if (!downstream.ok()) {
      check_.Violation("recovery_opens",
                       absl::StrCat("the downstream store: ",
                                    downstream.status().ToString()));
      return;
    }
    if (*downstream != nullptr && !ReadApplied(**downstream)) return;
    CheckApplied(downstream->get());
    CheckNoLostEmit();
  }

 private:
  // The outbox: one content per message ID, a committed input for every
  // entry and, after a crash-free run, no entry left. Notes each entry's
  // content. False if the outbox could not be read.
  bool CheckPending(Engine& upstream) {
    absl::StatusOr<std::vector<OutboxEntry>> pending =
        upstream.ReadOutbox(std::numeric_limits<size_t>::max());
    if (!pending.ok()) {
      check_.Violation(
          "no_lost_emit",
          absl::StrCat("reading the outbox: ", pending.status().ToString()));
      return false;
    }
    for (const OutboxEntry& e : *pending) {
      const std::string content = EntryContent(e);
      CheckContent(absl::StrCat("the outbox entry at position ", e.position),
                   e.message_id, content, in_.published, pending_contents_,
                   check_);
      pending_contents_.emplace(e.message_id, content);
      if (CommittedEmit(e.message_id) == nullptr) {
        check_.Violation(
            "downstream_exactly_once",
            absl::StrCat(
                "the outbox entry at position ", e.position, " (", e.message_id,
                ") has no committed input: ", Uncommitted(e.message_id)));
      }
    }
    if (in_.final_check && !pending->empty()) {
      check_.Violation(
          "final_complete",
          absl::StrCat("the outbox still holds ", pending->size(),
                       " entries after the crash-free run (the first at "
                       "position ",
                       pending->front().position, ")"));
    }
    return true;
  }

  // Reads the downstream's records of what it applied; false if they could
  // not be read.
  bool ReadApplied(Engine& downstream) {
    absl::StatusOr<std::map<std::string, AppliedRecord>> read =
        AppliedRecords(downstream);
    if (!read.ok()) {
      check_.Violation(
          "downstream_exactly_once",
          absl::StrCat("reading the downstream: ", read.status().ToString()));
      return false;
    }
    applied_ = *std::move(read);
    return true;
  }

  // Every applied entry (CheckAppliedRecord), and the downstream's state
  // (`downstream`, null if there is no store yet) against them.
  void CheckApplied(Engine* downstream) {
    std::vector<AppliedEntry> entries;
    for (const auto& [message_id, record] : applied_) {
      std::optional<AppliedEntry> entry =
          CheckAppliedRecord(message_id, record);
      if (entry.has_value()) entries.push_back(*std::move(entry));
    }
    if (downstream != nullptr) {
      if (absl::Status s = downstream_.VerifyDownstream(*downstream, entries);
          !s.ok()) {
        check_.Violation("downstream_exactly_once", s.ToString());
      }
    }
  }

  // One downstream record: its content, its committed input, applied once.
  // Returns the entry it records, with its input if committed; nullopt if
  // the record does not decode.
  std::optional<AppliedEntry> CheckAppliedRecord(const std::string& message_id,
                                                 const AppliedRecord& record) {
    CheckContent("the downstream", message_id, record.content, in_.published,
                 pending_contents_, check_);
    const Emit* emit = CommittedEmit(message_id);
    if (emit == nullptr) {
      check_.Violation("downstream_exactly_once",
                       absl::StrCat(message_id, " is applied downstream but ",
                                    Uncommitted(message_id)));
    }
    if (record.count != 1) {
      check_.Violation("downstream_exactly_once",
                       absl::StrCat(message_id, " was applied ", record.count,
                                    " times downstream"));
    }
    std::optional<OutboxEntry> entry =
        ParseEntryContent(message_id, record.content);
    if (!entry.has_value()) {
      check_.Violation("downstream_exactly_once",
                       absl::StrCat("the downstream's record of ", message_id,
                                    " does not decode"));
      return std::nullopt;
    }
    AppliedEntry a;
    a.entry = *std::move(entry);
    if (emit != nullptr) {
      a.input = &stream_.messages[emit->message];
      a.emit_index = emit->index;
    }
    return a;
  }

  // no_lost_emit: every emit of every committed message is applied, or
  // still in the outbox (a crash-free run leaves nothing there). Reports the
  // first lost one.
  void CheckNoLostEmit() {
    for (size_t i = 0; i < stream_.messages.size(); ++i) {
      if (!committed_[i]) continue;
      for (size_t j = 0; j < emits_.ids[i].size(); ++j) {
        const std::string& id = emits_.ids[i][j];
        if (applied_.contains(id)) continue;
        if (!in_.final_check && pending_contents_.contains(id)) continue;
        check_.Violation(
            "no_lost_emit",
            absl::StrCat("emit ", j, " of ", stream_.messages[i].id, " (", id,
                         in_.final_check
                             ? ") is not applied downstream after the "
                               "crash-free run"
                             : ") was committed but is neither in the outbox "
                               "nor applied downstream"));
        return;
      }
    }
  }

  // The emit that `message_id` names, if its message is committed upstream;
  // else null.
  const Emit* CommittedEmit(const std::string& message_id) const {
    auto it = emits_.by_id.find(message_id);
    return it != emits_.by_id.end() && committed_[it->second.message]
               ? &it->second
               : nullptr;
  }

  // Why `message_id` has no committed input.
  std::string Uncommitted(const std::string& message_id) const {
    auto it = emits_.by_id.find(message_id);
    return it == emits_.by_id.end()
               ? std::string("no stream message emits it")
               : absl::StrCat("it is ", Describe(stream_, it->second),
                              ", which is not committed upstream");
  }

  const VerifyInput& in_;
  const Stream& stream_;
  const Downstream& downstream_;
  const std::vector<bool>& committed_;  // by stream message index
  Checker& check_;
  const StreamEmits emits_;
  // The content of each message ID in the outbox.
  absl::flat_hash_map<std::string, std::string> pending_contents_;
  // The downstream's records of what it applied, by message ID.
  std::map<std::string, AppliedRecord> applied_;
};

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
  for (const char* name : kOutboxInvariantNames) check.Evaluated(name);
  OutboxChecker(in, committed, check).Run(upstream);
}

}  // namespace idem::crash
