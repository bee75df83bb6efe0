// The C API's transactions (include/idem/c.h): the handler adapter and the
// idem_txn calls.
//
// An idem_txn* is not a pointer to memory but a token: a number issued once
// per handler call (never reused), which the handler's frame on the calling
// thread carries. A txn call looks its token up among the frames of the
// handlers running on its thread; a token kept after its handler returned,
// or used from another thread, is found nowhere and fails with
// IDEM_FAILED_PRECONDITION, instead of touching freed memory.

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "c/c_internal.h"

namespace idem::c_api {
namespace {

std::atomic<uint64_t> next_txn_token{1};

// One running handler call on this thread; frames nest when a handler calls
// into another engine.
struct TxnFrame {
  uint64_t token;
  const idem_engine* engine;
  idem::Txn* txn;
  std::string value;   // the last idem_txn_get's value (its view)
  absl::Status error;  // idem_txn_set_error's
  TxnFrame* outer;
};

thread_local TxnFrame* innermost_frame = nullptr;

// Pushes a frame for the handler call's lifetime.
class FrameScope {
 public:
  FrameScope(const idem_engine* engine, idem::Txn& txn)
      : frame_{next_txn_token.fetch_add(1, std::memory_order_relaxed),
               engine,
               &txn,
               {},
               absl::OkStatus(),
               innermost_frame} {
    innermost_frame = &frame_;
  }
  FrameScope(const FrameScope&) = delete;
  FrameScope& operator=(const FrameScope&) = delete;
  ~FrameScope() { innermost_frame = frame_.outer; }

  TxnFrame& frame() { return frame_; }
  idem_txn* handle() const {
    return reinterpret_cast<idem_txn*>(static_cast<uintptr_t>(frame_.token));
  }

 private:
  TxnFrame frame_;
};

TxnFrame* FindFrame(const idem_txn* txn) {
  const uint64_t token = reinterpret_cast<uintptr_t>(txn);
  for (TxnFrame* f = innermost_frame; f != nullptr; f = f->outer) {
    if (f->token == token) return f;
  }
  return nullptr;
}

// The frame of `txn`, or the code (with the thread's last error) of why it
// is not usable.
idem_code Lookup(const idem_txn* txn, const char* what, TxnFrame** frame) {
  if (txn == nullptr) {
    return InvalidArgument(std::string(what) + ": txn is NULL");
  }
  *frame = FindFrame(txn);
  if (*frame == nullptr) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        what,
        ": txn used outside its handler (after the handler returned, or "
        "from another thread)")));
  }
  return IDEM_OK;
}

}  // namespace

bool InHandlerOf(const idem_engine* handle) {
  for (TxnFrame* f = innermost_frame; f != nullptr; f = f->outer) {
    if (f->engine == handle) return true;
  }
  return false;
}

namespace {

// Runs `call` with a txn token for `txn` valid during the call only, and
// maps what it returns as a C handler's return value to a status.
absl::Status RunInFrame(const idem_engine* engine, idem::Txn& txn,
                        absl::FunctionRef<int(idem_txn*)> call) {
  FrameScope scope(engine, txn);
  const int rc = call(scope.handle());
  if (rc == IDEM_HANDLER_COMMIT) return absl::OkStatus();
  absl::Status error = scope.frame().error;
  if (error.ok()) {
    error = absl::UnknownError(absl::StrCat("handler returned ", rc));
  }
  if (rc == IDEM_HANDLER_PERMANENT) return idem::PermanentError(error);
  return error;
}

}  // namespace

absl::Status RunCHandler(const idem_engine* engine, idem_handler handler,
                         void* user, const idem_message* message,
                         idem::Txn& txn) {
  return RunInFrame(engine, txn, [&](idem_txn* token) {
    return handler(user, message, token);
  });
}

absl::Status RunCTimerHandler(const idem_engine* engine,
                              idem_timer_handler handler, void* user,
                              const idem::TimerFire& fire, idem::Txn& txn) {
  const idem_timer view(fire);
  return RunInFrame(engine, txn, [&](idem_txn* token) {
    return handler(user, &view, token);
  });
}

}  // namespace idem::c_api

