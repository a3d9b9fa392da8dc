// The host-side harness every operator program (ops/<name>/<backend>/...)
// builds on: the stage contract of docs/operators.md, seeded inputs, the
// result files, CPU pinning, a timing loop with warm-up and cache flush, and
// hardware counters. Pure C++17, header-only, no dependencies beyond libc
// and Linux headers, so it compiles in any variant build (c++ or nvcc host
// code); ops/common/cuda_harness.cuh builds the device side on top of it.
//
// The stage contract (argv; parameters are compile-time constants from the
// generated tf_params.h, never argv):
//   <program> --stage build|reference|run|profile --params params.json
//             --workload workload.json --out DIR --seed N
//             [--warmup W --samples S --flush_cache 0|1 --output 0|1]
//   build      checks the parameters against the workload; exit 0 or 2
//   reference  writes DIR/reference.bin (raw little-endian float32, computed
//              in double precision)
//   run        writes DIR/output.bin from one checked run on NaN-poisoned
//              output (not with --output 0: a timing-only block), then
//              DIR/timing_us.txt: W + S lines, one µs sample each, warm-up
//              first
//   profile    runs the timed loop again (min(S, 10) runs) under hardware
//              counters and writes
//              DIR/PROF_cpu/counters.csv, or DIR/PROF_cpu/
//              counters_unavailable.txt saying why (containers often refuse
//              perf_event_open); exit 0 either way
// Exit codes: 0 ok, 2 bad input (parameters invalid for the workload), 3
// internal error.
//
// Environment (data, set by the board): TF_CPU_LIST="0-3,6" pins the process
// (and so every thread it starts) to those CPUs before anything runs.
//
// Thread-safety: the free functions are reentrant; a program calls Main once.
#ifndef TUNEFARM_OPS_COMMON_HARNESS_H_
#define TUNEFARM_OPS_COMMON_HARNESS_H_

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#ifdef __linux__
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

// A variant built for a board's persistent runner (agent/variant_runner.h)
// is a shared object compiled with -DTF_VARIANT_SHARED
// -Dmain=tf_variant_main: the program's main becomes this C entry point,
// which the runner calls once per stage with the stage's argv.
#ifdef TF_VARIANT_SHARED
extern "C" int tf_variant_main(int argc, char** argv);
#endif

namespace tf_harness {

inline constexpr int kExitOk = 0;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitInternal = 3;

struct Args {
  std::string stage, params_path, workload_path, out_dir;
  uint64_t seed = 0;
  int warmup = 3;
  int samples = 20;
  bool flush_cache = false;
  bool write_output = true;  // --output 0: a timing-only run block
};

// Parses the stage contract; false with *error naming the argument.
inline bool ParseArgs(int argc, char** argv, Args* out, std::string* error) {
  auto to_int = [&](const std::string& flag, const std::string& v, long long lo,
                    long long hi, long long* r) {
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi) {
      *error = flag + ": expected an integer in [" + std::to_string(lo) + ", " +
               std::to_string(hi) + "], got '" + v + "'";
      return false;
    }
    *r = x;
    return true;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      *error = flag + ": missing value";
      return false;
    }
    const std::string v = argv[++i];
    long long x = 0;
    if (flag == "--stage") {
      out->stage = v;
    } else if (flag == "--params") {
      out->params_path = v;
    } else if (flag == "--workload") {
      out->workload_path = v;
    } else if (flag == "--out") {
      out->out_dir = v;
    } else if (flag == "--seed") {
      char* end = nullptr;
      errno = 0;
      unsigned long long s = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || errno != 0) {
        *error = "--seed: expected an unsigned integer, got '" + v + "'";
        return false;
      }
      out->seed = s;
    } else if (flag == "--warmup") {
      if (!to_int(flag, v, 0, 1000, &x)) return false;
      out->warmup = static_cast<int>(x);
    } else if (flag == "--samples") {
      if (!to_int(flag, v, 1, 10000, &x)) return false;
      out->samples = static_cast<int>(x);
    } else if (flag == "--flush_cache") {
      if (!to_int(flag, v, 0, 1, &x)) return false;
      out->flush_cache = x != 0;
    } else if (flag == "--output") {
      if (!to_int(flag, v, 0, 1, &x)) return false;
      out->write_output = x != 0;
    } else if (flag == "--delay_ms") {
      // Accepted for compatibility with the sim contract; ignored.
    } else {
      *error = "unknown argument '" + flag + "'";
      return false;
    }
  }
  if (out->stage != "build" && out->stage != "reference" &&
      out->stage != "run" && out->stage != "profile") {
    *error = "--stage: expected build|reference|run|profile, got '" +
             out->stage + "'";
    return false;
  }
  if (out->workload_path.empty() || out->out_dir.empty()) {
    *error = "--workload and --out are required";
    return false;
  }
  return true;
}

