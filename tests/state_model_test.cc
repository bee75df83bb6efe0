// The state a handler reads through its layers (engine/state_layer.h,
// engine/merged_scan.h) agrees with a std::map model of the same writes,
// for many random interleavings of puts, deletes, merges and range
// deletions over the store, the commits in flight, earlier messages of the
// batch and the handler's own writes (tests/testing/state_model.h; the
// fuzz target tests/fuzz/merged_scan_fuzzer.cc explores the same check).

#include "tests/testing/state_model.h"

#include <random>
#include <string>

#include "gtest/gtest.h"

namespace idem {
namespace {

TEST(StateModelTest, ScansAndReadsAgreeWithAMapModel) {
  std::mt19937 random(20261207);
  for (int round = 0; round < 3000; ++round) {
    std::string input(random() % 200, '\0');
    for (char& c : input) c = static_cast<char>(random());
    const std::string failure = test::CheckStateModel(input);
    ASSERT_EQ(failure, "") << "round " << round;
  }
}

TEST(StateModelTest, CatchesALayerReadInTheWrongOrder) {
  // The check itself must fail when the layers disagree with the model:
  // a put in the store, deleted by the batch, must not show.
  StateLayer batch;
  batch.Delete("a");
  std::map<std::string, std::string> store = {{"a", "v"}};
  test::MapIterator it(store, "", "");
  int seen = 0;
  // The batch layer left out.
  ASSERT_TRUE(MergedScan({}, &it, "", "", ScanOptions(),
                         [&](std::string_view, std::string_view) {
                           ++seen;
                           return true;
                         })
                  .ok());
  EXPECT_EQ(seen, 1);
  const StateLayer* layers[] = {&batch};
  test::MapIterator again(store, "", "");
  seen = 0;
  ASSERT_TRUE(MergedScan(layers, &again, "", "", ScanOptions(),
                         [&](std::string_view, std::string_view) {
                           ++seen;
                           return true;
                         })
                  .ok());
  EXPECT_EQ(seen, 0);
}

}  // namespace
}  // namespace idem
