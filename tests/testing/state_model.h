// A model check of the state a handler reads (engine/state_layer.h,
// engine/merged_scan.h): writes decoded from arbitrary bytes are applied
// both to a std::map, in the order they happen, and to the layers a handler
// reads through (the store, the commits in flight, earlier messages of the
// batch absorbed one by one, the handler's own writes); then scans
// (forward or reverse, bounded or not, limited or stopped by the visitor)
// and point reads through the layers must agree with the map.
// Used by tests/state_model_test.cc (random inputs) and by the fuzz target
// tests/fuzz/merged_scan_fuzzer.cc. Header-only; not thread-safe.

#ifndef IDEM_TESTS_TESTING_STATE_MODEL_H_
#define IDEM_TESTS_TESTING_STATE_MODEL_H_

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/merged_scan.h"
#include "engine/state_layer.h"
#include "idem/merge.h"
#include "rocksdb/iterator.h"

namespace idem::test {

// A rocksdb::Iterator over a std::map within [lower, upper) (upper empty:
// no bound), as the store's iterator with its bounds set.
class MapIterator final : public rocksdb::Iterator {
 public:
  MapIterator(const std::map<std::string, std::string>& map,
              std::string_view lower, std::string_view upper)
      : first_(map.lower_bound(std::string(lower))),
        end_(upper.empty() ? map.end() : map.lower_bound(std::string(upper))),
        at_(end_) {
    if (std::distance(map.begin(), first_) > std::distance(map.begin(), end_)) {
      first_ = end_;
    }
  }
  bool Valid() const override { return at_ != end_; }
  void SeekToFirst() override { at_ = first_; }
  void SeekToLast() override { at_ = first_ == end_ ? end_ : std::prev(end_); }
  void Seek(const rocksdb::Slice&) override { at_ = end_; }
  void SeekForPrev(const rocksdb::Slice&) override { at_ = end_; }
  void Next() override { ++at_; }
  void Prev() override { at_ = at_ == first_ ? end_ : std::prev(at_); }
  rocksdb::Slice key() const override { return at_->first; }
  rocksdb::Slice value() const override { return at_->second; }
  rocksdb::Status status() const override { return rocksdb::Status::OK(); }

 private:
  std::map<std::string, std::string>::const_iterator first_;
  std::map<std::string, std::string>::const_iterator end_;
  std::map<std::string, std::string>::const_iterator at_;
};

// Reads bytes as small numbers; past the end, zeros.
class ModelInput {
 public:
  explicit ModelInput(std::string_view bytes) : bytes_(bytes) {}
  bool done() const { return at_ >= bytes_.size(); }
  uint8_t Byte() {
    return at_ < bytes_.size() ? static_cast<uint8_t>(bytes_[at_++]) : 0;
  }
  // A key from a small alphabet, so that writes collide and prefixes and
  // 0xff bytes meet the bounds.
  std::string Key() {
    static constexpr char kAlphabet[] = {'a', 'b', 'c', '\xff'};
    const uint8_t b = Byte();
    std::string key(1 + b % 3, 'a');
    for (size_t i = 0; i < key.size(); ++i)
      key[i] = kAlphabet[(b >> (2 + i * 2)) % 4];
    if (b % 7 == 0) key.clear();
    return key;
  }

