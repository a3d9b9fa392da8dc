#include "coordinator/strategy_util.h"

#include <algorithm>

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

}  // namespace tunefarm
