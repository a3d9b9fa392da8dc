#include "ops/spaces/space_file.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "ops/constraints.h"

namespace tunefarm {
namespace {

// ordered: the file order of configurations is kept (the first one is the
// manifest default).
using json = nlohmann::ordered_json;

absl::Status Bad(absl::string_view source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
}

bool IsGzip(absl::string_view s) {
  return s.size() >= 2 && static_cast<unsigned char>(s[0]) == 0x1f &&
         static_cast<unsigned char>(s[1]) == 0x8b;
}

absl::StatusOr<std::string> Gunzip(absl::string_view in,
                                   absl::string_view source) {
  z_stream zs{};
  // 15 + 16: zlib window, gzip header expected.
  if (inflateInit2(&zs, 15 + 16) != Z_OK) {
    return absl::InternalError(absl::StrCat(source, ": inflateInit2 failed"));
  }
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  std::string out;
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&zs);
      return Bad(source,
                 absl::StrCat("corrupt gzip data (zlib error ", rc, ")"));
    }
    out.append(buf, sizeof(buf) - zs.avail_out);
    if (rc == Z_OK && zs.avail_in == 0 && zs.avail_out != 0) {
      inflateEnd(&zs);
      return Bad(source, "truncated gzip data");
    }
  }
  inflateEnd(&zs);
  return out;
}

absl::StatusOr<v1::ParamValue> Value(const json& j, absl::string_view source,
                                     absl::string_view where) {
  if (j.is_boolean()) return BoolParam(j.get<bool>());
  if (j.is_number_integer()) return IntParam(j.get<int64_t>());
  if (j.is_number_float()) return DoubleParam(j.get<double>());
  if (j.is_string()) return StringParam(j.get<std::string>());
  return Bad(source, absl::StrCat(where, ": not a number, string or bool"));
}

bool IsNumber(const v1::ParamValue& v) {
  return v.kind_case() == v1::ParamValue::kIntValue ||
         v.kind_case() == v1::ParamValue::kDoubleValue;
}
double AsDouble(const v1::ParamValue& v) {
  return v.kind_case() == v1::ParamValue::kIntValue
             ? static_cast<double>(v.int_value())
             : v.double_value();
}

// Adds a value to a domain unless present (domains from observed values).
void AddToDomain(SpaceParameter& p, const v1::ParamValue& v) {
  for (const v1::ParamValue& x : p.values) {
    if (ParamValueEquals(x, v)) return;
  }
  p.values.push_back(v);
}

void SortDomain(SpaceParameter& p) {
  const bool numeric = std::all_of(p.values.begin(), p.values.end(), IsNumber);
  if (!numeric) return;
  std::stable_sort(p.values.begin(), p.values.end(),
                   [](const v1::ParamValue& a, const v1::ParamValue& b) {
                     return AsDouble(a) < AsDouble(b);
                   });
}

// Time unit name -> factor to microseconds.
absl::StatusOr<double> UnitToUs(std::string unit, absl::string_view source) {
  unit = absl::AsciiStrToLower(unit);
  if (unit == "microseconds" || unit == "us") return 1.0;
  // T4 files in the wild spell it "miliseconds".
  if (unit == "milliseconds" || unit == "miliseconds" || unit == "ms") {
    return 1000.0;
  }
  if (unit == "seconds" || unit == "s") return 1e6;
  if (unit == "nanoseconds" || unit == "ns") return 1e-3;
  return Bad(source, absl::StrCat("unknown time unit '", unit, "'"));
}

