// The C API's cost over the C++ API (include/idem/c.h against
// idem/engine.h): ProcessBatch of 500 new messages under Durability::kSync,
// with a handler that writes one state value per message (Put) or does
// nothing (Empty), through each API. Each run uses a fresh store under
// $TMPDIR (or /tmp). Reported: items_per_second (messages).
// bench/python/bench.py runs it beside the Python package's figures, so
// that the ratios come from one run:
//   build/bench/idem_c_api_bench --benchmark_min_time=2

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "idem/c.h"
#include "idem/engine.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

constexpr int kBatch = 500;
constexpr char kValue[] = "v:0123456789";

// The IDs of the batch that starts at message `first`.
std::vector<std::string> BatchIds(int64_t first) {
  std::vector<std::string> ids;
  ids.reserve(kBatch);
  for (int i = 0; i < kBatch; ++i) ids.push_back(absl::StrCat("m", first + i));
  return ids;
}

// Argument: 1 for a handler that writes one value, 0 for an empty one.
void BM_Cpp(benchmark::State& state) {
  const bool put = state.range(0) == 1;
  absl::StatusOr<util::TempDir> dir = util::TempDir::Create("idem_capi_");
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      dir.ok() ? Engine::Open(dir->Sub("store"), Options())
               : absl::StatusOr<std::unique_ptr<Engine>>(dir.status());
  if (!engine.ok()) {
    state.SkipWithError(engine.status().ToString().c_str());
    return;
  }
  int64_t next = 0;
  std::vector<Message> batch(kBatch);
  for (auto _ : state) {
    state.PauseTiming();
    const std::vector<std::string> ids = BatchIds(next);
    for (int i = 0; i < kBatch; ++i) batch[i].id = ids[i];
    next += kBatch;
    state.ResumeTiming();
    absl::StatusOr<std::vector<Result>> results =
        (*engine)->ProcessBatch(batch, [put](const Message& m, Txn& txn) {
          if (put) txn.Put(m.id, kValue);
          return absl::OkStatus();
        });
    if (!results.ok()) {
      state.SkipWithError(results.status().ToString().c_str());
      return;
    }
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

int PutHandler(void* user, const idem_message* message, idem_txn* txn) {
  (void)user;
  size_t size = 0;
  const char* id = idem_message_id(message, &size);
  return idem_txn_put(txn, id, size, kValue, sizeof(kValue) - 1) == IDEM_OK
             ? IDEM_HANDLER_COMMIT
             : 1;
}

int EmptyHandler(void*, const idem_message*, idem_txn*) {
  return IDEM_HANDLER_COMMIT;
}

void BM_CApi(benchmark::State& state) {
  const bool put = state.range(0) == 1;
  absl::StatusOr<util::TempDir> dir = util::TempDir::Create("idem_capi_");
  idem_engine* engine = nullptr;
  if (!dir.ok() || idem_engine_open(dir->Sub("store").c_str(), nullptr,
                                    &engine) != IDEM_OK) {
    state.SkipWithError(idem_last_error());
    return;
  }
  std::vector<idem_message*> messages(kBatch);
  for (idem_message*& m : messages) m = idem_message_new();
  int64_t next = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::vector<std::string> ids = BatchIds(next);
    for (int i = 0; i < kBatch; ++i) {
      idem_message_set_id(messages[i], ids[i].data(), ids[i].size());
    }
    next += kBatch;
    state.ResumeTiming();
    idem_result_list* results = nullptr;
    if (idem_engine_process_batch(engine, messages.data(), kBatch,
                                  put ? PutHandler : EmptyHandler, nullptr,
                                  &results) != IDEM_OK) {
      state.SkipWithError(idem_last_error());
      break;
    }
    idem_result_list_free(results);
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  for (idem_message* m : messages) idem_message_free(m);
  idem_engine_free(engine);
}

BENCHMARK(BM_Cpp)->ArgName("put")->Arg(1)->Arg(0)->UseRealTime();
BENCHMARK(BM_CApi)->ArgName("put")->Arg(1)->Arg(0)->UseRealTime();

}  // namespace
}  // namespace idem

BENCHMARK_MAIN();
