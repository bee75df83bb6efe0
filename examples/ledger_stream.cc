// The ledger's seeded message stream (examples/ledger_stream.h).

#include "examples/ledger_stream.h"

#include <cinttypes>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"

namespace idem::examples {
namespace {

// A random version-4 UUID in its 36-character text form.
std::string RandomUuid(std::mt19937_64& rng) {
  const uint64_t hi = (rng() & ~uint64_t{0xF000}) | 0x4000;  // version 4
  const uint64_t lo = (rng() & ~(uint64_t{3} << 62)) | (uint64_t{2} << 62);
  char buf[40];
  std::snprintf(buf, sizeof(buf),
                "%08" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%04" PRIx64
                "-%012" PRIx64,
                hi >> 32, (hi >> 16) & 0xFFFF, hi & 0xFFFF, lo >> 48,
                lo & uint64_t{0xFFFFFFFFFFFF});
  return buf;
}

}  // namespace

LedgerStream::LedgerStream(LedgerStreamOptions options)
    : options_(std::move(options)), rng_(options_.seed) {}

LedgerMessage LedgerStream::Next() {
  LedgerMessage m;
  m.id =
      options_.ids == LedgerStreamOptions::Ids::kUuid
          ? RandomUuid(rng_)
          : absl::StrCat(options_.id_prefix, "-", options_.seed, "-", index_);
  ++index_;
  m.payment.account =
      static_cast<int>(rng_() % static_cast<uint64_t>(options_.accounts));
  const uint64_t amounts =
      static_cast<uint64_t>(options_.max_amount - options_.min_amount) + 1;
  m.payment.amount =
      options_.min_amount + static_cast<int64_t>(rng_() % amounts);
  m.payload = EncodePayment(m.payment);
  return m;
}

std::vector<LedgerMessage> MakeLedgerMessages(
    const LedgerStreamOptions& options, size_t count) {
  LedgerStream stream(options);
  std::vector<LedgerMessage> messages;
  messages.reserve(count);
  for (size_t i = 0; i < count; ++i) messages.push_back(stream.Next());
  return messages;
}

}  // namespace idem::examples
