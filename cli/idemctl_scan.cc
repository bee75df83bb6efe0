// idem-ctl's subcommand scan: the committed state keys under a prefix, in
// key order (Engine::ScanState), of the store or, in a sharded store, of
// one shard (Target).

#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cli/idemctl_request.h"
#include "engine/absl_view.h"
#include "engine/record.h"
#include "idem/engine.h"
#include "util/json_writer.h"

namespace idem::cli::idemctl {

std::optional<int> PrepareScan(Request& request, std::ostream& err) {
  const IdemctlArgs& args = request.args;
  if (args.limit.has_value()) {
    std::optional<int64_t> limit =
        ParseNonNegative(*args.limit, std::numeric_limits<int64_t>::max());
    if (!limit.has_value()) {
      return UsageError(err, absl::StrCat("--limit must be a whole number "
                                          ">= 0 (0: no limit), not '",
                                          *args.limit, "'"));
    }
    request.limit = static_cast<size_t>(*limit);
  }
  return std::nullopt;
}

int RunScan(Engine& engine, const Request& r, std::ostream& out,
            std::ostream& err) {
  const std::string prefix = r.args.prefix.value_or("");
  ScanOptions options;
  options.reverse = r.args.reverse;
  options.limit = r.limit;
  std::vector<std::pair<std::string, std::string>> entries;
  // A view of the committed state: a consumer may hold the store meanwhile.
  const absl::Status s = Target(engine, r).ScanState(
      prefix, KeyRangeEnd(prefix),
      [&](std::string_view key, std::string_view value) {
        entries.emplace_back(key, value);
        return true;
      },
      options);
  if (!s.ok()) return Fail(err, "scanning the state", s);
  if (r.args.json) {
    util::JsonWriter j;
    j.BeginObject();
    j.Key("prefix");
    j.Bytes(prefix);
    j.Field("reverse", options.reverse);
    j.Field("limit", static_cast<uint64_t>(options.limit));
    j.Field("count", static_cast<uint64_t>(entries.size()));
    if (std::optional<int> shard = TargetShard(engine, r)) {
      j.Field("shard", *shard);
    }
    j.Key("entries");
    j.BeginArray();
    for (const auto& [key, value] : entries) {
      j.BeginObject();
      j.Key("key");
      j.Bytes(key);
      j.Key("value");
      j.Bytes(value);
      j.EndObject();
    }
    j.EndArray();
    j.EndObject();
    out << j.str() << "\n";
  } else {
    // One line per key, its key and value C-escaped (tab-separated), then
    // the count.
    for (const auto& [key, value] : entries) {
      out << absl::CHexEscape(AbslView(key)) << "\t"
          << absl::CHexEscape(AbslView(value)) << "\n";
    }
    out << entries.size() << (entries.size() == 1 ? " key" : " keys") << "\n";
  }
  return kExitOk;
}

}  // namespace idem::cli::idemctl
