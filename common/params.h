// Helpers for kernel parameters (tunefarm.v1.ParamValue): printing,
// comparing, diffing and the JSON form in which parameters reach a kernel.
// All functions are pure and thread-safe.
#ifndef TUNEFARM_COMMON_PARAMS_H_
#define TUNEFARM_COMMON_PARAMS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/map.h"
#include "nlohmann/json.hpp"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

using ParamMap = google::protobuf::Map<std::string, v1::ParamValue>;

v1::ParamValue IntParam(int64_t v);
v1::ParamValue DoubleParam(double v);
v1::ParamValue StringParam(std::string v);
v1::ParamValue BoolParam(bool v);

// "64", "0.5", "true", "abc"; "<unset>" for an empty value.
std::string ParamValueToString(const v1::ParamValue& v);
bool ParamValueEquals(const v1::ParamValue& a, const v1::ParamValue& b);

// A canonical text of a parameter set ("a=1,b=2", names sorted): equal sets
// give equal keys, so it identifies a configuration.
std::string ParamsKey(const ParamMap& params);

// The moves from `parent` to `child`, names sorted.
std::vector<v1::ParamChange> DiffParams(const ParamMap& parent,
                                        const ParamMap& child);
// "tile_m 64→128, unroll 2→4"; "no change" for an empty list.
std::string DescribeChanges(
    const google::protobuf::RepeatedPtrField<v1::ParamChange>& changes);

// The JSON object a kernel reads: {"tile_m": 64, ...}.
nlohmann::json ParamsToJson(const ParamMap& params);
// A JSON scalar as a ParamValue; INVALID_ARGUMENT for arrays, objects, null.
absl::StatusOr<v1::ParamValue> ParamValueFromJson(const nlohmann::json& j);

}  // namespace tunefarm

#endif  // TUNEFARM_COMMON_PARAMS_H_
