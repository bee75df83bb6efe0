#include "tests/testing/run_shell.h"

#include <stdio.h>

#include <array>

namespace idem::test {

std::string RunShell(const std::string& command, int* status) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *status = -1;
    return out;
  }
  std::array<char, 4096> buffer;
  size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    out.append(buffer.data(), n);
  }
  *status = pclose(pipe);
  return out;
}

}  // namespace idem::test