// The workload the board writes: {"name": ..., "dtype": ..., "dims": {...}}.
struct Workload {
  std::string name, dtype;
  std::map<std::string, int64_t> dims;
  // The dim, or `fallback` when absent.
  int64_t Dim(const std::string& key, int64_t fallback = -1) const {
    auto it = dims.find(key);
    return it == dims.end() ? fallback : it->second;
  }
};

namespace internal {

inline void SkipWs(const std::string& s, size_t* i) {
  while (*i < s.size() && std::strchr(" \t\r\n", s[*i]) != nullptr) ++*i;
}
inline bool ParseString(const std::string& s, size_t* i, std::string* out) {
  SkipWs(s, i);
  if (*i >= s.size() || s[*i] != '"') return false;
  ++*i;
  out->clear();
  while (*i < s.size() && s[*i] != '"') {
    if (s[*i] == '\\') return false;  // workload names are identifiers
    out->push_back(s[(*i)++]);
  }
  if (*i >= s.size()) return false;
  ++*i;
  return true;
}
inline bool Expect(const std::string& s, size_t* i, char c) {
  SkipWs(s, i);
  if (*i >= s.size() || s[*i] != c) return false;
  ++*i;
  return true;
}

}  // namespace internal

inline bool ReadText(const std::string& path, std::string* out,
                     std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot read " + path;
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

// Reads the workload JSON (the board's format only: string name/dtype and an
// object of integer dims).
inline bool ReadWorkload(const std::string& path, Workload* w,
                         std::string* error) {
  using namespace internal;
  std::string s;
  if (!ReadText(path, &s, error)) return false;
  size_t i = 0;
  auto bad = [&](const std::string& why) {
    *error = path + ": " + why + " at offset " + std::to_string(i);
    return false;
  };
  if (!Expect(s, &i, '{')) return bad("expected '{'");
  SkipWs(s, &i);
  if (i < s.size() && s[i] == '}') return bad("empty workload");
  while (true) {
    std::string key;
    if (!ParseString(s, &i, &key)) return bad("expected a key");
    if (!Expect(s, &i, ':')) return bad("expected ':'");
    if (key == "name" || key == "dtype") {
      std::string v;
      if (!ParseString(s, &i, &v)) return bad("expected a string for " + key);
      (key == "name" ? w->name : w->dtype) = v;
    } else if (key == "dims") {
      if (!Expect(s, &i, '{')) return bad("expected '{' for dims");
      SkipWs(s, &i);
      if (i < s.size() && s[i] == '}') {
        ++i;
      } else {
        while (true) {
          std::string dim;
          if (!ParseString(s, &i, &dim)) return bad("expected a dim name");
          if (!Expect(s, &i, ':')) return bad("expected ':'");
          SkipWs(s, &i);
          size_t j = i;
          if (j < s.size() && s[j] == '-') ++j;
          while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
          if (j == i) return bad("expected an integer for dim " + dim);
          w->dims[dim] = std::strtoll(s.substr(i, j - i).c_str(), nullptr, 10);
          i = j;
          SkipWs(s, &i);
          if (i < s.size() && s[i] == ',') {
            ++i;
            continue;
          }
          if (!Expect(s, &i, '}')) return bad("expected ',' or '}' in dims");
          break;
        }
      }
    } else {
      return bad("unknown key '" + key + "'");
    }
    SkipWs(s, &i);
    if (i < s.size() && s[i] == ',') {
      ++i;
      continue;
    }
    if (!Expect(s, &i, '}')) return bad("expected ',' or '}'");
    return true;
  }
}

// SplitMix64: the seeded input generator shared by every backend, so a CPU
// and a CUDA program given the same seed see the same inputs.
inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Values k/64 for k in [-64, 64]: exactly representable in fp32 and fp16.
// `salt` tells the tensors of one problem apart.
inline void FillInputs(uint64_t seed, uint64_t salt, float* data, size_t n) {
  const uint64_t base = Mix(seed ^ (salt * 0x2545f4914f6cdd1dULL));
  for (size_t i = 0; i < n; ++i) {
    data[i] =
        static_cast<float>(static_cast<int64_t>(Mix(base + i) % 129) - 64) /
        64.0f;
  }
}

inline void PoisonNaN(float* data, size_t n) {
  std::fill(data, data + n, std::numeric_limits<float>::quiet_NaN());
}

inline bool WriteBytes(const std::string& path, const void* data, size_t bytes,
                       std::string* error) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    *error = "cannot create " + tmp + ": " + std::strerror(errno);
    return false;
  }
  const bool ok = std::fwrite(data, 1, bytes, f) == bytes;
  if (std::fclose(f) != 0 || !ok ||
      std::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = "cannot write " + path;
    return false;
  }
  return true;
}

