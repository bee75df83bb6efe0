// Fuzzes the format check, FormatVersionFromFamilies (engine/store.h), with
// a list of column family names split from the input at each '\0' (a name
// may hold any other byte).
//
// Properties, for any list:
// - the answer is a version in [1, kFormatVersion], kFailedPrecondition or
//   kDataLoss, and an error names the store's path;
// - it does not depend on the order of the names;
// - an accepted list holds a format marker and every required family, and
//   the canonical list of that version (the required families and
//   FormatColumnFamilyName(version)) is accepted as the same version.
// A marker's number may be spelt any way absl::SimpleAtoi reads it
// ("idem.format.02" is format 2), so the marker itself need not be
// FormatColumnFamilyName(version).

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "engine/absl_view.h"
#include "engine/store.h"
#include "rocksdb/db.h"
#include "tests/fuzz/fuzz_target.h"

namespace idem::fuzz {
namespace {

constexpr std::string_view kPath = "/fuzz/store";

std::vector<std::string> SplitNames(std::string_view input) {
  std::vector<std::string> names;
  while (true) {
    const size_t at = input.find('\0');
    names.emplace_back(input.substr(0, at));
    if (at == std::string_view::npos) return names;
    input.remove_prefix(at + 1);
  }
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string joined;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) joined.push_back('\0');
    joined += names[i];
  }
  return joined;
}

std::vector<std::string> CanonicalNames(int version) {
  return {rocksdb::kDefaultColumnFamilyName, kDedupeColumnFamily,
          kStateColumnFamily, kOffsetsColumnFamily,
          FormatColumnFamilyName(version)};
}

bool Contains(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

std::vector<std::string> Seeds() {
  std::vector<std::string> with_bucket = CanonicalNames(2);
  with_bucket.push_back(BucketFamilyName(1'700'003'600'000'000));
  std::vector<std::string> missing_offsets = CanonicalNames(1);
  missing_offsets.erase(missing_offsets.begin() + 3);
  return {
      JoinNames(CanonicalNames(1)),
      JoinNames(CanonicalNames(2)),
      JoinNames(with_bucket),
      JoinNames(CanonicalNames(kFormatVersion + 1)),
      JoinNames(missing_offsets),
      JoinNames({rocksdb::kDefaultColumnFamilyName}),
  };
}

void FuzzOne(std::string_view input) {
  std::vector<std::string> names = SplitNames(input);
  const absl::StatusOr<int> version = FormatVersionFromFamilies(names, kPath);
  if (version.ok()) {
    IDEM_FUZZ_CHECK(*version >= 1 && *version <= kFormatVersion);
    IDEM_FUZZ_CHECK(
        std::any_of(names.begin(), names.end(), [](const std::string& name) {
          return name.starts_with(kFormatColumnFamilyPrefix);
        }));
    for (const char* required :
         {kDedupeColumnFamily, kStateColumnFamily, kOffsetsColumnFamily}) {
      IDEM_FUZZ_CHECK(Contains(names, required));
    }
    // Every marker is spelt as FormatColumnFamilyName writes it.
    for (const std::string& name : names) {
      if (!name.starts_with(kFormatColumnFamilyPrefix)) continue;
      bool written = false;
      for (int v = 1; v <= kFormatVersion; ++v) {
        written = written || FormatColumnFamilyName(v) == name;
      }
      IDEM_FUZZ_CHECK(written);
    }
    const absl::StatusOr<int> canonical =
        FormatVersionFromFamilies(CanonicalNames(*version), kPath);
    IDEM_FUZZ_CHECK(canonical.ok() && *canonical == *version);
  } else {
    IDEM_FUZZ_CHECK(version.status().code() ==
                        absl::StatusCode::kFailedPrecondition ||
                    version.status().code() == absl::StatusCode::kDataLoss);
    IDEM_FUZZ_CHECK(
        absl::StrContains(version.status().message(), AbslView(kPath)));
  }
  std::reverse(names.begin(), names.end());
  const absl::StatusOr<int> reversed = FormatVersionFromFamilies(names, kPath);
  IDEM_FUZZ_CHECK(reversed.status().code() == version.status().code());
  IDEM_FUZZ_CHECK(!version.ok() || *reversed == *version);
}

}  // namespace idem::fuzz
