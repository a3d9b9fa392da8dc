#include "coordinator/strategy_util.h"

#include <algorithm>
#include <cmath>

namespace tunefarm {

std::vector<v1::ParamValue> OrderedValues(const v1::ParameterDomain& domain) {
  std::vector<v1::ParamValue> ordered(domain.values().begin(),
                                      domain.values().end());
  if (std::all_of(ordered.begin(), ordered.end(), IsNumber)) {
    std::stable_sort(ordered.begin(), ordered.end(),
                     [](const v1::ParamValue& a, const v1::ParamValue& b) {
                       return AsDouble(a) < AsDouble(b);
                     });
  }
  return ordered;
}

int SuggestedPosition(const v1::Suggestion& s, int from, int given, int size) {
  int to = -1;
  if (s.direction() == "set") {
    to = given;
  } else if (s.direction() == "raise") {
    to = given > from ? given : from + 1;
  } else if (s.direction() == "lower") {
    to = given >= 0 && given < from ? given : from - 1;
  }
  return to < 0 || to >= size || to == from ? -1 : to;
}

double OrderWeight(const std::vector<std::vector<double>>& times,
                   double undetermined) {
  std::vector<double> means;
  for (const std::vector<double>& t : times) {
    if (t.empty()) continue;
    double sum = 0;
    for (double x : t) sum += x;
    means.push_back(sum / static_cast<double>(t.size()));
  }
  if (means.size() < 3) return undetermined;
  double adjacent = 0, all = 0;
  for (size_t i = 0; i + 1 < means.size(); ++i) {
    adjacent += std::abs(means[i + 1] - means[i]);
  }
  adjacent /= static_cast<double>(means.size() - 1);
  int pairs = 0;
  for (size_t i = 0; i < means.size(); ++i) {
    for (size_t j = i + 1; j < means.size(); ++j) {
      all += std::abs(means[j] - means[i]);
      ++pairs;
    }
  }
  all /= pairs;
  if (all <= 0) return undetermined;
  return std::clamp(1 - adjacent / all, 0.0, 1.0);
}

}  // namespace tunefarm
