#include "common/params.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tunefarm {

v1::ParamValue IntParam(int64_t v) {
  v1::ParamValue p;
  p.set_int_value(v);
  return p;
}
v1::ParamValue DoubleParam(double v) {
  v1::ParamValue p;
  p.set_double_value(v);
  return p;
}
v1::ParamValue StringParam(std::string v) {
  v1::ParamValue p;
  p.set_string_value(std::move(v));
  return p;
}
v1::ParamValue BoolParam(bool v) {
  v1::ParamValue p;
  p.set_bool_value(v);
  return p;
}

std::string ParamValueToString(const v1::ParamValue& v) {
  switch (v.kind_case()) {
    case v1::ParamValue::kIntValue:
      return absl::StrCat(v.int_value());
    case v1::ParamValue::kDoubleValue:
      return absl::StrCat(v.double_value());
    case v1::ParamValue::kStringValue:
      return v.string_value();
    case v1::ParamValue::kBoolValue:
      return v.bool_value() ? "true" : "false";
    case v1::ParamValue::KIND_NOT_SET:
      break;
  }
  return "<unset>";
}

bool ParamValueEquals(const v1::ParamValue& a, const v1::ParamValue& b) {
  if (a.kind_case() != b.kind_case()) return false;
  switch (a.kind_case()) {
    case v1::ParamValue::kIntValue:
      return a.int_value() == b.int_value();
    case v1::ParamValue::kDoubleValue:
      return a.double_value() == b.double_value();
    case v1::ParamValue::kStringValue:
      return a.string_value() == b.string_value();
    case v1::ParamValue::kBoolValue:
      return a.bool_value() == b.bool_value();
    case v1::ParamValue::KIND_NOT_SET:
      return true;
  }
  return false;
}

std::string ParamsKey(const ParamMap& params) {
  std::map<std::string, std::string> sorted;
  for (const auto& [name, value] : params) {
    sorted[name] = ParamValueToString(value);
  }
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

std::vector<v1::ParamChange> DiffParams(const ParamMap& parent,
                                        const ParamMap& child) {
  std::map<std::string, v1::ParamChange> moves;
  for (const auto& [name, to] : child) {
    auto it = parent.find(name);
    if (it != parent.end() && ParamValueEquals(it->second, to)) continue;
    v1::ParamChange& c = moves[name];
    c.set_name(name);
    if (it != parent.end()) *c.mutable_from() = it->second;
    *c.mutable_to() = to;
  }
  for (const auto& [name, from] : parent) {
    if (child.contains(name)) continue;
    v1::ParamChange& c = moves[name];
    c.set_name(name);
    *c.mutable_from() = from;
  }
  std::vector<v1::ParamChange> out;
  out.reserve(moves.size());
  for (auto& [name, c] : moves) out.push_back(std::move(c));
  return out;
}

std::string DescribeChanges(
    const google::protobuf::RepeatedPtrField<v1::ParamChange>& changes) {
  if (changes.empty()) return "no change";
  return absl::StrJoin(
      changes, ", ", [](std::string* out, const v1::ParamChange& c) {
        absl::StrAppend(out, c.name(), " ", ParamValueToString(c.from()), "→",
                        ParamValueToString(c.to()));
      });
}

nlohmann::json ParamsToJson(const ParamMap& params) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, v] : params) {
    switch (v.kind_case()) {
      case v1::ParamValue::kIntValue:
        j[name] = v.int_value();
        break;
      case v1::ParamValue::kDoubleValue:
        j[name] = v.double_value();
        break;
      case v1::ParamValue::kStringValue:
        j[name] = v.string_value();
        break;
      case v1::ParamValue::kBoolValue:
        j[name] = v.bool_value();
        break;
      case v1::ParamValue::KIND_NOT_SET:
        j[name] = nullptr;
        break;
    }
  }
  return j;
}

absl::StatusOr<v1::ParamValue> ParamValueFromJson(const nlohmann::json& j) {
  if (j.is_boolean()) return BoolParam(j.get<bool>());
  if (j.is_number_integer()) return IntParam(j.get<int64_t>());
  if (j.is_number_float()) return DoubleParam(j.get<double>());
  if (j.is_string()) return StringParam(j.get<std::string>());
  return absl::InvalidArgumentError(absl::StrCat(
      "parameter value must be a number, string or bool, got ", j.type_name()));
}

}  // namespace tunefarm
