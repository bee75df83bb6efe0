// The libFuzzer entry points of every target (see fuzz_target.h):
// LLVMFuzzerTestOneInput calls the target's FuzzOne, and
// LLVMFuzzerInitialize handles --write_seeds=DIR, which writes the target's
// seeds into DIR (created if missing) as seed-0, seed-1, ... and exits.
// libFuzzer ignores flags that start with "--".

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "tests/fuzz/fuzz_target.h"

namespace {

constexpr std::string_view kWriteSeeds = "--write_seeds=";

int WriteSeeds(const std::filesystem::path& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    std::fprintf(stderr, "cannot create %s: %s\n", dir.c_str(),
                 error.message().c_str());
    return 1;
  }
  const std::vector<std::string> seeds = idem::fuzz::Seeds();
  for (size_t i = 0; i < seeds.size(); ++i) {
    // Each seed goes through the target first: a seed that breaks a property
    // is a broken target, not a finding.
    idem::fuzz::FuzzOne(seeds[i]);
    const std::filesystem::path file = dir / ("seed-" + std::to_string(i));
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(seeds[i].data(), static_cast<std::streamsize>(seeds[i].size()));
    if (!out.flush()) {
      std::fprintf(stderr, "cannot write %s\n", file.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  for (int i = 1; i < *argc; ++i) {
    const std::string_view arg = (*argv)[i];
    if (arg.starts_with(kWriteSeeds)) {
      std::exit(WriteSeeds(std::string(arg.substr(kWriteSeeds.size()))));
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  idem::fuzz::FuzzOne(
      std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
