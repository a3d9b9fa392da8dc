// PyPTO: bubble_analysis.log (written by tools/profiling/draw_swim_lane.py)
// and merged_swimlane.json (the same script's Chrome trace). The metrics are
// PyPTO perf-analyzer's (ascend-formats.md §1.3.2-§1.3.3):
//   AicoreTime = W - Wt; utilisation = (W - Wt) / W;
//   bubble = Ws / (AicoreTime + Ws); load balance = 1 - σ/μ of AicoreTime
//   over AIC cores only (100 with fewer than 2 AIC cores).
// From the swim lane, the four per-core numbers are recomputed the way
// draw_swim_lane.py does, with the s/f flow pairs as the predecessor graph.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "analyzer/csv.h"
#include "analyzer/profile.h"
#include "nlohmann/json.hpp"

namespace tunefarm {
namespace {

using nlohmann::json;

absl::string_view Av(std::string_view s) { return {s.data(), s.size()}; }

absl::Status Bad(std::string_view file, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(Av(file), ": ", Av(what)));
}

// "Core Total Work Time: 12.5" -> 12.5 when the line starts with `key`.
std::optional<double> Field(std::string_view line, std::string_view key) {
  absl::string_view l = absl::StripAsciiWhitespace(Av(line));
  if (!absl::StartsWith(l, Av(key))) return std::nullopt;
  l.remove_prefix(key.size());
  l = absl::StripAsciiWhitespace(l);
  if (!absl::ConsumePrefix(&l, ":")) return std::nullopt;
  l = absl::StripAsciiWhitespace(l);
  absl::ConsumeSuffix(&l, "us");  // doc snippets add it; the writer does not
  return ParseNumber(std::string_view(l.data(), l.size()));
}

double Pct(double num, double den) { return den > 0 ? 100 * num / den : 0; }

}  // namespace

void ComputePyptoAggregates(PyptoSummary& s) {
  double util_sum = 0, bubble_sum = 0;
  double aic_util = 0, aiv_util = 0, aic_bubble = 0, aiv_bubble = 0;
  int n_aic = 0, n_aiv = 0;
  std::vector<double> aic_time;
  s.execution_us = 0;
  s.max_aic_wait_predecessor_us = 0;
  for (const PyptoCore& c : s.cores) {
    double aicore = c.work_us - c.wait_us;
    double util = Pct(aicore, aicore + c.wait_us);
    double bubble = Pct(c.wait_schedule_us, aicore + c.wait_schedule_us);
    util_sum += util;
    bubble_sum += bubble;
    s.execution_us = std::max(s.execution_us, c.work_us);
    if (c.aic) {
      ++n_aic;
      aic_util += util;
      aic_bubble += bubble;
      aic_time.push_back(aicore);
      s.max_aic_wait_predecessor_us =
          std::max(s.max_aic_wait_predecessor_us, c.wait_predecessor_us);
    } else {
      ++n_aiv;
      aiv_util += util;
      aiv_bubble += bubble;
    }
  }
  size_t n = s.cores.size();
  s.avg_utilization_pct = n > 0 ? util_sum / n : 0;
  s.avg_bubble_pct = n > 0 ? bubble_sum / n : 0;
  s.aic_utilization_pct = n_aic > 0 ? aic_util / n_aic : 0;
  s.aiv_utilization_pct = n_aiv > 0 ? aiv_util / n_aiv : 0;
  s.aic_bubble_pct = n_aic > 0 ? aic_bubble / n_aic : 0;
  s.aiv_bubble_pct = n_aiv > 0 ? aiv_bubble / n_aiv : 0;
  s.load_balance_pct = 100;
  if (aic_time.size() >= 2) {
    double mean = 0;
    for (double v : aic_time) mean += v;
    mean /= static_cast<double>(aic_time.size());
    double var = 0;
    for (double v : aic_time) var += (v - mean) * (v - mean);
    // numpy's np.std: the population standard deviation.
    double sd = std::sqrt(var / static_cast<double>(aic_time.size()));
    s.load_balance_pct = mean > 0 ? (1 - sd / mean) * 100 : 0;
  }
}

