#include "ops/catalog.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/digest.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "ops/constraints.h"
#include "ops/yaml_fields.h"

namespace tunefarm {
namespace {

namespace fs = std::filesystem;
using yamlf::Child;
using yamlf::FieldError;
using yamlf::Get;
using yamlf::Has;
using yamlf::Index;

constexpr size_t kMaxParameters = 256;
constexpr size_t kMaxValues = 4096;
constexpr size_t kMaxWorkloads = 1024;
constexpr size_t kMaxCommandArgs = 256;
constexpr int64_t kMaxDim = int64_t{1} << 40;

const char* KindName(v1::ParamValue::KindCase k) {
  switch (k) {
    case v1::ParamValue::kIntValue:
      return "an integer";
    case v1::ParamValue::kDoubleValue:
      return "a double";
    case v1::ParamValue::kStringValue:
      return "a string";
    case v1::ParamValue::kBoolValue:
      return "a bool";
    case v1::ParamValue::KIND_NOT_SET:
      break;
  }
  return "unset";
}

// "[16, 32, 64]", shortened for long domains.
std::string FormatValues(
    const google::protobuf::RepeatedPtrField<v1::ParamValue>& values) {
  constexpr int kShown = 16;
  std::vector<std::string> parts;
  for (int i = 0; i < values.size() && i < kShown; ++i) {
    parts.push_back(ParamValueToString(values[i]));
  }
  if (values.size() > kShown) {
    parts.push_back(absl::StrCat("... (", values.size(), " values)"));
  }
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

bool InDomain(const v1::ParameterDomain& p, const v1::ParamValue& v) {
  return std::any_of(
      p.values().begin(), p.values().end(),
      [&](const v1::ParamValue& d) { return ParamValueEquals(d, v); });
}

absl::Status RequirePresent(const YAML::Node& map, absl::string_view key,
                            absl::string_view path) {
  if (!Has(map, key)) return FieldError(Child(path, key), "is required");
  return absl::OkStatus();
}

absl::Status ParseParameter(const YAML::Node& node, const std::string& path,
                            v1::ParameterDomain* out) {
  TF_RETURN_IF_ERROR(yamlf::CheckMap(
      node, path,
      {"name", "values", "default", "stage", "description", "backends"}));
  TF_RETURN_IF_ERROR(RequirePresent(node, "name", path));
  TF_ASSIGN_OR_RETURN(std::string name,
                      yamlf::GetString(Get(node, "name"), Child(path, "name")));
  TF_RETURN_IF_ERROR(yamlf::CheckIdentifier(Child(path, "name"), name));
  out->set_name(name);

  const std::string values_path = Child(path, "values");
  const YAML::Node values = Get(node, "values");
  if (!values.IsDefined() || values.IsNull()) {
    return FieldError(values_path, "is required");
  }
  if (!values.IsSequence()) {
    return FieldError(values_path, absl::StrCat("expected a list, got ",
                                                yamlf::Describe(values)));
  }
  if (values.size() == 0) return FieldError(values_path, "must not be empty");
  if (values.size() > kMaxValues) {
    return FieldError(values_path,
                      absl::StrCat("has ", values.size(),
                                   " values; the limit is ", kMaxValues));
  }
  bool any_double = false;
  for (size_t i = 0; i < values.size(); ++i) {
    TF_ASSIGN_OR_RETURN(v1::ParamValue v,
                        yamlf::GetParamValue(values[i], Index(values_path, i)));
    any_double = any_double || v.has_double_value();
    *out->add_values() = std::move(v);
  }
  // Integers among doubles are doubles ("[0.5, 1, 2]").
  if (any_double) {
    for (v1::ParamValue& v : *out->mutable_values()) {
      if (v.has_int_value())
        v.set_double_value(static_cast<double>(v.int_value()));
    }
  }
  const v1::ParamValue::KindCase kind = out->values(0).kind_case();
  std::set<std::string> seen;
  for (int i = 0; i < out->values_size(); ++i) {
    const v1::ParamValue& v = out->values(i);
    if (v.kind_case() != kind) {
      return FieldError(Index(values_path, i),
                        absl::StrCat("'", ParamValueToString(v), "' is ",
                                     KindName(v.kind_case()),
                                     " but values[0] is ", KindName(kind),
                                     "; a parameter's values share one type"));
    }
    if (!seen.insert(ParamValueToString(v)).second) {
      return FieldError(
          Index(values_path, i),
          absl::StrCat("duplicate value ", ParamValueToString(v)));
    }
  }

  const std::string default_path = Child(path, "default");
  TF_RETURN_IF_ERROR(RequirePresent(node, "default", path));
  TF_ASSIGN_OR_RETURN(v1::ParamValue def,
                      yamlf::GetParamValue(Get(node, "default"), default_path));
  if (kind == v1::ParamValue::kDoubleValue && def.has_int_value()) {
    def.set_double_value(static_cast<double>(def.int_value()));
  }
  if (!InDomain(*out, def)) {
    return FieldError(default_path, absl::StrCat(ParamValueToString(def),
                                                 " is not one of values ",
                                                 FormatValues(out->values())));
  }
  *out->mutable_default_value() = std::move(def);

  out->set_stage("tiling");
  if (Has(node, "stage")) {
    const std::string stage_path = Child(path, "stage");
    TF_ASSIGN_OR_RETURN(std::string stage,
                        yamlf::GetString(Get(node, "stage"), stage_path));
    if (stage != "tiling" && stage != "pipeline" && stage != "in_core") {
      TF_RETURN_IF_ERROR(yamlf::CheckText(stage_path, stage, 64));
      return FieldError(stage_path,
                        absl::StrCat("unknown stage '", stage,
                                     "'; known: tiling, pipeline, in_core"));
    }
    out->set_stage(stage);
  }
  if (Has(node, "description")) {
    const std::string p = Child(path, "description");
    TF_ASSIGN_OR_RETURN(std::string d,
                        yamlf::GetString(Get(node, "description"), p));
    TF_RETURN_IF_ERROR(yamlf::CheckText(p, d, yamlf::kMaxStringBytes, true));
    out->set_description(d);
  }
  if (Has(node, "backends")) {
    const std::string p = Child(path, "backends");
    const YAML::Node kinds = Get(node, "backends");
    if (!kinds.IsSequence() || kinds.size() == 0) {
      return FieldError(
          p, absl::StrCat("must be a non-empty list of board kinds, got ",
                          yamlf::Describe(kinds)));
    }
    std::set<std::string> seen_kinds;
    for (size_t i = 0; i < kinds.size(); ++i) {
      TF_ASSIGN_OR_RETURN(std::string kind,
                          yamlf::GetString(kinds[i], Index(p, i)));
      const auto& known = KnownBoardKinds();
      if (std::find(known.begin(), known.end(), kind) == known.end()) {
        TF_RETURN_IF_ERROR(yamlf::CheckText(Index(p, i), kind, 64));
        return FieldError(
            Index(p, i),
            absl::StrCat("unknown board kind '", kind,
                         "'; known: ", absl::StrJoin(known, ", ")));
      }
      if (!seen_kinds.insert(kind).second) {
        return FieldError(Index(p, i),
                          absl::StrCat("duplicate board kind '", kind, "'"));
      }
      out->add_backends(kind);
    }
  }
  return absl::OkStatus();
}

absl::Status ParseWorkload(const YAML::Node& node, const std::string& path,
                           v1::Workload* out) {
  TF_RETURN_IF_ERROR(yamlf::CheckMap(node, path, {"name", "dtype", "dims"}));
  TF_RETURN_IF_ERROR(RequirePresent(node, "name", path));
  TF_ASSIGN_OR_RETURN(*out->mutable_name(),
                      yamlf::GetString(Get(node, "name"), Child(path, "name")));
  TF_RETURN_IF_ERROR(RequirePresent(node, "dtype", path));
  TF_ASSIGN_OR_RETURN(
      *out->mutable_dtype(),
      yamlf::GetString(Get(node, "dtype"), Child(path, "dtype")));
  TF_RETURN_IF_ERROR(RequirePresent(node, "dims", path));
  const std::string dims_path = Child(path, "dims");
  const YAML::Node dims = Get(node, "dims");
  TF_RETURN_IF_ERROR(yamlf::CheckOpenMap(dims, dims_path));
  for (auto it = dims.begin(); it != dims.end(); ++it) {
    const std::string& key = it->first.Scalar();
    TF_RETURN_IF_ERROR(yamlf::CheckIdentifier(dims_path, key));
    TF_ASSIGN_OR_RETURN(int64_t v,
                        yamlf::GetInt(it->second, Child(dims_path, key)));
    (*out->mutable_dims())[key] = v;
  }
  return ValidateWorkload(*out, path);
}

absl::Status ParseBackends(const YAML::Node& node, v1::OperatorManifest* op) {
  TF_RETURN_IF_ERROR(yamlf::CheckOpenMap(node, "backends"));
  if (node.size() == 0) return FieldError("backends", "must not be empty");
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string& kind = it->first.Scalar();
    const std::string path = Child("backends", kind);
    const auto& known = KnownBoardKinds();
    if (std::find(known.begin(), known.end(), kind) == known.end()) {
      return FieldError(path, absl::StrCat("unknown board kind; known: ",
                                           absl::StrJoin(known, ", ")));
    }
    TF_RETURN_IF_ERROR(yamlf::CheckMap(
        it->second, path,
        {"command", "sources", "compiler", "flags", "isolation"}));
    v1::BackendEntry entry;
    // A non-empty list of non-empty single-line strings at `key`.
    auto string_list = [&](absl::string_view key,
                           google::protobuf::RepeatedPtrField<std::string>* out,
                           bool allow_empty_list) -> absl::Status {
      const std::string list_path = Child(path, key);
      const YAML::Node list = Get(it->second, key);
      if (!list.IsDefined() || list.IsNull()) return absl::OkStatus();
      if (!list.IsSequence() || (!allow_empty_list && list.size() == 0)) {
        return FieldError(
            list_path, absl::StrCat("must be a non-empty list of strings, got ",
                                    yamlf::Describe(list)));
      }
      if (list.size() > kMaxCommandArgs) {
        return FieldError(list_path, absl::StrCat("has ", list.size(),
                                                  " entries; the limit is ",
                                                  kMaxCommandArgs));
      }
      for (size_t i = 0; i < list.size(); ++i) {
        const std::string arg_path = Index(list_path, i);
        TF_ASSIGN_OR_RETURN(std::string arg,
                            yamlf::GetString(list[i], arg_path));
        if (arg.empty()) return FieldError(arg_path, "must not be empty");
        TF_RETURN_IF_ERROR(yamlf::CheckText(arg_path, arg));
        out->Add(std::move(arg));
      }
      return absl::OkStatus();
    };
    TF_RETURN_IF_ERROR(string_list("command", entry.mutable_command(), false));
    TF_RETURN_IF_ERROR(string_list("sources", entry.mutable_sources(), false));
    TF_RETURN_IF_ERROR(string_list("flags", entry.mutable_flags(), true));
    if (Has(it->second, "compiler")) {
      const std::string cp = Child(path, "compiler");
      TF_ASSIGN_OR_RETURN(std::string compiler,
                          yamlf::GetString(Get(it->second, "compiler"), cp));
      if (compiler.empty()) return FieldError(cp, "must not be empty");
      TF_RETURN_IF_ERROR(yamlf::CheckText(cp, compiler, 1024));
      entry.set_compiler(std::move(compiler));
    }
    if (Has(it->second, "isolation")) {
      const std::string ip = Child(path, "isolation");
      TF_ASSIGN_OR_RETURN(std::string v,
                          yamlf::GetString(Get(it->second, "isolation"), ip));
      if (v == "process") {
        entry.set_isolation(v1::ISOLATION_PROCESS);
      } else if (v == "runner") {
        entry.set_isolation(v1::ISOLATION_RUNNER);
      } else {
        return FieldError(
            ip, absl::StrCat("must be process or runner, got '", v, "'"));
      }
    }
    // A replay backend runs nothing: the replay board answers from the
    // measured space it was started with (agent/replay_board.h).
    if (kind == "replay") {
      if (!entry.command().empty() || !entry.sources().empty() ||
          !entry.compiler().empty() || !entry.flags().empty()) {
        return FieldError(path,
                          "a replay backend runs nothing; give it no "
                          "command, sources, compiler or flags ({})");
      }
      (*op->mutable_backends())[kind] = std::move(entry);
      continue;
    }
    if (entry.command().empty() == entry.sources().empty()) {
      return FieldError(path, entry.command().empty()
                                  ? "needs either command (a ready program) or "
                                    "sources (compiled per variant)"
                                  : "has both command and sources; give one");
    }
    if (entry.command().empty() == false &&
        (!entry.compiler().empty() || !entry.flags().empty())) {
      return FieldError(path,
                        "compiler and flags go with sources, not command");
    }
    for (int i = 0; i < entry.sources_size(); ++i) {
      const std::string& src = entry.sources(i);
      const std::string sp = Index(Child(path, "sources"), i);
      if (src[0] == '/') {
        return FieldError(
            sp, absl::StrCat("'", src, "' must be relative to the package"));
      }
      for (absl::string_view c : absl::StrSplit(src, '/')) {
        if (c == "..") {
          return FieldError(
              sp, absl::StrCat("'", src, "' escapes the package (\"..\")"));
        }
      }
    }
    (*op->mutable_backends())[kind] = std::move(entry);
  }
  return absl::OkStatus();
}

absl::Status ParseManifestNode(const YAML::Node& doc,
                               v1::OperatorManifest* op) {
  TF_RETURN_IF_ERROR(
      yamlf::CheckMap(doc, "",
                      {"name", "description", "parameters", "constraints",
                       "workloads", "tolerances", "backends"}));
  TF_RETURN_IF_ERROR(RequirePresent(doc, "name", ""));
  TF_ASSIGN_OR_RETURN(*op->mutable_name(),
                      yamlf::GetString(Get(doc, "name"), "name"));
  TF_RETURN_IF_ERROR(yamlf::CheckIdentifier("name", op->name()));
  if (Has(doc, "description")) {
    TF_ASSIGN_OR_RETURN(
        *op->mutable_description(),
        yamlf::GetString(Get(doc, "description"), "description"));
    TF_RETURN_IF_ERROR(yamlf::CheckText("description", op->description(),
                                        yamlf::kMaxStringBytes, true));
  }

  TF_RETURN_IF_ERROR(RequirePresent(doc, "parameters", ""));
  const YAML::Node params = Get(doc, "parameters");
  if (!params.IsSequence()) {
    return FieldError("parameters", absl::StrCat("expected a list, got ",
                                                 yamlf::Describe(params)));
  }
  if (params.size() == 0) return FieldError("parameters", "must not be empty");
  if (params.size() > kMaxParameters) {
    return FieldError("parameters",
                      absl::StrCat("has ", params.size(),
                                   " entries; the limit is ", kMaxParameters));
  }
  std::map<std::string, size_t> param_index;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string path = Index("parameters", i);
    v1::ParameterDomain* p = op->add_parameters();
    TF_RETURN_IF_ERROR(ParseParameter(params[i], path, p));
    auto [it, inserted] = param_index.emplace(p->name(), i);
    if (!inserted) {
      return FieldError(Child(path, "name"),
                        absl::StrCat("duplicate parameter '", p->name(),
                                     "' (also parameters[", it->second, "])"));
    }
  }