absl::Status ParseKernelTuner(const json& doc, absl::string_view src,
                              Space& space) {
  space.format = "kernel_tuner";
  space.tool = "Kernel Tuner";
  space.kernel = doc.value("kernel_name", "");
  space.device = doc.value("device_name", "");
  const json& tp = doc.at("tune_params");
  if (!tp.is_object() || tp.empty()) return Bad(src, "tune_params: empty");
  std::vector<std::string> keys;
  if (doc.contains("tune_params_keys")) {
    keys = doc.at("tune_params_keys").get<std::vector<std::string>>();
  } else {
    for (const auto& [k, v] : tp.items()) keys.push_back(k);
  }
  for (const std::string& k : keys) {
    if (!tp.contains(k) || !tp.at(k).is_array() || tp.at(k).empty()) {
      return Bad(src, absl::StrCat("tune_params.", k, ": missing or empty"));
    }
    SpaceParameter p{k, {}};
    for (const json& v : tp.at(k)) {
      TF_ASSIGN_OR_RETURN(v1::ParamValue pv,
                          Value(v, src, absl::StrCat("tune_params.", k)));
      p.values.push_back(std::move(pv));
    }
    space.parameters.push_back(std::move(p));
  }
  const std::string objective = doc.value("objective", "time");
  const json& cache = doc.at("cache");
  if (!cache.is_object()) return Bad(src, "cache: not an object");
  for (const auto& [key, entry] : cache.items()) {
    SpaceConfig c;
    for (const std::string& k : keys) {
      if (!entry.contains(k)) {
        return Bad(src, absl::StrCat("cache[\"", key, "\"]: no ", k));
      }
      TF_ASSIGN_OR_RETURN(
          c.params[k],
          Value(entry.at(k), src, absl::StrCat("cache[\"", key, "\"].", k)));
    }
    if (!entry.contains(objective)) {
      return Bad(src, absl::StrCat("cache[\"", key, "\"]: no ", objective));
    }
    const json& t = entry.at(objective);
    if (t.is_number()) {
      c.time_us = t.get<double>() * 1000.0;  // Kernel Tuner records ms
      if (entry.contains("times") && entry.at("times").is_array()) {
        for (const json& s : entry.at("times")) {
          if (s.is_number()) c.samples_us.push_back(s.get<double>() * 1000.0);
        }
      }
    } else if (t.is_string()) {
      c.failure = t.get<std::string>();
      c.outcome = absl::StrContains(c.failure, "Compil")
                      ? SpaceOutcome::kCompileFailed
                      : SpaceOutcome::kRuntimeFailed;
    } else {
      return Bad(src, absl::StrCat("cache[\"", key, "\"].", objective,
                                   ": neither a number nor a failure"));
    }
    space.configs.push_back(std::move(c));
  }
  return absl::OkStatus();
}

absl::Status ParseT4(const json& doc, absl::string_view src, Space& space) {
  space.format = "t4";
  space.tool = "T4 results (schema " + doc.value("schema_version", "?") + ")";
  double to_us = 1000.0;  // the T4 default unit is ms
  if (doc.contains("metadata") && doc.at("metadata").contains("timeunit")) {
    TF_ASSIGN_OR_RETURN(
        to_us,
        UnitToUs(doc.at("metadata").at("timeunit").get<std::string>(), src));
  }
  const json& results = doc.at("results");
  if (!results.is_array()) return Bad(src, "results: not an array");
  std::map<std::string, size_t> param_index;
  for (size_t i = 0; i < results.size(); ++i) {
    const json& r = results[i];
    const std::string where = absl::StrCat("results[", i, "]");
    SpaceConfig c;
    const json& conf = r.at("configuration");
    for (const auto& [k, v] : conf.items()) {
      TF_ASSIGN_OR_RETURN(
          v1::ParamValue pv,
          Value(v, src, absl::StrCat(where, ".configuration.", k)));
      auto [it, added] = param_index.emplace(k, space.parameters.size());
      if (added) space.parameters.push_back(SpaceParameter{k, {}});
      AddToDomain(space.parameters[it->second], pv);
      c.params[k] = std::move(pv);
    }
    const std::string invalidity = r.value("invalidity", "correct");
    if (invalidity == "correct") {
      bool found = false;
      for (const json& m : r.at("measurements")) {
        if (m.value("name", "") == "time" && m.at("value").is_number()) {
          c.time_us = m.at("value").get<double>() * to_us;
          found = true;
        }
      }
      if (!found) return Bad(src, absl::StrCat(where, ": correct but no time"));
      if (r.contains("times") && r.at("times").contains("runtimes")) {
        for (const json& s : r.at("times").at("runtimes")) {
          if (s.is_number()) c.samples_us.push_back(s.get<double>() * to_us);
        }
      }
    } else {
      c.failure = invalidity;
      c.outcome = invalidity == "compile" ? SpaceOutcome::kCompileFailed
                                          : SpaceOutcome::kRuntimeFailed;
    }
    space.configs.push_back(std::move(c));
  }
  for (SpaceParameter& p : space.parameters) SortDomain(p);
  return absl::OkStatus();
}

