#include "crash/verifier.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "crash/outbox_verifier.h"
#include "engine/sharded_engine.h"  // kShardShift
#include "idem/engine.h"

namespace idem::crash {
namespace {

// The engine that holds the state of `partition`'s messages: its shard
// (what Engine::GetState(source, partition, key) reads); the engine itself
// when it has one shard.
Engine& StateOf(Engine& engine, int32_t partition) {
  return *engine.shard(engine.ShardOf(partition));
}

// Checks stream message `m`'s dedupe record (looked up on `partition` under
// partition scope) against its effect (in `partition`'s shard) and against what
// the event logs say was delivered, acknowledged and in flight: no_lost_ack,
// no_phantom, atomicity and bounded_in_flight. Returns whether the record is
// present (false if it could not be read).
bool CheckRecord(Engine& engine, const VerifyInput& in, const StreamMessage& m,
                 int32_t partition, Checker& check) {
  absl::StatusOr<bool> seen = in.dedupe_scope == DedupeScope::kPartition
                                  ? engine.Seen(m.id, kStreamSource, partition)
                                  : engine.Seen(m.id);
  absl::StatusOr<bool> effect =
      in.workload->EffectPresent(StateOf(engine, partition), m);
  if (!seen.ok() || !effect.ok()) {
    check.Violation(
        "atomicity",
        absl::StrCat(
            "reading ", m.id, ": ",
            (!seen.ok() ? seen.status() : effect.status()).ToString()));
    return false;
  }
  const bool acked = in.acked->contains(m.id);
  if (acked && !*seen) {
    check.Violation("no_lost_ack",
                    absl::StrCat(m.id, " was acknowledged but is absent"));
  }
  if (*seen && !in.delivered->contains(m.id)) {
    check.Violation("no_phantom",
                    absl::StrCat(m.id, " is present but was never delivered"));
  }
  if (*seen != *effect) {
    check.Violation(
        "atomicity",
        absl::StrCat(m.id, *seen ? " is present without its effect"
                                 : " has its effect but no dedupe record"));
  }
  if (*seen && !acked && !in.in_flight->contains(m.id)) {
    check.Violation("bounded_in_flight",
                    absl::StrCat(m.id,
                                 " is present but was never in flight"
                                 " unacknowledged"));
  }
  return *seen;
}

// Checks every stream message's record (CheckRecord); returns which are
// present, by index.
std::vector<bool> CheckRecords(Engine& engine, const VerifyInput& in,
                               Checker& check) {
  const Stream& stream = *in.stream;
  for (const char* name :
       {"no_lost_ack", "no_phantom", "atomicity", "bounded_in_flight"}) {
    check.Evaluated(name);
  }
  const std::vector<int32_t> partition_of = MessagePartitions(stream);
  std::vector<bool> present(stream.messages.size(), false);
  for (size_t i = 0; i < stream.messages.size(); ++i) {
    present[i] =
        CheckRecord(engine, in, stream.messages[i], partition_of[i], check);
  }
  return present;
}

// exactly_once_effect: the workload's state is the effects of exactly the
// `present` messages; shard by shard, the effects of the present messages of
// the shard's partitions.
void CheckEffects(Engine& engine, const VerifyInput& in,
                  const std::vector<bool>& present, Checker& check) {
  const Stream& stream = *in.stream;
  const std::vector<int32_t> partition_of = MessagePartitions(stream);
  std::vector<std::vector<StreamMessage>> applied(engine.shard_count());
  for (size_t i = 0; i < stream.messages.size(); ++i) {
    if (present[i]) {
      applied[engine.ShardOf(partition_of[i])].push_back(stream.messages[i]);
    }
  }
  check.Evaluated("exactly_once_effect");
  for (int shard = 0; shard < engine.shard_count(); ++shard) {
    absl::Status s = in.workload->Verify(*engine.shard(shard), applied[shard]);
    if (s.ok()) continue;
    check.Violation("exactly_once_effect",
                    engine.shard_count() == 1
                        ? s.ToString()
                        : absl::StrCat("shard ", shard, ": ", s.ToString()));
    return;
  }
}

// offsets_not_ahead: every entry at or below a partition's committed offset
// is present.
void CheckOffsets(Engine& engine, const Stream& stream,
                  const std::vector<bool>& present, Checker& check) {
  check.Evaluated("offsets_not_ahead");
  for (size_t p = 0; p < stream.partitions.size(); ++p) {
    absl::StatusOr<std::optional<int64_t>> committed =
        engine.CommittedOffset(kStreamSource, static_cast<int32_t>(p));
    if (!committed.ok()) {
      check.Violation("offsets_not_ahead", committed.status().ToString());
      continue;
    }
    if (!committed->has_value()) continue;
    const auto& entries = stream.partitions[p];
    const int64_t last = std::min<int64_t>(
        **committed, static_cast<int64_t>(entries.size()) - 1);
    for (int64_t o = 0; o <= last; ++o) {
      if (!present[entries[o]]) {
        check.Violation(
            "offsets_not_ahead",
            absl::StrCat("partition ", p, " committed offset ", **committed,
                         " but ", stream.messages[entries[o]].id, " at offset ",
                         o, " is absent"));
        break;
      }
    }
  }
}

// The run's commits that processed messages, in commit order.
std::vector<const CycleEvents::Commit*> InCommitOrder(
    const std::vector<CycleEvents::Commit>& all) {
  std::vector<const CycleEvents::Commit*> commits;
  for (const CycleEvents::Commit& c : all) {
    if (!c.processed.empty()) commits.push_back(&c);
  }
  std::sort(commits.begin(), commits.end(), [](const auto* a, const auto* b) {
    return a->sequence < b->sequence;
  });
  return commits;
}

// commit_prefix: each of the run's commits survived whole or not at all,
// and none survived after one of its shard that was lost (shards have write
// paths of their own: a crash may cut one shard's and not another's). A
// commit's logged sequence is its own write's last record's
// (Result::sequence), so the shard's commits are ordered by it exactly, and
// two commits of one shard that logged one sequence are a violation too.
void CheckCommitPrefix(const Stream& stream,
                       const std::vector<CycleEvents::Commit>& all,
                       const std::vector<bool>& present, Checker& check) {
  check.Evaluated("commit_prefix");
  // Sorted by sequence, so by shard (the top bits) and in each shard's order.
  const std::vector<const CycleEvents::Commit*> commits = InCommitOrder(all);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < stream.messages.size(); ++i) {
    index[stream.messages[i].id] = i;
  }
  const CycleEvents::Commit* first_missing = nullptr;
  const CycleEvents::Commit* previous = nullptr;
  for (const CycleEvents::Commit* c : commits) {
    if (first_missing != nullptr && (first_missing->sequence >> kShardShift) !=
                                        (c->sequence >> kShardShift)) {
      first_missing = nullptr;  // another shard's commits
    }
    if (previous != nullptr && previous->sequence == c->sequence) {
      check.Violation(
          "commit_prefix",
          absl::StrCat("two commits (", previous->processed[0], ", ... and ",
                       c->processed[0], ", ...) logged one sequence ",
                       c->sequence, ": their order is unknown"));
    }
    previous = c;
    size_t found = 0;
    for (const std::string& id : c->processed) {
      if (auto it = index.find(id); it != index.end() && present[it->second]) {
        ++found;
      }
    }
    if (found != 0 && found != c->processed.size()) {
      check.Violation(
          "commit_prefix",
          absl::StrCat("commit ", c->sequence, " survived in part: ", found,
                       " of ", c->processed.size(), " IDs"));
    }
    if (found == 0 && first_missing == nullptr) first_missing = c;
    if (found != 0 && first_missing != nullptr) {
      check.Violation(
          "commit_prefix",
          absl::StrCat("commit ", c->sequence,
                       " survived but the earlier commit ",
                       first_missing->sequence, " (",
                       first_missing->processed[0], ", ...) was lost"));
    }
  }
}

// final_complete: after the final crash-free run, every message is present.
void CheckFinalComplete(const Stream& stream, const std::vector<bool>& present,
                        Checker& check) {
  check.Evaluated("final_complete");
  for (size_t i = 0; i < stream.messages.size(); ++i) {
    if (!present[i]) {
      check.Violation("final_complete",
                      absl::StrCat(stream.messages[i].id,
                                   " is absent after the final run"));
      break;
    }
  }
}

// Checks the recovered store's invariants, and with a Downstream the
// outbox's.
void CheckStore(Engine& engine, const VerifyInput& in, Checker& check) {
  const Stream& stream = *in.stream;
  const std::vector<bool> present = CheckRecords(engine, in, check);
  CheckEffects(engine, in, present, check);
  CheckOffsets(engine, stream, present, check);
  CheckCommitPrefix(stream, *in.commits, present, check);
  if (in.final_check) CheckFinalComplete(stream, present, check);
  if (in.workload->downstream() != nullptr) {
    CheckOutbox(engine, in, present, check);
  }
}

void WriteAll(int fd, const std::string& s) {
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  return s;
}

}  // namespace