  if (Has(doc, "constraints")) {
    const YAML::Node cs = Get(doc, "constraints");
    if (!cs.IsSequence()) {
      return FieldError("constraints", absl::StrCat("expected a list, got ",
                                                    yamlf::Describe(cs)));
    }
    for (size_t i = 0; i < cs.size(); ++i) {
      TF_ASSIGN_OR_RETURN(std::string expr,
                          yamlf::GetString(cs[i], Index("constraints", i)));
      op->add_constraints(std::move(expr));
    }
    // Syntax, limits and names, each error naming constraints[i].
    absl::StatusOr<ConstraintSet> compiled = ConstraintSet::ForManifest(*op);
    if (!compiled.ok()) return compiled.status();
  }

  if (Has(doc, "workloads")) {
    const YAML::Node wls = Get(doc, "workloads");
    if (!wls.IsSequence()) {
      return FieldError("workloads", absl::StrCat("expected a list, got ",
                                                  yamlf::Describe(wls)));
    }
    if (wls.size() > kMaxWorkloads) {
      return FieldError("workloads",
                        absl::StrCat("has ", wls.size(),
                                     " entries; the limit is ", kMaxWorkloads));
    }
    std::map<std::string, size_t> wl_index;
    for (size_t i = 0; i < wls.size(); ++i) {
      const std::string path = Index("workloads", i);
      v1::Workload* w = op->add_workloads();
      TF_RETURN_IF_ERROR(ParseWorkload(wls[i], path, w));
      auto [it, inserted] = wl_index.emplace(w->name(), i);
      if (!inserted) {
        return FieldError(Child(path, "name"),
                          absl::StrCat("duplicate workload '", w->name(),
                                       "' (also workloads[", it->second, "])"));
      }
    }
  }

