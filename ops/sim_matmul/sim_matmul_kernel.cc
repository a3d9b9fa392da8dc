// tunefarm-sim-matmul: the "sim" backend of the shipped sim_matmul operator.
//
// It follows the operator contract: parameters arrive as data (a JSON file),
// each stage writes its outputs to files under --out, and bad input exits 2
// with a message naming the field.
//
//   tunefarm-sim-matmul --stage build|run|reference|profile --params P.json
//       --workload W.json --out DIR [--seed N] [--samples S --warmup W]
//       [--delay_ms D] [--noise F --noise_seed N] [--latency_us X]
//   --noise F: injected noise (tests): each run's speed is off by up to ±F
//   and each sample jitters by up to ±F, drawn from --noise_seed; without it
//   the model's own ±0.75% jitter. --latency_us X: every variant's modelled
//   latency is X (no real differences between variants; tests).
//
//   build      "compiles" the variant: UB fit check (exit 2 + message).
//   reference  computes a small check problem in double → DIR/reference.bin.
//   run        computes the same problem with the variant's tiling in float
//              (real tiled loops, with the shipped kernel's ragged-tail bug)
//              → DIR/output.bin, and the simulated timing samples →
//              DIR/timing_us.txt.
//   profile    writes a msprof-layout profile of one simulated launch under
//              DIR/PROF_000001_<ts>/.
//
// The check problem keeps every dim ≤ 512 and keeps each dim's residue
// modulo 256 (so modulo every tile size), so a tail that is ragged on the
// real workload is ragged on the check problem too.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/sim_model.h"
#include "common/files.h"
#include "common/params.h"
#include "nlohmann/json.hpp"

namespace tunefarm {
namespace {

constexpr int kExitBadInput = 2;
constexpr int kExitInternal = 1;
constexpr int64_t kCheckDimCap = 512;

// Real msprof headers (A2, PipeUtilization), copied from
// shared/fixtures/ascend/helix_msprof_real.
constexpr char kOpSummaryHeader[] =
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,"
    "Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Dim,"
    "Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,"
    "Output Shapes,Output Data Types,Output Formats,Context ID,aicore_time(us),"
    "aic_total_cycles,aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),"
    "aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),"
    "aic_mte2_ratio,aic_fixpipe_time(us),aic_fixpipe_ratio,"
    "aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,aiv_vec_time(us),"
    "aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),"
    "aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,"
    "cube_utilization(%)";
constexpr char kOpStatisticHeader[] =
    "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),"
    "Avg Time(us),Max Time(us),Ratio(%)";

struct Args {
  std::string stage, params_path, workload_path, out_dir;
  uint64_t seed = 0;
  int64_t samples = 20, warmup = 3, delay_ms = 0;
  double noise = 0, latency_us = 0;
  uint64_t noise_seed = 0;
};

absl::StatusOr<double> ParseDoubleFlag(const std::string& flag,
                                       const std::string& value, double lo,
                                       double hi) {
  double v;
  if (!absl::SimpleAtod(value, &v) || !(v >= lo && v <= hi)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " \"", value.substr(0, 40),
                     "\" is not a number in [", lo, ", ", hi, "]"));
  }
  return v;
}

absl::StatusOr<int64_t> ParseIntFlag(const std::string& flag,
                                     const std::string& value, int64_t lo,
                                     int64_t hi) {
  int64_t v;
  if (!absl::SimpleAtoi(value, &v) || v < lo || v > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " \"", value.substr(0, 40),
                     "\" is not an integer in [", lo, ", ", hi, "]"));
  }
  return v;
}

