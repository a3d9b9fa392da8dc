#include "tuning_db/codegen.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace tunefarm {
namespace {

using json = nlohmann::json;

// A C++ string literal: printable ASCII as is, everything else as a
// three-digit octal escape (which cannot run into the next character).
std::string CppString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f && c != '?') {  // '?': no trigraphs
      out += static_cast<char>(c);
    } else {
      out += absl::StrFormat("\\%03o", c);
    }
  }
  return out + "\"";
}

// A parameter value as the text the header's accessors parse.
std::string ValueText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return absl::StrCat(v.get<int64_t>());
  return absl::StrFormat("%.17g", v.get<double>());
}

std::string CppParams(const json& params) {
  std::vector<std::string> parts;
  for (auto it = params.begin(); it != params.end(); ++it) {
    parts.push_back(absl::StrCat("{", CppString(it.key()), ", ",
                                 CppString(ValueText(*it)), "}"));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

constexpr char kCppPrologue[] = R"(
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tunefarm_tuned {

// Parameter name -> value as text ("64", "0.5", "true", "row_major").
using Params = std::vector<std::pair<std::string, std::string>>;

struct Entry {
  const char* op;
  const char* backend;
  const char* device;
  const char* dtype;
  std::vector<std::pair<std::string, long long>> dims;  // sorted by name
  const char* workload;
  Params params;
  double time_us;  // measured median
  const char* sweep;
  long long round;
};

struct Default {
  const char* op;
  const char* backend;
  Params params;
};

// What Lookup found.
struct Config {
  std::string source;    // "exact", "nearest" or "default"
  std::string workload;  // the entry's workload ("" for the default)
  double time_us = 0;    // the entry's measured median (0 for the default)
  Params params;

  // A parameter's value as text; "" when the configuration has none.
  std::string Text(const std::string& name) const {
    for (const auto& p : params) {
      if (p.first == name) return p.second;
    }
    return "";
  }
  long long Int(const std::string& name) const {
    return std::atoll(Text(name).c_str());
  }
  double Double(const std::string& name) const {
    return std::atof(Text(name).c_str());
  }
  bool Bool(const std::string& name) const { return Text(name) == "true"; }
};

)";

constexpr char kCppLookup[] = R"(
// The configuration for a shape. Candidates are the entries of `op` on
// `backend` with `dtype`, `device` ("" = any device) and the same dim names:
// the one with equal dims ("exact"), else the one with the smallest sum over
// dims of |ln(dim / entry dim)|, ties to the faster ("nearest"). Without
// candidates, the operator's default on the backend ("default"). Returns
// false when there is neither.
inline bool Lookup(const std::string& op, const std::string& backend,
                   const std::string& device, const std::string& dtype,
                   const std::map<std::string, long long>& dims, Config* out) {
  const Entry* best = nullptr;
  double best_distance = std::numeric_limits<double>::infinity();
  for (const Entry& e : Entries()) {
    if (op != e.op || backend != e.backend || dtype != e.dtype) continue;
    if (!device.empty() && device != e.device) continue;
    if (e.dims.size() != dims.size()) continue;
    double distance = 0;
    bool same_names = true;
    for (const auto& d : e.dims) {
      auto it = dims.find(d.first);
      if (it == dims.end() || it->second <= 0) {
        same_names = false;
        break;
      }
      distance += std::fabs(std::log(static_cast<double>(it->second) /
                                     static_cast<double>(d.second)));
    }
    if (!same_names) continue;
    if (distance < best_distance ||
        (distance == best_distance && best != nullptr &&
         e.time_us < best->time_us)) {
      best = &e;
      best_distance = distance;
    }
  }
  if (best != nullptr) {
    out->source = best_distance == 0 ? "exact" : "nearest";
    out->workload = best->workload;
    out->time_us = best->time_us;
    out->params = best->params;
    return true;
  }
  for (const Default& d : Defaults()) {
    if (op == d.op && backend == d.backend) {
      out->source = "default";
      out->workload.clear();
      out->time_us = 0;
      out->params = d.params;
      return true;
    }
  }
  return false;
}

}  // namespace tunefarm_tuned

#endif  // TUNEFARM_TUNED_CONFIGS_H_
)";

constexpr char kPythonBody[] = R"(
ENTRIES = DB["entries"]
DEFAULTS = DB["defaults"]


def lookup(op, backend, device, dtype, dims):
    """The configuration for a shape, or None.

    Candidates are the entries of `op` on `backend` with `dtype`, `device`
    ("" = any device) and the same dim names: the one with equal dims
    ("exact"), else the one with the smallest sum over dims of
    |ln(dim / entry dim)|, ties to the faster ("nearest"). Without
    candidates, the operator's default on the backend ("default").
    Returns {"source", "params", "workload", "time_us"}.
    """
    best, best_distance = None, math.inf
    for e in ENTRIES:
        if (e["operator"], e["backend"], e["dtype"]) != (op, backend, dtype):
            continue
        if device and e["device"] != device:
            continue
        if set(e["dims"]) != set(dims) or any(v <= 0 for v in dims.values()):
            continue
        distance = 0.0
        for name in sorted(dims):
            distance += abs(math.log(dims[name] / e["dims"][name]))
        if distance < best_distance or (
            distance == best_distance
            and best is not None
            and e["time_us"] < best["time_us"]
        ):
            best, best_distance = e, distance
    if best is not None:
        return {
            "source": "exact" if best_distance == 0 else "nearest",
            "params": dict(best["params"]),
            "workload": best["workload"],
            "time_us": best["time_us"],
        }
    for d in DEFAULTS:
        if d["operator"] == op and d["backend"] == backend:
            return {"source": "default", "params": dict(d["params"]),
                    "workload": "", "time_us": 0.0}
    return None


