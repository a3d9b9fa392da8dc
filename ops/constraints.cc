#include "ops/constraints.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tunefarm {

enum class Op {
  kNum,
  kStr,
  kName,
  kNeg,
  kPos,
  kNot,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kFloorDiv,
  kMod,
  kPow,
  kAnd,
  kOr,
  kCompare,  // children: operands; cmp: the operators between them
  kCall,     // text: min | max | abs
};

enum class Cmp { kEq, kNe, kLt, kLe, kGt, kGe };

struct ConstraintExpr {
  Op op = Op::kNum;
  double num = 0;
  std::string text;  // string literal, name or function
  int slot = -1;     // a name's index in its set's names()
  std::vector<Cmp> cmp;
  std::vector<std::unique_ptr<ConstraintExpr>> kids;
};

namespace {

using Node = std::unique_ptr<ConstraintExpr>;

enum class Tok { kEnd, kNum, kStr, kName, kSym };

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;
  double num = 0;
  size_t col = 0;  // 1-based
};

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {}

  absl::StatusOr<Node> Parse() {
    if (src_.size() > kMaxConstraintChars) {
      return absl::InvalidArgumentError(
          absl::StrCat("is ", src_.size(), " characters long; the limit is ",
                       kMaxConstraintChars));
    }
    if (!Lex()) return Error();
    Node n = Or(0);
    if (n == nullptr) return Error();
    if (Peek().kind != Tok::kEnd) {
      Fail(absl::StrCat("unexpected '", Peek().text, "'"));
      return Error();
    }
    return n;
  }

  const std::set<std::string>& names() const { return names_; }
  // Where each parameter reference is in the source: (offset, length).
  const std::vector<std::pair<size_t, size_t>>& name_spans() const {
    return name_spans_;
  }

 private:
  absl::Status Error() const {
    return absl::InvalidArgumentError(
        absl::StrCat(error_, ", at column ", error_col_));
  }
  void Fail(std::string what) {
    if (!error_.empty()) return;
    error_ = std::move(what);
    error_col_ = Peek().col;
  }

  bool Lex() {
    size_t i = 0;
    while (i < src_.size()) {
      const char c = src_[i];
      Token t;
      t.col = i + 1;
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++i;
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c)) ||
          (c == '.' && i + 1 < src_.size() &&
           std::isdigit(static_cast<unsigned char>(src_[i + 1])))) {
        size_t j = i;
        while (j < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[j])) ||
                src_[j] == '.' ||
                ((src_[j] == '+' || src_[j] == '-') &&
                 (src_[j - 1] == 'e' || src_[j - 1] == 'E')))) {
          ++j;
        }
        t.kind = Tok::kNum;
        t.text = std::string(src_.substr(i, j - i));
        char* end = nullptr;
        t.num = std::strtod(t.text.c_str(), &end);
        if (end != t.text.c_str() + t.text.size() || !std::isfinite(t.num)) {
          error_ = absl::StrCat("bad number '", t.text, "'");
          error_col_ = t.col;
          return false;
        }
        i = j;
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t j = i;
        while (j < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[j])) ||
                src_[j] == '_')) {
          ++j;
        }
        t.kind = Tok::kName;
        t.text = std::string(src_.substr(i, j - i));
        i = j;
      } else if (c == '\'' || c == '"') {
        const size_t end = src_.find(c, i + 1);
        if (end == std::string_view::npos) {
          error_ = "unterminated string";
          error_col_ = t.col;
          return false;
        }
        t.kind = Tok::kStr;
        t.text = std::string(src_.substr(i + 1, end - i - 1));
        i = end + 1;
      } else {
        static const char* const kSyms[] = {
            "**", "//", "==", "!=", "<=", ">=", "&&", "||", "+", "-",
            "*",  "/",  "%",  "<",  ">",  "(",  ")",  ",",  "!"};
        bool found = false;
        for (const char* s : kSyms) {
          const std::string_view sym(s);
          if (src_.substr(i, sym.size()) == sym) {
            t.kind = Tok::kSym;
            t.text = std::string(sym);
            i += sym.size();
            found = true;
            break;
          }
        }
        if (!found) {
          error_ = absl::StrCat("unexpected character '",
                                absl::CHexEscape(std::string(1, c)), "'");
          error_col_ = t.col;
          return false;
        }
      }
      tokens_.push_back(std::move(t));
    }
    Token end;
    end.col = src_.size() + 1;
    end.text = "end of expression";
    tokens_.push_back(end);
    return true;
  }

  const Token& Peek() const {
    return tokens_[std::min(pos_, tokens_.size() - 1)];
  }
  bool IsSym(std::string_view s) const {
    return Peek().kind == Tok::kSym && Peek().text == s;
  }
  bool IsWord(std::string_view s) const {
    return Peek().kind == Tok::kName && Peek().text == s;
  }

  Node Make(Op op) {
    if (++nodes_ > kMaxConstraintNodes) {
      Fail(absl::StrCat("has more than ", kMaxConstraintNodes, " terms"));
      return nullptr;
    }
    auto n = std::make_unique<ConstraintExpr>();
    n->op = op;
    return n;
  }
  Node Binary(Op op, Node a, Node b) {
    if (a == nullptr || b == nullptr) return nullptr;
    Node n = Make(op);
    if (n == nullptr) return nullptr;
    n->kids.push_back(std::move(a));
    n->kids.push_back(std::move(b));
    return n;
  }
  bool Deep(int depth) {
    if (depth <= kMaxConstraintDepth) return false;
    Fail(absl::StrCat("nests deeper than ", kMaxConstraintDepth));
    return true;
  }

  Node Or(int d) {
    if (Deep(d)) return nullptr;
    Node a = And(d + 1);
    while (a != nullptr && (IsWord("or") || IsSym("||"))) {
      ++pos_;
      a = Binary(Op::kOr, std::move(a), And(d + 1));
    }
    return a;
  }
  Node And(int d) {
    if (Deep(d)) return nullptr;
    Node a = Not(d + 1);
    while (a != nullptr && (IsWord("and") || IsSym("&&"))) {
      ++pos_;
      a = Binary(Op::kAnd, std::move(a), Not(d + 1));
    }
    return a;
  }
  Node Not(int d) {
    if (Deep(d)) return nullptr;
    if (IsWord("not") || IsSym("!")) {
      ++pos_;
      Node k = Not(d + 1);
      if (k == nullptr) return nullptr;
      Node n = Make(Op::kNot);
      if (n != nullptr) n->kids.push_back(std::move(k));
      return n;
    }
    return Compare(d + 1);
  }
  Node Compare(int d) {
    if (Deep(d)) return nullptr;
    Node a = Sum(d + 1);
    if (a == nullptr) return nullptr;
    Node cmp;
    while (Peek().kind == Tok::kSym) {
      const std::string& s = Peek().text;
      Cmp c;
      if (s == "==") {
        c = Cmp::kEq;
      } else if (s == "!=") {
        c = Cmp::kNe;
      } else if (s == "<") {
        c = Cmp::kLt;
      } else if (s == "<=") {
        c = Cmp::kLe;
      } else if (s == ">") {
        c = Cmp::kGt;
      } else if (s == ">=") {
        c = Cmp::kGe;
      } else {
        break;
      }
      ++pos_;
      if (cmp == nullptr) {
        cmp = Make(Op::kCompare);
        if (cmp == nullptr) return nullptr;
        cmp->kids.push_back(std::move(a));
      }
      Node b = Sum(d + 1);
      if (b == nullptr) return nullptr;
      cmp->cmp.push_back(c);
      cmp->kids.push_back(std::move(b));
    }
    return cmp != nullptr ? std::move(cmp) : std::move(a);
  }
  Node Sum(int d) {
    if (Deep(d)) return nullptr;
    Node a = Term(d + 1);
    while (a != nullptr && (IsSym("+") || IsSym("-"))) {
      const Op op = IsSym("+") ? Op::kAdd : Op::kSub;
      ++pos_;
      a = Binary(op, std::move(a), Term(d + 1));
    }
    return a;
  }
  Node Term(int d) {
    if (Deep(d)) return nullptr;
    Node a = Unary(d + 1);
    while (a != nullptr &&
           (IsSym("*") || IsSym("/") || IsSym("//") || IsSym("%"))) {
      const Op op = IsSym("*")    ? Op::kMul
                    : IsSym("/")  ? Op::kDiv
                    : IsSym("//") ? Op::kFloorDiv
                                  : Op::kMod;
      ++pos_;
      a = Binary(op, std::move(a), Unary(d + 1));
    }
    return a;
  }
  Node Unary(int d) {
    if (Deep(d)) return nullptr;
    if (IsSym("-") || IsSym("+")) {
      const Op op = IsSym("-") ? Op::kNeg : Op::kPos;
      ++pos_;
      Node k = Unary(d + 1);
      if (k == nullptr) return nullptr;
      Node n = Make(op);
      if (n != nullptr) n->kids.push_back(std::move(k));
      return n;
    }
    return Power(d + 1);
  }
  Node Power(int d) {
    if (Deep(d)) return nullptr;
    Node a = Atom(d + 1);
    if (a != nullptr && IsSym("**")) {
      ++pos_;
      return Binary(Op::kPow, std::move(a), Unary(d + 1));  // right-assoc
    }
    return a;
  }
  Node Atom(int d) {
    if (Deep(d)) return nullptr;
    const Token& t = Peek();
    if (t.kind == Tok::kNum) {
      Node n = Make(Op::kNum);
      if (n == nullptr) return nullptr;
      n->num = t.num;
      ++pos_;
      return n;
    }
    if (t.kind == Tok::kStr) {
      Node n = Make(Op::kStr);
      if (n == nullptr) return nullptr;
      n->text = t.text;
      ++pos_;
      return n;
    }
    if (t.kind == Tok::kSym && t.text == "(") {
      ++pos_;
      Node n = Or(d + 1);
      if (n == nullptr) return nullptr;
      if (!IsSym(")")) {
        Fail(absl::StrCat("expected ')' but found '", Peek().text, "'"));
        return nullptr;
      }
      ++pos_;
      return n;
    }
    if (t.kind == Tok::kName) {
      static const std::set<std::string> kReserved = {
          "and", "or", "not", "in", "is", "if", "else", "lambda", "None"};
      if (t.text == "True" || t.text == "False") {
        Node n = Make(Op::kNum);
        if (n == nullptr) return nullptr;
        n->num = t.text == "True" ? 1 : 0;
        ++pos_;
        return n;
      }
      if (kReserved.count(t.text)) {
        Fail(absl::StrCat("'", t.text, "' is not supported here"));
        return nullptr;
      }
      const std::string name = t.text;
      const size_t offset = t.col - 1;
      ++pos_;
      if (IsSym("(")) {
        if (name != "min" && name != "max" && name != "abs") {
          Fail(absl::StrCat("unknown function '", name,
                            "' (known: min, max, abs)"));
          return nullptr;
        }
        ++pos_;
        Node n = Make(Op::kCall);
        if (n == nullptr) return nullptr;
        n->text = name;
        while (!IsSym(")")) {
          Node arg = Or(d + 1);
          if (arg == nullptr) return nullptr;
          n->kids.push_back(std::move(arg));
          if (IsSym(",")) {
            ++pos_;
          } else if (!IsSym(")")) {
            Fail(absl::StrCat("expected ',' or ')' but found '", Peek().text,
                              "'"));
            return nullptr;
          }
        }
        ++pos_;
        if (name == "abs" ? n->kids.size() != 1 : n->kids.size() < 2) {
          Fail(absl::StrCat(name, "() takes ",
                            name == "abs" ? "one argument"
                                          : "two or more "
                                            "arguments"));
          return nullptr;
        }
        return n;
      }
      Node n = Make(Op::kName);
      if (n == nullptr) return nullptr;
      n->text = name;
      names_.insert(name);
      name_spans_.emplace_back(offset, name.size());
      return n;
    }
    Fail(t.kind == Tok::kEnd ? std::string("unexpected end of expression")
                             : absl::StrCat("unexpected '", t.text, "'"));
    return nullptr;
  }

  std::string_view src_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int nodes_ = 0;
  std::string error_;
  size_t error_col_ = 0;
  std::set<std::string> names_;
  std::vector<std::pair<size_t, size_t>> name_spans_;
};

