// softmax_kernel.cuh: the tunable row-wise fp32 softmax, y[r][c] =
// exp(x[r][c] - max_r) / sum_r, memory-bound. Included by softmax.cu only.
//
// Parameters (compile-time, TF_PARAM_<NAME> from the -include'd tf_params.h):
//   THREADS_PER_ROW  threads that share one row (32..1024, a power of two);
//   ROWS_PER_BLOCK   rows one block handles (block = threads_per_row x
//                    rows_per_block threads);
//   VEC_WIDTH        floats per load/store (1, 2 or 4);
//   LOAD_UNROLL      independent vector loads each thread issues before
//                    using any of them (memory-level parallelism).
// Two passes over the row: the first keeps a running (max, sum) per thread,
// rescaling the sum once per chunk of LOAD_UNROLL*VEC_WIDTH elements (so exp runs
// about once per element, not twice), then reduces the pairs across the
// row's threads (warp shuffles, then shared memory); the second re-reads the
// row (an L2 hit for rows in flight) and writes the result. DRAM traffic is
// one read and one write of the matrix, the same as a device-to-device copy,
// which is the bandwidth this operator is compared with.
#ifndef TUNEFARM_OPS_SOFTMAX_CUDA_SOFTMAX_KERNEL_CUH_
#define TUNEFARM_OPS_SOFTMAX_CUDA_SOFTMAX_KERNEL_CUH_

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#ifndef TF_PARAM_THREADS_PER_ROW
#define TF_PARAM_THREADS_PER_ROW 256
#endif
#ifndef TF_PARAM_ROWS_PER_BLOCK
#define TF_PARAM_ROWS_PER_BLOCK 1
#endif
#ifndef TF_PARAM_VEC_WIDTH
#define TF_PARAM_VEC_WIDTH 4
#endif
#ifndef TF_PARAM_LOAD_UNROLL
#define TF_PARAM_LOAD_UNROLL 4
#endif

namespace tf_softmax {

constexpr int kTpr = TF_PARAM_THREADS_PER_ROW;
constexpr int kRpb = TF_PARAM_ROWS_PER_BLOCK;
constexpr int kVec = TF_PARAM_VEC_WIDTH;
constexpr int kUnroll = TF_PARAM_LOAD_UNROLL;
constexpr int kThreads = kTpr * kRpb;
constexpr int kWarpsPerRow = kTpr / 32;

static_assert(kTpr >= 32 && kTpr <= 1024 && (kTpr & (kTpr - 1)) == 0,
              "softmax: threads_per_row must be a power of two in 32..1024");
static_assert(kRpb >= 1, "softmax: rows_per_block must be >= 1");
static_assert(kThreads <= 1024,
              "softmax: threads_per_row * rows_per_block exceeds the CUDA limit of 1024 "
              "threads per block");
static_assert(kVec == 1 || kVec == 2 || kVec == 4, "softmax: vec_width must be 1, 2 or 4");
static_assert(kUnroll >= 1 && kUnroll <= 16, "softmax: load_unroll must be in 1..16");

template <int N>
struct Vec;
template <>
struct Vec<1> {
  using T = float;
  __device__ static float Get(const T& v, int) { return v; }
  __device__ static void Set(T& v, int, float x) { v = x; }
};
template <>
struct Vec<2> {
  using T = float2;
  __device__ static float Get(const T& v, int i) { return i == 0 ? v.x : v.y; }
  __device__ static void Set(T& v, int i, float x) { (i == 0 ? v.x : v.y) = x; }
};
template <>
struct Vec<4> {
  using T = float4;
  __device__ static float Get(const T& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
  }
  __device__ static void Set(T& v, int i, float x) {
    (i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w) = x;
  }
};
using V = Vec<kVec>;
using VecT = typename V::T;

__device__ __forceinline__ void Combine(float& m, float& s, float om, float os) {
  const float nm = fmaxf(m, om);
  // -inf - -inf is NaN: guard the empty side.
  s = (m == -INFINITY ? 0.f : s * __expf(m - nm)) + (om == -INFINITY ? 0.f : os * __expf(om - nm));
  m = nm;
}

// Requires cols % VEC_WIDTH == 0 (the host checks before launching).
__global__ void __launch_bounds__(kThreads)
    SoftmaxKernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float red_m[kRpb][kWarpsPerRow];
  __shared__ float red_s[kRpb][kWarpsPerRow];
  const int lane_in_row = threadIdx.x;  // 0..kTpr-1
  const int row_in_block = threadIdx.y;
  const int row = blockIdx.x * kRpb + row_in_block;
  const bool active = row < rows;
  const int vcols = cols / kVec;
  const VecT* xr = reinterpret_cast<const VecT*>(x + static_cast<int64_t>(active ? row : 0) * cols);
  VecT* yr = reinterpret_cast<VecT*>(y + static_cast<int64_t>(active ? row : 0) * cols);

  float m = -INFINITY, s = 0.f;
  if (active) {
    for (int base = lane_in_row; base < vcols; base += kTpr * kUnroll) {
      VecT v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int idx = base + u * kTpr;
        if (idx < vcols) {
          v[u] = __ldg(xr + idx);
        } else {
#pragma unroll
          for (int e = 0; e < kVec; ++e) V::Set(v[u], e, -INFINITY);
        }
      }
      float cm = -INFINITY;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int e = 0; e < kVec; ++e) cm = fmaxf(cm, V::Get(v[u], e));
      float cs = 0.f;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int e = 0; e < kVec; ++e) cs += __expf(V::Get(v[u], e) - cm);
      Combine(m, s, cm, cs);
    }
  }
  // Row reduction: within the warp, then across the row's warps.
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float om = __shfl_xor_sync(0xffffffffu, m, off);
    const float os = __shfl_xor_sync(0xffffffffu, s, off);
    Combine(m, s, om, os);
  }
  if constexpr (kWarpsPerRow > 1) {
    const int warp = lane_in_row / 32;
    if (lane_in_row % 32 == 0) {
      red_m[row_in_block][warp] = m;
      red_s[row_in_block][warp] = s;
    }
    __syncthreads();
    m = red_m[row_in_block][0];
    s = red_s[row_in_block][0];
#pragma unroll
    for (int w = 1; w < kWarpsPerRow; ++w) Combine(m, s, red_m[row_in_block][w], red_s[row_in_block][w]);
  }
  if (!active) return;
  const float inv = 1.f / s;
  for (int base = lane_in_row; base < vcols; base += kTpr * kUnroll) {
    VecT v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int idx = base + u * kTpr;
      if (idx < vcols) v[u] = __ldg(xr + idx);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int idx = base + u * kTpr;
      if (idx < vcols) {
        VecT o;
#pragma unroll
        for (int e = 0; e < kVec; ++e) V::Set(o, e, __expf(V::Get(v[u], e) - m) * inv);
        yr[idx] = o;
      }
    }
  }
}

// A plain float4 device-to-device copy kernel, the "what a stream can do"
// reference next to cudaMemcpy (same bytes read and written as softmax).
__global__ void CopyKernel(const float4* __restrict__ in, float4* __restrict__ out, int64_t n4) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = in[i];
  }
}

}  // namespace tf_softmax

#endif  // TUNEFARM_OPS_SOFTMAX_CUDA_SOFTMAX_KERNEL_CUH_
