#include "ops/yaml_fields.h"

#include <cmath>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/params.h"

namespace tunefarm::yamlf {
namespace {

// Quoted, escaped and shortened, so hostile text cannot forge log lines.
std::string Quote(absl::string_view text) {
  constexpr size_t kMax = 64;
  std::string shown = absl::CHexEscape(text.substr(0, kMax));
  if (text.size() > kMax) shown += "...";
  return absl::StrCat("'", shown, "'");
}

bool IsQuoted(const YAML::Node& node) {
  // yaml-cpp tags quoted scalars "!" and plain ones "?".
  const std::string& tag = node.Tag();
  return tag == "!" || tag == "tag:yaml.org,2002:str";
}

std::string PathOrDocument(absl::string_view path) {
  return path.empty() ? std::string("document") : std::string(path);
}

absl::Status CheckMapShape(
    const YAML::Node& node, absl::string_view path,
    const std::initializer_list<absl::string_view>* allowed) {
  if (!node.IsDefined() || !node.IsMap()) {
    return FieldError(PathOrDocument(path),
                      absl::StrCat("expected a map, got ", Describe(node)));
  }
  std::set<std::string> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar()) {
      return FieldError(PathOrDocument(path),
                        absl::StrCat("map keys must be plain names, got ",
                                     Describe(it->first)));
    }
    const std::string& key = it->first.Scalar();
    if (!seen.insert(key).second) {
      return FieldError(Child(path, key), "duplicate key");
    }
    if (allowed == nullptr) continue;
    bool known = false;
    for (absl::string_view a : *allowed) known = known || a == key;
    if (!known) {
      return FieldError(Child(path, key),
                        absl::StrCat("unknown field; known fields: ",
                                     absl::StrJoin(*allowed, ", ")));
    }
  }
  return absl::OkStatus();
}

bool ParseBoolText(absl::string_view text, bool* out) {
  if (text == "true" || text == "True" || text == "TRUE") {
    *out = true;
    return true;
  }
  if (text == "false" || text == "False" || text == "FALSE") {
    *out = false;
    return true;
  }
  return false;
}

bool LooksNonFinite(absl::string_view text) {
  std::string t = absl::AsciiStrToLower(text);
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) t.erase(0, 1);
  if (!t.empty() && t[0] == '.') t.erase(0, 1);
  return t == "nan" || t == "inf" || t == "infinity";
}

}  // namespace

absl::Status FieldError(absl::string_view path, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

std::string Child(absl::string_view path, absl::string_view key) {
  if (path.empty()) return std::string(key);
  return absl::StrCat(path, ".", key);
}

std::string Index(absl::string_view path, size_t i) {
  return absl::StrCat(path, "[", i, "]");
}

absl::StatusOr<YAML::Node> ParseYamlDocument(absl::string_view yaml) {
  if (yaml.size() > kMaxDocumentBytes) {
    return absl::InvalidArgumentError(absl::StrCat("document is ", yaml.size(),
                                                   " bytes; the limit is ",
                                                   kMaxDocumentBytes));
  }
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("YAML syntax error at line ", e.mark.line + 1, ", column ",
                     e.mark.column + 1, ": ", e.msg));
  }
  if (docs.empty() || (docs.size() == 1 && docs[0].IsNull())) {
    return absl::InvalidArgumentError("document is empty");
  }
  if (docs.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected one YAML document, found ", docs.size(),
        " (a second '---' at line ", docs[1].Mark().line + 1, ")"));
  }
  return docs[0];
}

std::string Describe(const YAML::Node& node) {
  if (!node.IsDefined()) return "nothing";
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
      return "nothing";
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return Quote(node.Scalar());
  }
  return "an unknown node";
}

absl::Status CheckMap(const YAML::Node& node, absl::string_view path,
                      std::initializer_list<absl::string_view> allowed) {
  return CheckMapShape(node, path, &allowed);
}

absl::Status CheckOpenMap(const YAML::Node& node, absl::string_view path) {
  return CheckMapShape(node, path, nullptr);
}

YAML::Node Get(const YAML::Node& node, absl::string_view key) {
  // A linear scan instead of operator[]: the const operator[] of yaml-cpp
  // returns "zombie" nodes that throw when inspected.
  if (node.IsDefined() && node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == key) return it->second;
    }
  }
  return YAML::Node();  // null
}

