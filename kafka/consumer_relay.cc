// ConsumerImpl's publishing of the engine's outbox after each batch
// (ConsumerOptions::relay_outbox).

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/absl_view.h"
#include "engine/user_code.h"
#include "kafka/consumer_impl.h"
#include "kafka/record_ids.h"

namespace idem::kafka {

absl::Status ConsumerImpl::RelayOutbox(BatchReport& report) {
  if (relay_ == nullptr || hooks_.skip_relay) return absl::OkStatus();
  const absl::Time start = absl::Now();
  absl::StatusOr<RelayReport> relayed = relay_->Drain();
  stats_.kafka_time += absl::Now() - start;
  if (!relayed.ok()) {
    NoteError(relayed.status());
    // A delivery that timed out (brokers down or unreachable) is as
    // transient as any other unavailability.
    const absl::StatusCode code = absl::IsDeadlineExceeded(relayed.status())
                                      ? absl::StatusCode::kUnavailable
                                      : relayed.status().code();
    if (changelog_ != nullptr) {
      // Some of the changelog may have reached Kafka and some not: only a
      // check against the changelog can tell which. Every held partition
      // is checked again (RecheckPartitions) before anything else is
      // processed, as on a new assignment; until then none is fenced, so
      // the relay publishes none of their changelog entries.
      changelog_->ReleaseAll();
      recheck_ = true;
      return absl::Status(
          code, absl::StrCat("changelog mode: publishing failed; every "
                             "partition is checked against its changelog "
                             "again before processing goes on: ",
                             relayed.status().message()));
    }
    return absl::Status(code, relayed.status().message());
  }
  report.outbox_published += relayed->published;
  stats_.outbox_published += relayed->published;
  stats_.outbox_dead_lettered += relayed->dead_lettered;
  return absl::OkStatus();
}

bool ConsumerImpl::OutboxFull() {
  if (options_.max_outbox_pending == 0 || relay_ == nullptr) return false;
  absl::StatusOr<Stats> stats = engine_->GetStats();
  if (!stats.ok()) return false;  // the next commit reports the store's error
  return stats->outbox_pending >
         static_cast<uint64_t>(options_.max_outbox_pending);
}

void ConsumerImpl::PauseInput() {
  bool paused = false;
  for (const TopicPartition& tp : assignment_) {
    if (!backpressured_.insert(tp).second) continue;
    PauseOrResume(tp, /*pause=*/true);
    paused = true;
  }
  if (paused) ++stats_.backpressure_pauses;
}

void ConsumerImpl::ResumeInput() {
  for (const TopicPartition& tp : backpressured_) {
    if (assignment_.contains(tp)) PauseOrResume(tp, /*pause=*/false);
  }
  backpressured_.clear();
}

}  // namespace idem::kafka