if __name__ == "__main__":
    # python3 tuning_db.py OP BACKEND DEVICE DTYPE m=512 n=512 k=512
    import sys
    if len(sys.argv) < 6:
        sys.exit("usage: tuning_db.py OP BACKEND DEVICE DTYPE NAME=SIZE...")
    shape = {k: int(v) for k, v in (a.split("=", 1) for a in sys.argv[5:])}
    print(json.dumps(lookup(*sys.argv[1:5], shape), sort_keys=True))
)";

}  // namespace

std::string GenerateCppHeader(const TuningDb& db_in) {
  // The JSON round trip sorts entries the way the database file does.
  const json doc = TuningDbToJson(db_in);
  std::string h = absl::StrCat(
      "// Tuned configurations exported by tunefarm (", kTuningDbFormat,
      " version ", kTuningDbVersion, "): ", doc.at("entries").size(),
      " entries, ", doc.at("defaults").size(),
      " defaults.\n// Generated by `tunefarm export`; do not edit, "
      "re-export. Lookup rule: docs/tuning-db.md.\n"
      "#ifndef TUNEFARM_TUNED_CONFIGS_H_\n#define TUNEFARM_TUNED_CONFIGS_H_\n",
      kCppPrologue);
  absl::StrAppend(&h,
                  "inline const std::vector<Entry>& Entries() {\n"
                  "  static const std::vector<Entry>* entries = "
                  "new std::vector<Entry>{\n");
  for (const json& e : doc.at("entries")) {
    std::vector<std::string> dims;
    for (auto it = e.at("dims").begin(); it != e.at("dims").end(); ++it) {
      dims.push_back(absl::StrCat("{", CppString(it.key()), ", ",
                                  it->get<int64_t>(), "}"));
    }
    const json& p = e.at("provenance");
    absl::StrAppend(&h, "      {",
                    CppString(e.at("operator").get<std::string>()), ", ",
                    CppString(e.at("backend").get<std::string>()), ", ",
                    CppString(e.at("device").get<std::string>()), ", ",
                    CppString(e.at("dtype").get<std::string>()), ",\n       {",
                    absl::StrJoin(dims, ", "), "}, ",
                    CppString(e.at("workload").get<std::string>()),
                    ",\n       ", CppParams(e.at("params")), ",\n       ",
                    absl::StrFormat("%.17g", e.at("time_us").get<double>()),
                    ", ", CppString(p.at("sweep").get<std::string>()), ", ",
                    p.at("round").get<int64_t>(), "},\n");
  }
  absl::StrAppend(&h,
                  "  };\n  return *entries;\n}\n\n"
                  "inline const std::vector<Default>& Defaults() {\n"
                  "  static const std::vector<Default>* defaults = "
                  "new std::vector<Default>{\n");
  for (const json& d : doc.at("defaults")) {
    absl::StrAppend(&h, "      {",
                    CppString(d.at("operator").get<std::string>()), ", ",
                    CppString(d.at("backend").get<std::string>()), ", ",
                    CppParams(d.at("params")), "},\n");
  }
  absl::StrAppend(&h, "  };\n  return *defaults;\n}\n", kCppLookup);
  return h;
}

std::string GeneratePythonModule(const TuningDb& db) {
  const json doc = TuningDbToJson(db);
  // A JSON string literal (ASCII, escapes \" \\ \n \uXXXX) is a valid Python
  // string literal.
  const std::string text =
      json(doc.dump(-1, ' ', true, json::error_handler_t::replace)).dump();
  return absl::StrCat(
      "\"\"\"Tuned configurations exported by tunefarm (", kTuningDbFormat,
      " version ", kTuningDbVersion, "): ", doc.at("entries").size(),
      " entries.\n\nGenerated by `tunefarm export`; do not edit, re-export. "
      "Lookup rule: docs/tuning-db.md.\n\"\"\"\n\nimport json\nimport math\n\n"
      "DB = json.loads(",
      text, ")\n", kPythonBody);
}

absl::Status WriteTuningDbFiles(const TuningDb& db, const std::string& dir) {
  TF_RETURN_IF_ERROR(MakeDirs(dir));
  TF_RETURN_IF_ERROR(
      WriteFileAtomic(dir + "/tuning_db.json", TuningDbText(db)));
  TF_RETURN_IF_ERROR(
      WriteFileAtomic(dir + "/tuning_db.h", GenerateCppHeader(db)));
  return WriteFileAtomic(dir + "/tuning_db.py", GeneratePythonModule(db));
}

}  // namespace tunefarm
