#include "idem/partition_state.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/validate.h"

namespace idem {

namespace {

constexpr std::string_view kPrefix = "partition/";

}  // namespace

std::string PartitionStatePrefix(std::string_view source, int32_t partition) {
  return absl::StrCat(AbslView(kPrefix), source.size(), ":", AbslView(source),
                      "/", partition, "/");
}

std::optional<PartitionStateKey> ParsePartitionStateKey(
    std::string_view state_key) {
  if (!state_key.starts_with(kPrefix)) return std::nullopt;
  std::string_view rest = state_key.substr(kPrefix.size());
  const size_t colon = rest.find(':');
  size_t length = 0;
  if (colon == std::string_view::npos ||
      !absl::SimpleAtoi(AbslView(rest.substr(0, colon)), &length) ||
      rest.size() - colon - 1 < length) {
    return std::nullopt;
  }
  PartitionStateKey parsed;
  parsed.source = std::string(rest.substr(colon + 1, length));
  rest = rest.substr(colon + 1 + length);
  if (!rest.starts_with('/')) return std::nullopt;
  rest.remove_prefix(1);
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos ||
      !absl::SimpleAtoi(AbslView(rest.substr(0, slash)), &parsed.partition) ||
      parsed.partition < 0) {
    return std::nullopt;
  }
  parsed.key = std::string(rest.substr(slash + 1));
  // Only the spelling PartitionStatePrefix writes: SimpleAtoi also takes a
  // sign, leading zeros and spaces ("partition/01:t/0/k"), which no
  // PartitionTxn wrote and ExportPartitionState would not move.
  if (!state_key.starts_with(
          PartitionStatePrefix(parsed.source, parsed.partition))) {
    return std::nullopt;
  }
  return parsed;
}

std::string PartitionTxn::Scoped(std::string_view key) const {
  return absl::StrCat(prefix_, AbslView(key));
}

absl::StatusOr<std::optional<std::string>> PartitionTxn::Get(
    std::string_view key) {
  return txn_.Get(Scoped(key));
}

void PartitionTxn::Put(std::string_view key, std::string_view value) {
  txn_.Put(Scoped(key), value);
}

void PartitionTxn::Delete(std::string_view key) { txn_.Delete(Scoped(key)); }

void PartitionTxn::SetResult(std::string_view result) {
  txn_.SetResult(result);
}

void PartitionTxn::Emit(std::string_view destination, std::string_view key,
                        std::string_view value) {
  txn_.Emit(destination, key, value);
}

void PartitionTxn::EmitWithHeaders(std::string_view destination,
                                   std::string_view key, std::string_view value,
                                   absl::Span<const Header> headers) {
  txn_.EmitWithHeaders(destination, key, value, headers);
}

absl::StatusOr<PartitionSnapshot> ExportPartitionState(Engine& engine,
                                                       std::string_view source,
                                                       int32_t partition) {
  if (absl::Status s = ValidateSource(source, partition); !s.ok()) return s;
  PartitionSnapshot snapshot;
  snapshot.source = std::string(source);
  snapshot.partition = partition;
  const std::string prefix = PartitionStatePrefix(source, partition);
  // One Dump: the state and the offset come from the same snapshot.
  absl::Status s = engine.Dump([&](const DumpEntry& entry) {
    if (entry.kind == DumpEntry::Kind::kState &&
        entry.key.starts_with(prefix)) {
      snapshot.entries.emplace_back(entry.key.substr(prefix.size()),
                                    entry.value);
    } else if (entry.kind == DumpEntry::Kind::kOffset && entry.key == source &&
               entry.partition == partition) {
      snapshot.offset = entry.offset;
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return snapshot;
}

absl::Status ImportPartitionState(Engine& engine,
                                  const PartitionSnapshot& snapshot) {
  if (absl::Status s = ValidateSource(snapshot.source, snapshot.partition);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::optional<int64_t>> current =
      engine.CommittedOffset(snapshot.source, snapshot.partition);
  if (!current.ok()) return current.status();
  if (current->has_value() &&
      (!snapshot.offset.has_value() || **current > *snapshot.offset)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ImportPartitionState: the engine is at offset ", **current,
        " of this partition, past the snapshot's ",
        snapshot.offset.has_value() ? absl::StrCat(*snapshot.offset)
                                    : std::string("(none)")));
  }
  const std::string prefix =
      PartitionStatePrefix(snapshot.source, snapshot.partition);
  std::vector<std::string> existing;
  absl::Status s = engine.Dump([&](const DumpEntry& entry) {
    if (entry.kind == DumpEntry::Kind::kState &&
        entry.key.starts_with(prefix)) {
      existing.push_back(entry.key);
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;

  // The import's ID names the snapshot (partition, offset, content), so a
  // repeated import of the same snapshot is a duplicate and writes nothing.
  XXH3_state_t hash;
  XXH3_64bits_reset(&hash);
  auto add = [&hash](std::string_view bytes) {
    const uint64_t size = bytes.size();  // sizes keep the fields apart
    XXH3_64bits_update(&hash, &size, sizeof(size));
    XXH3_64bits_update(&hash, bytes.data(), bytes.size());
  };
  add(prefix);
  add(absl::StrCat(snapshot.offset.value_or(-1)));
  for (const auto& [key, value] : snapshot.entries) {
    add(key);
    add(value);
  }
  const uint64_t digest = XXH3_64bits_digest(&hash);
  const std::string id = absl::StrCat("idem.import/", absl::Hex(digest));

  Message message;
  message.id = id;
  message.source = snapshot.source;
  message.partition = snapshot.partition;
  message.offset = snapshot.offset.value_or(-1);
  absl::StatusOr<Result> result =
      engine.Process(message, [&](const Message&, Txn& txn) {
        for (const std::string& key : existing) txn.Delete(key);
        for (const auto& [key, value] : snapshot.entries) {
          txn.Put(prefix + key, value);
        }
        return absl::OkStatus();
      });
  if (!result.ok()) return result.status();
  if (result->outcome == Outcome::kFailed) return result->error;
  return engine.WaitDurable(result->sequence);
}

}  // namespace idem