struct Value {
  bool is_str = false;
  double num = 0;
  std::string str;
};

// Evaluates `n`, reading a name's value as `lookup(name node)` (nullptr:
// not set); false with `*error` set on an error.
template <typename Lookup>
bool Eval(const ConstraintExpr& n, const Lookup& lookup, Value* out,
          std::string* error) {
  auto num = [&](const ConstraintExpr& k, double* v) {
    Value x;
    if (!Eval(k, lookup, &x, error)) return false;
    if (x.is_str) {
      *error =
          absl::StrCat("'", x.str, "' is a string where a number is needed");
      return false;
    }
    *v = x.num;
    return true;
  };
  switch (n.op) {
    case Op::kNum:
      out->num = n.num;
      return true;
    case Op::kStr:
      out->is_str = true;
      out->str = n.text;
      return true;
    case Op::kName: {
      const v1::ParamValue* found = lookup(n);
      if (found == nullptr) {
        *error = absl::StrCat("parameter '", n.text, "' is not set");
        return false;
      }
      const v1::ParamValue& v = *found;
      switch (v.kind_case()) {
        case v1::ParamValue::kIntValue:
          out->num = static_cast<double>(v.int_value());
          return true;
        case v1::ParamValue::kDoubleValue:
          out->num = v.double_value();
          return true;
        case v1::ParamValue::kBoolValue:
          out->num = v.bool_value() ? 1 : 0;
          return true;
        case v1::ParamValue::kStringValue:
          out->is_str = true;
          out->str = v.string_value();
          return true;
        default:
          *error = absl::StrCat("parameter '", n.text, "' has no value");
          return false;
      }
    }
    case Op::kNeg:
    case Op::kPos:
    case Op::kNot: {
      double v = 0;
      if (n.op == Op::kNot) {
        Value x;
        if (!Eval(*n.kids[0], lookup, &x, error)) return false;
        out->num = (x.is_str ? x.str.empty() : x.num == 0) ? 1 : 0;
        return true;
      }
      if (!num(*n.kids[0], &v)) return false;
      out->num = n.op == Op::kNeg ? -v : v;
      return true;
    }
    case Op::kAnd:
    case Op::kOr: {
      Value a;
      if (!Eval(*n.kids[0], lookup, &a, error)) return false;
      const bool ta = a.is_str ? !a.str.empty() : a.num != 0;
      if (n.op == Op::kAnd ? !ta : ta) {  // short-circuit, as Python
        out->num = ta ? 1 : 0;
        return true;
      }
      Value b;
      if (!Eval(*n.kids[1], lookup, &b, error)) return false;
      out->num = (b.is_str ? !b.str.empty() : b.num != 0) ? 1 : 0;
      return true;
    }
    case Op::kCompare: {
      Value left;
      if (!Eval(*n.kids[0], lookup, &left, error)) return false;
      for (size_t i = 0; i < n.cmp.size(); ++i) {
        Value right;
        if (!Eval(*n.kids[i + 1], lookup, &right, error)) return false;
        bool holds = false;
        const Cmp c = n.cmp[i];
        if (left.is_str || right.is_str) {
          if (c != Cmp::kEq && c != Cmp::kNe) {
            *error = "strings compare only with == and !=";
            return false;
          }
          const bool eq =
              left.is_str == right.is_str &&
              (left.is_str ? left.str == right.str : left.num == right.num);
          holds = c == Cmp::kEq ? eq : !eq;
        } else {
          const double a = left.num, b = right.num;
          holds = c == Cmp::kEq   ? a == b
                  : c == Cmp::kNe ? a != b
                  : c == Cmp::kLt ? a < b
                  : c == Cmp::kLe ? a <= b
                  : c == Cmp::kGt ? a > b
                                  : a >= b;
        }
        if (!holds) {
          out->num = 0;
          return true;
        }
        left = std::move(right);
      }
      out->num = 1;
      return true;
    }
    case Op::kCall: {
      double acc = 0;
      for (size_t i = 0; i < n.kids.size(); ++i) {
        double v = 0;
        if (!num(*n.kids[i], &v)) return false;
        if (n.text == "abs") {
          acc = std::abs(v);
        } else if (i == 0) {
          acc = v;
        } else {
          acc = n.text == "min" ? std::min(acc, v) : std::max(acc, v);
        }
      }
      out->num = acc;
      return true;
    }
    default: {
      double a = 0, b = 0;
      if (!num(*n.kids[0], &a) || !num(*n.kids[1], &b)) return false;
      switch (n.op) {
        case Op::kAdd:
          out->num = a + b;
          return true;
        case Op::kSub:
          out->num = a - b;
          return true;
        case Op::kMul:
          out->num = a * b;
          return true;
        case Op::kPow:
          out->num = std::pow(a, b);
          if (!std::isfinite(out->num)) {
            *error = "power out of range";
            return false;
          }
          return true;
        default:
          break;
      }
      if (b == 0) {
        *error = "division by zero";
        return false;
      }
      if (n.op == Op::kDiv) {
        out->num = a / b;
      } else if (n.op == Op::kFloorDiv) {
        out->num = std::floor(a / b);
      } else {  // Python's modulo: the result takes the divisor's sign
        double r = std::fmod(a, b);
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        out->num = r;
      }
      return true;
    }
  }
}