absl::StatusOr<Args> ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    std::string flag = argv[i];
    if (i + 1 >= argc) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
    }
    std::string value = argv[i + 1];
    if (flag == "--stage") {
      a.stage = value;
    } else if (flag == "--params") {
      a.params_path = value;
    } else if (flag == "--workload") {
      a.workload_path = value;
    } else if (flag == "--out") {
      a.out_dir = value;
    } else if (flag == "--seed") {
      if (!absl::SimpleAtoi(value, &a.seed)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--seed \"", value.substr(0, 40), "\" is not an unsigned integer"));
      }
    } else if (flag == "--samples") {
      auto v = ParseIntFlag("samples", value, 1, 100000);
      if (!v.ok()) return v.status();
      a.samples = *v;
    } else if (flag == "--warmup") {
      auto v = ParseIntFlag("warmup", value, 0, 10000);
      if (!v.ok()) return v.status();
      a.warmup = *v;
    } else if (flag == "--noise") {
      auto v = ParseDoubleFlag("noise", value, 0, 0.5);
      if (!v.ok()) return v.status();
      a.noise = *v;
    } else if (flag == "--latency_us") {
      auto v = ParseDoubleFlag("latency_us", value, 0.001, 1e9);
      if (!v.ok()) return v.status();
      a.latency_us = *v;
    } else if (flag == "--noise_seed") {
      if (!absl::SimpleAtoi(value, &a.noise_seed)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--noise_seed \"", value.substr(0, 40),
                         "\" is not an unsigned integer"));
      }
    } else if (flag == "--delay_ms") {
      auto v = ParseIntFlag("delay_ms", value, 0, 3600 * 1000);
      if (!v.ok()) return v.status();
      a.delay_ms = *v;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag \"", flag.substr(0, 40), "\""));
    }
  }
  if (a.stage != "build" && a.stage != "run" && a.stage != "reference" &&
      a.stage != "profile") {
    return absl::InvalidArgumentError(
        absl::StrCat("--stage \"", a.stage.substr(0, 40),
                     "\" must be one of build, run, reference, profile"));
  }
  for (const auto& [flag, v] :
       {std::pair<const char*, const std::string*>{"--params", &a.params_path},
        {"--workload", &a.workload_path},
        {"--out", &a.out_dir}}) {
    if (v->empty())
      return absl::InvalidArgumentError(absl::StrCat(flag, " is required"));
  }
  return a;
}

absl::StatusOr<nlohmann::json> ReadJsonObject(const std::string& path,
                                              const char* what) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " file ", path, " unreadable: ", text.status().message()));
  }
  nlohmann::json j =
      nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " file ", path, " is not valid JSON"));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " file ", path, " must hold a JSON object, got ", j.type_name()));
  }
  return j;
}

absl::StatusOr<MatmulConfig> LoadConfig(const std::string& path) {
  absl::StatusOr<nlohmann::json> j = ReadJsonObject(path, "params");
  if (!j.ok()) return j.status();
  ParamMap params;
  for (auto it = j->begin(); it != j->end(); ++it) {
    absl::StatusOr<v1::ParamValue> v = ParamValueFromJson(it.value());
    if (!v.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter ", it.key().substr(0, 64), ": ", v.status().message()));
    }
    if (it.value().is_number_unsigned() &&
        it.value().get<uint64_t>() >
            static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", it.key().substr(0, 64), " is too large"));
    }
    params[it.key()] = *v;
  }
  return ParseMatmulConfig(params);
}

absl::StatusOr<MatmulShape> LoadShape(const std::string& path) {
  absl::StatusOr<nlohmann::json> j = ReadJsonObject(path, "workload");
  if (!j.ok()) return j.status();
  v1::Workload w;
  if (auto it = j->find("name"); it != j->end()) {
    if (!it->is_string())
      return absl::InvalidArgumentError("workload name must be a string");
    w.set_name(it->get<std::string>());
  }
  auto dtype = j->find("dtype");
  if (dtype == j->end() || !dtype->is_string()) {
    return absl::InvalidArgumentError("workload dtype must be a string");
  }
  w.set_dtype(dtype->get<std::string>());
  auto dims = j->find("dims");
  if (dims == j->end() || !dims->is_object()) {
    return absl::InvalidArgumentError(
        "workload dims must be an object {m, n, k}");
  }
  for (auto it = dims->begin(); it != dims->end(); ++it) {
    if (!it.value().is_number_integer() ||
        (it.value().is_number_unsigned() &&
         it.value().get<uint64_t>() > (uint64_t{1} << 40))) {
      return absl::InvalidArgumentError(
          absl::StrCat("workload dim ", it.key().substr(0, 32),
                       " must be an integer in [1, 1048576]"));
    }
    (*w.mutable_dims())[it.key()] = it.value().get<int64_t>();
  }
  return ParseMatmulShape(w);
}

// ----- the check problem ----------------------------------------------------

