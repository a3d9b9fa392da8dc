#include "coordinator/report_render.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "common/subprocess.h"

namespace tunefarm {
namespace {

using nlohmann::json;

// --- validation
// ---------------------------------------------------------------

enum class Type {
  kString,
  kNumber,
  kInteger,
  kBool,
  kArray,
  kObject,
  kNumberOrNull,
  kScalar,
  kObjectOrNull
};

const char* TypeName(Type t) {
  switch (t) {
    case Type::kString:
      return "a string";
    case Type::kNumber:
      return "a number";
    case Type::kInteger:
      return "an integer";
    case Type::kBool:
      return "true or false";
    case Type::kArray:
      return "an array";
    case Type::kObject:
      return "an object";
    case Type::kNumberOrNull:
      return "a number or null";
    case Type::kScalar:
      return "a string, number or boolean";
    case Type::kObjectOrNull:
      return "an object or null";
  }
  return "?";
}

bool Is(const json& v, Type t) {
  switch (t) {
    case Type::kString:
      return v.is_string();
    case Type::kNumber:
      return v.is_number();
    case Type::kInteger:
      return v.is_number_integer();
    case Type::kBool:
      return v.is_boolean();
    case Type::kArray:
      return v.is_array();
    case Type::kObject:
      return v.is_object();
    case Type::kNumberOrNull:
      return v.is_number() || v.is_null();
    case Type::kScalar:
      return v.is_string() || v.is_number() || v.is_boolean();
    case Type::kObjectOrNull:
      return v.is_object() || v.is_null();
  }
  return false;
}

struct Field {
  const char* key;
  Type type;
};

absl::Status CheckFields(const json& obj, const std::string& path,
                         std::initializer_list<Field> fields) {
  if (!obj.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected an object"));
  }
  for (const Field& f : fields) {
    auto it = obj.find(f.key);
    if (it == obj.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ".", f.key, ": missing"));
    }
    if (!Is(*it, f.type)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ".", f.key, ": expected ", TypeName(f.type),
                       ", got ", it->type_name()));
    }
  }
  return absl::OkStatus();
}

// Each element of the array obj[key] (already checked to be an array).
template <typename Fn>
absl::Status CheckEach(const json& obj, const std::string& path,
                       const char* key, Fn fn) {
  const json& arr = obj.at(key);
  for (size_t i = 0; i < arr.size(); ++i) {
    TF_RETURN_IF_ERROR(fn(arr[i], absl::StrCat(path, ".", key, "[", i, "]")));
  }
  return absl::OkStatus();
}

absl::Status CheckMeasured(const json& obj, const std::string& path) {
  return CheckFields(obj, path,
                     {{"round", Type::kInteger},
                      {"time_us", Type::kNumber},
                      {"p20_us", Type::kNumber},
                      {"p80_us", Type::kNumber},
                      {"samples", Type::kInteger},
                      {"board", Type::kString},
                      {"simulated", Type::kBool},
                      {"policy", Type::kString}});
}

// --- formatting
// ---------------------------------------------------------------

std::string Us(double v) { return absl::StrFormat("%.2f", v); }

std::string UsOrDash(const json& v) {
  return v.is_number() ? Us(v.get<double>()) : "-";
}

std::string Pct(const json& v) {
  return v.is_number() ? absl::StrFormat("%+.1f%%", v.get<double>()) : "-";
}

std::string Time(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                          absl::FromUnixMillis(unix_ms), absl::UTCTimeZone());
}

std::string Duration(double s) {
  if (s <= 0) return "-";
  if (s < 60) return absl::StrFormat("%.1f s", s);
  const int64_t total = static_cast<int64_t>(std::lround(s));
  if (total < 3600) {
    return absl::StrFormat("%dm %02ds", total / 60, total % 60);
  }
  return absl::StrFormat("%dh %02dm %02ds", total / 3600, (total / 60) % 60,
                         total % 60);
}

// Table cells must not break the Markdown table.
std::string Cell(const std::string& s) {
  if (s.empty()) return "-";
  return absl::StrReplaceAll(s, {{"|", "\\|"}, {"\n", " "}});
}

std::string Scalar(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return absl::StrCat(v.get<int64_t>());
  const double d = v.get<double>();
  // Fractions (shares, ratios) need more digits than times.
  return std::fabs(d) < 10 ? absl::StrFormat("%.3f", d)
                           : absl::StrFormat("%.2f", d);
}

std::string DecisionText(const std::string& d) {
  if (d == "rolled_back") return "rolled back";
  if (d == "closing_check") return "closing check";
  if (d == "pending") return "not judged";
  return d;
}

std::string XmlEscape(const std::string& s) {
  return absl::StrReplaceAll(
      s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

std::string DotEscape(const std::string& s) {
  // "\n" is DOT's line break inside a label.
  return absl::StrReplaceAll(s,
                             {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}});
}

std::string S(const json& obj, const char* key) {
  return obj.at(key).get<std::string>();
}
double D(const json& obj, const char* key) { return obj.at(key).get<double>(); }
int64_t I(const json& obj, const char* key) {
  return obj.at(key).get<int64_t>();
}
bool B(const json& obj, const char* key) { return obj.at(key).get<bool>(); }

// Library exceptions stop at this seam.
template <typename Fn>
absl::StatusOr<std::string> Render(const json& report, Fn fn) {
  TF_RETURN_IF_ERROR(ValidateReport(report));
  try {
    return fn(report);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("report JSON: ", e.what()));
  }
}

// --- Markdown
// -----------------------------------------------------------------

