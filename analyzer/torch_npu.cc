// Parsers for the torch_npu-only tables under ASCEND_PROFILER_OUTPUT/
// (step_trace_time, operator_details, l2_cache) and profiler_info_*.json.
// kernel_details / op_statistic / api_statistic share msprof.cc's readers.
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analyzer/csv.h"
#include "analyzer/profile.h"
#include "nlohmann/json.hpp"

namespace tunefarm {
namespace {

absl::string_view Av(std::string_view s) { return {s.data(), s.size()}; }

absl::Status Bad(std::string_view file, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(Av(file), ": ", Av(what)));
}

}  // namespace

absl::StatusOr<StepTrace> ParseStepTrace(std::string_view text,
                                         std::string_view file) {
  absl::StatusOr<CsvTable> t = ParseCsvSkippingRaggedRows(text, file);
  if (!t.ok()) return t.status();
  std::optional<int> computing = t->Column({"Computing"});
  std::optional<int> free_col = t->Column({"Free"});
  if (!computing.has_value() || !free_col.has_value()) {
    return Bad(file, "needs columns 'Computing' and 'Free'");
  }
  std::optional<int> bubble = t->Column({"Bubble"});
  std::optional<int> stage = t->Column({"Stage"});
  std::optional<int> comm = t->Column({"Communication(Not Overlapped)"});
  std::optional<int> prep = t->Column({"Preparing"});
  StepTrace out;
  out.file = std::string(file);
  for (size_t r = 0; r < t->rows.size(); ++r) {
    std::optional<double> c = t->Number(r, computing);
    if (!c.has_value()) continue;
    ++out.steps;
    out.computing_us += *c;
    out.free_us += t->Number(r, free_col).value_or(0);
    out.bubble_us += t->Number(r, bubble).value_or(0);
    out.stage_us += t->Number(r, stage).value_or(0);
    out.comm_not_overlapped_us += t->Number(r, comm).value_or(0);
    out.preparing_us += t->Number(r, prep).value_or(0);
  }
  if (out.steps == 0) return Bad(file, "no row has a numeric 'Computing'");
  return out;
}

absl::StatusOr<OperatorDetails> ParseOperatorDetails(std::string_view text,
                                                     std::string_view file) {
  absl::StatusOr<CsvTable> t = ParseCsvSkippingRaggedRows(text, file);
  if (!t.ok()) return t.status();
  std::optional<int> name = t->Column({"Name"});
  std::optional<int> host = t->Column({"Host Self Duration(us)"});
  std::optional<int> device = t->Column({"Device Self Duration(us)"});
  if (!name.has_value() || !host.has_value()) {
    return Bad(file, "needs columns 'Name' and 'Host Self Duration(us)'");
  }
  OperatorDetails out;
  out.file = std::string(file);
  for (size_t r = 0; r < t->rows.size(); ++r) {
    std::optional<double> h = t->Number(r, host);
    if (!h.has_value()) continue;
    ++out.rows;
    out.host_self_us += *h;
    out.device_self_us += t->Number(r, device).value_or(0);
    if (*h > out.top_host_op_us) {
      out.top_host_op_us = *h;
      out.top_host_op = t->Text(r, name).value_or("(unnamed)");
    }
  }
  if (out.rows == 0) {
    return Bad(file, "no row has a numeric 'Host Self Duration(us)'");
  }
  return out;
}

absl::StatusOr<L2Cache> ParseL2Cache(std::string_view text,
                                     std::string_view file) {
  absl::StatusOr<CsvTable> t = ParseCsvSkippingRaggedRows(text, file);
  if (!t.ok()) return t.status();
  std::optional<int> hit = t->Column({"Hit Rate"});
  std::optional<int> victim = t->Column({"Victim Rate"});
  if (!hit.has_value() && !victim.has_value()) {
    return Bad(file, "needs column 'Hit Rate' or 'Victim Rate'");
  }
  L2Cache out;
  out.file = std::string(file);
  out.rows = static_cast<int64_t>(t->rows.size());
  for (size_t r = 0; r < t->rows.size(); ++r) {
    if (std::optional<double> v = t->Number(r, hit)) out.hit_rate.Add(*v);
    if (std::optional<double> v = t->Number(r, victim)) {
      out.victim_rate.Add(*v);
    }
  }
  if (out.hit_rate.n == 0 && out.victim_rate.n == 0) {
    return Bad(file, "no numeric 'Hit Rate' or 'Victim Rate' in any row");
  }
  return out;
}

absl::StatusOr<ProfilerInfo> ParseProfilerInfo(std::string_view text,
                                               std::string_view file) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr,
                                           /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Bad(file, "not a JSON object");
  }
  ProfilerInfo out;
  out.file = std::string(file);
  const nlohmann::json* cfg = nullptr;
  auto c = j.find("config");
  if (c != j.end() && c->is_object()) {
    auto e = c->find("experimental_config");
    if (e != c->end() && e->is_object()) cfg = &*e;
  }
  if (cfg != nullptr) {
    // Keys with or without the leading underscore: the layout drifts
    // across torch_npu versions.
    auto get = [&](std::initializer_list<const char*> keys) -> std::string {
      for (const char* key : keys) {
        auto it = cfg->find(key);
        if (it != cfg->end() && it->is_string()) return it->get<std::string>();
      }
      return std::string();
    };
    out.aic_metrics = get({"_aic_metrics", "aic_metrics"});
    out.level = get({"_profiler_level", "profiler_level"});
  }
  auto v = j.find("torch_npu_version");
  if (v != j.end() && v->is_string())
    out.torch_npu_version = v->get<std::string>();
  if (out.aic_metrics.empty() && out.level.empty()) {
    return Bad(file,
               "no config.experimental_config._aic_metrics / "
               "_profiler_level");
  }
  return out;
}

}  // namespace tunefarm