int64_t CheckDim(int64_t d) {
  if (d <= kCheckDimCap) return d;
  const int64_t r = d % 256;
  return r == 0 ? 256 : r + 256;
}

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Seeded inputs in [-1, 1] on a 1/64 grid: exact in fp16 and float, so the
// only error a correct tiling can make is accumulation order.
std::vector<float> Inputs(uint64_t seed, uint64_t salt, int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  const uint64_t base = Mix(seed ^ (salt * 0x2545f4914f6cdd1dULL));
  for (int64_t i = 0; i < count; ++i) {
    v[static_cast<size_t>(i)] =
        static_cast<float>(static_cast<int64_t>(Mix(base + i) % 129) - 64) /
        64.0f;
  }
  return v;
}

struct CheckProblem {
  int64_t m, n, k;
  std::vector<float> a, b;  // row-major m×k, k×n
};

CheckProblem MakeCheckProblem(const MatmulShape& s, uint64_t seed) {
  CheckProblem p{CheckDim(s.m), CheckDim(s.n), CheckDim(s.k), {}, {}};
  p.a = Inputs(seed, 1, p.m * p.k);
  p.b = Inputs(seed, 2, p.k * p.n);
  return p;
}

std::vector<float> Reference(const CheckProblem& p) {
  std::vector<double> c(static_cast<size_t>(p.m * p.n), 0.0);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t kk = 0; kk < p.k; ++kk) {
      const double aik = p.a[i * p.k + kk];
      const float* brow = &p.b[kk * p.n];
      double* crow = &c[i * p.n];
      for (int64_t j = 0; j < p.n; ++j) crow[j] += aik * brow[j];
    }
  }
  return std::vector<float>(c.begin(), c.end());
}

// The variant: tiles of tile_m × tile_n, accumulated over tile_k steps in a
// float accumulator, distributed round-robin over block_dim blocks.
std::vector<float> TiledMatmul(const CheckProblem& p, const MatmulConfig& c,
                               bool tail_bug) {
  std::vector<float> out(static_cast<size_t>(p.m * p.n),
                         std::numeric_limits<float>::quiet_NaN());
  const int64_t tiles_m = (p.m + c.tile_m - 1) / c.tile_m;
  const int64_t tiles_n = (p.n + c.tile_n - 1) / c.tile_n;
  const int64_t tiles = tiles_m * tiles_n;
  std::vector<float> acc(static_cast<size_t>(c.tile_m * c.tile_n));
  for (int64_t block = 0; block < c.block_dim; ++block) {
    for (int64_t t = block; t < tiles; t += c.block_dim) {
      const int64_t m0 = (t / tiles_n) * c.tile_m,
                    n0 = (t % tiles_n) * c.tile_n;
      const int64_t mh = std::min(c.tile_m, p.m - m0);
      const int64_t nw = std::min(c.tile_n, p.n - n0);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t k0 = 0; k0 < p.k; k0 += c.tile_k) {
        const int64_t kd = std::min(c.tile_k, p.k - k0);
        for (int64_t i = 0; i < mh; ++i) {
          for (int64_t kk = 0; kk < kd; ++kk) {
            const float aik = p.a[(m0 + i) * p.k + k0 + kk];
            const float* brow = &p.b[(k0 + kk) * p.n + n0];
            float* arow = &acc[i * c.tile_n];
            for (int64_t j = 0; j < nw; ++j) arow[j] += aik * brow[j];
          }
        }
      }
      // The shipped bug: the vectorised store handles a partial column tile
      // only for narrow tiles; for wide ones the last partial tile is lost.
      if (tail_bug && nw < c.tile_n) continue;
      for (int64_t i = 0; i < mh; ++i) {
        std::copy_n(&acc[i * c.tile_n], nw, &out[(m0 + i) * p.n + n0]);
      }
    }
  }
  return out;
}

absl::Status WriteFloats(const std::string& path, const std::vector<float>& v) {
  std::string bytes(v.size() * sizeof(float), '\0');
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  return WriteFileAtomic(path, bytes);
}

// ----- msprof-layout profile -----------------------------------------------

std::string F3(double v) { return absl::StrFormat("%.3f", v); }

struct ProfRow {
  std::string name, type, state, task_type;
  double start_us, dur_us, wait_us;
  int64_t block_dim;
  std::string in_shapes, in_types, in_formats, out_shapes, out_types,
      out_formats;
  std::string pmu;  // the 25 PMU cells from aicore_time(us) on
};