// Multi-workload sweeps: how each workload's lineage went.
std::string WorkloadSectionsMarkdown(const json& report,
                                     const std::string& sim) {
  const bool one_config = report.value("objective", "") == "one_config";
  std::string md = absl::StrCat(
      "## Workloads\n\n",
      one_config
          ? "Objective **one_config**: one configuration for every "
            "workload, judged by the weighted geometric mean of its "
            "per-workload time ratios.\n\n"
          : "Objective **per_workload**: each workload has its own lineage "
            "and best configuration.\n\n",
      "| workload | dims | weight | baseline µs", sim, " | best µs", sim,
      " | speedup | best round | ended because |\n",
      "|---|---|---|---|---|---|---|---|\n");
  for (const json& w : report.at("workloads")) {
    const json& base = w.at("baseline");
    const json& best = w.at("best");
    absl::StrAppend(
        &md, "| ", Cell(S(w, "name")), " | ", Cell(S(w, "dims")), " | ",
        absl::StrFormat("%g", D(w, "weight")), " | ",
        base.is_null() ? "-" : Us(D(base, "time_us")), " | ",
        best.is_null() ? "-" : Us(D(best, "time_us")), " | ",
        best.is_null() ? "-" : absl::StrFormat("%.2fx", D(best, "speedup")),
        " | ", best.is_null() ? "-" : absl::StrCat(I(best, "round")), " | ",
        Cell(S(w, "ended_because")), " |\n");
  }
  absl::StrAppend(&md, "\n");
  for (const json& w : report.at("workloads")) {
    const json& base = w.at("baseline");
    const json& best = w.at("best");
    absl::StrAppend(&md, "### Workload ", S(w, "name"), " (", S(w, "dtype"),
                    ", ", S(w, "dims"), ")\n\n");
    if (base.is_null() || best.is_null()) {
      absl::StrAppend(&md,
                      "No configuration passed: ", Cell(S(w, "ended_because")),
                      "\n\n");
      continue;
    }
    std::vector<std::string> path;
    for (const json& id : w.at("kept_path")) {
      path.push_back(absl::StrCat(id.get<int64_t>()));
    }
    absl::StrAppend(
        &md, "| | baseline | best |\n|---|---|---|\n", "| round | ",
        I(base, "round"), " | ", I(best, "round"), " |\n", "| median µs", sim,
        " | ", Us(D(base, "time_us")), " | ", Us(D(best, "time_us")), " |\n",
        "| p20 – p80 µs", sim, " | ",
        absl::StrFormat("%.2f – %.2f", D(base, "p20_us"), D(base, "p80_us")),
        " | ",
        absl::StrFormat("%.2f – %.2f", D(best, "p20_us"), D(best, "p80_us")),
        " |\n", "| speedup | 1.00x | ",
        absl::StrFormat("**%.2fx**", D(best, "speedup")), " |\n", "| board | ",
        Cell(S(base, "board")), " | ", Cell(S(best, "board")), " |\n\n",
        "Best configuration: `", S(best, "config"), "`. ",
        I(w, "rounds_finished"), " candidate round(s) judged; kept path: ",
        path.empty() ? "-" : absl::StrJoin(path, " → "),
        ". Ended: ", Cell(S(w, "ended_because")), "\n\n");
  }
  return md;
}