void Checker::Violation(const char* name, const std::string& counterexample) {
  for (const InvariantResult& r : out_->violations) {
    if (r.name == name) return;
  }
  InvariantResult r;
  r.name = name;
  r.passed = false;
  r.first_counterexample = counterexample;
  out_->violations.push_back(std::move(r));
}

VerifyOutput VerifyStore(const std::string& store_path,
                         const VerifyInput& input) {
  VerifyOutput out;
  Checker check(&out);
  Options options;
  options.create_if_missing = false;
  options.dedupe_scope = input.dedupe_scope;
  options.shards = input.shards;
  check.Evaluated("recovery_opens");
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(store_path, options);
  out.open_time = absl::Now() - start;
  if (absl::IsNotFound(engine.status()) && input.acked->empty()) {
    // Killed before the store was first created: nothing to check.
    return out;
  }
  if (!engine.ok()) {
    check.Violation("recovery_opens", engine.status().ToString());
    return out;
  }
  out.opened = true;
  CheckStore(**engine, input, check);
  return out;
}

absl::StatusOr<VerifyOutput> VerifyStoreInChild(const std::string& store_path,
                                                const VerifyInput& input) {
  int fds[2];
  if (::pipe(fds) != 0) {
    return absl::UnavailableError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    return absl::UnavailableError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    ::close(fds[0]);
    VerifyOutput out = VerifyStore(store_path, input);
    std::string text =
        out.opened ? absl::StrCat(
                         "T\t", absl::ToInt64Microseconds(out.open_time), "\n")
                   : std::string();
    for (const std::string& name : out.evaluated) {
      absl::StrAppend(&text, "E\t", name, "\n");
    }
    for (const InvariantResult& r : out.violations) {
      absl::StrAppend(&text, "V\t", r.name, "\t",
                      OneLine(r.first_counterexample), "\n");
    }
    WriteAll(fds[1], text);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  while (true) {
    const ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  VerifyOutput out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits('\t', 2));
    if (f.size() >= 2 && f[0] == "T") {
      int64_t micros = 0;
      if (absl::SimpleAtoi(f[1], &micros)) {
        out.opened = true;
        out.open_time = absl::Microseconds(micros);
      }
    } else if (f.size() >= 2 && f[0] == "E") {
      out.evaluated.push_back(f[1]);
    } else if (f.size() >= 2 && f[0] == "V") {
      InvariantResult r;
      r.name = f[1];
      r.passed = false;
      r.first_counterexample = f.size() > 2 ? f[2] : "";
      out.violations.push_back(std::move(r));
    }
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    InvariantResult r;
    r.name = "recovery_opens";
    r.passed = false;
    r.first_counterexample = absl::StrCat(
        "the verifier process died (",
        WIFSIGNALED(wstatus) ? absl::StrCat("signal ", WTERMSIG(wstatus))
                             : absl::StrCat("exit ", WEXITSTATUS(wstatus)),
        "); a RocksDB assertion or crash during recovery");
    out.violations.push_back(std::move(r));
  }
  return out;
}

}  // namespace idem::crash