  TF_RETURN_IF_ERROR(RequirePresent(doc, "tolerances", ""));
  const YAML::Node tol = Get(doc, "tolerances");
  TF_RETURN_IF_ERROR(yamlf::CheckMap(tol, "tolerances", {"rtol", "atol"}));
  for (const char* key : {"rtol", "atol"}) {
    const std::string path = Child("tolerances", key);
    TF_RETURN_IF_ERROR(RequirePresent(tol, key, "tolerances"));
    TF_ASSIGN_OR_RETURN(double v, yamlf::GetDouble(Get(tol, key), path));
    if (v < 0) return FieldError(path, absl::StrCat("must be >= 0, got ", v));
    if (std::string_view(key) == "rtol") {
      op->mutable_tolerances()->set_rtol(v);
    } else {
      op->mutable_tolerances()->set_atol(v);
    }
  }

  TF_RETURN_IF_ERROR(RequirePresent(doc, "backends", ""));
  TF_RETURN_IF_ERROR(ParseBackends(Get(doc, "backends"), op));
  for (int i = 0; i < op->parameters_size(); ++i) {
    const v1::ParameterDomain& p = op->parameters(i);
    for (int j = 0; j < p.backends_size(); ++j) {
      if (op->backends().count(p.backends(j)) == 0) {
        return FieldError(
            Index(Child(Index("parameters", i), "backends"), j),
            absl::StrCat("'", p.backends(j), "' has no entry under backends"));
      }
    }
  }
  return absl::OkStatus();
}

std::string ManifestPathOf(const std::string& package_dir) {
  return (fs::path(package_dir) / kManifestFileName).string();
}

bool IsPackage(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / kManifestFileName, ec);
}

}  // namespace

