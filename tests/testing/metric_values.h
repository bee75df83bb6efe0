// Reading a prometheus::Registry in tests: a family by name, a series by
// its labels, a counter's value.

#ifndef IDEM_TESTS_TESTING_METRIC_VALUES_H_
#define IDEM_TESTS_TESTING_METRIC_VALUES_H_

#include <map>
#include <string>
#include <vector>

#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace idem::test {

// One family of `registry` by name, or null.
inline const prometheus::MetricFamily* Find(
    const std::vector<prometheus::MetricFamily>& families,
    const std::string& name) {
  for (const prometheus::MetricFamily& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// The series of `name` whose labels include `labels`, or null.
inline const prometheus::ClientMetric* Series(
    const std::vector<prometheus::MetricFamily>& families,
    const std::string& name, const std::map<std::string, std::string>& labels) {
  const prometheus::MetricFamily* family = Find(families, name);
  if (family == nullptr) return nullptr;
  for (const prometheus::ClientMetric& m : family->metric) {
    size_t matched = 0;
    for (const prometheus::ClientMetric::Label& l : m.label) {
      auto it = labels.find(l.name);
      if (it != labels.end() && it->second == l.value) ++matched;
    }
    if (matched == labels.size()) return &m;
  }
  return nullptr;
}

inline bool HasSeries(prometheus::Registry& registry, const std::string& name,
                      const std::map<std::string, std::string>& labels) {
  return Series(registry.Collect(), name, labels) != nullptr;
}

inline double CounterValue(
    prometheus::Registry& registry, const std::string& name,
    const std::map<std::string, std::string>& labels = {}) {
  const std::vector<prometheus::MetricFamily> families = registry.Collect();
  const prometheus::ClientMetric* m = Series(families, name, labels);
  return m == nullptr ? -1 : m->counter.value;
}

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_METRIC_VALUES_H_