 private:
  std::string_view bytes_;
  size_t at_ = 0;
};

// Runs the model on `input`: "" if every read agreed, else what differed.
inline std::string CheckStateModel(std::string_view input) {
  ModelInput in(input);
  std::map<std::string, std::string> model;
  std::map<std::string, std::string> store;
  // Newest first: the handler's own writes, the batch's, those in flight.
  StateLayer own, batch, message, in_flight;
  auto apply_model = [&](std::map<std::string, std::string>& map, int kind,
                         const std::string& key, const std::string& end,
                         const std::string& value) {
    switch (kind) {
      case 0:
        map[key] = value;
        break;
      case 1:
        map.erase(key);
        break;
      case 2:
      case 3: {
        auto it = map.find(key);
        std::optional<std::string_view> base;
        if (it != map.end()) base = it->second;
        map[key] = ApplyMerge(
            base, kind == 2 ? MergeOp::kAddInt64 : MergeOp::kAppend, value);
        break;
      }
      case 4:
        map.erase(map.lower_bound(key), map.lower_bound(end));
        break;
    }
  };
  auto apply_layer = [](StateLayer& layer, int kind, const std::string& key,
                        const std::string& end, const std::string& value) {
    switch (kind) {
      case 0:
        layer.Put(key, value);
        break;
      case 1:
        layer.Delete(key);
        break;
      case 2:
        layer.Merge(key, MergeOp::kAddInt64, value);
        break;
      case 3:
        layer.Merge(key, MergeOp::kAppend, value);
        break;
      case 4:
        layer.DeleteRange(key, end);
        break;
    }
  };
  // Writes, oldest first: the store's, those in flight, the batch's
  // messages (each absorbed as it ends), then the handler's own.
  int stage = 0;
  int op_count = 0;
  while (!in.done() && stage < 4 && op_count < 64) {
    const uint8_t head = in.Byte();
    if (head % 8 == 7) {  // the end of a stage (or of a batch message)
      if (stage == 2) batch.Absorb(std::move(message));
      if (stage != 2 || head % 16 == 15) ++stage;
      continue;
    }
    ++op_count;
    const int kind = head % 8 % 5;
    std::string key = in.Key();
    std::string end = in.Key();
    if (kind == 4) {
      if (end < key) std::swap(key, end);
      if (key == end) end.push_back('b');
    }
    std::string value = kind == 2 ? Int64Operand(in.Byte() - 100)
                                  : std::string(1 + in.Byte() % 2, 'v');
    apply_model(model, kind, key, end, value);
    switch (stage) {
      case 0:
        apply_model(store, kind, key, end, value);
        break;
      case 1:
        apply_layer(in_flight, kind, key, end, value);
        break;
      case 2:
        apply_layer(message, kind, key, end, value);
        break;
      default:
        apply_layer(own, kind, key, end, value);
        break;
    }
  }
  batch.Absorb(std::move(message));
  const StateLayer* layers[] = {&own, &batch, &in_flight};
  auto show = [](std::string_view s) {
    return absl::StrCat("\"", absl::CHexEscape(AbslView(s)), "\"");
  };
  // Point reads.
  for (const std::string& key :
       {std::string(), std::string("a"), std::string("ab"), std::string("b"),
        std::string("c"), std::string("\xff"), std::string("aa")}) {
    LayeredRead read;
    for (const StateLayer* layer : layers) {
      if (read.Take(layer->Find(key))) break;
    }
    std::optional<std::string> got;
    if (read.decided()) {
      got = read.value();
    } else {
      auto it = store.find(key);
      got = read.Over(it == store.end()
                          ? std::nullopt
                          : std::optional<std::string_view>(it->second));
    }
    auto want = model.find(key);
    std::optional<std::string> expected;
    if (want != model.end()) expected = want->second;
    if (got != expected) {
      return absl::StrCat("point read of ", show(key), ": got ",
                          got ? show(*got) : "absent", ", want ",
                          expected ? show(*expected) : "absent");
    }
  }
  // Scans.
  for (int scan = 0; scan < 6; ++scan) {
    std::string begin = in.Key();
    std::string end = in.Key();
    if (!end.empty() && end < begin) std::swap(begin, end);
    const uint8_t shape = in.Byte();
    ScanOptions options{.reverse = (shape & 1) != 0,
                        .limit = static_cast<size_t>((shape >> 1) % 4)};
    const size_t stop_after = (shape >> 3) % 5;  // 0: never stop
    std::vector<std::pair<std::string, std::string>> want;
    for (auto it = model.lower_bound(begin);
         it != model.end() && (end.empty() || it->first < end); ++it) {
      want.emplace_back(it->first, it->second);
    }
    if (options.reverse) std::reverse(want.begin(), want.end());
    size_t keep = want.size();
    if (options.limit != 0) keep = std::min(keep, options.limit);
    if (stop_after != 0) keep = std::min(keep, stop_after);
    want.resize(keep);
    std::vector<std::pair<std::string, std::string>> got;
    MapIterator it(store, begin, end);
    absl::StatusOr<ScanExtent> extent =
        MergedScan(layers, &it, begin, end, options,
                   [&](std::string_view k, std::string_view v) {
                     got.emplace_back(k, v);
                     return stop_after == 0 || got.size() < stop_after;
                   });
    if (!extent.ok()) return std::string(extent.status().message());
    if (got != want) {
      std::string shown = absl::StrCat(
          "scan [", show(begin), ", ", show(end), ") reverse=", options.reverse,
          " limit=", options.limit, " stop=", stop_after, ": got");
      for (const auto& [k, v] : got) absl::StrAppend(&shown, " ", show(k));
      absl::StrAppend(&shown, "; want");
      for (const auto& [k, v] : want) absl::StrAppend(&shown, " ", show(k));
      return shown;
    }
    // The extent covers every key visited.
    for (const auto& [k, v] : got) {
      if (k < extent->begin || (!extent->end.empty() && k >= extent->end)) {
        return absl::StrCat("scan extent misses visited key ", show(k));
      }
    }
  }
  return "";
}

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_STATE_MODEL_H_
