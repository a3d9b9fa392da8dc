// A stand-in for nvcc, ncu and a CUDA stage program in one binary, so the
// cuda board's flow (argv construction, stage order, GPU isolation env,
// precision and timing handling, ncu export and its failure) is tested on
// machines without a GPU. Which role it plays follows from its argv:
//   --version                 nvcc identity
//   ... -o OUT                nvcc: logs argv to $FAKE_NVCC_LOG, copies
//                             itself to OUT; fails when the -include'd
//                             header sets TF_PARAM_MODE to build_error
//   --target-processes ...    ncu profile: logs argv to $FAKE_NCU_LOG,
//                             writes <-o>.ncu-rep; fails if $FAKE_NCU_FAIL
//   -i REPORT ...             ncu export: prints a raw-page CSV
//   --stage S ...             the stage program; behaviour from the
//                             "mode" value in --params
//   --query-gpu=...           nvidia-smi: two H200s
// With -shared among nvcc's flags it writes the same program built as a
// shared object (cuda_fake_variant, FAKE_VARIANT_SO) instead: a variant for
// the persistent runner, which calls its tf_variant_main.
#include <dlfcn.h>
#include <sys/stat.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#ifdef TF_VARIANT_SHARED
extern "C" int tf_variant_main(int argc, char** argv);
#endif

namespace {

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void Spit(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

std::string Arg(const std::vector<std::string>& a, const std::string& flag) {
  for (size_t i = 0; i + 1 < a.size(); ++i)
    if (a[i] == flag) return a[i + 1];
  return "";
}

bool Has(const std::vector<std::string>& a, const std::string& flag) {
  for (const auto& s : a)
    if (s == flag) return true;
  return false;
}

void LogArgv(const char* env, const std::vector<std::string>& a) {
  const char* path = std::getenv(env);
  if (!path) return;
  std::string text;
  for (const auto& s : a) text += s + "\n";
  Spit(path, text);
}

int Stage(const std::vector<std::string>& a) {
  const std::string stage = Arg(a, "--stage"), out = Arg(a, "--out");
  const std::string params = Slurp(Arg(a, "--params"));
  auto mode_is = [&](const std::string& m) {
    return params.find("\"" + m + "\"") != std::string::npos;
  };
  if (stage == "build") {
    if (mode_is("bad_workload")) {
      std::fprintf(stderr,
                   "gemm: workload m=100 is not a multiple of block_m=64\n");
      return 2;
    }
    return 0;
  }
  const int n = 64;
  std::vector<float> ref(n);
  for (int i = 0; i < n; ++i) ref[i] = 0.5f * i;
  if (stage == "reference") {
    Spit(out + "/reference.bin",
         std::string(reinterpret_cast<char*>(ref.data()), n * 4));
    return 0;
  }
  if (stage == "run") {
    const char* vis = std::getenv("CUDA_VISIBLE_DEVICES");
    const char* order = std::getenv("CUDA_DEVICE_ORDER");
    // The runner's state slot (ops/common/cuda_harness.cuh keeps device
    // memory there): the run stages this runner served so far, "none" in a
    // process of its own.
    using SlotFn = void** (*)(const char*);
    const auto slot_fn =
        reinterpret_cast<SlotFn>(dlsym(RTLD_DEFAULT, "tf_runner_slot"));
    std::string runs = "none";
    if (slot_fn != nullptr) {
      void** slot = slot_fn("fake.run_stages");
      if (*slot == nullptr) *slot = new long(0);
      runs = std::to_string(++*static_cast<long*>(*slot));
    }
    Spit(out + "/env.txt",
         std::string("CUDA_VISIBLE_DEVICES=") + (vis ? vis : "") +
             "\nCUDA_DEVICE_ORDER=" + (order ? order : "") +
             "\nrunner_run_stages=" + runs + "\n");
    if (mode_is("crash")) std::raise(SIGSEGV);
    std::vector<float> o = ref;
    if (mode_is("unwritten")) {
      for (int i = n / 2; i < n; ++i) o[i] = __builtin_nanf("");
    }
    Spit(out + "/output.bin",
         std::string(reinterpret_cast<char*>(o.data()), n * 4));
    const int total = std::atoi(Arg(a, "--warmup").c_str()) +
                      std::atoi(Arg(a, "--samples").c_str());
    std::string t;
    for (int i = 0; i < total; ++i) t += std::to_string(100 + i % 3) + ".0\n";
    Spit(out + "/timing_us.txt", t);
    Spit(out + "/timing_note.txt", "device=\"fake\" throttled=no\n");
    return 0;
  }
  if (stage == "profile") return 0;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv, argv + argc);
  if (argc == 2 && a[1] == "--version") {
    std::printf("fake-nvcc for cuda_board_test\n");
    return 0;
  }
  if (argc > 1 && a[1].rfind("--query-gpu=", 0) == 0) {  // nvidia-smi
    std::printf(
        "0, NVIDIA H200, GPU-11111111-2222-3333-4444-555555555555, 143771, "
        "1980, 31, 74.52\n"
        "1, NVIDIA H200, GPU-66666666-7777-8888-9999-000000000000, 143771, "
        "1980, 29, [N/A]\n");
    return 0;
  }
  if (Has(a, "--target-processes")) {
    LogArgv("FAKE_NCU_LOG", a);
    const std::string log = Arg(a, "--log-file");
    if (std::getenv("FAKE_NCU_FAIL")) {
      Spit(log,
           "==ERROR== Failed to initialize the profiler: LibraryNotLoaded\n");
      return 1;
    }
    Spit(log, "==PROF== Connected to process\n==PROF== Disconnected\n");
    Spit(Arg(a, "-o") + ".ncu-rep", "fake report");
    return 0;
  }
  if (Has(a, "--stage")) return Stage(a);
  if (Has(a, "-i")) {
    std::printf(
        "==PROF== note\n"
        "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel "
        "Name\",\"Context\","
        "\"Stream\",\"Block Size\",\"Grid "
        "Size\",\"Device\",\"CC\",\"gpu__time_duration.sum\"\n"
        "\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"ns\"\n"
        "\"0\",\"1\",\"gemm\",\"h\",\"GemmKernel\",\"1\",\"7\",\"(256, 1, "
        "1)\",\"(32, 32, 1)\","
        "\"0\",\"9.0\",\"1,234,000.00\"\n");
    return 0;
  }
  if (Has(a, "-o")) {
    LogArgv("FAKE_NVCC_LOG", a);
    const std::string header = Slurp(Arg(a, "-include"));
    if (header.find("build_error") != std::string::npos) {
      std::fprintf(
          stderr,
          "gemm_kernel.cuh(84): error: static assertion failed with \"gemm: "
          "threads per block exceed the CUDA limit of 1024\"\n");
      return 1;
    }
#ifdef FAKE_VARIANT_SO
    // TF_FAKE_VARIANT_SO where the tree was moved (the device run).
    const char* so = std::getenv("TF_FAKE_VARIANT_SO");
    const std::string self = Slurp(Has(a, "-shared")
                                       ? std::string(so ? so : FAKE_VARIANT_SO)
                                       : std::string("/proc/self/exe"));
#else
    const std::string self = Slurp("/proc/self/exe");
#endif
    const std::string out = Arg(a, "-o");
    Spit(out, self);
    chmod(out.c_str(), 0755);
    return 0;
  }
  std::fprintf(stderr, "cuda_fake_tool: unknown invocation\n");
  return 2;
}
