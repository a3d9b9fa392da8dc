// softmax.cu: the cuda backend's stage program for the softmax operator
// (row-wise fp32 softmax over a rows x cols matrix). One binary per variant:
// the parameters are compile-time constants (softmax_kernel.cuh).
//
// Stages (docs/operators.md; argv parsed by cuda_harness.cuh):
//   build          checks the variant against the workload (cols % vec_width);
//   reference      softmax in fp64 on the host -> reference.bin;
//   run            output poisoned (NaN), one launch -> output.bin (not with
//                  --output 0, a timing-only block), then the timing
//                  protocol -> timing_us.txt, timing_note.txt;
//   profile        3 warm-up launches and one more, for `ncu -s 3 -c 1`;
//   bandwidth_ref  the same bytes moved by cudaMemcpy device-to-device and by
//                  a float4 copy kernel, timed with the same protocol ->
//                  bandwidth_ref.json (and timing_us.txt of the memcpy), the
//                  ceiling the achieved bandwidth is compared with.
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cuda_harness.cuh"
#include "softmax_kernel.cuh"

namespace {

using tf_cuda::Die;
using tf_cuda::kExitBadInput;

struct Shape {
  int rows, cols;
};

void Launch(const float* x, float* y, const Shape& s) {
  const dim3 block(tf_softmax::kTpr, tf_softmax::kRpb);
  const int grid = (s.rows + tf_softmax::kRpb - 1) / tf_softmax::kRpb;
  tf_softmax::SoftmaxKernel<<<grid, block>>>(x, y, s.rows, s.cols);
}

std::vector<float> Reference(const std::vector<float>& x, const Shape& s) {
  std::vector<float> y(x.size());
  std::vector<double> e(s.cols);
  for (int r = 0; r < s.rows; ++r) {
    const float* xr = &x[static_cast<size_t>(r) * s.cols];
    double m = -INFINITY;
    for (int c = 0; c < s.cols; ++c) m = std::fmax(m, static_cast<double>(xr[c]));
    double sum = 0;
    for (int c = 0; c < s.cols; ++c) sum += (e[c] = std::exp(static_cast<double>(xr[c]) - m));
    float* yr = &y[static_cast<size_t>(r) * s.cols];
    for (int c = 0; c < s.cols; ++c) yr[c] = static_cast<float>(e[c] / sum);
  }
  return y;
}

double MedianOfSamples(const tf_cuda::TimingResult& t) {
  return tf_cuda::Median(std::vector<double>(t.samples_us.begin() + t.warmup, t.samples_us.end()));
}

}  // namespace

