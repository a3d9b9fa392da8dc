// cuda_harness.cuh: the CUDA side of the operator stage contract, shared by
// every CUDA operator program in ops/ (compiled into each variant by nvcc,
// next to the host-side contract in harness.h).
//
// What it gives an operator's main:
//   - TF_CUDA_CHECK / CudaFail: a CUDA error ends the stage with a message
//     naming the call, and exit code 3 (the board reports RUN_CRASHED with it);
//   - PoisonDevice: fills an output buffer with 0xFF bytes (a NaN in every
//     float) before each run, so an output the kernel never wrote fails the
//     farm's precision check instead of passing with stale data;
//   - L2Flusher: a 256 MiB buffer (>= 4x the H200's 60 MiB L2) memset before
//     every timed sample, so each sample starts with a cold L2;
//   - TimeKernel: warm-up (at least `warmup` launches and 25 ms, unless the
//     runner's device is still warm from the previous block; then a launch
//     timed before in this runner needs no untimed first launch), then one
//     CUDA-event pair per sample around the launch only, the elapsed times
//     read after one synchronize at the end (the do_bench / NVBench protocol
//     of shared/reference/cuda-backend.md §2.3);
//   - MeasureSmClockMhz: the SM clock the card runs at now, from clock64()
//     cycles over %globaltimer nanoseconds in a spinning kernel (no NVML
//     needed), read before and after the samples so a throttled run is
//     flagged in the timing note rather than silently compared;
//   - DeviceSummary: name, SMs, L2, max clock, for the notes.
//
// In a board's persistent runner (agent/variant_runner_main.cc) every stage
// of every variant runs in one long-lived process and CUDA context, and the
// runner exports `tf_runner_slot`: a process-lifetime pointer slot per key.
// The harness keeps there what each stage would otherwise redo: freed
// device memory, for the next stage's buffers of the same size (a stage
// allocates its inputs, output and the 256 MiB L2-flush buffer anew, and
// cudaMalloc/cudaFree of that much costs more than a short kernel's
// samples), a pinned host buffer the checked output is copied through, and
// when the device last ran timed work (a device busy a moment
// ago needs no 25 ms warm-up floor). A stage program run as a process of its
// own finds no slot and does everything per stage.
//
// Ownership: L2Flusher owns its device buffer; PendingWrite its thread.
// Everything here runs on the calling host thread and the legacy default
// stream, except PendingWrite's file write, which touches only host memory;
// not thread-safe (one stage program, one thread).
#ifndef TUNEFARM_OPS_COMMON_CUDA_HARNESS_CUH_
#define TUNEFARM_OPS_COMMON_CUDA_HARNESS_CUH_

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

// A variant built for a board's persistent runner is a shared object
// compiled with -DTF_VARIANT_SHARED -Dmain=tf_variant_main (see harness.h):
// the program's main becomes this C entry point.
#ifdef TF_VARIANT_SHARED
extern "C" int tf_variant_main(int argc, char** argv);
#endif