std::string Markdown(const json& report) {
  const json& o = report.at("overview");
  const bool simulated = B(report, "simulated");
  const std::string sim = simulated                         ? " (simulated)"
                          : report.value("replayed", false) ? " (replayed)"
                                                            : "";
  std::string md = absl::StrCat("# Tuning report: ", S(o, "name"), " (",
                                S(o, "sweep_id"), ")\n\n");
  if (simulated) {
    absl::StrAppend(&md,
                    "> **Simulated board.** Every time in this report comes "
                    "from tunefarm's NPU model, not from a real card.\n\n");
  }
  // Optional keys (absent in reports of older coordinators).
  if (report.value("replayed", false)) {
    absl::StrAppend(
        &md,
        "> **Replayed.** Every time in this report was recorded by someone "
        "else in a measured search space and replayed by a replay board; "
        "nothing ran here (see the measurement policy of each round).\n\n");
  }
  const std::string baseline_source = o.value("baseline_source", "");

  // Overview.
  const double achieved = D(o, "achieved_speedup");
  // How it was measured (optional key): the closing check's paired result,
  // or one sweep's two leases' medians.
  std::string basis;
  const std::string basis_key = o.value("speedup_basis", "");
  if (basis_key == "side_by_side" && report.contains("closing_check")) {
    const json& c = report.at("closing_check");
    basis = D(c, "speedup_low") > 0
                ? absl::StrFormat(
                      " side by side (%.2fx to %.2fx, each bound "
                      "at %.0f%%)",
                      D(c, "speedup_low"), D(c, "speedup_high"),
                      D(c, "confidence") * 100)
                : " side by side";
  } else if (basis_key == "lease_medians" && !report.contains("workloads")) {
    basis = " from two leases' medians";
  }
  std::string achieved_text =
      achieved > 0 ? absl::StrFormat("**%.2fx**%s (%sgoal %s)", achieved, basis,
                                     simulated ? "simulated; " : "",
                                     B(o, "goal_met") ? "met" : "not met")
                   : "no passing configuration";
  std::vector<std::string> boards;
  for (const json& b : o.at("boards")) {
    std::string kind = S(b, "kind");
    if (!S(b, "chip").empty()) absl::StrAppend(&kind, " ", S(b, "chip"));
    if (B(b, "simulated")) absl::StrAppend(&kind, ", simulated");
    boards.push_back(absl::StrCat(S(b, "board_id"), " (",
                                  kind.empty() ? "" : kind + ", ",
                                  I(b, "rounds"), " rounds)"));
  }
  // The achieved speedup compares two leases' medians; the closing check
  // timed the best against the baseline in one (optional key).
  std::string closing;
  if (report.contains("closing_check")) {
    const json& c = report.at("closing_check");
    closing = absl::StrCat(
        "| closing check (round ", I(c, "round"), ") | ",
        Cell(S(c, "outcome").empty() ? "running" : S(c, "outcome")), " |\n");
  }
  std::string budget;
  if (I(o, "max_rounds") > 0) {
    absl::StrAppend(&budget, "budget ", I(o, "max_rounds"), " rounds");
  }
  if (I(o, "time_limit_s") > 0) {
    absl::StrAppend(&budget, budget.empty() ? "" : ", ",
                    Duration(D(o, "time_limit_s")));
  }
  absl::StrAppend(
      &md, "## Overview\n\n| | |\n|---|---|\n", "| operator | ",
      Cell(S(o, "operator")), " |\n", "| workload | ", Cell(S(o, "workload")),
      " (", Cell(S(o, "dtype")), ") |\n", "| team | ", Cell(S(o, "team")),
      " |\n",
      baseline_source.empty()
          ? ""
          : absl::StrCat("| baseline from | ", Cell(baseline_source), " |\n"),
      "| goal | ", Cell(S(o, "goal")), " |\n", "| achieved | ", achieved_text,
      " |\n", closing, "| state | ", Cell(S(o, "state")), " |\n",
      "| ended because | ", Cell(S(o, "ended_because")), " |\n",
      "| duration | ", Duration(D(o, "duration_s")), " (started ",
      Time(I(o, "started_unix_ms")), ", finished ",
      Time(I(o, "finished_unix_ms")), ") |\n", "| rounds | ", I(o, "rounds"),
      " (", I(o, "rounds_finished"), " candidates finished",
      budget.empty() ? "" : "; " + budget, ") |\n", "| strategy | ",
      Cell(S(o, "strategy")), " (seed ", I(o, "seed"), ") |\n",
      "| boards used | ",
      boards.empty() ? "-" : Cell(absl::StrJoin(boards, ", ")), " |\n",
      "| minimum gain | ", absl::StrFormat("%.1f%%", D(o, "min_gain") * 100),
      " |\n\n");

  // Baseline vs best: one section per workload when there are several.
  const json& base = report.at("baseline");
  const json& best = report.at("best");
  const bool multi = report.contains("workloads");
  if (multi) {
    absl::StrAppend(&md, WorkloadSectionsMarkdown(report, sim));
  } else {
    absl::StrAppend(&md, "## Baseline vs best\n\n");
  }
  if (multi) {
    // Each workload's section above.
  } else if (best.is_null() || base.is_null()) {
    absl::StrAppend(
        &md, "No configuration passed: ", Cell(S(o, "ended_because")), "\n\n");
  } else {
    auto spread = [](const json& m) {
      return absl::StrFormat("%.2f – %.2f", D(m, "p20_us"), D(m, "p80_us"));
    };
    absl::StrAppend(
        &md, "| | baseline | best |\n|---|---|---|\n", "| round | ",
        I(base, "round"), " | ", I(best, "round"), " |\n", "| median µs", sim,
        " | ", Us(D(base, "time_us")), " | ", Us(D(best, "time_us")), " |\n",
        "| p20 – p80 µs", sim, " | ", spread(base), " | ", spread(best), " |\n",
        "| samples | ", I(base, "samples"), " | ", I(best, "samples"), " |\n",
        "| speedup | 1.00x | ",
        absl::StrFormat("**%.2fx**", D(best, "speedup")), " |\n", "| board | ",
        Cell(S(base, "board")), " | ", Cell(S(best, "board")), " |\n\n");
    if (!S(best, "policy").empty()) {
      absl::StrAppend(&md, "Measured: ", S(best, "policy"), ".\n\n");
    }
    const json& sig = report.at("signals");
    absl::StrAppend(&md, "### Profile signals that moved\n\n");
    if (!B(sig, "baseline_diagnosed") || !B(sig, "best_diagnosed")) {
      absl::StrAppend(&md, "No profile diagnosis of the ",
                      B(sig, "baseline_diagnosed") ? "best round" : "baseline",
                      "; nothing to compare.\n\n");
    } else if (sig.at("moved").empty()) {
      absl::StrAppend(&md,
                      "The diagnoses of the baseline and the best round show "
                      "the same signals.\n\n");
    } else {
      absl::StrAppend(&md, "| signal | baseline | best | change |\n",
                      "|---|---|---|---|\n");
      for (const json& m : sig.at("moved")) {
        absl::StrAppend(&md, "| ", Cell(S(m, "signal")), " | ",
                        Cell(Scalar(m.at("baseline"))), " | ",
                        Cell(Scalar(m.at("best"))), " | ",
                        Pct(m.at("change_pct")), " |\n");
      }
      absl::StrAppend(&md, "\n");
    }
  }

  // Kept path.
  const json& rounds = report.at("rounds");
  auto round_by_id = [&rounds](int64_t id) -> const json* {
    for (const json& r : rounds) {
      if (I(r, "round") == id) return &r;
    }
    return nullptr;
  };
  if (!report.at("kept_path").empty()) {
    absl::StrAppend(&md, "## Kept path (baseline → best)\n\n");
    int n = 0;
    for (const json& id : report.at("kept_path")) {
      const json* r = round_by_id(id.get<int64_t>());
      if (r == nullptr) continue;
      // Why the strategy proposed it; optional, as reports written before
      // rounds carried a rationale have none.
      const auto it = r->find("rationale");
      const std::string why =
          it != r->end() && it->is_string()
              ? absl::StrReplaceAll(it->get<std::string>(), {{"\n", " "}})
              : std::string();
      absl::StrAppend(&md, ++n, ". round ", I(*r, "round"), ": ",
                      S(*r, "change"), " — ", UsOrDash(r->at("time_us")), " µs",
                      sim, why.empty() ? "" : absl::StrCat(". Why: ", why),
                      "\n");
    }
    absl::StrAppend(&md, "\n");
  }

  // Effective optimisations.
  absl::StrAppend(&md, "## Effective optimisations\n\n");
  if (report.at("effective").empty()) {
    absl::StrAppend(&md, "No change was kept.\n\n");
  } else {
    absl::StrAppend(&md, "| round | change | before µs", sim, " | after µs",
                    sim, " | gain | on the kept path |\n",
                    "|---|---|---|---|---|---|\n");
    for (const json& e : report.at("effective")) {
      absl::StrAppend(&md, "| ", I(e, "round"), " | ", Cell(S(e, "change")),
                      " | ", Us(D(e, "from_us")), " | ", Us(D(e, "to_us")),
                      " | ", absl::StrFormat("%.1f%%", D(e, "gain_pct")), " | ",
                      B(e, "on_kept_path") ? "yes" : "no", " |\n");
    }
    absl::StrAppend(&md, "\n");
  }

  // Best configuration.
  absl::StrAppend(&md, "## Best configuration\n\n");
  if (best.is_null()) {
    absl::StrAppend(&md, "None.\n\n");
  } else {
    absl::StrAppend(&md, "`", S(best, "config"), "`\n\n",
                    "| parameter | value |\n|---|---|\n");
    for (const auto& [name, value] : best.at("params").items()) {
      absl::StrAppend(&md, "| ", Cell(name), " | ", Cell(Scalar(value)),
                      " |\n");
    }
    absl::StrAppend(&md, "\n");
  }

  // Rounds.
  std::map<std::string, int> decisions;
  for (const json& r : rounds) ++decisions[S(r, "decision")];
  absl::StrAppend(
      &md, "## Rounds\n\n",
      absl::StrFormat("%d rounds: %d kept, %d rolled back, %d rejected, %d "
                      "not judged.\n\n",
                      rounds.size(), decisions["kept"],
                      decisions["rolled_back"], decisions["rejected"],
                      decisions["pending"]),
      multi ? "| round | workload " : "| round ",
      "| parent | change | board | outcome | time µs", sim,
      " | change | decision | hotspot | reason |\n", multi ? "|---" : "",
      "|---|---|---|---|---|---|---|---|---|---|\n");
  for (const json& r : rounds) {
    absl::StrAppend(&md, "| ", I(r, "round"), " | ",
                    multi ? Cell(r.value("workload", "")) + " | " : "",
                    I(r, "parent") < 0 ? "-" : absl::StrCat(I(r, "parent")),
                    " | ", Cell(S(r, "change")), " | ", Cell(S(r, "board")),
                    " | ", Cell(S(r, "outcome")), " | ",
                    UsOrDash(r.at("time_us")), " | ", Pct(r.at("change_pct")),
                    " | ", DecisionText(S(r, "decision")), " | ",
                    Cell(S(r, "hotspot")), " | ", Cell(S(r, "reason")), " |\n");
  }
  absl::StrAppend(&md, "\n");

  // Problems.
  const json& problems = report.at("problems");
  absl::StrAppend(&md, "## Problems met\n\n");
  if (problems.at("items").empty()) {
    absl::StrAppend(&md,
                    "None: no build, precision, timeout, crash, "
                    "profile or board failure.\n\n");
  } else {
    std::vector<std::string> counts;
    for (const auto& [kind, n] : problems.at("counts").items()) {
      if (n.get<int64_t>() > 0)
        counts.push_back(absl::StrCat(kind, " ", n.get<int64_t>()));
    }
    absl::StrAppend(&md, absl::StrJoin(counts, ", "), ".\n\n");
    for (const json& p : problems.at("items")) {
      absl::StrAppend(
          &md, "- round ", I(p, "round"), " (",
          S(p, "board").empty() ? "no board" : S(p, "board"),
          "): ", S(p, "kind"),
          S(p, "detail").empty() ? "" : " — " + Cell(S(p, "detail")), "\n");
    }
    absl::StrAppend(&md, "\n");
  }

  // Pictures, when the report was written as a folder.
  if (report.contains("pictures")) {
    const json& pic = report.at("pictures");
    absl::StrAppend(&md, "## Pictures\n\n", "![time per round and best so far",
                    sim, "](", S(pic, "progress_svg"), ")\n\n");
    if (!S(pic, "lineage_svg").empty()) {
      absl::StrAppend(&md, "![lineage tree](", S(pic, "lineage_svg"), ")\n\n");
    }
    absl::StrAppend(&md, "Lineage tree in Graphviz DOT: [",
                    S(pic, "lineage_dot"), "](", S(pic, "lineage_dot"), ")");
    if (!S(pic, "lineage_note").empty()) {
      absl::StrAppend(&md, " — ", S(pic, "lineage_note"));
    }
    absl::StrAppend(&md, "\n");
  }
  return md;
}