using idem::c_api::CheckBytes;
using idem::c_api::Guarded;
using idem::c_api::InvalidArgument;
using idem::c_api::Lookup;
using idem::c_api::TxnFrame;

// Declared extern "C" in idem/c.h, so defined with C linkage.

idem_code idem_txn_get(idem_txn* txn, const void* key, size_t key_size,
                       const char** value, size_t* value_size, int* found) {
  TxnFrame* frame = nullptr;
  if (idem_code c = Lookup(txn, "txn_get", &frame); c != IDEM_OK) return c;
  if (idem_code c = CheckBytes(key, key_size, "txn_get: key"); c != IDEM_OK) {
    return c;
  }
  if (value == nullptr || value_size == nullptr || found == nullptr) {
    return InvalidArgument("txn_get: value, value_size or found is NULL");
  }
  return Guarded("txn_get", [&] {
    absl::StatusOr<std::optional<std::string>> got =
        frame->txn->Get(idem::c_api::Bytes(key, key_size));
    if (!got.ok()) return idem::c_api::Fail(got.status());
    *found = got->has_value() ? 1 : 0;
    if (!got->has_value()) {
      *value = nullptr;
      *value_size = 0;
      return IDEM_OK;
    }
    frame->value = std::move(**got);
    *value = frame->value.data();
    *value_size = frame->value.size();
    return IDEM_OK;
  });
}

idem_code idem_txn_put(idem_txn* txn, const void* key, size_t key_size,
                       const void* value, size_t value_size) {
  TxnFrame* frame = nullptr;
  if (idem_code c = Lookup(txn, "txn_put", &frame); c != IDEM_OK) return c;
  if (idem_code c = CheckBytes(key, key_size, "txn_put: key"); c != IDEM_OK) {
    return c;
  }
  if (idem_code c = CheckBytes(value, value_size, "txn_put: value");
      c != IDEM_OK) {
    return c;
  }
  return Guarded("txn_put", [&] {
    frame->txn->Put(idem::c_api::Bytes(key, key_size),
                    idem::c_api::Bytes(value, value_size));
    return IDEM_OK;
  });
}

idem_code idem_txn_put_with_ttl(idem_txn* txn, const void* key, size_t key_size,
                                const void* value, size_t value_size,
                                int64_t ttl_ms) {
  TxnFrame* frame = nullptr;
  if (idem_code c = Lookup(txn, "txn_put_with_ttl", &frame); c != IDEM_OK) {
    return c;
  }
  if (idem_code c = CheckBytes(key, key_size, "txn_put_with_ttl: key");
      c != IDEM_OK) {
    return c;
  }
  if (idem_code c = CheckBytes(value, value_size, "txn_put_with_ttl: value");
      c != IDEM_OK) {
    return c;
  }
  return Guarded("txn_put_with_ttl", [&] {
    idem::PutOptions options;
    options.ttl = absl::Milliseconds(ttl_ms);
    return idem::c_api::Fail(
        frame->txn->Put(idem::c_api::Bytes(key, key_size),
                        idem::c_api::Bytes(value, value_size), options));
  });
}

idem_code idem_txn_delete(idem_txn* txn, const void* key, size_t key_size) {
  TxnFrame* frame = nullptr;
  if (idem_code c = Lookup(txn, "txn_delete", &frame); c != IDEM_OK) return c;
  if (idem_code c = CheckBytes(key, key_size, "txn_delete: key");
      c != IDEM_OK) {
    return c;
  }
  return Guarded("txn_delete", [&] {
    frame->txn->Delete(idem::c_api::Bytes(key, key_size));
    return IDEM_OK;
  });
}

