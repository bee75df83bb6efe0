// The outbox invariants (kOutboxInvariantNames) of a workload with a
// Downstream, checked after each crash-test run against the recovered
// upstream store, the downstream store and what the event logs say was
// published. Free functions; thread-compatible.

#ifndef IDEM_CRASH_OUTBOX_VERIFIER_H_
#define IDEM_CRASH_OUTBOX_VERIFIER_H_

#include <string>
#include <utility>
#include <vector>

#include "crash/verifier.h"
#include "idem/engine.h"

namespace idem::crash {

// Adds one run's publications ((message ID, content) pairs, in order) to
// `contents`, which keeps the first content of each ID. Returns a
// counterexample for the first ID published with a second content, or ""
// if none was.
std::string AddPublished(
    const std::vector<std::pair<std::string, std::string>>& published,
    PublishedContents& contents);

// Opens the downstream store at `in.downstream_path` (no store yet: nothing
// applied) and checks no_lost_emit, one_content_per_id and
// downstream_exactly_once, and with `in.final_check` that the outbox is
// empty (final_complete). `committed[i]` says whether stream message i's
// dedupe record is in `upstream`. A downstream that does not open is a
// recovery_opens violation.
void CheckOutbox(Engine& upstream, const VerifyInput& in,
                 const std::vector<bool>& committed, Checker& check);

}  // namespace idem::crash

#endif  // IDEM_CRASH_OUTBOX_VERIFIER_H_
