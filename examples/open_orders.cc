// open_orders: "all open orders of customer X" inside the exactly-once
// commit, with a prefix scan.
//
// A stream of order events ("open <customer> <order> <amount>", "close
// <customer> <order>"), some delivered twice, keeps each open order under
// the key "open/<customer>/<order>". A handler refuses a fourth open order
// for one customer: it counts the customer's open orders with
// Txn::ScanPrefix, and that count is validated at commit, so parallel
// handlers can never let a fifth one in. At the end it lists each
// customer's open orders with Engine::ScanState, checks them against the
// events, and prints them. Exit 0 if everything matched, 1 otherwise.
//
// Usage: open_orders [--threads=N]   (default 4)

#include <stdlib.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "idem/engine.h"

namespace {

constexpr int kCustomers = 5;
constexpr int kMaxOpen = 3;

// The event stream: each customer opens orders 0..7 and closes the even
// ones; every seventh event is delivered twice.
std::vector<idem::Message> Events(std::vector<std::string>& payloads) {
  for (int c = 0; c < kCustomers; ++c) {
    for (int o = 0; o < 8; ++o) {
      payloads.push_back(absl::StrCat("open c", c, " o", o, " ", 10 * o));
      if (o % 2 == 0) payloads.push_back(absl::StrCat("close c", c, " o", o));
    }
  }
  std::vector<idem::Message> events;
  for (size_t i = 0; i < payloads.size(); ++i) {
    idem::Message m;
    m.id = payloads[i];  // the event names itself: a redelivery has its ID
    m.payload = payloads[i];
    events.push_back(m);
    if (i % 7 == 0) events.push_back(m);
  }
  return events;
}

absl::Status HandleOrder(const idem::Message& m, idem::Txn& txn) {
  std::vector<std::string> f = absl::StrSplit(std::string(m.payload), ' ');
  if (f.size() < 3) return absl::InvalidArgumentError("bad event");
  const std::string customer = "open/" + f[1] + "/";
  if (f[0] == "close") {
    txn.Delete(customer + f[2]);
    return absl::OkStatus();
  }
  int open = 0;
  if (absl::Status s = txn.ScanPrefix(customer,
                                      [&](std::string_view, std::string_view) {
                                        ++open;
                                        return true;
                                      });
      !s.ok()) {
    return s;
  }
  if (open >= kMaxOpen) {
    txn.SetResult("refused: too many open orders");
    return absl::OkStatus();
  }
  txn.Put(customer + f[2], f[3]);
  txn.SetResult("opened");
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help") {
      std::cout << "usage: open_orders [--threads=N]\n";
      return 0;
    }
    if (!arg.starts_with("--threads=") ||
        !absl::SimpleAtoi(arg.substr(10), &threads) || threads < 1) {
      std::cerr << "open_orders: bad argument " << arg << "\n";
      return 2;
    }
  }
  std::string dir =
      std::filesystem::temp_directory_path() / "open_orders.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return 1;
  int exit_code = 0;
  {
    auto engine = idem::Engine::Open(dir + "/store", idem::Options());
    if (!engine.ok()) {
      std::cerr << engine.status() << "\n";
      return 1;
    }
    std::vector<std::string> payloads;
    const std::vector<idem::Message> events = Events(payloads);
    // Each customer's events in order on one thread; customers in parallel.
    std::atomic<int> failures{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        for (const idem::Message& m : events) {
          std::vector<std::string> f =
              absl::StrSplit(std::string(m.payload), ' ');
          if (std::stoi(f[1].substr(1)) % threads != t) continue;
          auto r = (*engine)->Process(m, HandleOrder);
          if (!r.ok() || r->outcome == idem::Outcome::kFailed) ++failures;
        }
      });
    }
    for (std::thread& w : workers) w.join();
    // Expected: orders open in event order, refused past kMaxOpen.
    std::map<std::string, std::set<std::string>> expected;
    for (const std::string& p : payloads) {
      std::vector<std::string> f = absl::StrSplit(p, ' ');
      std::set<std::string>& open = expected[f[1]];
      if (f[0] == "close") {
        open.erase(f[2]);
      } else if (static_cast<int>(open.size()) < kMaxOpen) {
        open.insert(f[2]);
      }
    }
    for (const auto& [customer, want] : expected) {
      std::set<std::string> got;
      const std::string prefix = "open/" + customer + "/";
      std::string end = prefix;
      end.back() = static_cast<char>(end.back() + 1);
      absl::Status s = (*engine)->ScanState(
          prefix, end, [&](std::string_view key, std::string_view) {
            got.insert(std::string(key.substr(prefix.size())));
            return true;
          });
      std::cout << customer << ":";
      for (const std::string& o : got) std::cout << " " << o;
      const bool match = s.ok() && got == want;
      std::cout << (match ? "" : "  MISMATCH") << "\n";
      if (!match) exit_code = 1;
    }
    auto stats = (*engine)->GetStats();
    std::cout << "events " << events.size() << ", duplicates "
              << (stats.ok() ? stats->duplicates : 0) << ", failures "
              << failures.load() << "\n";
    if (failures.load() != 0) exit_code = 1;
  }
  std::filesystem::remove_all(dir);
  std::cout << (exit_code == 0 ? "open orders: OK\n" : "open orders: FAILED\n");
  return exit_code;
}