// --- SVG
// ----------------------------------------------------------------------

// A 1-2-5 step giving about `ticks` intervals over `span`.
double NiceStep(double span, int ticks) {
  const double raw = span / ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double step = norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10;
  return step * mag;
}

std::string Num(double v) { return absl::StrFormat("%.1f", v); }

std::string ProgressSvg(const json& report) {
  const json& rounds = report.at("rounds");
  const bool simulated = B(report, "simulated");
  constexpr double kWidth = 760, kHeight = 420;
  constexpr double kLeft = 70, kRight = 600, kTop = 50, kBottom = 360;
  int64_t max_round = 1;
  double max_us = 0;
  for (const json& r : rounds) {
    max_round = std::max(max_round, I(r, "round"));
    if (r.at("time_us").is_number()) {
      max_us = std::max(max_us, D(r, "time_us"));
    }
  }
  const double y_step = NiceStep(max_us > 0 ? max_us : 1, 5);
  const double y_max =
      std::ceil((max_us > 0 ? max_us : 1) * 1.05 / y_step) * y_step;
  const double x_step = std::max(1.0, std::ceil(NiceStep(max_round, 10)));
  auto x = [&](double round) {
    return kLeft + (kRight - kLeft) * round / max_round;
  };
  auto y = [&](double us) { return kBottom - (kBottom - kTop) * us / y_max; };

  const json& o = report.at("overview");
  std::string svg = absl::StrCat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", Num(kWidth),
      "\" height=\"", Num(kHeight), "\" viewBox=\"0 0 ", Num(kWidth), " ",
      Num(kHeight), "\" font-family=\"sans-serif\" font-size=\"12\">\n",
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n", "<text x=\"",
      Num(kLeft), "\" y=\"24\" font-size=\"15\">",
      XmlEscape(absl::StrCat(S(o, "name"), " (", S(o, "sweep_id"),
                             "): time per round",
                             simulated ? " — simulated board" : "")),
      "</text>\n");
  // Grid and ticks first, so the axes are drawn over them.
  for (double v = 0; v <= y_max + y_step / 2; v += y_step) {
    absl::StrAppend(&svg, "<line x1=\"", Num(kLeft), "\" y1=\"", Num(y(v)),
                    "\" x2=\"", Num(kRight), "\" y2=\"", Num(y(v)),
                    "\" stroke=\"#eee\"/>\n<text x=\"", Num(kLeft - 6),
                    "\" y=\"", Num(y(v) + 4), "\" text-anchor=\"end\">",
                    absl::StrFormat("%g", v), "</text>\n");
  }
  for (double r = 0; r <= max_round; r += x_step) {
    absl::StrAppend(&svg, "<line x1=\"", Num(x(r)), "\" y1=\"", Num(kBottom),
                    "\" x2=\"", Num(x(r)), "\" y2=\"", Num(kBottom + 5),
                    "\" stroke=\"#999\"/>\n<text x=\"", Num(x(r)), "\" y=\"",
                    Num(kBottom + 18), "\" text-anchor=\"middle\">",
                    absl::StrFormat("%g", r), "</text>\n");
  }
  absl::StrAppend(&svg, "<g stroke=\"#999\" stroke-width=\"1\">\n",
                  "<line x1=\"", Num(kLeft), "\" y1=\"", Num(kBottom),
                  "\" x2=\"", Num(kRight), "\" y2=\"", Num(kBottom), "\"/>\n",
                  "<line x1=\"", Num(kLeft), "\" y1=\"", Num(kTop), "\" x2=\"",
                  Num(kLeft), "\" y2=\"", Num(kBottom), "\"/>\n</g>\n");
  absl::StrAppend(&svg, "<text x=\"", Num((kLeft + kRight) / 2), "\" y=\"",
                  Num(kBottom + 38), "\" text-anchor=\"middle\">round</text>\n",
                  "<text transform=\"translate(18 ", Num((kTop + kBottom) / 2),
                  ") rotate(-90)\" text-anchor=\"middle\">median time (µs",
                  simulated ? ", simulated" : "", ")</text>\n");

  // Best so far, a step line.
  std::string path;
  double last_x = 0, last_y = 0;
  for (const json& r : rounds) {
    if (!r.at("best_so_far_us").is_number()) continue;
    const double px = x(I(r, "round")), py = y(D(r, "best_so_far_us"));
    if (path.empty()) {
      path = absl::StrCat("M", Num(px), " ", Num(py));
    } else if (py != last_y) {
      absl::StrAppend(&path, " H", Num(px), " V", Num(py));
    }
    last_x = px;
    last_y = py;
  }
  if (!path.empty()) {
    absl::StrAppend(&path, " H", Num(std::max(last_x, x(max_round))));
    absl::StrAppend(
        &svg, "<path d=\"", path,
        "\" fill=\"none\" stroke=\"#2a8a2a\" stroke-width=\"2\"/>\n");
  }

  // Each round's interval (report.cc: the A/B gain's, or the median's),
  // a thin vertical bar behind its mark; rounds without one have none.
  for (const json& r : rounds) {
    auto it = r.find("interval_us");
    if (it == r.end() || !it->is_array() || it->size() != 2 ||
        !(*it)[0].is_number() || !(*it)[1].is_number()) {
      continue;
    }
    const double lo = std::clamp((*it)[0].get<double>(), 0.0, y_max);
    const double hi = std::clamp((*it)[1].get<double>(), 0.0, y_max);
    const double px = x(I(r, "round"));
    absl::StrAppend(&svg, "<path d=\"M", Num(px), " ", Num(y(lo)), " V",
                    Num(y(hi)), " M", Num(px - 3), " ", Num(y(lo)), " H",
                    Num(px + 3), " M", Num(px - 3), " ", Num(y(hi)), " H",
                    Num(px + 3),
                    "\" stroke=\"#9bb7d9\" stroke-width=\"1\"/>\n");
  }

  // One mark per round.
  for (const json& r : rounds) {
    const std::string decision = S(r, "decision");
    const std::string outcome = S(r, "outcome");
    const double px = x(I(r, "round"));
    const std::string title = absl::StrCat(
        "<title>",
        XmlEscape(absl::StrCat("round ", I(r, "round"), ": ", S(r, "change"),
                               " — ", outcome, ", ", DecisionText(decision))),
        "</title>");
    if (r.at("time_us").is_number()) {
      const double py = y(D(r, "time_us"));
      if (decision == "baseline") {
        absl::StrAppend(&svg, "<rect x=\"", Num(px - 5), "\" y=\"", Num(py - 5),
                        "\" width=\"10\" height=\"10\" fill=\"#1f5fbf\">",
                        title, "</rect>\n");
      } else if (decision == "kept") {
        absl::StrAppend(&svg, "<circle cx=\"", Num(px), "\" cy=\"", Num(py),
                        "\" r=\"5\" fill=\"#2a8a2a\">", title, "</circle>\n");
      } else {
        absl::StrAppend(&svg, "<circle cx=\"", Num(px), "\" cy=\"", Num(py),
                        "\" r=\"4\" fill=\"none\" stroke=\"#777\" "
                        "stroke-width=\"1.5\">",
                        title, "</circle>\n");
      }
    } else if (outcome != "queued" && outcome != "leased" &&
               outcome != "cancelled" && outcome != "unspecified") {
      // A failed round has no time: a red cross along the top.
      const double py = kTop + 8;
      absl::StrAppend(&svg, "<path d=\"M", Num(px - 4), " ", Num(py - 4), " L",
                      Num(px + 4), " ", Num(py + 4), " M", Num(px - 4), " ",
                      Num(py + 4), " L", Num(px + 4), " ", Num(py - 4),
                      "\" stroke=\"#c62828\" stroke-width=\"2\">", title,
                      "</path>\n");
    }
  }

  // Legend.
  const double lx = kRight + 20;
  absl::StrAppend(
      &svg, "<g>\n", "<rect x=\"", Num(lx), "\" y=\"", Num(kTop),
      "\" width=\"10\" "
      "height=\"10\" fill=\"#1f5fbf\"/>\n<text x=\"",
      Num(lx + 18), "\" y=\"", Num(kTop + 9), "\">baseline</text>\n",
      "<circle cx=\"", Num(lx + 5), "\" cy=\"", Num(kTop + 25),
      "\" r=\"5\" fill=\"#2a8a2a\"/>\n<text x=\"", Num(lx + 18), "\" y=\"",
      Num(kTop + 29), "\">kept</text>\n", "<circle cx=\"", Num(lx + 5),
      "\" cy=\"", Num(kTop + 45),
      "\" r=\"4\" fill=\"none\" stroke=\"#777\" stroke-width=\"1.5\"/>\n"
      "<text x=\"",
      Num(lx + 18), "\" y=\"", Num(kTop + 49), "\">rolled back</text>\n",
      "<path d=\"M", Num(lx + 1), " ", Num(kTop + 61), " L", Num(lx + 9), " ",
      Num(kTop + 69), " M", Num(lx + 1), " ", Num(kTop + 69), " L", Num(lx + 9),
      " ", Num(kTop + 61),
      "\" stroke=\"#c62828\" stroke-width=\"2\"/>\n<text x=\"", Num(lx + 18),
      "\" y=\"", Num(kTop + 69), "\">failed (no time)</text>\n", "<line x1=\"",
      Num(lx), "\" y1=\"", Num(kTop + 85), "\" x2=\"", Num(lx + 10), "\" y2=\"",
      Num(kTop + 85), "\" stroke=\"#2a8a2a\" stroke-width=\"2\"/>\n<text x=\"",
      Num(lx + 18), "\" y=\"", Num(kTop + 89), "\">best so far</text>\n",
      "<path d=\"M", Num(lx + 5), " ", Num(kTop + 99), " V", Num(kTop + 113),
      " M", Num(lx + 2), " ", Num(kTop + 99), " H", Num(lx + 8), " M",
      Num(lx + 2), " ", Num(kTop + 113), " H", Num(lx + 8),
      "\" stroke=\"#9bb7d9\" stroke-width=\"1\"/>\n<text x=\"", Num(lx + 18),
      "\" y=\"", Num(kTop + 110), "\">interval</text>\n</g>\n</svg>\n");
  return svg;
}