absl::Status ParseKtt(const json& doc, absl::string_view src, Space& space) {
  space.format = "ktt";
  const json& meta = doc.at("Metadata");
  space.tool = absl::StrCat("KTT ", meta.value("KttVersion", ""));
  space.device = meta.value("Device", "");
  TF_ASSIGN_OR_RETURN(double to_us,
                      UnitToUs(meta.value("TimeUnit", "Microseconds"), src));
  const json& results = doc.at("Results");
  if (!results.is_array()) return Bad(src, "Results: not an array");
  std::map<std::string, size_t> param_index;
  for (size_t i = 0; i < results.size(); ++i) {
    const json& r = results[i];
    const std::string where = absl::StrCat("Results[", i, "]");
    if (space.kernel.empty()) space.kernel = r.value("KernelName", "");
    SpaceConfig c;
    for (const json& p : r.at("Configuration")) {
      const std::string name = p.at("Name").get<std::string>();
      TF_ASSIGN_OR_RETURN(v1::ParamValue pv,
                          Value(p.at("Value"), src,
                                absl::StrCat(where, ".Configuration.", name)));
      auto [it, added] = param_index.emplace(name, space.parameters.size());
      if (added) space.parameters.push_back(SpaceParameter{name, {}});
      AddToDomain(space.parameters[it->second], pv);
      c.params[name] = std::move(pv);
    }
    const std::string status = r.at("Status").get<std::string>();
    if (status == "Ok") {
      c.time_us = r.at("TotalDuration").get<double>() * to_us;
    } else {
      c.failure = status;
      c.outcome = absl::StrContains(status, "Compil")
                      ? SpaceOutcome::kCompileFailed
                      : SpaceOutcome::kRuntimeFailed;
    }
    space.configs.push_back(std::move(c));
  }
  for (SpaceParameter& p : space.parameters) SortDomain(p);
  return absl::OkStatus();
}

}  // namespace

const SpaceConfig* Space::Find(const ParamMap& params) const {
  auto it = index.find(ParamsKey(params));
  return it == index.end() ? nullptr : &configs[it->second];
}

double Space::CartesianSize() const {
  double n = 1;
  for (const SpaceParameter& p : parameters) n *= p.values.size();
  return n;
}

absl::StatusOr<Space> ParseSpace(absl::string_view content,
                                 absl::string_view source_name) {
  std::string inflated;
  if (IsGzip(content)) {
    TF_ASSIGN_OR_RETURN(inflated, Gunzip(content, source_name));
    content = inflated;
  }
  Space space;
  space.file = std::string(source_name);
  try {
    const json doc = json::parse(content);
    if (!doc.is_object()) return Bad(source_name, "not a JSON object");
    if (doc.contains("cache") && doc.contains("tune_params")) {
      TF_RETURN_IF_ERROR(ParseKernelTuner(doc, source_name, space));
    } else if (doc.contains("results") && doc.contains("schema_version")) {
      TF_RETURN_IF_ERROR(ParseT4(doc, source_name, space));
    } else if (doc.contains("Results") && doc.contains("Metadata")) {
      TF_RETURN_IF_ERROR(ParseKtt(doc, source_name, space));
    } else {
      return Bad(source_name,
                 "not a Kernel Tuner cache (cache + tune_params), T4 file "
                 "(results + schema_version) or KTT output (Results + "
                 "Metadata)");
    }
  } catch (const std::exception& e) {
    return Bad(source_name, e.what());
  }
  if (space.parameters.empty()) return Bad(source_name, "no parameters");
  if (space.configs.empty()) return Bad(source_name, "no configurations");
  for (size_t i = 0; i < space.configs.size(); ++i) {
    SpaceConfig& c = space.configs[i];
    if (c.params.size() != space.parameters.size()) {
      return Bad(source_name,
                 absl::StrCat("configuration ", i, " sets ", c.params.size(),
                              " of ", space.parameters.size(), " parameters"));
    }
    std::string key = ParamsKey(c.params);
    if (!space.index.emplace(std::move(key), i).second) {
      return Bad(source_name,
                 absl::StrCat("configuration ", i, " (", ParamsKey(c.params),
                              ") appears twice"));
    }
    if (c.outcome != SpaceOutcome::kOk) continue;
    ++space.ok_count;
    if (space.best_index < 0 || c.time_us < space.best_us) {
      space.best_index = static_cast<int64_t>(i);
      space.best_us = c.time_us;
    }
  }
  return space;
}