// reference.bin / output.bin: raw float32.
inline bool WriteFloats(const std::string& path, const std::vector<float>& v,
                        std::string* error) {
  return WriteBytes(path, v.data(), v.size() * sizeof(float), error);
}

// timing_us.txt: one sample per line.
inline bool WriteTiming(const std::string& path, const std::vector<double>& us,
                        std::string* error) {
  std::string text;
  char line[64];
  for (double v : us) {
    std::snprintf(line, sizeof(line), "%.3f\n", v);
    text += line;
  }
  return WriteBytes(path, text.data(), text.size(), error);
}

inline bool MakeDir(const std::string& path) {
#ifdef __linux__
  return mkdir(path.c_str(), 0755) == 0 || errno == EEXIST;
#else
  return true;
#endif
}

// Pins the process to TF_CPU_LIST ("0-3,6"). Returns the number of CPUs
// pinned to (0 when the variable is unset); false with *error when it is
// malformed or the kernel refuses.
inline bool PinFromEnv(int* pinned, std::string* error) {
  *pinned = 0;
#ifdef __linux__
  const char* list = std::getenv("TF_CPU_LIST");
  if (list == nullptr || *list == '\0') return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  std::string s(list);
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    const std::string part = s.substr(i, j - i);
    const size_t dash = part.find('-');
    char* end = nullptr;
    long lo = std::strtol(part.c_str(), &end, 10);
    long hi = lo;
    bool ok = !part.empty() && end != part.c_str();
    if (dash != std::string::npos) {
      ok = ok && end == part.c_str() + dash;
      const char* h = part.c_str() + dash + 1;
      hi = std::strtol(h, &end, 10);
      ok = ok && end != h && *end == '\0';
    } else {
      ok = ok && *end == '\0';
    }
    if (!ok || lo < 0 || hi < lo || hi >= CPU_SETSIZE) {
      *error = "TF_CPU_LIST: bad entry '" + part + "' in '" + s + "'";
      return false;
    }
    for (long c = lo; c <= hi; ++c) CPU_SET(static_cast<int>(c), &set);
    i = j + 1;
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    *error = std::string("sched_setaffinity(TF_CPU_LIST=") + s +
             "): " + std::strerror(errno);
    return false;
  }
  *pinned = CPU_COUNT(&set);
#endif
  return true;
}

// Evicts the caches by streaming through a buffer larger than the LLC
// (2 × LLC, clamped to [8, 64] MiB so a flush stays ~10 ms).
class CacheFlusher {
 public:
  CacheFlusher() {
    long llc = 0;
#if defined(__linux__) && defined(_SC_LEVEL3_CACHE_SIZE)
    llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    size_t bytes = llc > 0 ? 2 * static_cast<size_t>(llc) : (32u << 20);
    bytes = std::min<size_t>(std::max<size_t>(bytes, 8u << 20), 64u << 20);
    buffer_.assign(bytes / sizeof(uint64_t), 1);
  }
  void Flush() {
    uint64_t acc = 0;
    for (size_t i = 0; i < buffer_.size(); i += 8) {
      buffer_[i] += 1;
      acc += buffer_[i];
    }
    sink_ = acc;
  }

 private:
  std::vector<uint64_t> buffer_;
  volatile uint64_t sink_ = 0;
};

