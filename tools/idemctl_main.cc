// idem-ctl: inspect and maintain an idem store. Parses flags and hands over
// to idem::cli::RunIdemctl (cli/idemctl.h), which holds the logic and the
// list of subcommands.

#include <deque>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/idemctl.h"
#include "cli/tool_usage.h"

int main(int argc, char** argv) {
  std::unique_ptr<CLI::App> app =
      idem::cli::MakeToolApp("idem-ctl", idem::cli::IdemctlUsage());
  idem::cli::IdemctlArgs args;
  app->add_option("--store", args.store,
                  "Path of an existing idem store (required).");
  app->add_flag("--json", args.json,
                "Machine-readable output: one JSON object per result. dump "
                "and export always write JSON lines.");
  std::string source, partition;
  CLI::Option* source_flag = app->add_option(
      "--source", source,
      "seen, forget, export: the source of the partition (or give it in "
      "--partition=SOURCE:P); seen and forget need it in a partition-scoped "
      "store.");
  CLI::Option* partition_flag = app->add_option(
      "--partition", partition,
      "seen, forget, export: the partition, P (with --source) or SOURCE:P; "
      "get, scan: in a sharded store, the partition whose shard to read.");
  std::string shard;
  CLI::Option* shard_flag = app->add_option(
      "--shard", shard,
      "A sharded store's shard N (0 to shards - 1) for stats, offsets, "
      "compact, dump, verify and metrics (default: every shard) and for get "
      "and scan (which need it, or --partition, in a sharded store).");
  std::string prefix, limit;
  CLI::Option* prefix_flag =
      app->add_option("--prefix", prefix,
                      "scan: the prefix of the keys to list (default: all).");
  CLI::Option* limit_flag = app->add_option(
      "--limit", limit, "scan: list at most this many keys (0: all).");
  app->add_flag("--reverse", args.reverse,
                "scan: list the keys in reverse order.");
  // At most one subcommand; a word that names none is kept as an extra, so
  // that it can be reported as an unknown subcommand (CLI11 would only say
  // that a subcommand is required).
  app->require_subcommand(0, 1);
  app->allow_extras();
  // One string per positional argument of every subcommand; a deque keeps
  // them where CLI11 writes them.
  std::deque<std::string> values;
  for (const idem::cli::IdemctlSubcommand& s :
       idem::cli::IdemctlSubcommands()) {
    CLI::App* sub =
        app->add_subcommand(std::string(s.name), std::string(s.help));
    sub->fallthrough();  // the flags may follow the subcommand
    for (std::string_view arg : s.args) {
      sub->add_option(std::string(arg), values.emplace_back())->required();
    }
  }
  if (std::optional<int> code =
          idem::cli::ParseToolFlags(*app, argc, argv, std::cout, std::cerr)) {
    return *code;
  }
  if (source_flag->count() > 0) args.source = source;
  if (partition_flag->count() > 0) args.partition = partition;
  if (shard_flag->count() > 0) args.shard = shard;
  if (prefix_flag->count() > 0) args.prefix = prefix;
  if (limit_flag->count() > 0) args.limit = limit;
  const std::vector<std::string> extras = app->remaining();
  if (!extras.empty() &&
      (!app->get_subcommands().empty() || extras.front().starts_with("-"))) {
    return idem::cli::ReportUsageError(
        "idem-ctl",
        absl::StrCat(extras.front().starts_with("-") ? "unknown flag "
                                                     : "unexpected argument ",
                     extras.front()),
        std::cerr);
  }
  if (app->get_subcommands().empty()) {
    // RunIdemctl names the unknown subcommand, or says that none was given.
    if (!extras.empty()) args.command.push_back(extras.front());
  } else {
    CLI::App* sub = app->get_subcommands().front();
    args.command.push_back(sub->get_name());
    for (const CLI::Option* o : sub->get_options(
             [](const CLI::Option* o) { return o->get_positional(); })) {
      args.command.push_back(o->as<std::string>());
    }
  }
  return idem::cli::RunIdemctl(args, std::cout, std::cerr);
}
