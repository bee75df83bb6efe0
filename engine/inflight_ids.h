// InflightIds: the dedupe records being decided right now, so that a second
// delivery of an ID waits for the first one's outcome instead of running its
// handler too (docs/design.md, "Concurrency").
//
// A commit claims the record keys of all its messages before it looks them
// up, and releases them once its write has landed (synced, under kSync) or
// failed. A claim is all or nothing: Acquire waits until none of the keys is
// held by another claim, then holds them all, so two batches that share IDs
// in different orders never wait for each other in a cycle.
//
// Safe for concurrent access from multiple threads without external
// synchronization. A Claim is not thread-safe and must not outlive the table.

#ifndef IDEM_ENGINE_INFLIGHT_IDS_H_
#define IDEM_ENGINE_INFLIGHT_IDS_H_

#include <condition_variable>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "engine/plain_mutex.h"
#include "engine/record.h"

namespace idem {

class InflightIds {
 public:
  // Holds record keys until destroyed (or moved from).
  class Claim {
   public:
    Claim() = default;
    Claim(Claim&& other) noexcept;
    Claim& operator=(Claim&& other) noexcept;
    Claim(const Claim&) = delete;
    Claim& operator=(const Claim&) = delete;
    ~Claim() { Release(); }

    // Releases the keys now.
    void Release();

   private:
    friend class InflightIds;
    InflightIds* table_ = nullptr;
    absl::InlinedVector<RecordKey, 1> keys_;
  };

  InflightIds() = default;
  InflightIds(const InflightIds&) = delete;
  InflightIds& operator=(const InflightIds&) = delete;

  // Waits until no other claim holds any of `keys` (repeats allowed), then
  // claims them all. With `enabled` false (the deliberately broken variant
  // EngineHooks::skip_inflight_ids) claims nothing and never waits.
  Claim Acquire(absl::Span<const RecordKey> keys, bool enabled = true)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Test-only: how many keys are claimed now.
  size_t held_for_testing() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Release(absl::Span<const RecordKey> keys) ABSL_LOCKS_EXCLUDED(mu_);

  // A PlainMutex: taken twice a commit (engine/plain_mutex.h).
  mutable PlainMutex mu_;
  // Notified when a claim releases its keys.
  std::condition_variable released_;
  absl::flat_hash_set<RecordKey> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace idem

#endif  // IDEM_ENGINE_INFLIGHT_IDS_H_
