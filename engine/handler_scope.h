// The handlers running on this thread, and the boundary a handler is called
// through.
//
// The scope also names the Txn each handler runs with and the hash of its
// message's ID (the engine's, computed once per message), so that a Txn
// decorator (the Kafka changelog's) can name the message's dedupe record
// without hashing its ID again.
//
// A handler of one engine may call another engine, whose handler may call
// back into the first, at any depth. A call that could wait for the commit
// of an engine anywhere in the list (the store lock that commit holds
// shared, its claimed IDs, its queued write) must be rejected (it would
// deadlock), and a read must not lock that engine's store again
// (absl::Mutex is not re-entrant). One HandlerScope per running handler, on
// the stack of the thread running it; each thread has its own list, so the
// class needs no locking. Not copyable.

#ifndef IDEM_ENGINE_HANDLER_SCOPE_H_
#define IDEM_ENGINE_HANDLER_SCOPE_H_

#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "idem/engine.h"
#include "idem/message.h"
#include "idem/txn.h"

namespace idem {

class HandlerScope {
 public:
  // Marks a handler of `engine` as running on this thread until destroyed,
  // with `txn` for the message whose ID hashes to `message_hash`
  // (kDedupeKeyBytes bytes). Both are borrowed for the scope's life.
  HandlerScope(const Engine* engine, const Txn& txn,
               std::string_view message_hash);
  HandlerScope(const HandlerScope&) = delete;
  HandlerScope& operator=(const HandlerScope&) = delete;
  ~HandlerScope();

  // Whether a handler of `engine` is running anywhere on this thread.
  static bool Running(const Engine* engine);

  // The hash of the ID of the message whose handler runs on this thread with
  // `txn`, or nullopt if no handler does (a Txn that is not an engine's, or
  // used outside its handler call).
  static std::optional<std::string_view> MessageHash(const Txn& txn);

 private:
  static thread_local const HandlerScope* innermost_;
  const Engine* const engine_;
  const Txn* const txn_;
  const std::string_view message_hash_;
  const HandlerScope* const outer_;
};

// Runs `handler` on `message`: its status, or kInternal naming the
// exception if it threw (no exception crosses the engine's boundary).
absl::Status CallHandler(Handler handler, const Message& message, Txn& txn);

}  // namespace idem

#endif  // IDEM_ENGINE_HANDLER_SCOPE_H_