bool Has(const YAML::Node& node, absl::string_view key) {
  YAML::Node child = Get(node, key);
  return child.IsDefined() && !child.IsNull();
}

absl::StatusOr<std::string> GetString(const YAML::Node& node,
                                      absl::string_view path) {
  if (!node.IsDefined() || !node.IsScalar()) {
    return FieldError(path,
                      absl::StrCat("expected a string, got ", Describe(node)));
  }
  return node.Scalar();
}

absl::StatusOr<int64_t> GetInt(const YAML::Node& node, absl::string_view path) {
  int64_t v = 0;
  if (!node.IsDefined() || !node.IsScalar() ||
      !absl::SimpleAtoi(node.Scalar(), &v)) {
    return FieldError(
        path, absl::StrCat("expected an integer, got ", Describe(node)));
  }
  return v;
}

absl::StatusOr<double> GetDouble(const YAML::Node& node,
                                 absl::string_view path) {
  if (node.IsDefined() && node.IsScalar() && LooksNonFinite(node.Scalar())) {
    return FieldError(
        path, absl::StrCat("must be a finite number, got ", Describe(node)));
  }
  double v = 0;
  if (!node.IsDefined() || !node.IsScalar() ||
      !absl::SimpleAtod(node.Scalar(), &v) || !std::isfinite(v)) {
    return FieldError(path,
                      absl::StrCat("expected a number, got ", Describe(node)));
  }
  return v;
}

absl::StatusOr<bool> GetBool(const YAML::Node& node, absl::string_view path) {
  bool v = false;
  if (!node.IsDefined() || !node.IsScalar() ||
      !ParseBoolText(node.Scalar(), &v)) {
    return FieldError(
        path, absl::StrCat("expected true or false, got ", Describe(node)));
  }
  return v;
}

absl::StatusOr<int64_t> GetIntInRange(const YAML::Node& node,
                                      absl::string_view path, int64_t lo,
                                      int64_t hi) {
  absl::StatusOr<int64_t> v = GetInt(node, path);
  if (!v.ok()) return v.status();
  if (*v < lo || *v > hi) {
    return FieldError(
        path, absl::StrCat("must be between ", lo, " and ", hi, ", got ", *v));
  }
  return *v;
}

v1::ParamValue ParamValueFromScalar(absl::string_view text, bool quoted) {
  if (quoted) return StringParam(std::string(text));
  bool b = false;
  if (ParseBoolText(text, &b)) return BoolParam(b);
  int64_t i = 0;
  if (absl::SimpleAtoi(text, &i)) return IntParam(i);
  double d = 0;
  if (!LooksNonFinite(text) && absl::SimpleAtod(text, &d) && std::isfinite(d)) {
    return DoubleParam(d);
  }
  return StringParam(std::string(text));
}

absl::StatusOr<v1::ParamValue> GetParamValue(const YAML::Node& node,
                                             absl::string_view path) {
  if (!node.IsDefined() || !node.IsScalar()) {
    return FieldError(path,
                      absl::StrCat("expected a number, string or bool, got ",
                                   Describe(node)));
  }
  v1::ParamValue v = ParamValueFromScalar(node.Scalar(), IsQuoted(node));
  if (v.has_string_value()) {
    absl::Status s = CheckText(path, v.string_value(), 256);
    if (!s.ok()) return s;
  }
  return v;
}

absl::Status CheckText(absl::string_view path, absl::string_view value,
                       size_t max_len, bool allow_newlines) {
  if (value.size() > max_len) {
    return FieldError(
        path, absl::StrCat("is ", value.size(), " bytes long; the limit is ",
                           max_len));
  }
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (allow_newlines && (c == '\n' || c == '\t')) continue;
    if (u < 0x20 || u == 0x7f) {
      return FieldError(
          path, absl::StrCat("must not contain control characters, got ",
                             Quote(value)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckIdentifier(absl::string_view path, absl::string_view value) {
  bool ok = !value.empty() && value.size() <= 64 && value[0] >= 'a' &&
            value[0] <= 'z';
  for (char c : value) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  }
  if (!ok) {
    return FieldError(
        path,
        absl::StrCat("must match [a-z][a-z0-9_]* (at most 64 characters), got ",
                     Quote(value)));
  }
  return absl::OkStatus();
}

}  // namespace tunefarm::yamlf
