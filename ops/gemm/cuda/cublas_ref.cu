// cublas_ref.cu: the comparison point for the gemm operator's cuda variants:
// cublasSgemm (fp32, CUBLAS_DEFAULT_MATH, so no TF32 tensor cores: the
// CUDA-core sgemm path) on the same shape, the same seeded inputs and the
// same timing protocol (cuda_harness.cuh) as the variants. Not a variant;
// built once by scripts/device-cuda.sh:
//   nvcc -O3 -arch=sm_90a -std=c++17 -Iops/common ops/gemm/cuda/cublas_ref.cu -lcublas
//
// Usage: cublas_ref --stage run --workload workload.json --out DIR
//                   [--seed N --warmup W --samples S]
// Writes DIR/output.bin (cuBLAS's C), DIR/timing_us.txt, DIR/timing_note.txt
// and DIR/cublas_ref.json (median µs, TFLOP/s, and the largest difference
// from the fp64 reference kernel, so a wrong comparison point is visible).
#include <cublas_v2.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda_harness.cuh"
#include "gemm_kernel.cuh"

namespace {

#define TF_CUBLAS_CHECK(expr)                                                       \
  do {                                                                              \
    cublasStatus_t st_ = (expr);                                                    \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                             \
      std::fprintf(stderr, "cublas error: %s failed: %s\n", #expr,                 \
                   cublasGetStatusString(st_));                                     \
      std::exit(tf_cuda::kExitCudaError);                                           \
    }                                                                               \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  const tf_cuda::StageArgs args = tf_cuda::ParseStageArgs(argc, argv);
  if (args.stage != "run") tf_cuda::Die(tf_cuda::kExitBadInput, "cublas_ref supports --stage run only");
  const int m = static_cast<int>(tf_cuda::WorkloadDim(args.workload_path, "m"));
  const int n = static_cast<int>(tf_cuda::WorkloadDim(args.workload_path, "n"));
  const int k = static_cast<int>(tf_cuda::WorkloadDim(args.workload_path, "k"));
  const size_t a_count = static_cast<size_t>(m) * k, b_count = static_cast<size_t>(k) * n,
               c_count = static_cast<size_t>(m) * n;
  tf_cuda::DeviceBuffer<float> a(a_count), b(b_count), c(c_count), ref(c_count);
  a.Upload(tf_cuda::SeededInputs(args.seed, 1, a_count));
  b.Upload(tf_cuda::SeededInputs(args.seed, 2, b_count));

  cublasHandle_t handle;
  TF_CUBLAS_CHECK(cublasCreate(&handle));
  TF_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
  const float alpha = 1.f, beta = 0.f;
  // Row-major C = A*B is column-major C^T = B^T * A^T: swap the operands.
  auto launch = [&] {
    TF_CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b.get(), n,
                                a.get(), k, &beta, c.get(), n));
  };

  tf_cuda::PoisonDevice(c.get(), c.bytes());
  launch();
  TF_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> out = c.Download();
  tf_cuda::WriteFloats(args.out_dir + "/output.bin", out);

  const dim3 grid((n + 15) / 16, (m + 15) / 16), block(16, 16);
  tf_gemm::ReferenceGemmKernel<<<grid, block>>>(a.get(), b.get(), ref.get(), m, n, k);
  TF_CUDA_CHECK_LAUNCH("ReferenceGemmKernel");
  const std::vector<float> expect = ref.Download();
  double max_abs = 0;
  size_t nans = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) { ++nans; continue; }
    max_abs = std::fmax(max_abs, std::fabs(static_cast<double>(out[i]) - expect[i]));
  }

  const tf_cuda::TimingResult t = tf_cuda::TimeKernel(launch, args.warmup, args.samples);
  tf_cuda::WriteTiming(args.out_dir, t);
  const double med =
      tf_cuda::Median(std::vector<double>(t.samples_us.begin() + t.warmup, t.samples_us.end()));
  const double tflops = 2.0 * m * n * static_cast<double>(k) / (med * 1e6);
  char json[1024];
  std::snprintf(json, sizeof(json),
                "{\n  \"m\": %d, \"n\": %d, \"k\": %d,\n  \"math_mode\": \"CUBLAS_DEFAULT_MATH\",\n"
                "  \"median_us\": %.3f,\n  \"tflops\": %.3f,\n  \"max_abs_err_vs_fp64\": %.6g,\n"
                "  \"non_finite\": %zu,\n  \"note\": \"%s\"\n}\n",
                m, n, k, med, tflops, max_abs, nans, t.note.c_str());
  tf_cuda::WriteText(args.out_dir + "/cublas_ref.json", json);
  std::printf("cublas_ref: sgemm %dx%dx%d median %.3f us = %.2f TFLOP/s, max |err| vs fp64 %.3g%s\n",
              m, n, k, med, tflops, max_abs, nans ? " (NON-FINITE VALUES)" : "");
  cublasDestroy(handle);
  return nans ? tf_cuda::kExitCudaError : 0;
}
