// A fuzz target for one on-disk decoder is one file, tests/fuzz/NAME.cc, that
// defines the two functions below, and one idem_add_fuzzer(NAME) line in
// tests/fuzz/CMakeLists.txt. fuzz_main.cc turns it into a libFuzzer binary
// (clang); replay_main.cc into a program that runs given inputs (any
// compiler). Both write the target's seeds with --write_seeds=DIR.
//
// FuzzOne must accept any bytes: it decodes them, checks the decoder's
// properties with IDEM_FUZZ_CHECK, and returns. It must not keep state
// between calls. Not thread-safe (libFuzzer calls it from one thread).

#ifndef IDEM_TESTS_FUZZ_FUZZ_TARGET_H_
#define IDEM_TESTS_FUZZ_FUZZ_TARGET_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace idem::fuzz {

// A few valid encodings (and near misses) to start from: the seed corpus.
std::vector<std::string> Seeds();

// Decodes `input` and checks the properties of the result.
void FuzzOne(std::string_view input);

// Whether `part` lies inside `whole` (a view the decoder returned into its
// input, not into a copy or past its end). An empty `part` may point
// anywhere inside or just past `whole`.
inline bool IsInside(std::string_view part, std::string_view whole) {
  const auto begin = reinterpret_cast<std::uintptr_t>(whole.data());
  const auto end = begin + whole.size();
  const auto at = reinterpret_cast<std::uintptr_t>(part.data());
  return at >= begin && at <= end && end - at >= part.size();
}

[[noreturn]] inline void CheckFailed(const char* condition, const char* file,
                                     int line) {
  std::fprintf(stderr, "%s:%d: fuzz property violated: %s\n", file, line,
               condition);
  std::abort();  // libFuzzer reports it as a crash and keeps the input
}

}  // namespace idem::fuzz

// Aborts with the failed condition when `condition` is false.
#define IDEM_FUZZ_CHECK(condition)                               \
  do {                                                           \
    if (!(condition)) {                                          \
      ::idem::fuzz::CheckFailed(#condition, __FILE__, __LINE__); \
    }                                                            \
  } while (false)

#endif  // IDEM_TESTS_FUZZ_FUZZ_TARGET_H_