const std::vector<std::string>& KnownBoardKinds() {
  static const auto* kinds =
      new std::vector<std::string>{"sim", "cpu", "cuda", "ascend", "replay"};
  return *kinds;
}

absl::Status ValidateWorkload(const v1::Workload& w, std::string_view path_in) {
  const absl::string_view path(path_in.data(), path_in.size());
  TF_RETURN_IF_ERROR(yamlf::CheckIdentifier(Child(path, "name"), w.name()));
  TF_RETURN_IF_ERROR(yamlf::CheckIdentifier(Child(path, "dtype"), w.dtype()));
  const std::string dims_path = Child(path, "dims");
  if (w.dims().empty()) return FieldError(dims_path, "must not be empty");
  if (w.dims().size() > 64) {
    return FieldError(dims_path, "has more than 64 entries");
  }
  std::map<std::string, int64_t> sorted(w.dims().begin(), w.dims().end());
  for (const auto& [key, v] : sorted) {
    TF_RETURN_IF_ERROR(yamlf::CheckIdentifier(dims_path, key));
    if (v < 1 || v > kMaxDim) {
      return FieldError(
          Child(dims_path, key),
          absl::StrCat("must be between 1 and ", kMaxDim, ", got ", v));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::OperatorManifest> ParseOperatorManifest(
    std::string_view yaml_in, std::string_view source_in) {
  const absl::string_view yaml(yaml_in.data(), yaml_in.size());
  const absl::string_view source_name(source_in.data(), source_in.size());
  auto with_source = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(source_name, ": ", s.message()));
  };
  absl::StatusOr<YAML::Node> doc = yamlf::ParseYamlDocument(yaml);
  if (!doc.ok()) return with_source(doc.status());
  v1::OperatorManifest op;
  absl::Status s;
  try {
    s = ParseManifestNode(*doc, &op);
  } catch (const YAML::Exception& e) {
    s = absl::InvalidArgumentError(
        absl::StrCat("YAML error at line ", e.mark.line + 1, ", column ",
                     e.mark.column + 1, ": ", e.msg));
  }
  if (!s.ok()) return with_source(s);
  return op;
}

absl::StatusOr<v1::OperatorManifest> LoadOperatorManifest(
    const std::string& package_dir) {
  const std::string manifest_path = ManifestPathOf(package_dir);
  absl::StatusOr<std::string> text = ReadFile(manifest_path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat(manifest_path,
                                     ": cannot read the operator "
                                     "manifest: ",
                                     text.status().message()));
  }
  TF_ASSIGN_OR_RETURN(v1::OperatorManifest op,
                      ParseOperatorManifest(*text, manifest_path));
  // Absolute, because the agent expands "{pkg}" from another working folder.
  std::error_code ec;
  fs::path abs = fs::absolute(fs::path(package_dir), ec);
  std::string dir = ec ? package_dir : abs.lexically_normal().string();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  op.set_package_dir(dir);
  // The source hash: the manifest and every backend's sources, in a fixed
  // order, length-prefixed so that no two different packages hash alike.
  std::set<std::string> sources;
  for (const auto& [kind, backend] : op.backends()) {
    for (const std::string& src : backend.sources()) sources.insert(src);
  }
  FieldHasher h;
  h.Add(kManifestFileName, *text);
  for (const std::string& src : sources) {
    absl::StatusOr<std::string> content = ReadFile(dir + "/" + src);
    // A missing source fails the build later, with the compiler's words.
    h.Add(src, content.ok() ? *content : "(missing)");
  }
  op.set_source_hash(h.Hex());
  return op;
}

