// The exit codes the command-line tools share (tools/, and the benchmarks'
// tools bench/idem_bench/ and bench/peers/). A tool may add codes of its
// own above these: idem-ctl does (cli/idemctl.h). Header-only constants.

#ifndef IDEM_CLI_EXIT_CODES_H_
#define IDEM_CLI_EXIT_CODES_H_

namespace idem::cli {

// The tool ran and everything it checked held.
inline constexpr int kExitOk = 0;
// The tool ran but failed (a check, the store or I/O). idem-ctl differs: see
// cli/idemctl.h.
inline constexpr int kExitFailure = 1;
// The command line was wrong: a bad flag, or a value out of range.
inline constexpr int kExitUsage = 2;

}  // namespace idem::cli

#endif  // IDEM_CLI_EXIT_CODES_H_