// Times `run` warmup + samples times (µs each, steady clock), flushing the
// caches before each call when asked (the flush is not timed).
inline std::vector<double> TimeLoop(const std::function<void()>& run,
                                    int warmup, int samples, bool flush_cache) {
  CacheFlusher* flusher = flush_cache ? new CacheFlusher() : nullptr;
  std::vector<double> us;
  us.reserve(static_cast<size_t>(warmup + samples));
  for (int i = 0; i < warmup + samples; ++i) {
    if (flusher != nullptr) flusher->Flush();
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const auto t1 = std::chrono::steady_clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  delete flusher;
  return us;
}

// Hardware counters around a region (perf_event_open, this process and the
// threads it starts afterwards). Unavailable() says why when the kernel
// refused (EACCES under perf_event_paranoid, ENOENT/ENODEV in VMs and
// containers); the caller writes that down as an evidence gap.
class PerfCounters {
 public:
  struct Counter {
    const char* name;
    uint32_t type;
    uint64_t config;
  };
  PerfCounters() {
#ifdef __linux__
    static const Counter kCounters[] = {
        {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
        {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
        {"cache_references", PERF_TYPE_HARDWARE,
         PERF_COUNT_HW_CACHE_REFERENCES},
        {"cache_misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
        {"llc_read_misses", PERF_TYPE_HW_CACHE,
         PERF_COUNT_HW_CACHE_LL | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
             (PERF_COUNT_HW_CACHE_RESULT_MISS << 16)},
        {"task_clock_ns", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    };
    for (const Counter& c : kCounters) {
      perf_event_attr attr;
      std::memset(&attr, 0, sizeof(attr));
      attr.size = sizeof(attr);
      attr.type = c.type;
      attr.config = c.config;
      attr.disabled = 1;
      attr.inherit = 1;  // count the worker threads started in the region
      attr.exclude_kernel = 1;
      attr.exclude_hv = 1;
      const long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
      if (fd < 0) {
        const int err = errno;
        // Hardware counters are what matter; a missing one is recorded.
        if (c.type != PERF_TYPE_SOFTWARE && why_.empty()) {
          why_ =
              std::string("perf_event_open(") + c.name +
              "): " + std::strerror(err) +
              (err == EACCES || err == EPERM ? " (kernel.perf_event_paranoid "
                                               "or container policy forbids it)"
               : err == ENOENT || err == ENODEV || err == EOPNOTSUPP
                   ? " (no hardware PMU exposed, common in VMs and containers)"
                   : "");
        }
        missing_.push_back(c.name);
        continue;
      }
      fds_.push_back(static_cast<int>(fd));
      names_.push_back(c.name);
    }
    // Without cycles and instructions there is no useful profile.
    if (std::find(names_.begin(), names_.end(), std::string("cycles")) ==
            names_.end() ||
        std::find(names_.begin(), names_.end(), std::string("instructions")) ==
            names_.end()) {
      if (why_.empty()) why_ = "cycles/instructions counters not available";
    } else {
      why_.clear();
    }
#else
    why_ = "perf_event_open is Linux-only";
#endif
  }
  ~PerfCounters() {
#ifdef __linux__
    for (int fd : fds_) close(fd);
#endif
  }
  PerfCounters(const PerfCounters&) = delete;
  PerfCounters& operator=(const PerfCounters&) = delete;

  // "" when cycles and instructions can be counted.
  const std::string& Unavailable() const { return why_; }

  void Start() {
#ifdef __linux__
    for (int fd : fds_) {
      ioctl(fd, PERF_EVENT_IOC_RESET, 0);
      ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
    }
#endif
  }
  void Stop() {
#ifdef __linux__
    for (int fd : fds_) ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
#endif
  }
  // "counter,value" rows (header "counter,value"); counters the kernel
  // refused are listed as "name,unavailable".
  std::string Csv() const {
    std::string out = "counter,value\n";
#ifdef __linux__
    for (size_t i = 0; i < fds_.size(); ++i) {
      uint64_t v = 0;
      if (read(fds_[i], &v, sizeof(v)) != static_cast<ssize_t>(sizeof(v)))
        continue;
      out += names_[i] + "," + std::to_string(v) + "\n";
    }
#endif
    for (const std::string& m : missing_) out += m + ",unavailable\n";
    return out;
  }

 private:
  std::vector<int> fds_;
  std::vector<std::string> names_, missing_;
  std::string why_;
};

// One operator program. The harness owns the stage sequence; the operator
// supplies the pieces. Every callback may write *error and return false.
struct Operator {
  std::string name;
  // build stage (also run before every other stage): parameters vs workload.
  std::function<bool(const Workload&, std::string* error)> check;
  // reference stage: the expected output, computed in double precision.
  std::function<bool(const Workload&, uint64_t seed, std::vector<float>* ref,
                     std::string* error)>
      reference;
  // run/profile: builds inputs from the seed and sizes the output.
  std::function<bool(const Workload&, uint64_t seed, std::string* error)>
      prepare;
  // One execution of the kernel (what is timed).
  std::function<void()> run;
  // The output buffer `run` writes (poisoned with NaN before the checked run).
  std::function<std::vector<float>*()> output;
  // Optional: a line of extra profile facts (e.g. "flops=...,bytes=...").
  std::function<std::string(const Workload&)> describe;
};

inline int Fail(const Operator& op, int code, const std::string& message) {
  std::fprintf(stderr, "%s: error: %s\n", op.name.c_str(), message.c_str());
  return code;
}

// The whole stage contract for `op`. Returns the process exit code.
inline int Main(int argc, char** argv, const Operator& op) {
  Args args;
  std::string error;
  if (!ParseArgs(argc, argv, &args, &error))
    return Fail(op, kExitBadInput, error);
  int pinned = 0;
  if (!PinFromEnv(&pinned, &error)) return Fail(op, kExitInternal, error);
  Workload w;
  if (!ReadWorkload(args.workload_path, &w, &error))
    return Fail(op, kExitBadInput, error);
  if (op.check && !op.check(w, &error)) return Fail(op, kExitBadInput, error);
  if (!MakeDir(args.out_dir))
    return Fail(op, kExitInternal, "cannot create " + args.out_dir);

  if (args.stage == "build") {
    std::printf("%s: parameters valid for workload %s\n", op.name.c_str(),
                w.name.c_str());
    return kExitOk;
  }
  if (args.stage == "reference") {
    std::vector<float> ref;
    if (!op.reference(w, args.seed, &ref, &error))
      return Fail(op, kExitInternal, error);
    if (!WriteFloats(args.out_dir + "/reference.bin", ref, &error)) {
      return Fail(op, kExitInternal, error);
    }
    return kExitOk;
  }
  if (!op.prepare(w, args.seed, &error)) return Fail(op, kExitBadInput, error);
  std::vector<float>* out = op.output();
  if (args.stage == "run") {
    if (args.write_output) {  // --output 0: a timing-only block
      PoisonNaN(out->data(), out->size());
      op.run();
      if (!WriteFloats(args.out_dir + "/output.bin", *out, &error)) {
        return Fail(op, kExitInternal, error);
      }
    }
    const std::vector<double> us =
        TimeLoop(op.run, args.warmup, args.samples, args.flush_cache);
    if (!WriteTiming(args.out_dir + "/timing_us.txt", us, &error)) {
      return Fail(op, kExitInternal, error);
    }
    std::printf("%s: run ok on %d pinned cpus\n", op.name.c_str(), pinned);
    return kExitOk;
  }
  // profile
  const std::string prof = args.out_dir + "/PROF_cpu";
  if (!MakeDir(prof)) return Fail(op, kExitInternal, "cannot create " + prof);
  PerfCounters counters;
  std::vector<double> us;
  // The counters need a few runs, not the full sample count: keep it short.
  const int runs = std::min(args.samples, 10);
  if (counters.Unavailable().empty()) {
    counters.Start();
    us = TimeLoop(op.run, 0, runs, args.flush_cache);
    counters.Stop();
    std::string csv = counters.Csv();
    csv += "runs," + std::to_string(runs) + "\n";
    if (!WriteBytes(prof + "/counters.csv", csv.data(), csv.size(), &error)) {
      return Fail(op, kExitInternal, error);
    }
  } else {
    us = TimeLoop(op.run, 0, runs, args.flush_cache);
    const std::string why =
        "counters unavailable: " + counters.Unavailable() + "\n";
    if (!WriteBytes(prof + "/counters_unavailable.txt", why.data(), why.size(),
                    &error)) {
      return Fail(op, kExitInternal, error);
    }
  }
  std::string facts = "operator," + op.name + "\nworkload," + w.name + "\n";
  for (const auto& [k, v] : w.dims)
    facts += "dim_" + k + "," + std::to_string(v) + "\n";
  facts += "pinned_cpus," + std::to_string(pinned) + "\n";
  if (!us.empty()) {
    std::vector<double> sorted = us;
    std::sort(sorted.begin(), sorted.end());
    facts += "median_us," + std::to_string(sorted[sorted.size() / 2]) + "\n";
  }
  if (op.describe) facts += op.describe(w);
  if (!WriteBytes(prof + "/run_facts.csv", facts.data(), facts.size(),
                  &error)) {
    return Fail(op, kExitInternal, error);
  }
  return kExitOk;
}

}  // namespace tf_harness

#endif  // TUNEFARM_OPS_COMMON_HARNESS_H_