ParamMap DefaultParams(const v1::OperatorManifest& op) {
  ParamMap params;
  for (const v1::ParameterDomain& p : op.parameters()) {
    params[p.name()] = p.default_value();
  }
  return params;
}

const v1::ParameterDomain* FindParameter(const v1::OperatorManifest& op,
                                         std::string_view name) {
  for (const v1::ParameterDomain& p : op.parameters()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

absl::Status ValidateParams(const v1::OperatorManifest& op,
                            const ParamMap& params) {
  std::set<std::string> names;
  for (const auto& [name, v] : params) names.insert(name);
  for (const std::string& name : names) {
    if (FindParameter(op, name) == nullptr) {
      std::vector<std::string> known;
      for (const auto& p : op.parameters()) known.push_back(p.name());
      return absl::InvalidArgumentError(
          absl::StrCat("unknown parameter '",
                       absl::CHexEscape(name.substr(0, 64)), "' for operator ",
                       op.name(), "; known: ", absl::StrJoin(known, ", ")));
    }
  }
  for (const v1::ParameterDomain& p : op.parameters()) {
    auto it = params.find(p.name());
    if (it == params.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", p.name(), " is missing"));
    }
    const v1::ParamValue& v = it->second;
    if (!p.values().empty() && v.kind_case() != p.values(0).kind_case()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", p.name(), ": expected ",
                       KindName(p.values(0).kind_case()), ", got ",
                       KindName(v.kind_case()), " ", ParamValueToString(v)));
    }
    if (!InDomain(p, v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", p.name(), ": ", ParamValueToString(v),
                       " is not one of ", FormatValues(p.values())));
    }
  }
  return absl::OkStatus();
}

