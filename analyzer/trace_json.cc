// Chrome-trace timelines: msprof_*.json, torch_npu trace_view.json and
// PyTorch profiler (kineto) traces. All three are Chrome trace events, as a
// bare array or under "traceEvents"; `ts` may be a decimal string (Ascend)
// or a number (kineto), in µs. Device tasks are X events on the "Ascend
// Hardware" process (Ascend) or of cat kernel / gpu_memcpy / gpu_memset
// (kineto). Launches are joined to device tasks by flow events
// (HostToDevice on Ascend, ac2g on kineto) or, on kineto, by
// args.correlation.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "analyzer/profile.h"
#include "nlohmann/json.hpp"

namespace tunefarm {
namespace {

using nlohmann::json;

absl::string_view Av(std::string_view s) { return {s.data(), s.size()}; }

absl::Status Bad(std::string_view file, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(Av(file), ": ", Av(what)));
}

// Ascend writes `ts` as a decimal string of ~16 significant digits; a
// double would round it to 0.25 µs, so read it as long double and keep
// times relative to the first event.
std::optional<long double> Ts(const json& e, const char* key = "ts") {
  auto it = e.find(key);
  if (it == e.end()) return std::nullopt;
  if (it->is_number()) return static_cast<long double>(it->get<double>());
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    char* end = nullptr;
    long double v = std::strtold(s.c_str(), &end);
    if (end == s.c_str()) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

std::optional<double> Dur(const json& e) {
  auto it = e.find("dur");
  if (it == e.end()) return std::nullopt;
  if (it->is_number()) return it->get<double>();
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str()) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

std::string Str(const json& e, const char* key) {
  auto it = e.find(key);
  if (it == e.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  if (it->is_number()) return std::to_string(it->get<double>());
  return "";
}

struct Span {
  long double ts;
  double dur;
  const json* event;
};

}  // namespace

absl::StatusOr<TraceSummary> ParseChromeTrace(std::string_view text,
                                              std::string_view file) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad(file, "not valid JSON (truncated?)");
  const json* events = nullptr;
  if (j.is_array()) {
    events = &j;
  } else if (j.is_object()) {
    auto it = j.find("traceEvents");
    if (it != j.end() && it->is_array()) events = &*it;
  }
  if (events == nullptr) {
    return Bad(file,
               "neither a JSON array of trace events nor an object "
               "with a 'traceEvents' array");
  }
  TraceSummary out;
  out.file = std::string(file);
  out.events = static_cast<int64_t>(events->size());
  if (j.is_object()) {
    auto dp = j.find("deviceProperties");
    if (dp != j.end() && dp->is_array() && !dp->empty() &&
        (*dp)[0].is_object()) {
      out.device_name = Str((*dp)[0], "name");
    }
  }

  // Pass 1: process names.
  std::map<std::string, std::string> process_names;  // pid -> name
  bool any_kernel_cat = false;
  for (const json& e : *events) {
    if (!e.is_object()) continue;
    std::string ph = Str(e, "ph");
    if (ph == "M" && Str(e, "name") == "process_name") {
      auto a = e.find("args");
      if (a != e.end() && a->is_object()) {
        process_names[Str(e, "pid")] = Str(*a, "name");
      }
    }
    if (ph == "X" && Str(e, "cat") == "kernel") any_kernel_cat = true;
  }
  std::set<std::string> device_pids, cann_pids;
  bool has_python = false, machine_view = false;
  for (const auto& [pid, name] : process_names) {
    if (name == "Ascend Hardware") device_pids.insert(pid);
    if (name == "CANN") cann_pids.insert(pid);
    if (name == "Python") has_python = true;
    if (name == "Machine View") machine_view = true;
  }
  if (machine_view) {
    return Bad(file,
               "a PyPTO swim lane (process 'Machine View'); read it "
               "with the PyPTO parser");
  }
  const bool kineto =
      device_pids.empty() &&
      (any_kernel_cat || (j.is_object() && j.contains("deviceProperties")));
  if (kineto) {
    out.format = "kineto";
  } else if (!device_pids.empty()) {
    out.format = has_python ? "torch_npu" : "msprof";
  } else {
    return Bad(file,
               "no device tasks: no 'Ascend Hardware' process and no "
               "events of cat 'kernel'");
  }

  // Pass 2: device tasks, host calls, flows.
  std::vector<Span> device;
  std::map<std::string, std::vector<Span>> host_by_thread;  // pid/tid
  std::map<std::string, Span> kineto_launch_by_corr;
  std::map<std::string, std::pair<std::optional<long double>,
                                  std::optional<long double>>>
      flows;  // id -> (s.ts, f.ts)
  std::map<std::string, std::string> flow_src_thread;
  std::map<std::string, std::string> flow_dst_thread;
  long double base = 0;
  bool have_base = false;
  for (const json& e : *events) {
    if (!e.is_object()) continue;
    std::string ph = Str(e, "ph");
    std::string pid = Str(e, "pid");
    std::string cat = Str(e, "cat");
    if (ph == "C" && Str(e, "name") == "AI Core Freq") {
      auto a = e.find("args");
      if (a != e.end() && a->is_object()) {
        auto m = a->find("MHz");
        if (m != a->end() && m->is_number())
          out.aicore_freq_mhz = m->get<double>();
      }
      continue;
    }
    if (ph == "s" || ph == "f") {
      if (cat != "HostToDevice" && cat != "ac2g") continue;
      std::string id = Str(e, "id");
      std::optional<long double> ts = Ts(e);
      std::string thread = pid + "/" + Str(e, "tid");
      if (ph == "s") {
        flows[id].first = ts;
        flow_src_thread[id] = thread;
      } else {
        flows[id].second = ts;
        flow_dst_thread[id] = thread;
      }
      continue;
    }
    if (ph != "X") continue;
    std::optional<long double> ts = Ts(e);
    std::optional<double> dur = Dur(e);
    if (!ts.has_value() || !dur.has_value() || *dur < 0) continue;
    if (!have_base || *ts < base) {
      base = *ts;
      have_base = true;
    }
    bool is_device = false;
    if (kineto) {
      is_device = cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset";
      if (cat == "cuda_runtime" || cat == "cuda_driver") {
        auto a = e.find("args");
        if (a != e.end() && a->is_object()) {
          std::string corr = Str(*a, "correlation");
          std::string name = Str(e, "name");
          if (!corr.empty() && absl::StrContains(name, "aunch")) {
            kineto_launch_by_corr[corr] = Span{*ts, *dur, &e};
          }
        }
      }
    } else if (device_pids.count(pid) > 0) {
      std::string type;
      auto a = e.find("args");
      if (a != e.end() && a->is_object()) type = Str(*a, "Task Type");
      is_device = !absl::StrContains(type, "PROFILING") &&
                  !absl::StrContains(type, "TIMEOUT");
    }
    if (is_device) {
      device.push_back(Span{*ts, *dur, &e});
    } else {
      host_by_thread[pid + "/" + Str(e, "tid")].push_back(Span{*ts, *dur, &e});
    }
  }
  if (device.empty()) return Bad(file, "no device task events (ph 'X')");

  std::vector<std::pair<double, double>> iv;
  iv.reserve(device.size());
  for (const Span& s : device) {
    double a = static_cast<double>(s.ts - base);
    iv.emplace_back(a, a + s.dur);
    std::string name = Str(*s.event, "name");
    out.by_name[name].Add(s.dur);
    if (!kineto && out.core_of.find(name) == out.core_of.end()) {
      auto args = s.event->find("args");
      if (args != s.event->end() && args->is_object()) {
        out.core_of[name] = Str(*args, "Task Type");
      }
    }
  }
  out.device_tasks = static_cast<int64_t>(device.size());
  out.device = SummarizeIntervals(std::move(iv));

  // Launch path. Device tasks by start time for the flow join.
  std::map<long double, const Span*> device_by_ts;
  for (const Span& s : device) device_by_ts.emplace(s.ts, &s);
  for (auto& [thread, spans] : host_by_thread) {
    std::sort(spans.begin(), spans.end(),
              [](const Span& a, const Span& b) { return a.ts < b.ts; });
  }
  std::vector<double> delays;
  auto add_launch = [&](const Span* host, const Span& kernel,
                        long double launch_ts) {
    ++out.launches;
    long double host_end = host != nullptr ? host->ts + host->dur : launch_ts;
    double delay = static_cast<double>(kernel.ts - host_end);
    if (delay < 0) ++out.negative_launch_delays;
    delays.push_back(delay);
    if (host != nullptr && kernel.dur < host->dur) ++out.short_kernels;
  };
  if (kineto) {
    for (const Span& k : device) {
      auto a = k.event->find("args");
      if (a == k.event->end() || !a->is_object()) continue;
      auto it = kineto_launch_by_corr.find(Str(*a, "correlation"));
      if (it != kineto_launch_by_corr.end()) add_launch(&it->second, k, 0);
    }
  } else {
    for (const auto& [id, pair] : flows) {
      if (!pair.first.has_value() || !pair.second.has_value()) continue;
      auto dev = device_by_ts.find(*pair.second);
      if (dev == device_by_ts.end()) continue;
      // The host call enclosing the flow start on its thread.
      const Span* host = nullptr;
      auto th = host_by_thread.find(flow_src_thread[id]);
      if (th != host_by_thread.end()) {
        for (const Span& h : th->second) {
          if (h.ts > *pair.first) break;
          if (h.ts + h.dur >= *pair.first) host = &h;
        }
      }
      add_launch(host, *dev->second, *pair.first);
    }
  }
  if (!delays.empty()) {
    std::nth_element(delays.begin(), delays.begin() + delays.size() / 2,
                     delays.end());
    out.median_launch_delay_us = delays[delays.size() / 2];
  }
  return out;
}

}  // namespace tunefarm