std::string Shape(const std::vector<std::pair<int64_t, int64_t>>& shapes) {
  std::vector<std::string> parts;
  for (const auto& [r, c] : shapes) parts.push_back(absl::StrCat(r, ",", c));
  return absl::StrCat("\"\"\"", absl::StrJoin(parts, ";"), "\"\"\"");
}

// A vector-core op (Cast, TransData) moving `bytes` through UB.
ProfRow VectorRow(const SimChip& chip, std::string name, std::string type,
                  double bytes, double start_us, double wait_us,
                  std::string in_shapes, std::string in_types,
                  std::string in_formats, std::string out_shapes,
                  std::string out_types, std::string out_formats) {
  ProfRow r;
  r.name = std::move(name);
  r.type = std::move(type);
  r.state = "dynamic";
  r.task_type = "AI_VECTOR_CORE";
  r.block_dim = std::clamp<int64_t>(static_cast<int64_t>(bytes / 65536), 1,
                                    chip.vector_cores);
  const double aiv = bytes / (chip.hbm_gbps * 1e3) * 1.4 + 1.2;
  r.start_us = start_us;
  r.wait_us = wait_us;
  r.dur_us = aiv + 1.8;
  r.in_shapes = std::move(in_shapes);
  r.in_types = std::move(in_types);
  r.in_formats = std::move(in_formats);
  r.out_shapes = std::move(out_shapes);
  r.out_types = std::move(out_types);
  r.out_formats = std::move(out_formats);
  const int64_t cycles =
      static_cast<int64_t>(aiv * chip.clock_mhz * r.block_dim);
  r.pmu = absl::StrCat("0.0,0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,",
                       F3(aiv), ",", cycles, ",", F3(aiv * 0.08), ",0.080,",
                       F3(aiv * 0.25), ",0.250,", F3(aiv * 0.62), ",0.620,",
                       F3(aiv * 0.21), ",0.210,0.150,0.000");
  return r;
}