uint64_t SpaceSize(const v1::OperatorManifest& op) {
  uint64_t size = 1;
  for (const v1::ParameterDomain& p : op.parameters()) {
    uint64_t next = 0;
    if (__builtin_mul_overflow(size, static_cast<uint64_t>(p.values_size()),
                               &next)) {
      return UINT64_MAX;
    }
    size = next;
  }
  return size;
}

absl::StatusOr<OperatorCatalog> OperatorCatalog::LoadFromDirs(
    const std::vector<std::string>& roots) {
  OperatorCatalog catalog;
  std::map<std::string, std::string> origin;  // operator name -> manifest path
  auto add = [&](const std::string& package_dir) -> absl::Status {
    TF_ASSIGN_OR_RETURN(v1::OperatorManifest op,
                        LoadOperatorManifest(package_dir));
    const std::string path = ManifestPathOf(package_dir);
    auto [it, inserted] = origin.emplace(op.name(), path);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("operator '", op.name(),
                       "' is defined twice: ", it->second, " and ", path));
    }
    catalog.Add(std::move(op));
    return absl::OkStatus();
  };
  for (const std::string& root : roots) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {
      return absl::NotFoundError(absl::StrCat(
          "operator folder '", root, "' does not exist or is not a folder"));
    }
    if (IsPackage(root)) {
      TF_RETURN_IF_ERROR(add(root));
      continue;
    }
    std::vector<fs::path> packages;
    fs::directory_iterator it(root, ec), end;
    if (ec) {
      return absl::InternalError(absl::StrCat("cannot list operator folder '",
                                              root, "': ", ec.message()));
    }
    for (; it != end; it.increment(ec)) {
      if (ec) break;
      std::error_code ec2;
      if (it->is_directory(ec2) && IsPackage(it->path())) {
        packages.push_back(it->path());
      }
    }
    if (ec) {
      return absl::InternalError(absl::StrCat("cannot list operator folder '",
                                              root, "': ", ec.message()));
    }
    if (packages.empty()) {
      return absl::NotFoundError(
          absl::StrCat("operator folder '", root, "' holds no package (no ",
                       kManifestFileName, " in it or in any subfolder)"));
    }
    std::sort(packages.begin(), packages.end());
    for (const fs::path& p : packages) TF_RETURN_IF_ERROR(add(p.string()));
  }
  return catalog;
}

