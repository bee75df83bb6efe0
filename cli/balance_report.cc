#include "cli/balance_report.h"

#include "absl/strings/str_cat.h"

namespace idem::cli {

void WriteBalanceCheck(util::JsonWriter& j, std::string_view name,
                       const examples::BalanceCheck& check) {
  j.Key(name);
  j.BeginObject();
  j.Field("expected_total", check.expected_total);
  j.Field("actual_total", check.actual_total);
  j.Field("mismatched_accounts", check.mismatched_accounts);
  j.Field("first_mismatch", check.first_mismatch);
  j.EndObject();
}

std::string DescribeBalanceCheck(const examples::BalanceCheck& check) {
  return absl::StrCat(
      "balances total ", check.actual_total, ", payments total ",
      check.expected_total, ", ", check.mismatched_accounts, " accounts differ",
      check.first_mismatch.empty() ? "" : " (", check.first_mismatch,
      check.first_mismatch.empty() ? "" : ")");
}

}  // namespace idem::cli