absl::StatusOr<PyptoSummary> ParseBubbleAnalysisLog(std::string_view text,
                                                    std::string_view file) {
  PyptoSummary out;
  out.file = std::string(file);
  out.source = "bubble_analysis.log";
  PyptoCore* cur = nullptr;
  int fields = 0;
  for (absl::string_view raw : absl::StrSplit(Av(text), '\n')) {
    std::string_view line(raw.data(), raw.size());
    absl::string_view t = absl::StripAsciiWhitespace(raw);
    if (absl::StartsWith(t, "[AIC_") || absl::StartsWith(t, "[AIV_")) {
      size_t close = t.find(']');
      if (close == absl::string_view::npos) continue;
      PyptoCore c;
      c.name = std::string(t.substr(1, close - 1));
      c.aic = absl::StartsWith(t, "[AIC_");
      size_t num = t.find("task num:");
      if (num != absl::string_view::npos) {
        absl::string_view rest = t.substr(num + 9);
        size_t comma = rest.find(',');
        int64_t v = 0;
        if (absl::SimpleAtoi(absl::StripAsciiWhitespace(rest.substr(0, comma)),
                             &v)) {
          c.tasks = v;
        }
      }
      out.cores.push_back(std::move(c));
      cur = &out.cores.back();
      continue;
    }
    if (absl::StartsWith(t, "[")) {  // Fake Core_0 and other lanes
      cur = nullptr;
      continue;
    }
    if (cur == nullptr) continue;
    if (auto v = Field(line, "Core Total Work Time")) {
      cur->work_us = *v;
      ++fields;
    } else if (auto v = Field(line, "Total Wait Time")) {
      cur->wait_us = *v;
      ++fields;
    } else if (auto v = Field(line, "Wait Schedule Time")) {
      cur->wait_schedule_us = *v;
      ++fields;
    } else if (auto v = Field(line, "Wait Predecessor Time")) {
      cur->wait_predecessor_us = *v;
      ++fields;
    }
  }
  if (out.cores.empty()) {
    return Bad(file, "no '[AIC_n] Execute task num:' / '[AIV_n] ...' blocks");
  }
  if (fields == 0) {
    return Bad(file,
               "core blocks carry no 'Core Total Work Time:' lines "
               "(truncated?)");
  }
  ComputePyptoAggregates(out);
  return out;
}

namespace {
// "Task:[0-1-53], rootHash:1795..., callOpMagic:10008, leafHash:8097...,"
// -> "8097..."; empty when the hint has no leafHash.
std::string LeafHashOf(std::string_view hint) {
  constexpr std::string_view kKey = "leafHash:";
  size_t at = hint.find(kKey);
  if (at == std::string_view::npos) return "";
  size_t b = at + kKey.size();
  while (b < hint.size() && hint[b] == ' ') ++b;
  size_t e = b;
  while (e < hint.size() && hint[e] >= '0' && hint[e] <= '9') ++e;
  return std::string(hint.substr(b, e - b));
}
}  // namespace