idem_code idem_txn_set_result(idem_txn* txn, const void* result, size_t size) {
  TxnFrame* frame = nullptr;
  if (idem_code c = Lookup(txn, "txn_set_result", &frame); c != IDEM_OK) {
    return c;
  }
  if (idem_code c = CheckBytes(result, size, "txn_set_result: result");
      c != IDEM_OK) {
    return c;
  }
  return Guarded("txn_set_result", [&] {
    frame->txn->SetResult(idem::c_api::Bytes(result, size));
    return IDEM_OK;
  });
}

idem_code idem_txn_emit(idem_txn* txn, const void* destination,
                        size_t destination_size, const void* key,
                        size_t key_size, const void* value, size_t value_size) {
  // idem::Txn::Emit is EmitWithOptions with the default options.
  return idem_txn_emit_with_options(txn, destination, destination_size, key,
                                    key_size, value, value_size, -1, 0, nullptr,
                                    0);
}

idem_code idem_txn_emit_with_options(idem_txn* txn, const void* destination,
                                     size_t destination_size, const void* key,
                                     size_t key_size, const void* value,
                                     size_t value_size, int32_t partition,
                                     int tombstone, const idem_header* headers,
                                     size_t header_count) {
  TxnFrame* frame = nullptr;
  if (idem_code c = Lookup(txn, "txn_emit_with_options", &frame);
      c != IDEM_OK) {
    return c;
  }
  for (auto [data, size, what] :
       {std::tuple(destination, destination_size,
                   "txn_emit_with_options: destination"),
        std::tuple(key, key_size, "txn_emit_with_options: key"),
        std::tuple(value, value_size, "txn_emit_with_options: value")}) {
    if (idem_code c = CheckBytes(data, size, what); c != IDEM_OK) return c;
  }
  if (headers == nullptr && header_count != 0) {
    return InvalidArgument("txn_emit_with_options: headers is NULL");
  }
  for (size_t h = 0; h < header_count; ++h) {
    if (CheckBytes(headers[h].name, headers[h].name_size, "header name") !=
            IDEM_OK ||
        CheckBytes(headers[h].value, headers[h].value_size, "header value") !=
            IDEM_OK) {
      return InvalidArgument("txn_emit_with_options: header " +
                             std::to_string(h) + " has a NULL name or value");
    }
  }
  return Guarded("txn_emit_with_options", [&] {
    std::vector<idem::Txn::Header> views;
    views.reserve(header_count);
    for (size_t h = 0; h < header_count; ++h) {
      views.emplace_back(
          idem::c_api::Bytes(headers[h].name, headers[h].name_size),
          idem::c_api::Bytes(headers[h].value, headers[h].value_size));
    }
    idem::Txn::EmitOptions options;
    options.partition = partition;
    options.tombstone = tombstone != 0;
    options.headers = views;
    frame->txn->EmitWithOptions(
        idem::c_api::Bytes(destination, destination_size),
        idem::c_api::Bytes(key, key_size),
        idem::c_api::Bytes(value, value_size), options);
    return IDEM_OK;
  });
}

idem_code idem_txn_set_error(idem_txn* txn, idem_code code,
                             const char* message) {
  TxnFrame* frame = nullptr;
  if (idem_code c = Lookup(txn, "txn_set_error", &frame); c != IDEM_OK) {
    return c;
  }
  if (idem::c_api::EnumValue(code) == IDEM_OK) {
    return InvalidArgument("txn_set_error: code is IDEM_OK");
  }
  return Guarded("txn_set_error", [&] {
    frame->error = absl::Status(idem::c_api::ToStatusCode(code),
                                message == nullptr ? "" : message);
    return IDEM_OK;
  });
}