namespace tf_cuda {

// Exit code of a stage that failed because of CUDA (launch error, fault).
inline constexpr int kExitCudaError = 3;

[[noreturn]] inline void CudaFail(cudaError_t err, const char* what,
                                  const char* file, int line) {
  std::fprintf(stderr, "cuda error: %s failed at %s:%d: %s (%s)\n", what, file,
               line, cudaGetErrorString(err), cudaGetErrorName(err));
  std::fflush(stderr);
  std::exit(kExitCudaError);
}

#define TF_CUDA_CHECK(expr)                                         \
  do {                                                              \
    cudaError_t tf_cuda_err_ = (expr);                              \
    if (tf_cuda_err_ != cudaSuccess)                                \
      ::tf_cuda::CudaFail(tf_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a launch: a bad configuration (too many threads, too much shared
// memory) shows up here, named as a launch failure of `kernel`.
#define TF_CUDA_CHECK_LAUNCH(kernel)                                \
  do {                                                              \
    cudaError_t tf_cuda_err_ = cudaGetLastError();                  \
    if (tf_cuda_err_ != cudaSuccess)                                \
      ::tf_cuda::CudaFail(tf_cuda_err_, "launch of " kernel,        \
                          __FILE__, __LINE__);                      \
  } while (0)

// ----- state kept by a persistent runner (see the header comment) ---------

using RunnerSlotFn = void** (*)(const char* key);

// The runner's slot for `key` (created empty), or null outside a runner.
inline void** RunnerSlot(const char* key) {
  static const RunnerSlotFn fn =
      reinterpret_cast<RunnerSlotFn>(dlsym(RTLD_DEFAULT, "tf_runner_slot"));
  return fn != nullptr ? fn(key) : nullptr;
}

// Device memory stages handed back, by exact size, for later stages of any
// variant in the same runner. At most a quarter of the device's memory is
// held; an allocation that finds the device full gives it all back first.
struct DevicePool {
  std::multimap<size_t, void*> free_blocks;
  size_t held = 0, cap = 0;
};

inline DevicePool* RunnerDevicePool() {
  void** slot = RunnerSlot("tf_cuda.device_pool.v1");
  if (slot == nullptr) return nullptr;
  if (*slot == nullptr) {
    auto* pool = new DevicePool;  // lives as long as the runner
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) pool->cap = total_bytes / 4;
    *slot = pool;
  }
  return static_cast<DevicePool*>(*slot);
}

inline void* DeviceAlloc(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  DevicePool* pool = RunnerDevicePool();
  if (pool != nullptr) {
    auto it = pool->free_blocks.find(bytes);
    if (it != pool->free_blocks.end()) {
      void* ptr = it->second;
      pool->free_blocks.erase(it);
      pool->held -= bytes;
      return ptr;
    }
  }
  void* ptr = nullptr;
  cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err == cudaErrorMemoryAllocation && pool != nullptr && pool->held > 0) {
    (void)cudaGetLastError();
    for (auto& [size, block] : pool->free_blocks) cudaFree(block);
    pool->free_blocks.clear();
    pool->held = 0;
    err = cudaMalloc(&ptr, bytes);
  }
  if (err != cudaSuccess) CudaFail(err, "cudaMalloc", __FILE__, __LINE__);
  return ptr;
}

// Called once the stage no longer uses `ptr` (its work on the default
// stream is ordered before any later use of the block).
inline void DeviceRelease(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  bytes = std::max<size_t>(bytes, 1);
  DevicePool* pool = RunnerDevicePool();
  if (pool != nullptr && pool->held + bytes <= pool->cap) {
    pool->free_blocks.emplace(bytes, ptr);
    pool->held += bytes;
    return;
  }
  cudaFree(ptr);
}

inline int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// When timed work last ended on this runner's device (steady-clock ns), or
// null outside a runner.
inline int64_t* RunnerLastTimedNs() {
  void** slot = RunnerSlot("tf_cuda.last_timed_ns.v1");
  if (slot == nullptr) return nullptr;
  if (*slot == nullptr) *slot = new int64_t(0);  // lives as long as the runner
  return static_cast<int64_t*>(*slot);
}

// Device memory owned for the life of the stage (from the runner's pool
// when there is one).
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count)
      : ptr_(static_cast<T*>(DeviceAlloc(count * sizeof(T)))), count_(count) {}
  ~DeviceBuffer() { DeviceRelease(ptr_, count_ * sizeof(T)); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return ptr_; }
  size_t count() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

  void Upload(const std::vector<T>& host) {
    TF_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T),
                             cudaMemcpyHostToDevice));
  }
  std::vector<T> Download() const {
    std::vector<T> host(count_);
    TF_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* ptr_ = nullptr;
  size_t count_;
};

// 0xFF in every byte: each float reads as a NaN.
inline void PoisonDevice(void* ptr, size_t bytes) {
  TF_CUDA_CHECK(cudaMemset(ptr, 0xFF, bytes));
}

class L2Flusher {
 public:
  static constexpr size_t kBytes = 256u << 20;
  L2Flusher() : buf_(DeviceAlloc(kBytes)) {}
  ~L2Flusher() { DeviceRelease(buf_, kBytes); }
  L2Flusher(const L2Flusher&) = delete;
  L2Flusher& operator=(const L2Flusher&) = delete;
  // Enqueued on the default stream, ahead of the sample's start event.
  void Flush() { TF_CUDA_CHECK(cudaMemsetAsync(buf_, 0, kBytes, 0)); }

 private:
  void* buf_ = nullptr;
};

struct DeviceSummary {
  std::string name;
  int sms = 0;
  int l2_bytes = 0;
  int max_clock_mhz = 0;
  int cc_major = 0, cc_minor = 0;
};