absl::StatusOr<Space> LoadSpaceFile(const std::string& path) {
  TF_ASSIGN_OR_RETURN(std::string content, ReadFile(path));
  return ParseSpace(content, path);
}

std::string StageForSpaceParameter(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  auto any = [&](std::initializer_list<const char*> words) {
    for (const char* w : words) {
      if (absl::StrContains(n, w)) return true;
    }
    return false;
  };
  // CLBlast's GEMM names: MWG/NWG/KWG work-group tile, MDIMC/NDIMC/MDIMA/
  // NDIMB thread-block shapes; KWI the k-loop unroll, STRM/STRN strided
  // access, SA/SB staging through local memory; VWM/VWN vector widths.
  if (n == "mwg" || n == "nwg" || n == "kwg" || n == "mdimc" || n == "ndimc" ||
      n == "mdima" || n == "ndimb") {
    return "tiling";
  }
  if (n == "kwi" || n == "strm" || n == "strn" || n == "sa" || n == "sb") {
    return "pipeline";
  }
  if (any({"stride"})) return "pipeline";
  if (any({"block", "tile", "work_group", "workgroup", "wg_"})) return "tiling";
  if (any({"unroll", "shmem", "shared", "padding", "read_only", "cache",
           "iteration", "buffer", "stage", "prefetch", "pipeline"})) {
    return "pipeline";
  }
  return "in_core";
}

v1::OperatorManifest ManifestFromSpace(const Space& space) {
  v1::OperatorManifest op;
  std::string name;
  for (char ch : space.kernel.empty() ? std::string("space") : space.kernel) {
    name +=
        std::isalnum(static_cast<unsigned char>(ch))
            ? static_cast<char>(std::tolower(static_cast<unsigned char>(ch)))
            : '_';
  }
  if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0]))) {
    name = "k_" + name;
  }
  op.set_name(name);
  op.set_description(
      absl::StrCat("measured space ", space.file, " (", space.tool, ", ",
                   space.device.empty() ? "unnamed GPU" : space.device, ")"));
  const SpaceConfig* first = &space.configs.front();
  for (const SpaceConfig& c : space.configs) {
    if (c.outcome == SpaceOutcome::kOk) {
      if (first->outcome != SpaceOutcome::kOk) first = &c;
      break;
    }
  }
  for (const SpaceParameter& sp : space.parameters) {
    SpaceParameter sorted = sp;
    SortDomain(sorted);
    v1::ParameterDomain* p = op.add_parameters();
    p->set_name(sp.name);
    for (const v1::ParamValue& v : sorted.values) *p->add_values() = v;
    *p->mutable_default_value() = first->params.at(sp.name);
    p->set_stage(StageForSpaceParameter(sp.name));
  }
  for (std::string& c : KnownSpaceConstraints(space)) op.add_constraints(c);
  op.mutable_tolerances();
  // The files record no problem size: the one workload names the space.
  v1::Workload* w = op.add_workloads();
  w->set_name("recorded");
  w->set_dtype("recorded");
  (*w->mutable_dims())["configs"] = static_cast<int64_t>(space.configs.size());
  (*op.mutable_backends())["replay"];
  return op;
}