absl::StatusOr<PyptoSummary> ParsePyptoSwimlane(std::string_view text,
                                                std::string_view file) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad(file, "not valid JSON (truncated?)");
  const json* events = nullptr;
  if (j.is_object()) {
    auto it = j.find("traceEvents");
    if (it != j.end() && it->is_array()) events = &*it;
  } else if (j.is_array()) {
    events = &j;
  }
  if (events == nullptr) return Bad(file, "no 'traceEvents' array");

  struct Task {
    int64_t tid;
    double ts, end;
    bool fake;
    std::string name;
    std::vector<int> preds;
    std::string leaf;  // leafHash from args.event-hint; empty when absent
  };
  std::map<int64_t, std::string> lanes;
  std::vector<Task> tasks;
  struct FlowEnd {
    int64_t tid;
    double ts;
  };
  std::map<std::string, FlowEnd> src, dst;
  auto num = [](const json& e, const char* k) -> std::optional<double> {
    auto it = e.find(k);
    if (it == e.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  auto id_of = [](const json& e) -> std::string {
    auto it = e.find("id");
    if (it == e.end()) return "";
    return it->is_string() ? it->get<std::string>() : it->dump();
  };
  for (const json& e : *events) {
    if (!e.is_object()) continue;
    auto ph_it = e.find("ph");
    if (ph_it == e.end() || !ph_it->is_string()) continue;
    const std::string& ph = ph_it->get_ref<const std::string&>();
    std::optional<double> tid = num(e, "tid");
    if (ph == "M") {
      auto n = e.find("name");
      auto a = e.find("args");
      if (tid && n != e.end() && *n == "thread_name" && a != e.end() &&
          a->is_object() && a->contains("name") && (*a)["name"].is_string()) {
        lanes[static_cast<int64_t>(*tid)] = (*a)["name"].get<std::string>();
      }
    } else if (ph == "X") {
      std::optional<double> ts = num(e, "ts"), dur = num(e, "dur");
      if (!tid || !ts || !dur || *dur < 0) continue;
      Task t{static_cast<int64_t>(*tid), *ts, *ts + *dur, false, "", {}, ""};
      auto a = e.find("args");
      if (a != e.end() && a->is_object()) {
        auto c = a->find("color");
        t.fake = c != a->end() && c->is_string() && *c == "fake";
        auto hint = a->find("event-hint");
        if (hint != a->end() && hint->is_string()) {
          t.leaf = LeafHashOf(hint->get_ref<const std::string&>());
        }
      }
      auto n = e.find("name");
      if (n != e.end() && n->is_string()) t.name = n->get<std::string>();
      tasks.push_back(std::move(t));
    } else if ((ph == "s" || ph == "f") && tid) {
      std::optional<double> ts = num(e, "ts");
      if (!ts) continue;
      (ph == "s" ? src : dst)[id_of(e)] =
          FlowEnd{static_cast<int64_t>(*tid), *ts};
    }
  }
  bool machine_view = false;
  for (const json& e : *events) {
    if (e.is_object() && e.value("ph", "") == "M" &&
        e.value("name", "") == "process_name" && e.contains("args") &&
        e["args"].is_object() &&
        e["args"].value("name", "") == "Machine View") {
      machine_view = true;
    }
  }
  if (!machine_view && lanes.empty()) {
    return Bad(file,
               "not a PyPTO swim lane (no 'Machine View' process, no "
               "AIC_n / AIV_n lanes)");
  }
  if (tasks.empty()) return Bad(file, "no task events (ph 'X')");

  // Tasks per lane, by start; fake lanes count as fake tasks.
  std::map<int64_t, std::vector<int>> by_lane;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const std::string& lane = lanes[tasks[i].tid];
    if (absl::StartsWith(lane, "Fake")) tasks[i].fake = true;
    by_lane[tasks[i].tid].push_back(static_cast<int>(i));
  }
  for (auto& [tid, idx] : by_lane) {
    std::sort(idx.begin(), idx.end(),
              [&](int a, int b) { return tasks[a].ts < tasks[b].ts; });
  }
  // Flow ends to tasks: the source ends at s.ts + 0.0001, the target starts
  // at f.ts; take the nearest task on the lane.
  auto nearest = [&](int64_t tid, double t, bool by_end) -> int {
    auto it = by_lane.find(tid);
    if (it == by_lane.end()) return -1;
    int best = -1;
    double best_d = 0;
    for (int i : it->second) {
      double d = std::fabs((by_end ? tasks[i].end : tasks[i].ts) - t);
      if (best < 0 || d < best_d) {
        best = i;
        best_d = d;
      }
    }
    return best_d <= 0.05 ? best : -1;
  };
  for (const auto& [id, s] : src) {
    auto f = dst.find(id);
    if (f == dst.end()) continue;
    int a = nearest(s.tid, s.ts + 0.0001, /*by_end=*/true);
    int b = nearest(f->second.tid, f->second.ts, /*by_end=*/false);
    if (a >= 0 && b >= 0) tasks[b].preds.push_back(a);
  }
  // The global start is the first real task's: fake (bookkeeping) tasks
  // start earlier and would count as everyone's wait.
  bool have_min = false;
  double gmin = 0;
  for (const Task& t : tasks) {
    if (t.fake) continue;
    gmin = have_min ? std::min(gmin, t.ts) : t.ts;
    have_min = true;
  }
  if (!have_min) return Bad(file, "only fake tasks in the swim lane");
  double gmax = gmin;
  PyptoSummary out;
  out.file = std::string(file);
  out.source = "merged_swimlane.json";
  double busy = 0;
  int lanes_with_work = 0;
  double real_min = 0, real_max = 0;
  bool any_real = false;
  for (const auto& [tid, idx] : by_lane) {
    const std::string& lane = lanes[tid];
    bool aic = absl::StartsWith(lane, "AIC_");
    bool aiv = absl::StartsWith(lane, "AIV_");
    if (!aic && !aiv) {
      for (int i : idx) out.fake_tasks += tasks[i].fake ? 1 : 0;
      continue;
    }
    PyptoCore c;
    c.name = lane;
    c.aic = aic;
    double last = gmin;
    bool worked = false;
    for (int i : idx) {
      const Task& t = tasks[i];
      if (t.fake) {
        ++out.fake_tasks;
        continue;
      }
      ++out.real_tasks;
      ++c.tasks;
      worked = true;
      busy += t.end - t.ts;
      real_min = any_real ? std::min(real_min, t.ts) : t.ts;
      real_max = any_real ? std::max(real_max, t.end) : t.end;
      any_real = true;
      // Tasks of one leaf function (same leafHash) are one op: the
      // per-task labels (0-1-58-82-8()) are all distinct.
      std::string key = t.leaf.empty() ? t.name : "leafHash:" + t.leaf;
      out.by_name[key].Add(t.end - t.ts);
      out.label_of.emplace(key, t.name);
      double pred_ready = gmin;
      for (int p : t.preds) pred_ready = std::max(pred_ready, tasks[p].end);
      c.wait_schedule_us += t.ts - std::max(last, pred_ready);
      c.wait_us += t.ts - last;
      last = t.end;
    }
    if (!worked) continue;
    ++lanes_with_work;
    c.work_us = last - gmin;
    c.wait_predecessor_us = c.wait_us - c.wait_schedule_us;
    out.cores.push_back(std::move(c));
  }
  if (out.cores.empty()) {
    return Bad(file, "no real (non-fake) task on an AIC_n / AIV_n lane");
  }
  double span = real_max - real_min;
  out.whole_trace_utilization_pct =
      span > 0 ? 100 * busy / (lanes_with_work * span) : 0;
  (void)gmax;
  ComputePyptoAggregates(out);
  return out;
}

}  // namespace tunefarm