absl::StatusOr<const v1::OperatorManifest*> OperatorCatalog::Find(
    std::string_view name_in) const {
  const absl::string_view name(name_in.data(), name_in.size());
  auto it = ops_.find(name_in);
  if (it == ops_.end()) {
    std::vector<std::string> names = Names();
    return absl::NotFoundError(absl::StrCat(
        "unknown operator '", absl::CHexEscape(name.substr(0, 64)),
        "'; known: ",
        names.empty() ? std::string("(none)") : absl::StrJoin(names, ", ")));
  }
  return &it->second;
}

std::vector<std::string> OperatorCatalog::Names() const {
  std::vector<std::string> names;
  names.reserve(ops_.size());
  for (const auto& [name, op] : ops_) names.push_back(name);
  return names;
}

void OperatorCatalog::Add(v1::OperatorManifest op) {
  std::string name = op.name();
  ops_.insert_or_assign(std::move(name), std::move(op));
}

v1::OperatorManifest ProjectManifest(const v1::OperatorManifest& op,
                                     std::string_view board_kind) {
  v1::OperatorManifest out = op;
  out.clear_parameters();
  for (const v1::ParameterDomain& p : op.parameters()) {
    if (p.backends().empty() ||
        std::find(p.backends().begin(), p.backends().end(), board_kind) !=
            p.backends().end()) {
      *out.add_parameters() = p;
    }
  }
  // A constraint over a parameter this backend does not have is another
  // backend's.
  out.clear_constraints();
  for (const std::string& c : op.constraints()) {
    absl::StatusOr<std::vector<std::string>> names = ConstraintNames(c);
    const bool all_here =
        names.ok() &&
        std::all_of(names->begin(), names->end(), [&](const std::string& n) {
          return FindParameter(out, n) != nullptr;
        });
    if (all_here) out.add_constraints(c);
  }
  return out;
}

}  // namespace tunefarm
