// The handlers running on this thread, and the boundary a handler is called
// through.
//
// A handler of one engine may call another engine, whose handler may call
// back into the first, at any depth. A call that would wait for the commit
// lock of an engine anywhere in the list must be rejected (it would
// deadlock), and a read must not lock that engine's store again
// (absl::Mutex is not re-entrant). One HandlerScope per running handler, on
// the stack of the thread running it; each thread has its own list, so the
// class needs no locking. Not copyable.

#ifndef IDEM_ENGINE_HANDLER_SCOPE_H_
#define IDEM_ENGINE_HANDLER_SCOPE_H_

#include "absl/status/status.h"
#include "idem/engine.h"
#include "idem/message.h"
#include "idem/txn.h"

namespace idem {

class HandlerScope {
 public:
  // Marks a handler of `engine` as running on this thread until destroyed.
  explicit HandlerScope(const Engine* engine);
  HandlerScope(const HandlerScope&) = delete;
  HandlerScope& operator=(const HandlerScope&) = delete;
  ~HandlerScope();

  // Whether a handler of `engine` is running anywhere on this thread.
  static bool Running(const Engine* engine);

 private:
  static thread_local const HandlerScope* innermost_;
  const Engine* const engine_;
  const HandlerScope* const outer_;
};

// Runs `handler` on `message`: its status, or kInternal naming the
// exception if it threw (no exception crosses the engine's boundary).
absl::Status CallHandler(Handler handler, const Message& message, Txn& txn);

}  // namespace idem

#endif  // IDEM_ENGINE_HANDLER_SCOPE_H_
