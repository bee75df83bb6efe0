// idem::ForwardingTxn passes every call to another Txn: the base of a Txn
// decorator, as rocksdb::FileSystemWrapper is of a file system, so that a
// decorator overrides only what it changes. Every emit reaches
// EmitWithOptions (Txn's Emit and EmitWithHeaders call it), so a decorator
// that changes emits overrides that one alone.
//
// The target is borrowed and must outlive the ForwardingTxn. Valid during
// one handler call, as the Txn it forwards to; not thread-safe.

#ifndef IDEM_FORWARDING_TXN_H_
#define IDEM_FORWARDING_TXN_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "idem/txn.h"

namespace idem {

class ForwardingTxn : public Txn {
 public:
  explicit ForwardingTxn(Txn& target) : target_(target) {}

  absl::StatusOr<std::optional<std::string>> Get(
      std::string_view key) override {
    return target_.Get(key);
  }
  void Put(std::string_view key, std::string_view value) override {
    target_.Put(key, value);
  }
  absl::Status Put(std::string_view key, std::string_view value,
                   const PutOptions& options) override {
    return target_.Put(key, value, options);
  }
  void Delete(std::string_view key) override { target_.Delete(key); }
  absl::Status Scan(std::string_view begin, std::string_view end,
                    ScanVisitor visit,
                    const ScanOptions& options = ScanOptions()) override {
    return target_.Scan(begin, end, visit, options);
  }
  absl::Status Merge(std::string_view key, MergeOp op,
                     std::string_view operand) override {
    return target_.Merge(key, op, operand);
  }
  absl::Status DeleteRange(std::string_view begin,
                           std::string_view end) override {
    return target_.DeleteRange(begin, end);
  }
  absl::Time record_expires_at() const override {
    return target_.record_expires_at();
  }
  void SetResult(std::string_view result) override {
    target_.SetResult(result);
  }
  void EmitWithOptions(std::string_view destination, std::string_view key,
                       std::string_view value,
                       const EmitOptions& options) override {
    target_.EmitWithOptions(destination, key, value, options);
  }
  absl::Time stream_time() const override { return target_.stream_time(); }
  absl::Status SetTimer(std::string_view timer_key, TimeDomain domain,
                        absl::Time fire_at,
                        std::string_view payload = {}) override {
    return target_.SetTimer(timer_key, domain, fire_at, payload);
  }
  absl::Status CancelTimer(std::string_view timer_key) override {
    return target_.CancelTimer(timer_key);
  }

 protected:
  // The Txn calls go to.
  Txn& target() const { return target_; }

 private:
  Txn& target_;
};

}  // namespace idem

#endif  // IDEM_FORWARDING_TXN_H_