// The current device's summary. A runner keeps it per device: the
// properties do not change, and cudaGetDeviceProperties fills in every field
// (some are slow driver queries) where a block needs five.
inline DeviceSummary QueryDevice() {
  int dev = 0;
  TF_CUDA_CHECK(cudaGetDevice(&dev));
  void** slot = RunnerSlot(("tf_cuda.device_summary.v1." + std::to_string(dev)).c_str());
  if (slot != nullptr && *slot != nullptr) return *static_cast<DeviceSummary*>(*slot);
  cudaDeviceProp prop{};
  TF_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  DeviceSummary s;
  s.name = prop.name;
  s.sms = prop.multiProcessorCount;
  s.l2_bytes = prop.l2CacheSize;
  s.cc_major = prop.major;
  s.cc_minor = prop.minor;
  int khz = 0;
  TF_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
  s.max_clock_mhz = khz / 1000;
  if (slot != nullptr) *slot = new DeviceSummary(s);  // lives as long as the runner
  return s;
}

__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One thread spins for `spin_ns` of wall time and reports the cycles its SM
// counted over the nanoseconds that passed.
__global__ void ClockProbeKernel(uint64_t spin_ns, unsigned long long* out) {
  const uint64_t t0 = GlobalTimerNs();
  const long long c0 = clock64();
  uint64_t t1 = t0;
  while (t1 - t0 < spin_ns) t1 = GlobalTimerNs();
  const long long c1 = clock64();
  out[0] = static_cast<unsigned long long>(c1 - c0);
  out[1] = t1 - t0;
}

// The SM clock now, in MHz (0 when the probe could not tell). The probe runs
// right after real work so it reads the clock the work ran at, not an idle
// clock.
inline double MeasureSmClockMhz() {
  DeviceBuffer<unsigned long long> d(2);
  // 250 us: %globaltimer ticks in at most 1 us, so the reading is within
  // 0.4 %, far inside the 75 % throttle floor; it runs twice per block.
  ClockProbeKernel<<<1, 1>>>(250'000, d.get());
  TF_CUDA_CHECK_LAUNCH("ClockProbeKernel");
  unsigned long long h[2] = {0, 0};
  TF_CUDA_CHECK(cudaMemcpy(h, d.get(), sizeof(h), cudaMemcpyDeviceToHost));
  return h[1] == 0 ? 0.0 : static_cast<double>(h[0]) * 1e3 / static_cast<double>(h[1]);
}

struct TimingResult {
  std::vector<double> samples_us;  // warm-up launches first, then samples
  int warmup = 0;
  double clock_before_mhz = 0, clock_after_mhz = 0;
  int max_clock_mhz = 0;
  bool throttled = false;  // a clock read below 75 % of the max clock
  std::string note;        // one line for the bundle / logs
};

// A runner's device that ended timed work this recently is warm: its clocks
// are up, and the next block needs no warm-up floor.
inline constexpr int64_t kWarmDeviceNs = 100'000'000;

// Whether this program timed this launch before in this process. A
// variant's shared object stays loaded in the runner, so a later block finds
// the launch's module loaded. A flag per launch (a program may time several,
// e.g. a copy and its kernel) and, by internal linkage, per program: the
// shared objects a runner loads do not share it.
template <typename Launch>
static bool& TimedBefore() {
  static bool timed = false;
  return timed;
}

// Times `launch` (which enqueues the candidate on the default stream and
// nothing else). Untimed warm-up: one launch (module load), then, unless
// the runner's device ran timed work within kWarmDeviceNs, launches up to a
// 25 ms floor (clocks ramping up); a warm device running a candidate timed
// before in this runner needs neither. Then `warmup` launches timed like
// the samples (the board drops them) and `samples` cold samples: flush L2,
// start event, launch, end event. One synchronize at the end.
template <typename Launch>
TimingResult TimeKernel(Launch&& launch, int warmup, int samples) {
  TimingResult r;
  L2Flusher flusher;
  const DeviceSummary dev = QueryDevice();
  r.max_clock_mhz = dev.max_clock_mhz;
  int64_t* last_timed_ns = RunnerLastTimedNs();
  const bool warm = last_timed_ns != nullptr && *last_timed_ns > 0 &&
                    SteadyNowNs() - *last_timed_ns < kWarmDeviceNs;
  bool& timed_before = TimedBefore<std::decay_t<Launch>>();
  const bool loaded = warm && timed_before;

  if (!loaded) {
    launch();
    TF_CUDA_CHECK_LAUNCH("candidate (first launch)");
    TF_CUDA_CHECK(cudaDeviceSynchronize());
    const auto t0 = std::chrono::steady_clock::now();
    int n = 0;
    while (!warm && (n < 5 || std::chrono::steady_clock::now() - t0 <
                                  std::chrono::milliseconds(25))) {
      launch();
      ++n;
      if (n % 8 == 0) TF_CUDA_CHECK(cudaDeviceSynchronize());
      if (n > 100000) break;
    }
    TF_CUDA_CHECK_LAUNCH("candidate (warm-up)");
    TF_CUDA_CHECK(cudaDeviceSynchronize());
  }
  r.clock_before_mhz = MeasureSmClockMhz();

  const int total = std::max(0, warmup) + std::max(1, samples);
  r.warmup = std::max(0, warmup);
  std::vector<cudaEvent_t> start(total), stop(total);
  for (int i = 0; i < total; ++i) {
    TF_CUDA_CHECK(cudaEventCreate(&start[i]));
    TF_CUDA_CHECK(cudaEventCreate(&stop[i]));
  }
  for (int i = 0; i < total; ++i) {
    flusher.Flush();
    TF_CUDA_CHECK(cudaEventRecord(start[i], 0));
    launch();
    TF_CUDA_CHECK(cudaEventRecord(stop[i], 0));
    // Keep the host from running far ahead of the device (the event pool
    // is small, but a very long queue would measure the queueing).
    if (i % 32 == 31) TF_CUDA_CHECK(cudaEventSynchronize(stop[i]));
  }
  TF_CUDA_CHECK_LAUNCH("candidate (timed)");
  TF_CUDA_CHECK(cudaDeviceSynchronize());
  for (int i = 0; i < total; ++i) {
    float ms = 0;
    TF_CUDA_CHECK(cudaEventElapsedTime(&ms, start[i], stop[i]));
    r.samples_us.push_back(static_cast<double>(ms) * 1e3);
    cudaEventDestroy(start[i]);
    cudaEventDestroy(stop[i]);
  }
  r.clock_after_mhz = MeasureSmClockMhz();
  if (last_timed_ns != nullptr) *last_timed_ns = SteadyNowNs();
  timed_before = true;
  const double floor = 0.75 * r.max_clock_mhz;
  r.throttled = r.max_clock_mhz > 0 &&
                ((r.clock_before_mhz > 0 && r.clock_before_mhz < floor) ||
                 (r.clock_after_mhz > 0 && r.clock_after_mhz < floor));
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "device=\"%s\" sms=%d l2_bytes=%d max_sm_clock_mhz=%d "
                "sm_clock_before_mhz=%.0f sm_clock_after_mhz=%.0f throttled=%s "
                "l2_flush_bytes=%zu warmup=%d samples=%d warm_start=%s "
                "first_launch=%s protocol=cuda-events-cold-l2",
                dev.name.c_str(), dev.sms, dev.l2_bytes, dev.max_clock_mhz,
                r.clock_before_mhz, r.clock_after_mhz, r.throttled ? "yes" : "no",
                L2Flusher::kBytes, r.warmup, total - r.warmup, warm ? "yes" : "no",
                loaded ? "skipped" : "untimed");
  r.note = buf;
  return r;
}

