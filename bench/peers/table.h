// idem-peers-bench's output: the Markdown table with its footnotes and
// legend, or the same results as one JSON object; and the number formats
// the table and the progress lines share.

#ifndef IDEM_BENCH_PEERS_TABLE_H_
#define IDEM_BENCH_PEERS_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "bench/peers/measure.h"

namespace idem::peers {

// What the run was: printed above the table, or as the JSON's top fields.
struct ReportHeader {
  std::string date;
  std::string machine;
  size_t messages = 0;
  size_t slow_messages = 0;
  double duplicate_rate = 0;
  uint64_t seed = 0;
  int accounts = 0;
  size_t stream_duplicates = 0;
  int rounds = 1;
};

// 1234567 -> "1,234,567" (rounded to an integer).
std::string FormatThousands(double value);
// 1234 -> "1.2k", 56789 -> "57k".
std::string FormatShort(double value);
// Microseconds as "850 µs" or "1.2 ms".
std::string FormatLatency(double us);
// "0", "12 KiB" or "3.4 MiB".
std::string FormatBytes(uint64_t bytes);

void PrintTable(const ReportHeader& header, const std::vector<ResultRow>& rows,
                std::ostream& out);
void PrintJson(const ReportHeader& header, const std::vector<ResultRow>& rows,
               std::ostream& out);

}  // namespace idem::peers

#endif  // IDEM_BENCH_PEERS_TABLE_H_