std::vector<std::string> KnownSpaceConstraints(const Space& space) {
  struct Family {
    std::vector<std::string> signature;  // parameters that identify it
    std::vector<std::string> constraints;
  };
  // Copied from PROVENANCE.md ("Constraints, taken from the upstream T1/KTT
  // input files"); each set reproduces its files' configuration list.
  static const auto* families = new std::vector<Family>{
      {{"MWG", "NWG", "KWG", "KWI", "MDIMC", "NDIMC", "MDIMA", "NDIMB", "VWM",
        "VWN"},
       {"KWG % KWI == 0", "MWG % (MDIMC*VWM) == 0", "NWG % (NDIMC*VWN) == 0",
        "MWG % (MDIMA*VWM) == 0", "NWG % (NDIMB*VWN) == 0",
        "KWG % ((MDIMC*NDIMC)/MDIMA) == 0",
        "KWG % ((MDIMC*NDIMC)/NDIMB) == 0"}},
      {{"block_size_x", "block_size_y", "tile_size_x", "tile_size_y",
        "use_padding", "use_shmem", "filter_width", "filter_height"},
       {"use_padding==0 or block_size_x % 32 != 0",
        "block_size_x*block_size_y<=1024", "use_padding==0 or use_shmem != 0",
        "use_shmem == 0 or ((block_size_x*tile_size_x+(filter_width-1))*"
        "(block_size_y*tile_size_y+(filter_height-1))) < 12*1024"}},
      {{"block_size_x", "block_size_y", "tile_size_x", "tile_size_y",
        "tile_stride_x", "tile_stride_y"},
       {"32 <= block_size_x*block_size_y <= 1024",
        "tile_size_x > 1 or tile_stride_x == 0",
        "tile_size_y > 1 or tile_stride_y == 0"}},
      {{"INNER_UNROLL_FACTOR", "Z_ITERATIONS", "WORK_GROUP_SIZE_X",
        "WORK_GROUP_SIZE_Y"},
       {"INNER_UNROLL_FACTOR < Z_ITERATIONS",
        "WORK_GROUP_SIZE_X*WORK_GROUP_SIZE_Y >= 64"}},
  };
  for (const Family& f : *families) {
    const bool match = std::all_of(
        f.signature.begin(), f.signature.end(), [&](const std::string& n) {
          return std::any_of(
              space.parameters.begin(), space.parameters.end(),
              [&](const SpaceParameter& p) { return p.name == n; });
        });
    if (match) return f.constraints;
  }
  return {};
}

namespace {

// A YAML flow scalar for a parameter value; doubles keep a decimal point so
// that they read back as doubles.
std::string YamlScalar(const v1::ParamValue& v) {
  switch (v.kind_case()) {
    case v1::ParamValue::kIntValue:
      return absl::StrCat(v.int_value());
    case v1::ParamValue::kDoubleValue: {
      std::string d = json(v.double_value()).dump();
      if (d.find_first_of(".eE") == std::string::npos) d += ".0";
      return d;
    }
    case v1::ParamValue::kBoolValue:
      return v.bool_value() ? "true" : "false";
    default:
      return json(v.string_value()).dump();  // JSON strings are YAML
  }
}

}  // namespace

std::string ManifestParameterName(absl::string_view space_name) {
  std::string out;
  for (char ch : space_name) {
    const unsigned char c = static_cast<unsigned char>(ch);
    out += std::isalnum(c) ? static_cast<char>(std::tolower(c)) : '_';
  }
  if (out.empty() || !std::isalpha(static_cast<unsigned char>(out[0]))) {
    out = "p_" + out;
  }
  return out;
}

std::string SpaceManifestYaml(const Space& space, const std::string& name) {
  v1::OperatorManifest op = ManifestFromSpace(space);
  if (!name.empty()) op.set_name(name);
  std::string y = absl::StrCat(
      "# Generated from the measured space ", space.file,
      "; served by replay boards.\n", "name: ", op.name(),
      "\ndescription: ", json(op.description()).dump(), "\nparameters:\n");
  for (const v1::ParameterDomain& p : op.parameters()) {
    std::vector<std::string> values;
    for (const v1::ParamValue& v : p.values()) values.push_back(YamlScalar(v));
    absl::StrAppend(&y, "  - name: ", ManifestParameterName(p.name()),
                    "\n    values: [", absl::StrJoin(values, ", "),
                    "]\n    default: ", YamlScalar(p.default_value()),
                    "\n    stage: ", p.stage(), "\n");
  }
  // The constraints name the file's parameters: the same renaming, or the
  // catalog would refuse them (or a board would never see them enforced).
  if (!op.constraints().empty()) absl::StrAppend(&y, "constraints:\n");
  for (const std::string& c : op.constraints()) {
    absl::StatusOr<std::string> renamed =
        RenameConstraintParameters(c, [](std::string_view n) {
          return ManifestParameterName(absl::string_view(n.data(), n.size()));
        });
    // KnownSpaceConstraints are fixed texts that parse (spaces_test).
    absl::StrAppend(&y, "  - ", json(renamed.ok() ? *renamed : c).dump(), "\n");
  }
  const v1::Workload& w = op.workloads(0);
  absl::StrAppend(&y, "workloads:\n  - {name: ", w.name(),
                  ", dtype: ", w.dtype(),
                  ", dims: {configs: ", w.dims().at("configs"), "}}\n",
                  "tolerances: {rtol: 0, atol: 0}\nbackends:\n  replay: {}\n");
  return y;
}

}  // namespace tunefarm