// The sample values a run stage writes to timing_us.txt: one per line.
inline std::string TimingLines(const TimingResult& r) {
  std::string out;
  char buf[64];
  for (double us : r.samples_us) {
    std::snprintf(buf, sizeof(buf), "%.3f\n", us);
    out += buf;
  }
  return out;
}

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}


// ----- host side of the stage contract (docs/operators.md) -----------------
// Kept here so the CUDA programs need nothing but the CUDA toolkit; it
// follows the same argv and file layout as the cpu backend's harness.h.

// Exit codes: bad input (argv, workload, a workload the variant cannot
// handle) and I/O failures.
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitIo = 4;

struct StageArgs {
  std::string stage;  // build | reference | run | profile | extra stages
  std::string params_path, workload_path, out_dir;
  uint64_t seed = 0;
  int warmup = 3, samples = 20;
  // --output 0: a timing-only block of the run stage (no output.bin).
  bool write_output = true;
};

[[noreturn]] inline void Die(int code, const std::string& what) {
  std::fprintf(stderr, "error: %s\n", what.c_str());
  std::fflush(stderr);
  std::exit(code);
}

inline StageArgs ParseStageArgs(int argc, char** argv) {
  StageArgs a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(kExitBadInput, flag + " needs a value");
      return argv[++i];
    };
    auto number = [&](const std::string& v) -> long long {
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 0) Die(kExitBadInput, flag + ": not a count: " + v);
      return n;
    };
    if (flag == "--stage") a.stage = value();
    else if (flag == "--params") a.params_path = value();
    else if (flag == "--workload") a.workload_path = value();
    else if (flag == "--out") a.out_dir = value();
    else if (flag == "--seed") a.seed = static_cast<uint64_t>(number(value()));
    else if (flag == "--warmup") a.warmup = static_cast<int>(std::min(number(value()), 100000LL));
    else if (flag == "--samples") a.samples = static_cast<int>(std::min(number(value()), 100000LL));
    else if (flag == "--output") a.write_output = number(value()) != 0;
    else if (flag == "--delay_ms") value();     // sim-board compatibility; unused
    else if (flag == "--flush_cache") value();  // harness.h's; the CUDA timing always flushes L2
    else Die(kExitBadInput, "unknown argument " + flag);
  }
  if (a.stage.empty()) Die(kExitBadInput, "--stage is required");
  if (a.workload_path.empty()) Die(kExitBadInput, "--workload is required");
  if (a.out_dir.empty()) Die(kExitBadInput, "--out is required");
  return a;
}

