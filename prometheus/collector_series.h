// What the Prometheus collectors share (internal to prometheus/): families
// registered with errors as statuses, one collector's series removed from
// its family with the collector, and counters that follow a running total.

#ifndef IDEM_PROMETHEUS_COLLECTOR_SERIES_H_
#define IDEM_PROMETHEUS_COLLECTOR_SERIES_H_

#include <algorithm>
#include <exception>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "prometheus/check_names.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/labels.h"
#include "prometheus/registry.h"

namespace idem::metrics {

// The family `name` of `builder`'s type in `registry`, created if missing.
// kInvalidArgument (prometheus-cpp's reason) for a bad name or a family of
// that name with another type or constant labels.
template <typename T>
absl::StatusOr<prometheus::Family<T>*> RegisterFamily(
    prometheus::detail::Builder<T> builder, const std::string& name,
    const std::string& help, prometheus::Registry& registry) {
  try {
    return &builder.Name(name).Help(help).Register(registry);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("registering ", name, ": ", e.what()));
  }
}

// kInvalidArgument, naming `what`, unless every name in `labels` is a
// Prometheus label name other than the `reserved` ones (the collector's own).
inline absl::Status CheckOwnLabels(
    const prometheus::Labels& labels,
    std::initializer_list<absl::string_view> reserved, absl::string_view what) {
  for (const auto& [name, value] : labels) {
    if (!prometheus::CheckLabelName(name) ||
        std::find(reserved.begin(), reserved.end(), name) != reserved.end()) {
      std::string names;
      for (absl::string_view r : reserved) absl::StrAppend(&names, " ", r);
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": '", name,
          "' is not a label name of its own (a Prometheus label name other "
          "than",
          names, ")"));
    }
  }
  return absl::OkStatus();
}

// One series of a family, removed from it on destruction. Move-only.
template <typename T>
class Series {
 public:
  Series() = default;
  Series(prometheus::Family<T>* family, T* metric)
      : family_(family), metric_(metric) {}
  Series(Series&& other) noexcept
      : family_(other.family_),
        metric_(std::exchange(other.metric_, nullptr)) {}
  Series& operator=(Series&& other) noexcept {
    if (this != &other) {
      Reset();
      family_ = other.family_;
      metric_ = std::exchange(other.metric_, nullptr);
    }
    return *this;
  }
  ~Series() { Reset(); }

  T& operator*() const { return *metric_; }
  T* operator->() const { return metric_; }

 private:
  void Reset() {
    if (metric_ != nullptr) family_->Remove(metric_);
    metric_ = nullptr;
  }

  prometheus::Family<T>* family_ = nullptr;
  T* metric_ = nullptr;
};

// Adds the series `labels` to `family` (`args` construct it, e.g. a
// histogram's bucket bounds). kAlreadyExists if the family has it already
// (another collector with the same labels); kInvalidArgument for a bad
// label name.
template <typename T, typename... Args>
absl::StatusOr<Series<T>> AddSeries(prometheus::Family<T>& family,
                                    const prometheus::Labels& labels,
                                    Args&&... args) {
  if (family.Has(labels)) {
    return absl::AlreadyExistsError(
        "the registry has these series already: give each collector of one "
        "registry its own labels");
  }
  try {
    return Series<T>(&family, &family.Add(labels, std::forward<Args>(args)...));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("adding a series: ", e.what()));
  }
}

// `labels` plus one more.
inline prometheus::Labels With(prometheus::Labels labels,
                               const std::string& name,
                               const std::string& value) {
  labels[name] = value;
  return labels;
}

// A running total the collector copies into a counter: Advance returns how
// much the counter moves so it never goes back. A total below the last one
// counts as a restart from zero (a new engine or consumer behind it).
class RunningTotal {
 public:
  double Advance(double total) {
    const double delta = total >= last_ ? total - last_ : total;
    last_ = total;
    return delta;
  }

 private:
  double last_ = 0;
};

// A counter series that follows a running total (RunningTotal).
struct FollowedCounter {
  Series<prometheus::Counter> series;
  RunningTotal total;

  void Follow(double value) { series->Increment(total.Advance(value)); }
};

}  // namespace idem::metrics

#endif  // IDEM_PROMETHEUS_COLLECTOR_SERIES_H_
