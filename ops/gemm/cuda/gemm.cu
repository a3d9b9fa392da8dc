// gemm.cu: the cuda backend's stage program for the gemm operator (fp32,
// C = A * B, row-major, on CUDA cores). One binary per variant: the
// parameters are compile-time constants (gemm_kernel.cuh).
//
// Stages (docs/operators.md; argv parsed by cuda_harness.cuh):
//   build      checks the variant against the workload and the device
//              (divisibility, the shared-memory opt-in limit); exit 2 with a
//              message when it cannot run it (the board: BUILD_FAILED);
//   reference  C from the fp64-accumulating reference kernel -> reference.bin;
//   run        output poisoned (NaN), one launch -> output.bin (not with
//              --output 0, a timing-only block), then the timing protocol
//              -> timing_us.txt, timing_note.txt;
//   profile    3 warm-up launches and one more, for `ncu -s 3 -c 1`.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cuda_harness.cuh"
#include "gemm_kernel.cuh"

namespace {

using tf_cuda::Die;
using tf_cuda::kExitBadInput;

struct Shape {
  int m, n, k;
};

Shape LoadShape(const tf_cuda::StageArgs& args) {
  return Shape{static_cast<int>(tf_cuda::WorkloadDim(args.workload_path, "m")),
               static_cast<int>(tf_cuda::WorkloadDim(args.workload_path, "n")),
               static_cast<int>(tf_cuda::WorkloadDim(args.workload_path, "k"))};
}

// Why this variant cannot run this workload on this device, or "".
std::string CheckVariant(const Shape& s) {
  char buf[256];
  if (s.m % tf_gemm::kBM || s.n % tf_gemm::kBN || s.k % tf_gemm::kBK) {
    std::snprintf(buf, sizeof(buf),
                  "gemm: workload m=%d n=%d k=%d is not a multiple of the tile "
                  "block_m=%d block_n=%d block_k=%d (this kernel has no edge tiles)",
                  s.m, s.n, s.k, tf_gemm::kBM, tf_gemm::kBN, tf_gemm::kBK);
    return buf;
  }
  if (s.n % 4 || s.k % 4) {
    std::snprintf(buf, sizeof(buf), "gemm: n=%d and k=%d must be multiples of 4 (vector access)",
                  s.n, s.k);
    return buf;
  }
  int dev = 0, optin = 0;
  TF_CUDA_CHECK(cudaGetDevice(&dev));
  TF_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (tf_gemm::kSmemBytes > static_cast<size_t>(optin)) {
    std::snprintf(buf, sizeof(buf),
                  "gemm: the variant needs %zu bytes of shared memory per block; this device "
                  "allows %d",
                  tf_gemm::kSmemBytes, optin);
    return buf;
  }
  return "";
}

void Launch(const float* a, const float* b, float* c, const Shape& s) {
  const dim3 grid(s.n / tf_gemm::kBN, s.m / tf_gemm::kBM);
  tf_gemm::GemmKernel<<<grid, tf_gemm::kThreads, tf_gemm::kSmemBytes>>>(a, b, c, s.m, s.n, s.k);
}

}  // namespace

int main(int argc, char** argv) {
  const tf_cuda::StageArgs args = tf_cuda::ParseStageArgs(argc, argv);
  const Shape s = LoadShape(args);
  const std::string why = CheckVariant(s);
  if (!why.empty()) Die(kExitBadInput, why);
  TF_CUDA_CHECK(cudaFuncSetAttribute(tf_gemm::GemmKernel,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(tf_gemm::kSmemBytes)));
  if (args.stage == "build") {
    cudaFuncAttributes attr{};
    TF_CUDA_CHECK(cudaFuncGetAttributes(&attr, tf_gemm::GemmKernel));
    std::printf("gemm: variant ok: %d threads/block, %zu bytes shared, %d registers/thread, "
                "%zu bytes local (spills)\n",
                tf_gemm::kThreads, tf_gemm::kSmemBytes, attr.numRegs, attr.localSizeBytes);
    return 0;
  }

  const size_t a_count = static_cast<size_t>(s.m) * s.k;
  const size_t b_count = static_cast<size_t>(s.k) * s.n;
  const size_t c_count = static_cast<size_t>(s.m) * s.n;
  tf_cuda::DeviceBuffer<float> a(a_count), b(b_count), c(c_count);
  tf_cuda::FillSeededInputs(args.seed, 1, a.get(), a_count);
  tf_cuda::FillSeededInputs(args.seed, 2, b.get(), b_count);

  if (args.stage == "reference") {
    const dim3 grid((s.n + 15) / 16, (s.m + 15) / 16), block(16, 16);
    tf_gemm::ReferenceGemmKernel<<<grid, block>>>(a.get(), b.get(), c.get(), s.m, s.n, s.k);
    TF_CUDA_CHECK_LAUNCH("ReferenceGemmKernel");
    TF_CUDA_CHECK(cudaDeviceSynchronize());
    tf_cuda::WriteFloats(args.out_dir + "/reference.bin", c.Download());
    std::printf("gemm: reference %dx%dx%d written (fp64 accumulation)\n", s.m, s.n, s.k);
    return 0;
  }
  if (args.stage == "run") {
    std::optional<tf_cuda::PendingWrite> output;
    if (args.write_output) {  // --output 0: a timing-only block
      tf_cuda::PoisonDevice(c.get(), c.bytes());
      Launch(a.get(), b.get(), c.get(), s);
      TF_CUDA_CHECK_LAUNCH("GemmKernel");
      TF_CUDA_CHECK(cudaDeviceSynchronize());
      // Written to disk while the samples below run.
      tf_cuda::WriteDeviceBufferAsync(args.out_dir + "/output.bin", c, &output);
    }
    const tf_cuda::TimingResult t = tf_cuda::TimeKernel(
        [&] { Launch(a.get(), b.get(), c.get(), s); }, args.warmup, args.samples);
    if (output.has_value()) output->Wait();
    tf_cuda::WriteTiming(args.out_dir, t);
    const double med = tf_cuda::Median(
        std::vector<double>(t.samples_us.begin() + t.warmup, t.samples_us.end()));
    std::printf("gemm: run ok: median %.3f us = %.2f TFLOP/s; %s\n", med,
                2.0 * s.m * s.n * static_cast<double>(s.k) / (med * 1e6), t.note.c_str());
    return 0;
  }
  if (args.stage == "profile") {
    for (int i = 0; i < 4; ++i) Launch(a.get(), b.get(), c.get(), s);
    TF_CUDA_CHECK_LAUNCH("GemmKernel");
    TF_CUDA_CHECK(cudaDeviceSynchronize());
    std::printf("gemm: profile launches done (3 warm-up + 1)\n");
    return 0;
  }
  Die(kExitBadInput, "unknown --stage " + args.stage);
}
