// IsReservedHeader tells an adapter's Publish which of an outbox entry's
// headers to leave out: those named like a field the adapter writes itself
// (the message ID's field or header, the payload's field, the key's). A
// dead letter carries its input's headers, and an input may itself come
// from a relay: written as they are, such headers would travel twice, and
// a downstream consumer reading the last one would take a copied header for
// the message ID. Names compare exactly (as Redis fields and AMQP table
// keys do). Thread-safe (no state).

#ifndef IDEM_BROKERS_RESERVED_HEADERS_H_
#define IDEM_BROKERS_RESERVED_HEADERS_H_

#include <initializer_list>
#include <string_view>

namespace idem::brokers {

// True when `name` is one of `reserved`.
inline bool IsReservedHeader(std::string_view name,
                             std::initializer_list<std::string_view> reserved) {
  for (std::string_view r : reserved) {
    if (name == r) return true;
  }
  return false;
}

}  // namespace idem::brokers

#endif  // IDEM_BROKERS_RESERVED_HEADERS_H_
