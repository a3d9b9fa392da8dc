// analyzer_bench: parse-and-diagnose throughput on large profiler tables,
// against pandas read_csv plus the same aggregation, in the same run.
//
// For each case (an msprof op_summary and a torch_npu kernel_details), the
// real fixture's data rows are repeated until the file reaches --mb MB, the
// file is written to a temporary folder, and then
//   - tunefarm, end to end: map the file (MappedFile) + AnalyzeFiles() on
//     the mapped text (the full diagnosis: per-op aggregation, hotspots,
//     pipe ratios, timeline, rules, perf-analysis.md), best of --repeats,
//     with the table read on the machine's cores (the default) and again
//     on one thread;
//     and Analyze() alone on a bundle already in memory (a worker's case);
//   - pandas: pandas_baseline.py in a python3 subprocess: read_csv, group by
//     op name, sum the duration, top 10, best of --repeats, timed inside
//     the script (interpreter start and import excluded).
// The two top-10 lists must agree (names and sums), or the bench fails.
// Prints one line per case with MB/s and the ratio. Nothing is committed:
// the big files live in $TMPDIR and are removed at the end.
//
//   build/bin/analyzer_bench [--mb 64] [--repeats 3] [--python
//   /usr/bin/python3]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "analyzer/analyzer.h"
#include "analyzer/mapped_file.h"
#include "analyzer/profile.h"
#include "common/files.h"
#include "nlohmann/json.hpp"

