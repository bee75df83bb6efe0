// Partition-scoped state: a handler that keeps its state under keys
// namespaced by the message's source partition (PartitionTxn) lets that
// partition's state be found, exported and moved on its own when the
// partition moves to another engine (Engine::ExportPartition and
// ImportPartition; see docs/scale-out.md).
//
// PartitionTxn is a view over a handler's Txn and has the same contract: not
// thread-safe, valid only during the handler call that received the Txn.
// The free functions are thread-safe: they only compute.

#ifndef IDEM_PARTITION_STATE_H_
#define IDEM_PARTITION_STATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "idem/engine.h"
#include "idem/forwarding_txn.h"
#include "idem/partition_snapshot.h"
#include "idem/txn.h"

namespace idem {

// The prefix of every state key of (source, partition):
// "partition/<source length>:<source>/<partition>/". The length makes the
// prefix unambiguous whatever bytes `source` holds, so no partition's prefix
// is a prefix of another's.
std::string PartitionStatePrefix(std::string_view source, int32_t partition);

// If `state_key` is partition-scoped (it starts with
// PartitionStatePrefix(source, partition), spelt exactly as that writes it),
// the partition's source and number and the key as the handler wrote it;
// nullopt otherwise.
struct PartitionStateKey {
  std::string source;
  int32_t partition = 0;
  std::string key;
};
std::optional<PartitionStateKey> ParsePartitionStateKey(
    std::string_view state_key);

// A Txn whose keys live under PartitionStatePrefix(source, partition).
// Every key, range and prefix it is given is taken relative to that prefix
// (an empty scan end is the end of the partition's keys), and the keys its
// scans visit are relative too. SetResult, Emit, EmitWithHeaders and
// EmitWithOptions pass through unchanged (idem/forwarding_txn.h).
class PartitionTxn final : public ForwardingTxn {
 public:
  PartitionTxn(Txn& txn, std::string_view source, int32_t partition)
      : ForwardingTxn(txn), prefix_(PartitionStatePrefix(source, partition)) {}

  absl::StatusOr<std::optional<std::string>> Get(std::string_view key) override;
  void Put(std::string_view key, std::string_view value) override;
  absl::Status Put(std::string_view key, std::string_view value,
                   const PutOptions& options) override;
  void Delete(std::string_view key) override;
  absl::Status Scan(std::string_view begin, std::string_view end,
                    ScanVisitor visit,
                    const ScanOptions& options = ScanOptions()) override;
  absl::Status Merge(std::string_view key, MergeOp op,
                     std::string_view operand) override;
  absl::Status DeleteRange(std::string_view begin,
                           std::string_view end) override;

 private:
  // The scoped form of a range's end: the end of the partition's keys for
  // an empty one.
  std::string ScopedEnd(std::string_view end) const;

  std::string Scoped(std::string_view key) const;

  const std::string prefix_;
};

}  // namespace idem

#endif  // IDEM_PARTITION_STATE_H_