inline std::string ReadTextFile(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) Die(kExitIo, "cannot open " + path);
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

// Writes `path` through a temporary and a rename; "" or why it failed.
inline std::string TryWriteBytes(const std::string& path, const void* data, size_t bytes) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return "cannot create " + tmp;
  const bool short_write = bytes && std::fwrite(data, 1, bytes, f) != bytes;
  if (std::fclose(f) != 0 || short_write) return "short write to " + tmp;
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return "cannot rename to " + path;
  return "";
}

inline void WriteBytes(const std::string& path, const void* data, size_t bytes) {
  const std::string why = TryWriteBytes(path, data, bytes);
  if (!why.empty()) Die(kExitIo, why);
}

inline void WriteText(const std::string& path, const std::string& text) {
  WriteBytes(path, text.data(), text.size());
}

inline void WriteFloats(const std::string& path, const std::vector<float>& v) {
  WriteBytes(path, v.data(), v.size() * sizeof(float));
}

// A pinned host buffer of at least `bytes` kept by the runner (grown when
// too small), or null outside a runner. A copy into pinned memory runs at
// the link's speed; into pageable memory at a fraction of it.
struct PinnedHost {
  void* ptr = nullptr;
  size_t bytes = 0;
};

inline void* RunnerPinnedHost(size_t bytes) {
  void** slot = RunnerSlot("tf_cuda.pinned_host.v1");
  if (slot == nullptr) return nullptr;
  if (*slot == nullptr) *slot = new PinnedHost;  // lives as long as the runner
  auto* p = static_cast<PinnedHost*>(*slot);
  if (p->bytes < bytes) {
    if (p->ptr != nullptr) cudaFreeHost(p->ptr);
    p->ptr = nullptr;
    p->bytes = 0;
    TF_CUDA_CHECK(cudaMallocHost(&p->ptr, bytes));
    p->bytes = bytes;
  }
  return p->ptr;
}

// A file being written on a host thread: the run stage's output.bin (tens
// of MB for a large workload) goes to disk while the device times the
// samples that follow. Wait() (or the destructor) joins it and ends the
// stage as WriteBytes would when the write failed. Move-only; owned by the
// stage that started it.
class PendingWrite {
 public:
  PendingWrite() = default;
  PendingWrite(std::string path, std::vector<char> owned, const void* data, size_t bytes)
      : path_(std::move(path)), owned_(std::move(owned)) {
    thread_ = std::thread([this, data, bytes] {
      why_ = TryWriteBytes(path_, owned_.empty() ? data : owned_.data(), bytes);
    });
  }
  PendingWrite(PendingWrite&&) = delete;
  PendingWrite& operator=(PendingWrite&&) = delete;
  ~PendingWrite() { Wait(); }

  void Wait() {
    if (!thread_.joinable()) return;
    thread_.join();
    if (!why_.empty()) Die(kExitIo, why_);
  }

 private:
  std::string path_;
  std::vector<char> owned_;  // the copy when no runner buffer holds it
  std::string why_;
  std::thread thread_;
};