// Each name's slot: its index in `names` (sorted).
void AssignSlots(ConstraintExpr& n, const std::vector<std::string>& names) {
  if (n.op == Op::kName) {
    auto it = std::lower_bound(names.begin(), names.end(), n.text);
    n.slot = it != names.end() && *it == n.text
                 ? static_cast<int>(it - names.begin())
                 : -1;
  }
  for (auto& k : n.kids) AssignSlots(*k, names);
}

// A name's value in a ParamMap.
struct ByName {
  const ParamMap& params;
  const v1::ParamValue* operator()(const ConstraintExpr& n) const {
    auto it = params.find(n.text);
    return it == params.end() ? nullptr : &it->second;
  }
};

// A name's value by its slot.
struct BySlot {
  absl::Span<const v1::ParamValue* const> values;
  const v1::ParamValue* operator()(const ConstraintExpr& n) const {
    return n.slot >= 0 && static_cast<size_t>(n.slot) < values.size()
               ? values[n.slot]
               : nullptr;
  }
};

template <typename Lookup>
bool AllHold(const std::vector<std::unique_ptr<ConstraintExpr>>& exprs,
             const Lookup& lookup) {
  for (const auto& e : exprs) {
    Value v;
    std::string error;
    if (!Eval(*e, lookup, &v, &error)) return false;
    if (v.is_str ? v.str.empty() : v.num == 0) return false;
  }
  return true;
}

