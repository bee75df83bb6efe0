#include "engine/handler_scope.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "engine/user_code.h"

namespace idem {

thread_local const HandlerScope* HandlerScope::innermost_ = nullptr;

HandlerScope::HandlerScope(const Engine* engine, const Txn& txn,
                           std::string_view message_hash)
    : engine_(engine),
      txn_(&txn),
      message_hash_(message_hash),
      outer_(innermost_) {
  innermost_ = this;
}

HandlerScope::~HandlerScope() { innermost_ = outer_; }

bool HandlerScope::Running(const Engine* engine) {
  for (const HandlerScope* s = innermost_; s != nullptr; s = s->outer_) {
    if (s->engine_ == engine) return true;
  }
  return false;
}

std::optional<std::string_view> HandlerScope::MessageHash(const Txn& txn) {
  for (const HandlerScope* s = innermost_; s != nullptr; s = s->outer_) {
    if (s->txn_ == &txn) return s->message_hash_;
  }
  return std::nullopt;
}

absl::Status CallHandler(Handler handler, const Message& message, Txn& txn) {
  return CallUserCode("handler", [&] { return handler(message, txn); });
}

}  // namespace idem