namespace tunefarm {
namespace {

struct Case {
  const char* name;
  const char* fixture;      // under shared/fixtures/ascend/
  const char* bundle_path;  // how the analyzer sees it (classification)
  const char* name_col;
  const char* dur_col;
};

constexpr Case kCases[] = {
    {"msprof op_summary",
     "helix_msprof_real/mindstudio_profiler_output/"
     "op_summary_20260511093035.csv",
     "mindstudio_profiler_output/op_summary_20260511093035.csv", "Op Name",
     "Task Duration(us)"},
    {"torch_npu kernel_details", "msprof_analyze_arithmetic/kernel_details.csv",
     "ASCEND_PROFILER_OUTPUT/kernel_details.csv", "Name", "Duration(us)"},
};

double Seconds(std::chrono::steady_clock::time_point a,
               std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Header + the fixture's data rows repeated until `bytes` is reached.
absl::StatusOr<std::string> MakeBig(const std::string& fixture, size_t bytes,
                                    int64_t* rows) {
  absl::StatusOr<std::string> text = ReadFile(fixture);
  if (!text.ok()) return text.status();
  size_t nl = text->find('\n');
  if (nl == std::string::npos || nl + 1 >= text->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(fixture, ": needs a header and data rows"));
  }
  std::string header = text->substr(0, nl + 1);
  std::string body = text->substr(nl + 1);
  if (body.back() != '\n') body.push_back('\n');
  int64_t body_rows = std::count(body.begin(), body.end(), '\n');
  std::string out = header;
  out.reserve(bytes + body.size());
  *rows = 0;
  while (out.size() < bytes) {
    out += body;
    *rows += body_rows;
  }
  return out;
}

int Run(int argc, char** argv) {
  double mb = 64;
  int repeats = 3;
  // Debian's interpreter, where python3-pandas installs (a pyenv or venv
  // python3 first on PATH often lacks pandas); --python overrides.
  std::string python =
      access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  // --smoke 1: a 2 MB table, one repeat, and a pandas-less machine is not
  // a failure (the agreement of the three tunefarm paths still is): what
  // CI runs through ctest, in seconds.
  bool smoke = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--smoke") {
      smoke = std::atoi(argv[i + 1]) != 0;
      if (smoke) {
        mb = 2;
        repeats = 1;
      }
    } else if (a == "--mb")
      mb = std::atof(argv[i + 1]);
    else if (a == "--repeats")
      repeats = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--python")
      python = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "usage: %s [--mb N] [--repeats N] [--python P] "
                   "[--smoke 1]\n",
                   argv[0]);
      return 2;
    }
  }
  absl::StatusOr<std::string> dir = MakeTempDir("analyzer_bench");
  if (!dir.ok()) {
    std::fprintf(stderr, "%s\n", dir.status().ToString().c_str());
    return 1;
  }
  int rc = 0;
  std::string pandas_version = "?";
  double min_ratio = 1e30, min_ratio_1t = 1e30;
  bool pandas_ran = false;
  // tunefarm_s: file to diagnosis; analyze_s: Analyze alone on the bundle
  // in memory (a worker's case: bundles arrive over ZeroMQ).
  // tunefarm_1t_s: the same on one thread (pandas reads on one).
  std::printf("%-26s %6s %8s %10s %8s %12s %10s %10s %8s %8s %8s %9s\n", "case",
              "MB", "rows", "tunefarm_s", "MB/s", "tunefarm_1t_s", "analyze_s",
              "pandas_s", "MB/s", "ratio", "ratio_1t", "ratio_mem");
  for (const Case& c : kCases) {
    int64_t rows = 0;
    absl::StatusOr<std::string> big = MakeBig(
        absl::StrCat(TUNEFARM_SHARED_DIR, "/fixtures/ascend/", c.fixture),
        static_cast<size_t>(mb * 1024 * 1024), &rows);
    if (!big.ok()) {
      std::fprintf(stderr, "%s\n", big.status().ToString().c_str());
      return 1;
    }
    const double size_mb = static_cast<double>(big->size()) / (1024 * 1024);
    const std::string file = absl::StrCat(*dir, "/", rows, ".csv");
    if (absl::Status st = WriteFileAtomic(file, *big); !st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return 1;
    }
    big->clear();
    big->shrink_to_fit();

    // The in-memory case gets its bundle once, outside the timing.
    v1::ProfileBundle bundle;
    bundle.set_bundle_id("bench");
    {
      absl::StatusOr<std::string> text = ReadFile(file);
      if (!text.ok()) {
        std::fprintf(stderr, "%s\n", text.status().ToString().c_str());
        return 1;
      }
      v1::ProfileFile* f = bundle.add_files();
      f->set_path(c.bundle_path);
      f->set_content(*std::move(text));
    }
    double best = 1e30, best_1t = 1e30, best_mem = 1e30;
    v1::Diagnosis d;
    // End to end: the file on disk to the diagnosis, as `tunefarm analyze`
    // does it (map the file, analyse the mapped text).
    auto end_to_end = [&](const ParseOptions& options,
                          v1::Diagnosis& out) -> bool {
      absl::StatusOr<MappedFile> mapped = MappedFile::Open(file);
      if (!mapped.ok()) {
        std::fprintf(stderr, "%s\n", mapped.status().ToString().c_str());
        return false;
      }
      v1::ProfileBundle meta;
      meta.set_bundle_id("bench");
      out = AnalyzeFiles(meta, {{c.bundle_path, mapped->text()}}, nullptr,
                         options);
      return true;
    };
    for (int r = 0; r < repeats; ++r) {
      v1::Diagnosis one_thread;
      auto t0 = std::chrono::steady_clock::now();
      if (!end_to_end(ParseOptions{}, d)) return 1;
      auto t1 = std::chrono::steady_clock::now();
      if (!end_to_end(ParseOptions{.threads = 1}, one_thread)) return 1;
      auto t2 = std::chrono::steady_clock::now();
      v1::Diagnosis in_memory = Analyze(bundle);
      auto t3 = std::chrono::steady_clock::now();
      best = std::min(best, Seconds(t0, t1));
      best_1t = std::min(best_1t, Seconds(t1, t2));
      best_mem = std::min(best_mem, Seconds(t2, t3));
      // All three read the same rows: the same hotspots, the same sums (up
      // to the order of additions across threads).
      for (const v1::Diagnosis* other : {&one_thread, &in_memory}) {
        bool same = other->hotspots_size() == d.hotspots_size();
        for (int h = 0; same && h < d.hotspots_size(); ++h) {
          const v1::Hotspot& a = d.hotspots(h);
          const v1::Hotspot& b = other->hotspots(h);
          same = a.op_name() == b.op_name() && a.count() == b.count() &&
                 std::fabs(a.duration_us() - b.duration_us()) <=
                     1e-9 * std::max(1.0, std::fabs(a.duration_us()));
        }
        if (!same) {
          std::fprintf(stderr,
                       "%s: the analyses (threads / 1 thread / in "
                       "memory) differ\n",
                       c.name);
          rc = 1;
        }
      }
      if (getenv("TUNEFARM_BENCH_VERBOSE") != nullptr) {
        auto t4 = std::chrono::steady_clock::now();
        absl::StatusOr<TaskTable> parsed =
            ParseTaskTable(bundle.files(0).content(), c.bundle_path);
        auto t5 = std::chrono::steady_clock::now();
        std::fprintf(stderr,
                     "  end to end %.3f s (1 thread %.3f s), analyze in "
                     "memory %.3f s, parse only %.3f s\n",
                     Seconds(t0, t1), Seconds(t1, t2), Seconds(t2, t3),
                     Seconds(t4, t5));
      }
    }
    bundle.Clear();

    std::string cmd =
        absl::StrCat(python, " ", TUNEFARM_BENCH_PANDAS_SCRIPT, " '", file,
                     "' '", c.name_col, "' '", c.dur_col, "' ", repeats);
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    while (p != nullptr && std::fgets(buf, sizeof buf, p) != nullptr)
      out += buf;
    int prc = p == nullptr ? -1 : pclose(p);
    nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
    if (prc != 0 || j.is_discarded() || !j.contains("seconds")) {
      std::fprintf(stderr, "pandas run failed (%s): %s\n", cmd.c_str(),
                   out.c_str());
      if (!smoke) return 1;
      std::printf("%-26s %6.1f %8lld %10.3f %8.1f %12.3f %10.3f (no pandas)\n",
                  c.name, size_mb, static_cast<long long>(rows), best,
                  size_mb / best, best_1t, best_mem);
      (void)RemoveAll(file);
      continue;
    }
    pandas_ran = true;
    const double pandas_s = j["seconds"].get<double>();
    pandas_version = j.value("pandas", "?");

    // Same answer? Top-10 by name and sum.
    std::map<std::string, double> ours, theirs;
    for (const v1::Hotspot& h : d.hotspots())
      ours[h.op_name()] = h.duration_us();
    for (const auto& row : j["top"]) {
      theirs[row[0].get<std::string>()] = row[1].get<double>();
    }
    bool same = ours.size() == theirs.size();
    for (const auto& [n, v] : theirs) {
      auto it = ours.find(n);
      same = same && it != ours.end() &&
             std::fabs(it->second - v) <= 1e-6 * std::max(1.0, std::fabs(v));
    }
    if (!same) {
      std::fprintf(stderr, "%s: top-10 differs from pandas'\n", c.name);
      for (const auto& [n, v] : ours)
        std::fprintf(stderr, "  ours %s %.3f\n", n.c_str(), v);
      for (const auto& [n, v] : theirs)
        std::fprintf(stderr, "  pandas %s %.3f\n", n.c_str(), v);
      rc = 1;
    }
    if (j["rows"].get<int64_t>() != rows) {
      std::fprintf(stderr, "%s: pandas read %lld rows, wrote %lld\n", c.name,
                   static_cast<long long>(j["rows"].get<int64_t>()),
                   static_cast<long long>(rows));
      rc = 1;
    }
    std::printf(
        "%-26s %6.1f %8lld %10.3f %8.1f %12.3f %10.3f %10.3f %8.1f %7.1fx "
        "%7.1fx %8.1fx\n",
        c.name, size_mb, static_cast<long long>(rows), best, size_mb / best,
        best_1t, best_mem, pandas_s, size_mb / pandas_s, pandas_s / best,
        pandas_s / best_1t, pandas_s / best_mem);
    std::fflush(stdout);
    min_ratio = std::min(min_ratio, pandas_s / best);
    min_ratio_1t = std::min(min_ratio_1t, pandas_s / best_1t);
    (void)RemoveAll(file);
  }
  std::printf(
      "pandas %s; %u hardware threads (tunefarm_s reads a table in 4 MB "
      "blocks on up to that many); top-10 and threads/1-thread "
      "cross-checked: %s\n",
      pandas_version.c_str(), std::thread::hardware_concurrency(),
      rc == 0 ? "agree" : "DIFFER");
  (void)RemoveAll(*dir);
  // The one machine-readable line.
  std::printf(
      "analyzer_bench: mb=%.0f repeats=%d smoke=%d pandas=%s "
      "ratio_min=%s ratio_1t_min=%s agree=%d threads=%u\n",
      mb, repeats, smoke ? 1 : 0, pandas_ran ? pandas_version.c_str() : "none",
      pandas_ran ? absl::StrFormat("%.2f", min_ratio).c_str() : "na",
      pandas_ran ? absl::StrFormat("%.2f", min_ratio_1t).c_str() : "na",
      rc == 0 ? 1 : 0, std::thread::hardware_concurrency());
  return rc;
}

}  // namespace
}  // namespace tunefarm

int main(int argc, char** argv) { return tunefarm::Run(argc, argv); }