// --- DOT
// ----------------------------------------------------------------------

std::string LineageDot(const json& report) {
  const json& o = report.at("overview");
  const std::string sim = B(report, "simulated")            ? " (simulated)"
                          : report.value("replayed", false) ? " (replayed)"
                                                            : "";
  std::string dot = absl::StrCat(
      "digraph lineage {\n  rankdir=LR;\n  labelloc=t;\n  label=\"",
      DotEscape(absl::StrCat(S(o, "name"), " (", S(o, "sweep_id"), "): lineage",
                             sim)),
      "\";\n  node [shape=box, style=\"rounded,filled\", fillcolor=white, "
      "fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", "
      "fontsize=9];\n");
  const json& rounds = report.at("rounds");
  for (const json& r : rounds) {
    const std::string decision = S(r, "decision");
    const std::string outcome = S(r, "outcome");
    const bool on_path = B(r, "on_kept_path");
    std::string label =
        absl::StrCat("#", I(r, "round"), " ", DecisionText(decision));
    if (r.at("time_us").is_number()) {
      absl::StrAppend(&label, "\n", Us(D(r, "time_us")), " µs", sim);
    } else if (outcome != "ok") {
      absl::StrAppend(&label, "\n", outcome);
    }
    std::string attrs;
    if (decision == "baseline" &&
        !o.value("baseline_source", std::string()).empty()) {
      absl::StrAppend(&label, "\nfrom ", S(o, "baseline_source"));
    }
    if (decision == "baseline") {
      attrs = "fillcolor=\"#dbe9ff\", color=\"#1f5fbf\", penwidth=2";
    } else if (on_path) {
      attrs = "fillcolor=\"#d8f5d0\", color=\"#2a8a2a\", penwidth=2";
    } else if (decision == "kept") {
      attrs = "color=\"#2a8a2a\"";
    } else if (r.at("time_us").is_null() && outcome != "queued" &&
               outcome != "leased" && outcome != "cancelled") {
      attrs =
          "shape=octagon, style=filled, fillcolor=\"#fde0e0\", "
          "color=\"#c62828\", fontcolor=\"#c62828\"";
    } else if (decision == "pending") {
      attrs = "style=\"rounded,dotted\", color=gray60, fontcolor=gray40";
    } else {
      attrs = "style=\"rounded,dashed\", color=gray50, fontcolor=gray35";
    }
    absl::StrAppend(&dot, "  r", I(r, "round"), " [label=\"", DotEscape(label),
                    "\", ", attrs, "];\n");
  }
  for (const json& r : rounds) {
    if (I(r, "parent") < 0) continue;
    std::string attrs = B(r, "on_kept_path") ? ", color=\"#2a8a2a\", penwidth=2"
                                             : ", color=gray55";
    absl::StrAppend(&dot, "  r", I(r, "parent"), " -> r", I(r, "round"),
                    " [label=\"", DotEscape(S(r, "change")), "\"", attrs,
                    "];\n");
  }
  absl::StrAppend(&dot, "}\n");
  return dot;
}

