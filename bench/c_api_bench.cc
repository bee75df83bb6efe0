// The C API's cost over the C++ API (include/idem/c.h against
// idem/engine.h): ProcessBatch of 500 new messages, with a handler that
// writes one state value per message (put:1) or does nothing (put:0),
// through each API, under Durability::kSync (buffered:0, one fsync per
// batch) or kBuffered (buffered:1, no fsync: the CPU cost alone). Each run uses
// a fresh store under $TMPDIR (or /tmp). Reported: items_per_second (messages).
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

Options BenchOptions(const benchmark::State& state) {
  Options options;
  options.durability =
      state.range(1) == 1 ? Durability::kBuffered : Durability::kSync;
  return options;
}

// Arguments: put (1: a handler that writes one value, 0: an empty one),
// buffered (1: kBuffered, 0: kSync).
void BM_Cpp(benchmark::State& state) {
  const bool put = state.range(0) == 1;
  absl::StatusOr<util::TempDir> dir = util::TempDir::Create("idem_capi_");
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      dir.ok() ? Engine::Open(dir->Sub("store"), BenchOptions(state))
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
  idem_options* options = idem_options_new();
  idem_options_set_durability(options, state.range(1) == 1
                                           ? IDEM_DURABILITY_BUFFERED
                                           : IDEM_DURABILITY_SYNC);
  idem_engine* engine = nullptr;
  const idem_code opened =
      dir.ok() ? idem_engine_open(dir->Sub("store").c_str(), options, &engine)
               : IDEM_UNAVAILABLE;
  idem_options_free(options);
  if (opened != IDEM_OK) {
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

BENCHMARK(BM_Cpp)
    ->ArgNames({"put", "buffered"})
    ->ArgsProduct({{1, 0}, {0, 1}})
    ->UseRealTime();
BENCHMARK(BM_CApi)
    ->ArgNames({"put", "buffered"})
    ->ArgsProduct({{1, 0}, {0, 1}})
    ->UseRealTime();

}  // namespace
}  // namespace idem

BENCHMARK_MAIN();