namespace idem::c_api {
namespace {

// A C visitor as an idem::ScanVisitor.
struct CScan {
  idem_scan_visitor visit;
  void* user;
  bool operator()(std::string_view key, std::string_view value) const {
    return visit(user, key.data(), key.size(), value.data(), value.size()) == 0;
  }
};

}  // namespace

idem_code CheckScan(const void* begin, size_t begin_size, const void* end,
                    size_t end_size, idem_scan_visitor visit,
                    const char* what) {
  if (idem_code c = CheckBytes(begin, begin_size, what); c != IDEM_OK) return c;
  if (idem_code c = CheckBytes(end, end_size, what); c != IDEM_OK) return c;
  if (visit == nullptr) {
    return InvalidArgument(std::string(what) + ": visit is NULL");
  }
  return IDEM_OK;
}

absl::Status RunScan(
    absl::FunctionRef<absl::Status(ScanVisitor, const ScanOptions&)> scan,
    int reverse, size_t limit, idem_scan_visitor visit, void* user) {
  ScanOptions options;
  options.reverse = reverse != 0;
  options.limit = limit;
  const CScan c_scan{visit, user};
  return scan(c_scan, options);
}

}  // namespace idem::c_api

idem_code idem_txn_scan(idem_txn* txn, const void* begin, size_t begin_size,
                        const void* end, size_t end_size, int reverse,
                        size_t limit, idem_scan_visitor visit, void* user) {
  TxnFrame* frame = nullptr;
  if (idem_code c = Lookup(txn, "txn_scan", &frame); c != IDEM_OK) return c;
  if (idem_code c = idem::c_api::CheckScan(begin, begin_size, end, end_size,
                                           visit, "txn_scan");
      c != IDEM_OK) {
    return c;
  }
  return Guarded("txn_scan", [&] {
    absl::Status s = idem::c_api::RunScan(
        [&](idem::ScanVisitor v, const idem::ScanOptions& options) {
          return frame->txn->Scan(idem::c_api::Bytes(begin, begin_size),
                                  idem::c_api::Bytes(end, end_size), v,
                                  options);
        },
        reverse, limit, visit, user);
    return s.ok() ? IDEM_OK : idem::c_api::Fail(s);
  });
}

idem_code idem_txn_scan_prefix(idem_txn* txn, const void* prefix,
                               size_t prefix_size, int reverse, size_t limit,
                               idem_scan_visitor visit, void* user) {
  TxnFrame* frame = nullptr;
  if (idem_code c = Lookup(txn, "txn_scan_prefix", &frame); c != IDEM_OK) {
    return c;
  }
  if (idem_code c = idem::c_api::CheckScan(prefix, prefix_size, nullptr, 0,
                                           visit, "txn_scan_prefix");
      c != IDEM_OK) {
    return c;
  }
  return Guarded("txn_scan_prefix", [&] {
    absl::Status s = idem::c_api::RunScan(
        [&](idem::ScanVisitor v, const idem::ScanOptions& options) {
          return frame->txn->ScanPrefix(idem::c_api::Bytes(prefix, prefix_size),
                                        v, options);
        },
        reverse, limit, visit, user);
    return s.ok() ? IDEM_OK : idem::c_api::Fail(s);
  });
}

idem_code idem_txn_merge(idem_txn* txn, const void* key, size_t key_size,
                         idem_merge_op op, const void* operand,
                         size_t operand_size) {
  TxnFrame* frame = nullptr;
  if (idem_code c = Lookup(txn, "txn_merge", &frame); c != IDEM_OK) return c;
  if (idem_code c = CheckBytes(key, key_size, "txn_merge: key"); c != IDEM_OK) {
    return c;
  }
  if (idem_code c = CheckBytes(operand, operand_size, "txn_merge: operand");
      c != IDEM_OK) {
    return c;
  }
  return Guarded("txn_merge", [&] {
    // A value outside MergeOp's byte would wrap into it: refused here; an
    // unknown one inside it reaches Txn::Merge, which refuses it (and fails
    // the message).
    const int n = idem::c_api::EnumValue(op);
    if (n < 0 || n > 255) {
      return InvalidArgument("txn_merge: unknown merge op " +
                             std::to_string(n));
    }
    const auto merge_op = static_cast<idem::MergeOp>(n);
    absl::Status s =
        frame->txn->Merge(idem::c_api::Bytes(key, key_size), merge_op,
                          idem::c_api::Bytes(operand, operand_size));
    return s.ok() ? IDEM_OK : idem::c_api::Fail(s);
  });
}