std::string Quote(std::string_view text) {
  std::string s(text.substr(0, 200));
  if (text.size() > 200) s += "...";
  return absl::StrCat("'", absl::CHexEscape(s), "'");
}

}  // namespace

ConstraintSet::ConstraintSet() = default;
ConstraintSet::~ConstraintSet() = default;
ConstraintSet::ConstraintSet(ConstraintSet&&) noexcept = default;
ConstraintSet& ConstraintSet::operator=(ConstraintSet&&) noexcept = default;

absl::StatusOr<ConstraintSet> ConstraintSet::Compile(
    const std::vector<std::string>& exprs,
    const std::vector<std::string>& known) {
  if (exprs.size() > static_cast<size_t>(kMaxConstraints)) {
    return absl::InvalidArgumentError(
        absl::StrCat("constraints: ", exprs.size(), " entries; the limit is ",
                     kMaxConstraints));
  }
  const std::set<std::string> known_set(known.begin(), known.end());
  std::set<std::string> names;
  ConstraintSet out;
  for (size_t i = 0; i < exprs.size(); ++i) {
    Parser p(exprs[i]);
    absl::StatusOr<Node> n = p.Parse();
    if (!n.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("constraints[", i, "]: ", n.status().message(), " of ",
                       Quote(exprs[i])));
    }
    if (!known.empty()) {
      for (const std::string& name : p.names()) {
        if (!known_set.count(name)) {
          return absl::InvalidArgumentError(
              absl::StrCat("constraints[", i, "]: unknown parameter '", name,
                           "' in ", Quote(exprs[i])));
        }
      }
    }
    for (const std::string& name : p.names()) names.insert(name);
    out.texts_.push_back(exprs[i]);
    out.exprs_.push_back(*std::move(n));
  }
  out.names_.assign(names.begin(), names.end());
  for (auto& e : out.exprs_) AssignSlots(*e, out.names_);
  return out;
}