absl::Status WriteProfile(const Args& args, const SimChip& chip,
                          const MatmulShape& s, const MatmulConfig& c,
                          const SimKernelTiming& t) {
  const absl::Time now = absl::Now();
  const std::string ts =
      absl::FormatTime("%Y%m%d%H%M%S", now, absl::UTCTimeZone());
  const std::string prof = absl::StrCat(args.out_dir, "/PROF_000001_", ts);
  const std::string out = prof + "/mindstudio_profiler_output";
  if (absl::Status st = MakeDirs(out); !st.ok()) return st;
  ParamMap params;
  params["tile_m"] = IntParam(c.tile_m);
  params["tile_n"] = IntParam(c.tile_n);
  params["tile_k"] = IntParam(c.tile_k);
  params["buffer_count"] = IntParam(c.buffer_count);
  params["block_dim"] = IntParam(c.block_dim);
  const std::string key = ParamsKey(params);

  std::vector<ProfRow> rows;
  double clock_us = static_cast<double>(absl::ToUnixMicros(now));
  const double fp32_a = static_cast<double>(s.m * s.k) * 6;
  const double fp32_b = static_cast<double>(s.k * s.n) * 6;
  auto next = [&](double gap) {
    clock_us += gap;
    return clock_us;
  };
  rows.push_back(VectorRow(chip, "aclnnMatmul_CastAiCore_Cast", "Cast", fp32_a,
                           next(0), 0, Shape({{s.m, s.k}}), "FLOAT", "ND",
                           Shape({{s.m, s.k}}), "FLOAT16", "ND"));
  clock_us += rows.back().dur_us;
  rows.push_back(VectorRow(chip, "aclnnMatmul_CastAiCore_Cast", "Cast", fp32_b,
                           next(3.1), 3.1, Shape({{s.k, s.n}}), "FLOAT", "ND",
                           Shape({{s.k, s.n}}), "FLOAT16", "ND"));
  clock_us += rows.back().dur_us;
  rows.push_back(VectorRow(chip, "aclnnMatmul_TransData_TransData", "TransData",
                           static_cast<double>(s.k * s.n) * 4, next(2.7), 2.7,
                           Shape({{s.k, s.n}}), "FLOAT16", "ND",
                           Shape({{s.k, s.n}}), "FLOAT16", "FRACTAL_NZ"));
  clock_us += rows.back().dur_us;
  for (int launch = 0; launch < 3; ++launch) {
    const double dur =
        SimNoisySample(t.latency_us, args.seed, key, 1000000 + launch);
    const double sc = dur / t.latency_us;
    ProfRow r;
    r.name = "aclnnMatmul_SimMatmul_MatMulV2";
    r.type = "MatMulV2";
    r.state = "static";
    r.task_type = "AI_CORE";
    r.wait_us = launch == 0 ? 4.2 : 1.9;
    r.start_us = next(r.wait_us);
    r.dur_us = dur;
    clock_us += dur;
    r.block_dim = t.block_dim;
    r.in_shapes = Shape({{s.m, s.k}, {s.k, s.n}});
    r.in_types = "FLOAT16;FLOAT16";
    r.in_formats = "ND;FRACTAL_NZ";
    r.out_shapes = Shape({{s.m, s.n}});
    r.out_types = "FLOAT16";
    r.out_formats = "ND";
    const int64_t total_cycles = static_cast<int64_t>(
        std::llround(static_cast<double>(t.total_cycles) * sc));
    r.pmu = absl::StrCat(
        F3(t.aicore_time_us * sc), ",", total_cycles, ",", F3(t.mac_us * sc),
        ",", F3(t.mac_ratio), ",", F3(t.scalar_us * sc), ",",
        F3(t.scalar_ratio), ",", F3(t.mte1_us * sc), ",", F3(t.mte1_ratio), ",",
        F3(t.mte2_us * sc), ",", F3(t.mte2_ratio), ",", F3(t.fixpipe_us * sc),
        ",", F3(t.fixpipe_ratio), ",", F3(t.icache_miss_rate),
        ",0.0,0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,",
        F3(100.0 * total_cycles / (chip.clock_mhz * chip.cube_cores * dur)));
    rows.push_back(std::move(r));
  }

  std::string summary = absl::StrCat(kOpSummaryHeader, "\n");
  int task_id = 1;
  for (const ProfRow& r : rows) {
    absl::StrAppend(
        &summary, "0,4294967295,", task_id++, ",2,", r.name, ",", r.type, ",",
        r.state, ",", r.task_type, ",", F3(r.start_us), "\t,", F3(r.dur_us),
        ",", absl::StrFormat("%.6f", r.wait_us), ",", r.block_dim, ",0,NO,",
        r.in_shapes, ",", r.in_types, ",", r.in_formats, ",", r.out_shapes, ",",
        r.out_types, ",", r.out_formats, ",N/A,", r.pmu, "\n");
  }
  // op_statistic: one row per (type, core type), largest total first.
  struct Stat {
    std::string core;
    int64_t count = 0;
    double total = 0, min = 1e300, max = 0;
  };
  std::map<std::string, Stat> stats;
  double all = 0;
  for (const ProfRow& r : rows) {
    Stat& st = stats[r.type];
    st.core = r.task_type;
    ++st.count;
    st.total += r.dur_us;
    st.min = std::min(st.min, r.dur_us);
    st.max = std::max(st.max, r.dur_us);
    all += r.dur_us;
  }
  std::vector<std::pair<std::string, Stat>> sorted(stats.begin(), stats.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second.total > b.second.total;
  });
  std::string statistic = absl::StrCat(kOpStatisticHeader, "\n");
  for (const auto& [type, st] : sorted) {
    absl::StrAppend(&statistic, "0,", type, ",", st.core, ",", st.count, ",",
                    F3(st.total), ",", F3(st.min), ",", F3(st.total / st.count),
                    ",", F3(st.max), ",", F3(100.0 * st.total / all), "\n");
  }
  if (absl::Status st = WriteFileAtomic(
          absl::StrCat(out, "/op_summary_", ts, ".csv"), summary);
      !st.ok()) {
    return st;
  }
  if (absl::Status st = WriteFileAtomic(
          absl::StrCat(out, "/op_statistic_", ts, ".csv"), statistic);
      !st.ok()) {
    return st;
  }
  return WriteFileAtomic(
      prof + "/SIMULATED.txt",
      absl::StrCat(
          "SIMULATED PROFILE: every number in this folder comes from the "
          "tunefarm ",
          chip.name,
          " performance model (tunefarm-sim-matmul), "
          "not from an Ascend device.\nchip: ",
          chip.name, "\nseed: ", args.seed, "\nparams: ", key,
          "\nshape: m=", s.m, " n=", s.n, " k=", s.k,
          "\nmodelled latency_us: ", F3(t.latency_us), "\n"));
}