int main(int argc, char** argv) {
  const tf_cuda::StageArgs args = tf_cuda::ParseStageArgs(argc, argv);
  const Shape s{static_cast<int>(tf_cuda::WorkloadDim(args.workload_path, "rows")),
                static_cast<int>(tf_cuda::WorkloadDim(args.workload_path, "cols"))};
  if (s.cols % tf_softmax::kVec != 0) {
    Die(kExitBadInput, "softmax: cols=" + std::to_string(s.cols) +
                           " is not a multiple of vec_width=" + std::to_string(tf_softmax::kVec));
  }
  const size_t count = static_cast<size_t>(s.rows) * s.cols;
  const double bytes_moved = 2.0 * count * sizeof(float);  // read x, write y
  if (args.stage == "build") {
    std::printf("softmax: variant ok: %d threads/block (%d per row x %d rows), vec %d, load_unroll %d\n",
                tf_softmax::kThreads, tf_softmax::kTpr, tf_softmax::kRpb, tf_softmax::kVec,
                tf_softmax::kUnroll);
    return 0;
  }
  // Logits in [-8, 8] on a 1/8 grid: a real spread of exponents.
  constexpr uint64_t kSalt = 3;
  constexpr float kScale = 8.f;
  if (args.stage == "reference") {
    const std::vector<float> x_host = tf_cuda::SeededInputs(args.seed, kSalt, count, kScale);
    tf_cuda::WriteFloats(args.out_dir + "/reference.bin", Reference(x_host, s));
    std::printf("softmax: reference %dx%d written (fp64)\n", s.rows, s.cols);
    return 0;
  }
  tf_cuda::DeviceBuffer<float> x(count), y(count);
  tf_cuda::FillSeededInputs(args.seed, kSalt, x.get(), count, kScale);
  if (args.stage == "run") {
    std::optional<tf_cuda::PendingWrite> output;
    if (args.write_output) {  // --output 0: a timing-only block
      tf_cuda::PoisonDevice(y.get(), y.bytes());
      Launch(x.get(), y.get(), s);
      TF_CUDA_CHECK_LAUNCH("SoftmaxKernel");
      TF_CUDA_CHECK(cudaDeviceSynchronize());
      // Written to disk while the samples below run.
      tf_cuda::WriteDeviceBufferAsync(args.out_dir + "/output.bin", y, &output);
    }
    const tf_cuda::TimingResult t =
        tf_cuda::TimeKernel([&] { Launch(x.get(), y.get(), s); }, args.warmup, args.samples);
    if (output.has_value()) output->Wait();
    tf_cuda::WriteTiming(args.out_dir, t);
    const double med = MedianOfSamples(t);
    std::printf("softmax: run ok: median %.3f us = %.1f GB/s (read+write); %s\n", med,
                bytes_moved / (med * 1e3), t.note.c_str());
    return 0;
  }
  if (args.stage == "profile") {
    for (int i = 0; i < 4; ++i) Launch(x.get(), y.get(), s);
    TF_CUDA_CHECK_LAUNCH("SoftmaxKernel");
    TF_CUDA_CHECK(cudaDeviceSynchronize());
    std::printf("softmax: profile launches done (3 warm-up + 1)\n");
    return 0;
  }
  if (args.stage == "bandwidth_ref") {
    const tf_cuda::TimingResult memcpy_t = tf_cuda::TimeKernel(
        [&] { TF_CUDA_CHECK(cudaMemcpyAsync(y.get(), x.get(), y.bytes(), cudaMemcpyDeviceToDevice, 0)); },
        args.warmup, args.samples);
    if (count % 4 != 0) Die(kExitBadInput, "softmax: bandwidth_ref needs rows*cols % 4 == 0");
    const tf_cuda::DeviceSummary dev = tf_cuda::QueryDevice();
    const int64_t n4 = static_cast<int64_t>(count / 4);
    const tf_cuda::TimingResult kernel_t = tf_cuda::TimeKernel(
        [&] {
          tf_softmax::CopyKernel<<<dev.sms * 8, 512>>>(reinterpret_cast<const float4*>(x.get()),
                                                     reinterpret_cast<float4*>(y.get()), n4);
        },
        args.warmup, args.samples);
    const double memcpy_us = MedianOfSamples(memcpy_t), kernel_us = MedianOfSamples(kernel_t);
    char json[1024];
    std::snprintf(json, sizeof(json),
                  "{\n  \"bytes_moved\": %.0f,\n  \"memcpy_median_us\": %.3f,\n"
                  "  \"memcpy_gbps\": %.1f,\n  \"copy_kernel_median_us\": %.3f,\n"
                  "  \"copy_kernel_gbps\": %.1f,\n  \"note\": \"%s\"\n}\n",
                  bytes_moved, memcpy_us, bytes_moved / (memcpy_us * 1e3), kernel_us,
                  bytes_moved / (kernel_us * 1e3), "bytes_moved counts reads and writes");
    tf_cuda::WriteText(args.out_dir + "/bandwidth_ref.json", json);
    tf_cuda::WriteTiming(args.out_dir, memcpy_t);
    std::printf("softmax: bandwidth_ref: memcpy %.3f us = %.1f GB/s, copy kernel %.3f us = %.1f GB/s\n",
                memcpy_us, bytes_moved / (memcpy_us * 1e3), kernel_us,
                bytes_moved / (kernel_us * 1e3));
    return 0;
  }
  Die(kExitBadInput, "unknown --stage " + args.stage);
}