absl::StatusOr<ConstraintSet> ConstraintSet::ForManifest(
    const v1::OperatorManifest& op) {
  std::vector<std::string> exprs(op.constraints().begin(),
                                 op.constraints().end());
  std::vector<std::string> known;
  for (const v1::ParameterDomain& p : op.parameters()) {
    known.push_back(p.name());
  }
  return Compile(exprs, known);
}

bool ConstraintSet::Feasible(const ParamMap& params) const {
  return AllHold(exprs_, ByName{params});
}

bool ConstraintSet::FeasibleBySlot(
    absl::Span<const v1::ParamValue* const> values) const {
  return AllHold(exprs_, BySlot{values});
}

absl::Status ConstraintSet::Check(const ParamMap& params) const {
  for (size_t i = 0; i < exprs_.size(); ++i) {
    Value v;
    std::string error;
    if (!Eval(*exprs_[i], ByName{params}, &v, &error)) {
      return absl::FailedPreconditionError(
          absl::StrCat("constraint ", Quote(texts_[i]), ": ", error));
    }
    if (v.is_str ? v.str.empty() : v.num == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("violates constraint ", Quote(texts_[i])));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ConstraintNames(
    std::string_view expr) {
  Parser p(expr);
  absl::StatusOr<Node> n = p.Parse();
  if (!n.ok()) return n.status();
  return std::vector<std::string>(p.names().begin(), p.names().end());
}

absl::StatusOr<std::string> RenameConstraintParameters(
    std::string_view expr,
    const std::function<std::string(std::string_view)>& rename) {
  Parser p(expr);
  absl::StatusOr<Node> n = p.Parse();
  if (!n.ok()) return n.status();
  std::string out;
  size_t at = 0;
  // Spans come in source order: the parser reads left to right.
  for (const auto& [offset, length] : p.name_spans()) {
    out.append(expr.substr(at, offset - at));
    out.append(rename(expr.substr(offset, length)));
    at = offset + length;
  }
  out.append(expr.substr(at));
  return out;
}

}  // namespace tunefarm
