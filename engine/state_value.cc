#include "engine/state_value.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/coding.h"

namespace idem {

StateReadTime StateTtlContext::Now() const {
  StateReadTime now;
  now.enveloped = enveloped.load(std::memory_order_acquire);
  if (time != nullptr) {
    absl::StatusOr<int64_t> micros = time->NowMicros();
    if (micros.ok()) now.now_micros = *micros;
  }
  return now;
}

bool LooksLikeEnvelope(std::string_view stored) {
  return stored.size() >= kEnvelopeBytes && stored.ends_with(kEnvelopeMagic);
}

StateValue DecodeStateValue(std::string_view stored, bool enveloped) {
  if (!enveloped || !LooksLikeEnvelope(stored)) return StateValue{stored};
  const size_t size = stored.size() - kEnvelopeBytes;
  return StateValue{stored.substr(0, size),
                    static_cast<int64_t>(GetFixed64LE(stored.data() + size))};
}

std::optional<std::string_view> LiveStateValue(std::string_view stored,
                                               const StateReadTime& time) {
  const StateValue decoded = DecodeStateValue(stored, time.enveloped);
  if (decoded.expires_micros <= time.now_micros) return std::nullopt;
  return decoded.value;
}

std::string EncodeStateValue(std::string_view value, int64_t expires_micros,
                             bool enveloped) {
  std::string stored;
  EncodeStateValueTo(&stored, value, expires_micros, enveloped);
  return stored;
}

void EncodeStateValueTo(std::string* out, std::string_view value,
                        int64_t expires_micros, bool enveloped) {
  out->assign(value);
  if (!enveloped ||
      (expires_micros == kNeverExpires && !LooksLikeEnvelope(value))) {
    return;
  }
  out->reserve(value.size() + kEnvelopeBytes);
  PutFixed64LE(out, static_cast<uint64_t>(expires_micros));
  out->append(kEnvelopeMagic);
}

int64_t ExpiryAfter(int64_t now_micros, absl::Duration ttl) {
  if (ttl == absl::InfiniteDuration()) return kNeverExpires;
  const int64_t ttl_micros =
      std::max<int64_t>(1, absl::ToInt64Microseconds(ttl));
  if (now_micros > 0 && ttl_micros > kNeverExpires - 1 - now_micros) {
    return kNeverExpires - 1;
  }
  return now_micros + ttl_micros;
}

absl::Status ValidateTtl(absl::Duration ttl, std::string_view what) {
  if (ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(what), " must be positive (infinite: none), got ",
                     absl::FormatDuration(ttl)));
  }
  return absl::OkStatus();
}

}  // namespace idem
