// How the demos (idem-kafka-demo's two-process modes, idem-broker-demo)
// report a ledger balance check (examples::BalanceCheck): as a JSON object or
// as one line of text. Free functions: thread-safe.

#ifndef IDEM_CLI_BALANCE_REPORT_H_
#define IDEM_CLI_BALANCE_REPORT_H_

#include <string>
#include <string_view>

#include "examples/ledger.h"
#include "util/json_writer.h"

namespace idem::cli {

// `check` in a report: as the object {expected_total, actual_total,
// mismatched_accounts, first_mismatch} under `name`, or as one line of text
// ("balances total 12, payments total 15, 1 accounts differ (account ...)").
void WriteBalanceCheck(util::JsonWriter& j, std::string_view name,
                       const examples::BalanceCheck& check);
std::string DescribeBalanceCheck(const examples::BalanceCheck& check);

}  // namespace idem::cli

#endif  // IDEM_CLI_BALANCE_REPORT_H_
