#include "crash/event_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace idem::crash {

EventLogWriter::EventLogWriter(const std::string& path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) std::abort();
}

EventLogWriter::~EventLogWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void EventLogWriter::WriteLine(std::string line) {
  line.push_back('\n');
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) std::abort();  // a lost log line would fake a violation
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void EventLogWriter::Invoke(const std::vector<std::string>& ids) {
  WriteLine(absl::StrCat("I\t", absl::StrJoin(ids, "\t")));
}

void EventLogWriter::Commit(uint64_t sequence, uint64_t duplicates,
                            const std::vector<std::string>& processed) {
  WriteLine(absl::StrCat("C\t", sequence, "\t", duplicates,
                         processed.empty() ? "" : "\t",
                         absl::StrJoin(processed, "\t")));
}

void EventLogWriter::Ack(int partition, int64_t offset,
                         const std::vector<std::string>& ids) {
  WriteLine(absl::StrCat("A\t", partition, "\t", offset, "\t",
                         absl::StrJoin(ids, "\t")));
}

void EventLogWriter::Publish(const std::string& message_id,
                             const std::string& content) {
  WriteLine(absl::StrCat("P\t", absl::CEscape(message_id), "\t",
                         absl::CEscape(content)));
}

void EventLogWriter::Conflicts(uint64_t count) {
  WriteLine(absl::StrCat("K\t", count));
}

void EventLogWriter::UnrejectedConflict(const std::string& id,
                                        const std::string& outcome) {
  WriteLine(absl::StrCat("X\t", id, "\t", outcome));
}

void EventLogWriter::Error(const std::string& message) {
  std::string clean = message;
  for (char& c : clean) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  WriteLine(absl::StrCat("E\t", clean));
}

void EventLogWriter::Done() { WriteLine("D"); }

absl::StatusOr<CycleEvents> ReadCycleEvents(const std::string& path,
                                            int partitions) {
  CycleEvents events;
  events.acked_offsets.assign(partitions, -1);
  std::ifstream in(path);
  if (!in) return events;  // the worker died before writing anything
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline: torn by the kill
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    if (f.empty() || f[0].size() != 1) continue;
    switch (f[0][0]) {
      case 'I':
        for (size_t i = 1; i < f.size(); ++i) {
          events.invoked.insert(f[i]);
          ++events.deliveries;
        }
        break;
      case 'C': {
        CycleEvents::Commit commit;
        uint64_t duplicates = 0;
        if (f.size() < 3 || !absl::SimpleAtoi(f[1], &commit.sequence) ||
            !absl::SimpleAtoi(f[2], &duplicates)) {
          return absl::DataLossError(absl::StrCat("bad log line: ", line));
        }
        events.duplicates += duplicates;
        commit.processed.assign(f.begin() + 3, f.end());
        events.commits.push_back(std::move(commit));
        break;
      }
      case 'A': {
        int partition = 0;
        int64_t offset = 0;
        if (f.size() < 3 || !absl::SimpleAtoi(f[1], &partition) ||
            !absl::SimpleAtoi(f[2], &offset) || partition >= partitions) {
          return absl::DataLossError(absl::StrCat("bad log line: ", line));
        }
        if (partition >= 0 && offset > events.acked_offsets[partition]) {
          events.acked_offsets[partition] = offset;
        }
        for (size_t i = 3; i < f.size(); ++i) {
          events.acked.insert(f[i]);
          ++events.acked_deliveries;
        }
        break;
      }
      case 'P': {
        std::string message_id, content;
        if (f.size() != 3 || !absl::CUnescape(f[1], &message_id) ||
            !absl::CUnescape(f[2], &content)) {
          return absl::DataLossError(absl::StrCat("bad log line: ", line));
        }
        events.published.emplace_back(std::move(message_id),
                                      std::move(content));
        break;
      }
      case 'K': {
        uint64_t count = 0;
        if (f.size() != 2 || !absl::SimpleAtoi(f[1], &count)) {
          return absl::DataLossError(absl::StrCat("bad log line: ", line));
        }
        events.conflicts += count;
        break;
      }
      case 'X':
        events.unrejected_conflicts.push_back(absl::StrCat(
            f.size() > 1 ? f[1] : "", ": ", f.size() > 2 ? f[2] : ""));
        break;
      case 'E':
        events.errors.push_back(f.size() > 1 ? f[1] : "");
        break;
      case 'D':
        events.done = true;
        break;
      default:
        break;
    }
  }
  return events;
}

}  // namespace idem::crash