// Copies a device buffer's contents out (the buffer may be reused at once)
// and writes them to `path` (as WriteBytes) on `*write`'s thread. In a
// runner the copy goes through its pinned buffer, which no other stage uses
// before this one returns and joins the write.
template <typename T>
inline void WriteDeviceBufferAsync(const std::string& path, const DeviceBuffer<T>& buf,
                                   std::optional<PendingWrite>* write) {
  void* host = RunnerPinnedHost(buf.bytes());
  std::vector<char> owned;
  if (host == nullptr) {
    owned.resize(buf.bytes());
    host = owned.data();
  }
  TF_CUDA_CHECK(cudaMemcpy(host, buf.get(), buf.bytes(), cudaMemcpyDeviceToHost));
  write->emplace(path, std::move(owned), host, buf.bytes());
}

// A device buffer's contents written to `path` (as WriteBytes).
template <typename T>
inline void WriteDeviceBuffer(const std::string& path, const DeviceBuffer<T>& buf) {
  std::optional<PendingWrite> write;
  WriteDeviceBufferAsync(path, buf, &write);
  write->Wait();
}

// dims.<name> of workload.json as the boards write it:
// {"name": ..., "dtype": ..., "dims": {"m": 4096, ...}}. A small scanner
// (no JSON library in a CUDA variant); dies naming the file and key.
inline long long WorkloadDim(const std::string& workload_path, const std::string& name) {
  const std::string text = ReadTextFile(workload_path);
  const size_t dims = text.find("\"dims\"");
  if (dims == std::string::npos) Die(kExitBadInput, workload_path + ": no \"dims\" object");
  const size_t open = text.find('{', dims);
  const size_t close = text.find('}', dims);
  if (open == std::string::npos || close == std::string::npos || close < open)
    Die(kExitBadInput, workload_path + ": malformed \"dims\" object");
  const std::string body = text.substr(open + 1, close - open - 1);
  const std::string key = "\"" + name + "\"";
  const size_t at = body.find(key);
  if (at == std::string::npos) Die(kExitBadInput, workload_path + ": dims." + name + " is missing");
  size_t p = body.find(':', at + key.size());
  if (p == std::string::npos) Die(kExitBadInput, workload_path + ": dims." + name + " has no value");
  ++p;
  while (p < body.size() && (body[p] == ' ' || body[p] == '\n' || body[p] == '\t' || body[p] == '\r')) ++p;
  char* end = nullptr;
  const long long v = std::strtoll(body.c_str() + p, &end, 10);
  if (end == body.c_str() + p || v <= 0 || v > (1LL << 31) - 1)
    Die(kExitBadInput, workload_path + ": dims." + name + " is not a positive 32-bit integer");
  return v;
}

__host__ __device__ inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Seeded inputs on a 1/64 grid in [-scale, scale]: exactly representable,
// so fp32 products are exact and a correct kernel differs from the fp64
// reference only by accumulation order. `salt` separates the operands.
inline std::vector<float> SeededInputs(uint64_t seed, uint64_t salt, size_t count, float scale = 1.f) {
  std::vector<float> v(count);
  const uint64_t base = Mix64(seed ^ (salt * 0x2545f4914f6cdd1dULL));
  for (size_t i = 0; i < count; ++i) {
    v[i] = scale * static_cast<float>(static_cast<int64_t>(Mix64(base + i) % 129) - 64) / 64.0f;
  }
  return v;
}

__global__ void SeededInputsKernel(uint64_t base, size_t count, float scale, float* out) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    out[i] = scale * static_cast<float>(static_cast<int64_t>(Mix64(base + i) % 129) - 64) / 64.0f;
  }
}

// SeededInputs' values, bit for bit (integers and exact k/64 steps), made on
// the device: a run block then neither loops over the input on the host nor
// copies it over (for softmax 8192^2, 256 MB per block).
inline void FillSeededInputs(uint64_t seed, uint64_t salt, float* dst, size_t count,
                             float scale = 1.f) {
  const uint64_t base = Mix64(seed ^ (salt * 0x2545f4914f6cdd1dULL));
  SeededInputsKernel<<<1024, 256>>>(base, count, scale, dst);
  TF_CUDA_CHECK_LAUNCH("SeededInputsKernel");
  TF_CUDA_CHECK(cudaDeviceSynchronize());
}

// The run stage's timing files: timing_us.txt (every sample, warm-up
// first, as agent/measurement.h reads it) and timing_note.txt (device,
// clocks, protocol).
inline void WriteTiming(const std::string& out_dir, const TimingResult& r) {
  WriteText(out_dir + "/timing_us.txt", TimingLines(r));
  WriteText(out_dir + "/timing_note.txt", r.note + "\n");
}

}  // namespace tf_cuda

#endif  // TUNEFARM_OPS_COMMON_CUDA_HARNESS_CUH_