// Renders `dot_file` to `svg_file`; "" on success, else why not.
std::string RunDot(const std::string& program, const std::string& dot_file,
                   const std::string& svg_file, const std::string& log_file) {
  auto child =
      Subprocess::Start({program, "-Tsvg", dot_file, "-o", svg_file}, log_file);
  if (!child.ok()) {
    return absl::StrCat("cannot start ", program, ": ",
                        child.status().message());
  }
  std::optional<int> status = (*child)->Wait(absl::Seconds(60));
  if (!status.has_value()) {
    (*child)->Stop(absl::Seconds(1));
    return absl::StrCat(program, " ran over 60 s");
  }
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    absl::StatusOr<std::string> log = ReadFile(log_file);
    std::string why = log.ok() ? std::string(absl::StripAsciiWhitespace(*log))
                               : std::string();
    return absl::StrCat(program, " failed (wait status ", *status, ")",
                        why.empty() ? "" : ": " + why.substr(0, 300));
  }
  return "";
}

}  // namespace

absl::Status ValidateReport(const json& report) {
  TF_RETURN_IF_ERROR(CheckFields(report, "report",
                                 {{"schema", Type::kString},
                                  {"schema_version", Type::kInteger},
                                  {"simulated", Type::kBool},
                                  {"overview", Type::kObject},
                                  {"baseline", Type::kObjectOrNull},
                                  {"best", Type::kObjectOrNull},
                                  {"signals", Type::kObject},
                                  {"rounds", Type::kArray},
                                  {"kept_path", Type::kArray},
                                  {"effective", Type::kArray},
                                  {"problems", Type::kObject}}));
  if (report.at("schema") != "tunefarm.report") {
    return absl::InvalidArgumentError(
        absl::StrCat("report.schema: \"", S(report, "schema"),
                     "\" is not \"tunefarm.report\""));
  }
  if (I(report, "schema_version") != kReportSchemaVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("report.schema_version: ", I(report, "schema_version"),
                     " is not supported (this tunefarm reads version ",
                     kReportSchemaVersion, ")"));
  }
  const json& o = report.at("overview");
  TF_RETURN_IF_ERROR(CheckFields(o, "report.overview",
                                 {{"sweep_id", Type::kString},
                                  {"name", Type::kString},
                                  {"team", Type::kString},
                                  {"operator", Type::kString},
                                  {"workload", Type::kString},
                                  {"dtype", Type::kString},
                                  {"strategy", Type::kString},
                                  {"seed", Type::kInteger},
                                  {"board_kind", Type::kString},
                                  {"state", Type::kString},
                                  {"ended_because", Type::kString},
                                  {"goal", Type::kString},
                                  {"goal_speedup", Type::kNumber},
                                  {"goal_target_us", Type::kNumber},
                                  {"goal_met", Type::kBool},
                                  {"achieved_speedup", Type::kNumber},
                                  {"submitted_unix_ms", Type::kInteger},
                                  {"started_unix_ms", Type::kInteger},
                                  {"finished_unix_ms", Type::kInteger},
                                  {"duration_s", Type::kNumber},
                                  {"rounds", Type::kInteger},
                                  {"rounds_finished", Type::kInteger},
                                  {"max_rounds", Type::kInteger},
                                  {"time_limit_s", Type::kInteger},
                                  {"min_gain", Type::kNumber},
                                  {"boards", Type::kArray}}));
  TF_RETURN_IF_ERROR(CheckEach(o, "report.overview", "boards",
                               [](const json& b, const std::string& path) {
                                 return CheckFields(
                                     b, path,
                                     {{"board_id", Type::kString},
                                      {"kind", Type::kString},
                                      {"chip", Type::kString},
                                      {"simulated", Type::kBool},
                                      {"rounds", Type::kInteger}});
                               }));
  if (!report.at("baseline").is_null()) {
    TF_RETURN_IF_ERROR(CheckMeasured(report.at("baseline"), "report.baseline"));
  }
  if (!report.at("best").is_null()) {
    TF_RETURN_IF_ERROR(CheckMeasured(report.at("best"), "report.best"));
    TF_RETURN_IF_ERROR(CheckFields(report.at("best"), "report.best",
                                   {{"speedup", Type::kNumber},
                                    {"config", Type::kString},
                                    {"params", Type::kObject}}));
    for (const auto& [name, value] : report.at("best").at("params").items()) {
      if (!Is(value, Type::kScalar)) {
        return absl::InvalidArgumentError(
            absl::StrCat("report.best.params.", name, ": expected ",
                         TypeName(Type::kScalar), ", got ", value.type_name()));
      }
    }
  }
  const json& sig = report.at("signals");
  TF_RETURN_IF_ERROR(CheckFields(sig, "report.signals",
                                 {{"baseline_diagnosed", Type::kBool},
                                  {"best_diagnosed", Type::kBool},
                                  {"moved", Type::kArray}}));
  TF_RETURN_IF_ERROR(CheckEach(sig, "report.signals", "moved",
                               [](const json& m, const std::string& path) {
                                 return CheckFields(
                                     m, path,
                                     {{"signal", Type::kString},
                                      {"baseline", Type::kScalar},
                                      {"best", Type::kScalar},
                                      {"change_pct", Type::kNumberOrNull}});
                               }));
  TF_RETURN_IF_ERROR(CheckEach(
      report, "report", "rounds", [](const json& r, const std::string& path) {
        return CheckFields(r, path,
                           {{"round", Type::kInteger},
                            {"parent", Type::kInteger},
                            {"stage", Type::kString},
                            {"change", Type::kString},
                            {"board", Type::kString},
                            {"outcome", Type::kString},
                            {"time_us", Type::kNumberOrNull},
                            {"parent_us", Type::kNumberOrNull},
                            {"change_pct", Type::kNumberOrNull},
                            {"decision", Type::kString},
                            {"reason", Type::kString},
                            {"attempts", Type::kInteger},
                            {"simulated", Type::kBool},
                            {"best_so_far_us", Type::kNumberOrNull},
                            {"hotspot", Type::kString},
                            {"on_kept_path", Type::kBool}});
      }));
  const json& path = report.at("kept_path");
  for (size_t i = 0; i < path.size(); ++i) {
    if (!path[i].is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat("report.kept_path[", i, "]: expected an integer, got ",
                       path[i].type_name()));
    }
  }
  TF_RETURN_IF_ERROR(CheckEach(report, "report", "effective",
                               [](const json& e, const std::string& path) {
                                 return CheckFields(
                                     e, path,
                                     {{"round", Type::kInteger},
                                      {"change", Type::kString},
                                      {"from_us", Type::kNumber},
                                      {"to_us", Type::kNumber},
                                      {"gain_pct", Type::kNumber},
                                      {"on_kept_path", Type::kBool}});
                               }));
  const json& problems = report.at("problems");
  TF_RETURN_IF_ERROR(
      CheckFields(problems, "report.problems",
                  {{"counts", Type::kObject}, {"items", Type::kArray}}));
  for (const auto& [kind, n] : problems.at("counts").items()) {
    if (!n.is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat("report.problems.counts.", kind,
                       ": expected an integer, got ", n.type_name()));
    }
  }
  TF_RETURN_IF_ERROR(CheckEach(problems, "report.problems", "items",
                               [](const json& p, const std::string& path) {
                                 return CheckFields(
                                     p, path,
                                     {{"round", Type::kInteger},
                                      {"kind", Type::kString},
                                      {"board", Type::kString},
                                      {"detail", Type::kString}});
                               }));
  if (report.contains("workloads")) {  // multi-workload sweeps only
    TF_RETURN_IF_ERROR(CheckFields(
        report, "report",
        {{"objective", Type::kString}, {"workloads", Type::kArray}}));
    TF_RETURN_IF_ERROR(CheckEach(
        report, "report", "workloads",
        [](const json& w, const std::string& path) -> absl::Status {
          TF_RETURN_IF_ERROR(CheckFields(w, path,
                                         {{"name", Type::kString},
                                          {"dtype", Type::kString},
                                          {"dims", Type::kString},
                                          {"weight", Type::kNumber},
                                          {"baseline", Type::kObjectOrNull},
                                          {"best", Type::kObjectOrNull},
                                          {"rounds", Type::kInteger},
                                          {"rounds_finished", Type::kInteger},
                                          {"done", Type::kBool},
                                          {"ended_because", Type::kString},
                                          {"goal_met", Type::kBool},
                                          {"kept_path", Type::kArray}}));
          if (!w.at("baseline").is_null()) {
            TF_RETURN_IF_ERROR(
                CheckMeasured(w.at("baseline"), path + ".baseline"));
          }
          if (!w.at("best").is_null()) {
            TF_RETURN_IF_ERROR(CheckMeasured(w.at("best"), path + ".best"));
            TF_RETURN_IF_ERROR(CheckFields(
                w.at("best"), path + ".best",
                {{"speedup", Type::kNumber}, {"config", Type::kString}}));
          }
          for (const json& id : w.at("kept_path")) {
            if (!id.is_number_integer()) {
              return absl::InvalidArgumentError(
                  absl::StrCat(path, ".kept_path: expected integers"));
            }
          }
          return absl::OkStatus();
        }));
  }
  if (o.contains("speedup_basis") && o.at("speedup_basis") != "side_by_side" &&
      o.at("speedup_basis") != "lease_medians") {
    return absl::InvalidArgumentError(
        "report.overview.speedup_basis: expected \"side_by_side\" or "
        "\"lease_medians\"");
  }
  if (report.contains("closing_check")) {
    TF_RETURN_IF_ERROR(CheckFields(report.at("closing_check"),
                                   "report.closing_check",
                                   {{"round", Type::kInteger},
                                    {"best_round", Type::kInteger},
                                    {"lease_speedup", Type::kNumber},
                                    {"speedup", Type::kNumber},
                                    {"speedup_low", Type::kNumber},
                                    {"speedup_high", Type::kNumber},
                                    {"confidence", Type::kNumber},
                                    {"outcome", Type::kString}}));
  }
  if (report.contains("pictures")) {
    TF_RETURN_IF_ERROR(CheckFields(report.at("pictures"), "report.pictures",
                                   {{"progress_svg", Type::kString},
                                    {"lineage_dot", Type::kString},
                                    {"lineage_svg", Type::kString},
                                    {"lineage_note", Type::kString}}));
  }
  return absl::OkStatus();
}