// ----- stages ----------------------------------------------------------------

int Fail(int code, const absl::Status& s) {
  std::fprintf(stderr, "tunefarm-sim-matmul: error: %s\n",
               std::string(s.message()).c_str());
  return code;
}

int Main(int argc, char** argv) {
  absl::StatusOr<Args> args = ParseArgs(argc, argv);
  if (!args.ok()) return Fail(kExitBadInput, args.status());
  absl::StatusOr<MatmulConfig> config = LoadConfig(args->params_path);
  if (!config.ok()) return Fail(kExitBadInput, config.status());
  absl::StatusOr<MatmulShape> shape = LoadShape(args->workload_path);
  if (!shape.ok()) return Fail(kExitBadInput, shape.status());
  const SimChip chip = DefaultSimChip();
  if (absl::Status st = CheckMatmulBuild(chip, *config); !st.ok()) {
    return Fail(kExitBadInput, st);
  }
  if (absl::Status st = MakeDirs(args->out_dir); !st.ok())
    return Fail(kExitInternal, st);

  if (args->stage == "build") {
    std::printf("sim_matmul: build ok: UB use %lld of %lld bytes\n",
                static_cast<long long>(MatmulUbBytes(*config)),
                static_cast<long long>(chip.ub_bytes));
    return 0;
  }
  if (args->stage == "reference") {
    const CheckProblem p = MakeCheckProblem(*shape, args->seed);
    if (absl::Status st =
            WriteFloats(args->out_dir + "/reference.bin", Reference(p));
        !st.ok()) {
      return Fail(kExitInternal, st);
    }
    std::printf("sim_matmul: reference %lldx%lldx%lld written\n",
                static_cast<long long>(p.m), static_cast<long long>(p.n),
                static_cast<long long>(p.k));
    return 0;
  }
  absl::StatusOr<SimKernelTiming> timing = ModelMatmul(chip, *shape, *config);
  if (!timing.ok()) return Fail(kExitBadInput, timing.status());
  if (args->stage == "run") {
    const CheckProblem p = MakeCheckProblem(*shape, args->seed);
    const bool bug = MatmulHasTailBug(*config, shape->n);
    if (absl::Status st = WriteFloats(args->out_dir + "/output.bin",
                                      TiledMatmul(p, *config, bug));
        !st.ok()) {
      return Fail(kExitInternal, st);
    }
    ParamMap params;
    params["tile_m"] = IntParam(config->tile_m);
    params["tile_n"] = IntParam(config->tile_n);
    params["tile_k"] = IntParam(config->tile_k);
    params["buffer_count"] = IntParam(config->buffer_count);
    params["block_dim"] = IntParam(config->block_dim);
    const std::string key = ParamsKey(params);
    std::string lines;
    const double latency =
        args->latency_us > 0 ? args->latency_us : timing->latency_us;
    for (int64_t i = 0; i < args->warmup + args->samples; ++i) {
      const double sample =
          args->noise > 0 ? SimInjectedNoiseSample(latency, args->noise,
                                                   args->noise_seed, key, i)
                          : SimNoisySample(latency, args->seed, key, i);
      absl::StrAppend(&lines, F3(sample), "\n");
    }
    if (absl::Status st =
            WriteFileAtomic(args->out_dir + "/timing_us.txt", lines);
        !st.ok()) {
      return Fail(kExitInternal, st);
    }
    if (args->delay_ms > 0) absl::SleepFor(absl::Milliseconds(args->delay_ms));
    std::printf("sim_matmul: run ok, modelled latency %.3f us (simulated)\n",
                timing->latency_us);
    return 0;
  }
  // profile
  if (absl::Status st = WriteProfile(*args, chip, *shape, *config, *timing);
      !st.ok()) {
    return Fail(kExitInternal, st);
  }
  return 0;
}

}  // namespace
}  // namespace tunefarm

int main(int argc, char** argv) { return tunefarm::Main(argc, argv); }