idem_code idem_txn_delete_range(idem_txn* txn, const void* begin,
                                size_t begin_size, const void* end,
                                size_t end_size) {
  TxnFrame* frame = nullptr;
  if (idem_code c = Lookup(txn, "txn_delete_range", &frame); c != IDEM_OK) {
    return c;
  }
  if (idem_code c = CheckBytes(begin, begin_size, "txn_delete_range: begin");
      c != IDEM_OK) {
    return c;
  }
  if (idem_code c = CheckBytes(end, end_size, "txn_delete_range: end");
      c != IDEM_OK) {
    return c;
  }
  return Guarded("txn_delete_range", [&] {
    absl::Status s =
        frame->txn->DeleteRange(idem::c_api::Bytes(begin, begin_size),
                                idem::c_api::Bytes(end, end_size));
    return s.ok() ? IDEM_OK : idem::c_api::Fail(s);
  });
}

idem_code idem_txn_stream_time(idem_txn* txn, int64_t* stream_time_us) {
  TxnFrame* frame = nullptr;
  if (idem_code c = Lookup(txn, "txn_stream_time", &frame); c != IDEM_OK) {
    return c;
  }
  if (stream_time_us == nullptr) {
    return InvalidArgument("txn_stream_time: stream_time_us is NULL");
  }
  return Guarded("txn_stream_time", [&] {
    *stream_time_us = idem::c_api::ToMicros(frame->txn->stream_time());
    return IDEM_OK;
  });
}

idem_code idem_txn_set_timer(idem_txn* txn, const void* timer_key,
                             size_t timer_key_size, idem_time_domain domain,
                             int64_t fire_at_us, const void* payload,
                             size_t payload_size) {
  TxnFrame* frame = nullptr;
  if (idem_code c = Lookup(txn, "txn_set_timer", &frame); c != IDEM_OK) {
    return c;
  }
  if (idem_code c =
          CheckBytes(timer_key, timer_key_size, "txn_set_timer: timer_key");
      c != IDEM_OK) {
    return c;
  }
  if (idem_code c = CheckBytes(payload, payload_size, "txn_set_timer: payload");
      c != IDEM_OK) {
    return c;
  }
  return Guarded("txn_set_timer", [&] {
    const std::optional<idem::TimeDomain> known =
        idem::c_api::ToTimeDomain(domain);
    // An unknown domain goes to Txn::SetTimer as a byte that is no
    // TimeDomain, so that it fails the message as SetTimer documents; the
    // error names the number the caller gave.
    constexpr auto kNoDomain = static_cast<idem::TimeDomain>(0xff);
    absl::Status s = frame->txn->SetTimer(
        idem::c_api::Bytes(timer_key, timer_key_size),
        known.value_or(kNoDomain), idem::c_api::FromMicros(fire_at_us),
        idem::c_api::Bytes(payload, payload_size));
    if (!known.has_value() && !s.ok()) {
      return InvalidArgument(absl::StrCat("txn_set_timer: domain ",
                                          idem::c_api::EnumValue(domain),
                                          " is not an idem_time_domain"));
    }
    return idem::c_api::Fail(s);
  });
}

idem_code idem_txn_cancel_timer(idem_txn* txn, const void* timer_key,
                                size_t timer_key_size) {
  TxnFrame* frame = nullptr;
  if (idem_code c = Lookup(txn, "txn_cancel_timer", &frame); c != IDEM_OK) {
    return c;
  }
  if (idem_code c =
          CheckBytes(timer_key, timer_key_size, "txn_cancel_timer: timer_key");
      c != IDEM_OK) {
    return c;
  }
  return Guarded("txn_cancel_timer", [&] {
    return idem::c_api::Fail(
        frame->txn->CancelTimer(idem::c_api::Bytes(timer_key, timer_key_size)));
  });
}
