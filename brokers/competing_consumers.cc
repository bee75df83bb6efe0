#include "brokers/competing_consumers.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"

namespace idem::brokers {

void CompetingConsumers::Saw(std::string_view what) {
  if (++seen_ > 1) return;
  const std::string line = absl::StrCat(
      "idem: ", absl::string_view(what.data(), what.size()),
      ": consumers with stores of their own apply a message twice when it "
      "is redelivered from one to another; run one of the supported "
      "patterns (single active consumer, a source per instance, one shared "
      "store): see \"Competing consumers\" in docs/brokers.md");
  if (logger_ != nullptr) {
    logger_->Log(LogSeverity::kWarning, line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

}  // namespace idem::brokers
