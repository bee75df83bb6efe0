// hot_counter: one counter bumped by many threads at once, as a
// read-modify-write (Get + Put) and as a merge (Txn::Merge).
//
// Each of --threads threads processes --messages messages whose handler
// waits --wait_ms (an external call, say) and adds 1 to the key "hits".
// With Get + Put, concurrent handlers read the same value, so every commit
// but one in a round finds its read stale and its handler runs again;
// with Merge the increment reads nothing, never conflicts and never runs
// again. Prints, for each, the final count, the handler reruns and the
// rate. Exit 0 if both counts are exact and the merge ran no handler
// again, 1 otherwise. Rates are of this machine and run: noisy.
//
// Usage: hot_counter [--threads=N] [--messages=N] [--wait_ms=N]
//        (defaults 16, 20, 1)

#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "idem/engine.h"

namespace {

struct Run {
  int64_t count = 0;
  uint64_t reruns = 0;
  double per_second = 0;
  bool ok = false;
};

Run Measure(const std::string& path, bool merge, int threads, int messages,
            absl::Duration wait) {
  Run run;
  idem::Options options;
  options.durability = idem::Durability::kBuffered;
  auto engine = idem::Engine::Open(path, options);
  if (!engine.ok()) {
    std::cerr << engine.status() << "\n";
    return run;
  }
  auto handler = [&](const idem::Message&, idem::Txn& txn) -> absl::Status {
    absl::SleepFor(wait);
    if (merge) {
      return txn.Merge("hits", idem::MergeOp::kAddInt64, idem::Int64Operand(1));
    }
    auto value = txn.Get("hits");
    if (!value.ok()) return value.status();
    const int64_t n = idem::ReadInt64(value->value_or("")).value_or(0);
    txn.Put("hits", idem::Int64Operand(n + 1));
    return absl::OkStatus();
  };
  bool failed = false;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < messages; ++i) {
        idem::Message m;
        const std::string id = absl::StrCat(t, "/", i);
        m.id = id;
        auto r = (*engine)->Process(m, handler);
        if (!r.ok() || r->outcome != idem::Outcome::kProcessed) failed = true;
      }
    });
  }
  for (std::thread& w : workers) w.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  auto value = (*engine)->GetState("hits");
  auto stats = (*engine)->GetStats();
  if (!value.ok() || !stats.ok()) return run;
  run.count = idem::ReadInt64(value->value_or("")).value_or(-1);
  run.reruns = stats->handler_reruns;
  run.per_second = threads * messages / seconds;
  run.ok = !failed;
  return run;
}

bool Flag(const std::string& arg, const char* name, int* value) {
  const std::string prefix = absl::StrCat("--", name, "=");
  return arg.starts_with(prefix) &&
         absl::SimpleAtoi(arg.substr(prefix.size()), value) && *value >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 16, messages = 20, wait_ms = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help") {
      std::cout << "usage: hot_counter [--threads=N] [--messages=N] "
                   "[--wait_ms=N]\n";
      return 0;
    }
    if (!Flag(arg, "threads", &threads) && !Flag(arg, "messages", &messages) &&
        !Flag(arg, "wait_ms", &wait_ms)) {
      std::cerr << "hot_counter: bad argument " << arg << "\n";
      return 2;
    }
  }
  if (threads < 1) threads = 1;
  std::string dir =
      std::filesystem::temp_directory_path() / "hot_counter.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return 1;
  const int64_t want = int64_t{threads} * messages;
  const Run rmw = Measure(dir + "/rmw", /*merge=*/false, threads, messages,
                          absl::Milliseconds(wait_ms));
  const Run merged = Measure(dir + "/merge", /*merge=*/true, threads, messages,
                             absl::Milliseconds(wait_ms));
  std::filesystem::remove_all(dir);
  for (const auto& [name, run] :
       {std::pair{"get+put", rmw}, std::pair{"merge", merged}}) {
    std::cout << name << ": count " << run.count << " of " << want
              << ", handler reruns " << run.reruns << ", "
              << static_cast<int64_t>(run.per_second) << " msgs/s\n";
  }
  const bool exact = rmw.ok && merged.ok && rmw.count == want &&
                     merged.count == want && merged.reruns == 0;
  std::cout << (exact ? "hot counter: OK\n" : "hot counter: FAILED\n");
  return exact ? 0 : 1;
}