absl::StatusOr<json> ParseReport(const std::string& text) {
  json report = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded()) {
    return absl::InvalidArgumentError("report JSON: not valid JSON");
  }
  TF_RETURN_IF_ERROR(ValidateReport(report));
  return report;
}

absl::StatusOr<std::string> RenderReportMarkdown(const json& report) {
  return Render(report, Markdown);
}

absl::StatusOr<std::string> RenderProgressSvg(const json& report) {
  return Render(report, ProgressSvg);
}

absl::StatusOr<std::string> RenderLineageDot(const json& report) {
  return Render(report, LineageDot);
}

absl::StatusOr<json> WriteReportFolder(json report, const std::string& dir,
                                       const ReportFolderOptions& options) {
  TF_RETURN_IF_ERROR(ValidateReport(report));
  TF_RETURN_IF_ERROR(MakeDirs(dir));
  TF_ASSIGN_OR_RETURN(std::string dot, RenderLineageDot(report));
  TF_ASSIGN_OR_RETURN(std::string svg, RenderProgressSvg(report));
  const std::string dot_file = dir + "/lineage.dot";
  const std::string svg_file = dir + "/lineage.svg";
  TF_RETURN_IF_ERROR(WriteFileAtomic(dot_file, dot));
  TF_RETURN_IF_ERROR(WriteFileAtomic(dir + "/progress.svg", svg));

  // An old picture must not pass for this one.
  std::error_code ec;
  std::filesystem::remove(svg_file, ec);
  const std::string program =
      options.dot_program.empty() ? FindExecutable("dot") : options.dot_program;
  std::string note;
  if (program.empty() || ::access(program.c_str(), X_OK) != 0) {
    note =
        "Graphviz `dot` is not installed, so lineage.svg was not drawn; "
        "render it with `dot -Tsvg lineage.dot -o lineage.svg`.";
  } else {
    const std::string log_file = dir + "/.dot.log";
    std::string why = RunDot(program, dot_file, svg_file, log_file);
    std::filesystem::remove(log_file, ec);
    if (!why.empty()) {
      std::filesystem::remove(svg_file, ec);
      note = absl::StrCat("lineage.svg was not drawn: ", why, ".");
    }
  }
  report["pictures"] = {{"progress_svg", "progress.svg"},
                        {"lineage_dot", "lineage.dot"},
                        {"lineage_svg", note.empty() ? "lineage.svg" : ""},
                        {"lineage_note", note}};
  TF_ASSIGN_OR_RETURN(std::string md, RenderReportMarkdown(report));
  TF_RETURN_IF_ERROR(WriteFileAtomic(
      dir + "/report.json",
      report.dump(2, ' ', false, json::error_handler_t::replace) + "\n"));
  TF_RETURN_IF_ERROR(WriteFileAtomic(dir + "/report.md", md));
  return report;
}

}  // namespace tunefarm
