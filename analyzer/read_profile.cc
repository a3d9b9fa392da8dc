// ClassifyFile / ReadProfile: what a profile folder holds, and reading it.
// Mode rules follow the Helix profile-report (ascend-formats.md §1.1.3):
// torch_npu's kernel_details wins over an msprof op_summary (torch_npu
// writes both); among files of one kind the newest time-stamped name wins.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "analyzer/profile.h"

namespace tunefarm {
namespace {

absl::string_view Av(std::string_view s) { return {s.data(), s.size()}; }

std::string_view BaseName(std::string_view path) {
  size_t slash = path.find_last_of("/\\");
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool Has(std::string_view hay, std::string_view needle) {
  return absl::StrContains(Av(hay), Av(needle));
}

}  // namespace

FileKind ClassifyFile(std::string_view path, std::string_view content) {
  std::string base = absl::AsciiStrToLower(Av(BaseName(path)));
  std::string full = absl::AsciiStrToLower(Av(path));
  const bool csv = absl::EndsWith(base, ".csv");
  const bool json = absl::EndsWith(base, ".json");
  const bool torch = Has(full, "ascend_profiler_output");
  std::string_view head = content.substr(0, 4096);
  auto starts = [&](std::string_view p) {
    return absl::StartsWith(base, Av(p));
  };
  if (Has(full, "prof_cpu/")) {
    if (base == "counters.csv") return {"perf", "counters"};
    if (base == "run_facts.csv") return {"perf", "run_facts"};
    if (base == "counters_unavailable.txt") {
      return {"perf", "counters_unavailable"};
    }
  }
  // msprof op (OPPROF_* folder): fixed file names.
  if (csv && base == "opbasicinfo.csv") return {"msprof_op", "op_basic_info"};
  if (csv && (base == "pipeutilization.csv" ||
              base == "arithmeticutilization.csv" || base == "memory.csv" ||
              base == "memoryl0.csv" || base == "memoryub.csv" ||
              base == "l2cache.csv" || base == "resourceconflictratio.csv")) {
    return {"msprof_op", "opprof_group"};
  }
  if (csv && starts("kernel_details")) return {"torch_npu", "kernel_details"};
  if (csv && starts("op_summary")) return {"msprof", "op_summary"};
  if (csv && starts("op_statistic")) {
    return {torch ? "torch_npu" : "msprof", "op_statistic"};
  }
  if (csv && starts("api_statistic")) {
    return {torch ? "torch_npu" : "msprof", "api_statistic"};
  }
  if (csv && starts("task_time")) return {"msprof", "task_time"};
  if (csv && starts("step_trace_time")) return {"torch_npu", "step_trace_time"};
  if (csv && starts("operator_details"))
    return {"torch_npu", "operator_details"};
  if (csv && starts("l2_cache")) return {"torch_npu", "l2_cache"};
  if (json && starts("profiler_info")) return {"torch_npu", "profiler_info"};
  if (json && starts("trace_view")) return {"torch_npu", "trace"};
  if (json && starts("msprof")) return {"msprof", "trace"};
  if (starts("bubble_analysis")) return {"pypto", "bubble_log"};
  if (json && (starts("merged_swimlane") || Has(head, "\"Machine View\""))) {
    return {"pypto", "swimlane"};
  }
  if ((csv || absl::EndsWith(base, ".log") || absl::EndsWith(base, ".txt")) &&
      Has(content.substr(0, 1 << 16), "\"ID\",\"Process ID\"")) {
    return {"ncu", "ncu_csv"};
  }
  if (json &&
      (Has(head, "\"traceEvents\"") || Has(head, "\"schemaVersion\"")) &&
      (Has(content, "\"cat\": \"kernel\"") ||
       Has(content, "\"cat\":\"kernel\"") ||
       Has(head, "\"deviceProperties\""))) {
    return {"kineto", "trace"};
  }
  return {};
}

namespace {

struct Candidate {
  const InputFile* file;
  FileKind kind;
};

void AddFormat(ProfileData& d, const std::string& f) {
  if (std::find(d.formats.begin(), d.formats.end(), f) == d.formats.end()) {
    d.formats.push_back(f);
  }
}

// Tries the candidates of `kind` newest first until one parses; failures
// become gaps. Returns true when one parsed.
template <typename T, typename Fn>
bool ReadFirst(ProfileData& d, const std::vector<Candidate>& all,
               std::initializer_list<std::string_view> kinds,
               std::optional<T>& slot, Fn parse) {
  std::vector<const Candidate*> mine;
  for (std::string_view kind : kinds) {
    std::vector<const Candidate*> of_kind;
    for (const Candidate& c : all) {
      if (c.kind.kind == kind) of_kind.push_back(&c);
    }
    std::sort(of_kind.begin(), of_kind.end(),
              [](const Candidate* a, const Candidate* b) {
                std::string_view na = BaseName(a->file->path);
                std::string_view nb = BaseName(b->file->path);
                if (na != nb) return na > nb;
                return a->file->path > b->file->path;
              });
    mine.insert(mine.end(), of_kind.begin(), of_kind.end());
  }
  for (const Candidate* c : mine) {
    absl::StatusOr<T> r = parse(c->file->content, c->file->path);
    if (r.ok()) {
      slot = *std::move(r);
      AddFormat(d, c->kind.format);
      return true;
    }
    d.gaps.push_back(
        {c->file->path, c->kind.format, std::string(r.status().message())});
    ++d.errors_by_format[c->kind.format];
  }
  return false;
}

}  // namespace

ProfileData ReadProfile(const std::vector<InputFile>& files,
                        const ParseOptions& options) {
  ProfileData d;
  std::vector<Candidate> all;
  for (const InputFile& f : files) {
    FileKind k = ClassifyFile(f.path, f.content);
    if (k.format.empty()) {
      d.ignored.push_back(f.path);
      continue;
    }
    ++d.files_read;
    all.push_back({&f, k});
  }
  // Ragged rows of the chosen task table are partial evidence: a gap.
  auto parse_tasks = [&options](std::string_view text, std::string_view path) {
    return ParseTaskTable(text, path, options);
  };
  if (ReadFirst(d, all, {"kernel_details", "op_summary"}, d.tasks,
                parse_tasks) &&
      !d.tasks->ragged.empty()) {
    std::string shown;
    for (size_t i = 0; i < d.tasks->ragged.size() && i < 3; ++i) {
      absl::StrAppend(&shown, i > 0 ? "; " : "", d.tasks->ragged[i]);
    }
    d.gaps.push_back(
        {d.tasks->file, d.tasks->format,
         absl::StrCat(d.tasks->ragged.size(),
                      " malformed row(s) skipped, totals exclude "
                      "them: ",
                      shown, d.tasks->ragged.size() > 3 ? "; ..." : "")});
  }
  ReadFirst(d, all, {"op_statistic"}, d.op_statistic, ParseOpStatistic);
  ReadFirst(d, all, {"api_statistic"}, d.api_statistic, ParseApiStatistic);
  ReadFirst(d, all, {"task_time"}, d.task_time, ParseTaskTime);
  ReadFirst(d, all, {"step_trace_time"}, d.step_trace, ParseStepTrace);
  ReadFirst(d, all, {"operator_details"}, d.operator_details,
            ParseOperatorDetails);
  ReadFirst(d, all, {"l2_cache"}, d.l2_cache, ParseL2Cache);
  ReadFirst(d, all, {"profiler_info"}, d.profiler_info, ParseProfilerInfo);
  ReadFirst(d, all, {"trace"}, d.trace, ParseChromeTrace);
  if (!ReadFirst(d, all, {"bubble_log"}, d.pypto, ParseBubbleAnalysisLog)) {
    ReadFirst(d, all, {"swimlane"}, d.pypto, ParsePyptoSwimlane);
  }
  ReadFirst(d, all, {"ncu_csv"}, d.ncu, ParseNcuCsv);
  // msprof op: the newest OpBasicInfo and the metric groups beside it.
  std::optional<OpProfBasic> basic;
  if (ReadFirst(d, all, {"op_basic_info"}, basic, ParseOpBasicInfo)) {
    OpProf op;
    op.basic = *std::move(basic);
    std::string_view dir = op.basic.file;
    size_t slash = dir.find_last_of('/');
    dir = slash == std::string_view::npos ? std::string_view()
                                          : dir.substr(0, slash + 1);
    for (const Candidate& c : all) {
      if (c.kind.kind != "opprof_group") continue;
      std::string_view path = c.file->path;
      size_t cs = path.find_last_of('/');
      std::string_view cdir = cs == std::string_view::npos
                                  ? std::string_view()
                                  : path.substr(0, cs + 1);
      if (cdir != dir) continue;
      absl::StatusOr<OpProfGroup> g = ParseOpProfGroup(c.file->content, path);
      if (!g.ok()) {
        d.gaps.push_back(
            {c.file->path, "msprof_op", std::string(g.status().message())});
        ++d.errors_by_format["msprof_op"];
        continue;
      }
      std::string name = g->group;
      op.groups.emplace(std::move(name), *std::move(g));
    }
    d.opprof = std::move(op);
  }
  ReadFirst(d, all, {"counters"}, d.cpu_counters, ParseCpuCounters);
  ReadFirst(d, all, {"run_facts"}, d.cpu_facts, ParseCpuRunFacts);
  // The harness writes this note instead of counters.csv when the kernel
  // refuses perf_event_open: the missing evidence, said as the tool said it.
  if (!d.cpu_counters.has_value()) {
    for (const Candidate& c : all) {
      if (c.kind.kind != "counters_unavailable") continue;
      std::string why(
          absl::StripAsciiWhitespace(Av(c.file->content.substr(0, 512))));
      // No format: this is missing evidence, not a parse error (the
      // worker counts gaps with a format as parse errors).
      d.gaps.push_back(
          {c.file->path, "",
           why.empty() ? "counters unavailable (no reason given)" : why});
      AddFormat(d, "perf");
      break;
    }
  }
  return d;
}

}  // namespace tunefarm
