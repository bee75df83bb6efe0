// RunShell: runs a command line through the shell and returns its stdout,
// for the tests that run a tool as the binary it is. Thread-compatible.

#ifndef IDEM_TESTS_TESTING_RUN_SHELL_H_
#define IDEM_TESTS_TESTING_RUN_SHELL_H_

#include <string>

namespace idem::test {

// Runs `command` with popen; returns its stdout and sets `*status` to its
// wait status (pclose), or -1 if it could not be started.
std::string RunShell(const std::string& command, int* status);

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_RUN_SHELL_H_
