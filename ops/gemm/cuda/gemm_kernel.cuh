// gemm_kernel.cuh: the tunable fp32 GEMM on CUDA cores, C = A * B with A
// (m x k), B (k x n) and C (m x n) row-major, and the fp64 reference GEMM
// the reference stage uses. Included by gemm.cu (the stage program) only.
//
// The variant's parameters arrive as compile-time constants TF_PARAM_<NAME>
// (agent/variant_build.h writes them into the -include'd tf_params.h):
//   BLOCK_M, BLOCK_N, BLOCK_K  the C tile one block computes, and the depth
//                              of one k-step staged in shared memory;
//   THREAD_M, THREAD_N         the register tile of C one thread computes;
//   VEC_WIDTH                  floats per global load of the A and B tiles
//                              (1, 2 or 4: 4-, 8- or 16-byte loads);
//   STAGES                     1: load tile, sync, compute, sync.
//                              2: double-buffered shared memory, the next
//                              tile's global loads in flight in registers
//                              while the current one is computed.
// Impossible combinations stop the build with a static_assert that names the
// parameters (BUILD_FAILED); combinations the device refuses at run time
// (shared memory over the opt-in limit) fail the launch with a message.
//
// Layout choices (why): A is stored transposed in shared memory (As[k][m])
// so a thread's THREAD_M values for one k are contiguous and load as float4;
// A's rows are padded by 4 floats so the transposed stores of consecutive
// threads spread over the 32 banks. A thread's register tile is split into
// groups of 4 rows/columns strided across the block (thread t owns columns
// t*4..t*4+3, then the same plus BLOCK_N/(THREAD_N/4)...), so a warp's
// float4 reads of B cover consecutive addresses: no bank conflicts, and the
// C stores coalesce.
#ifndef TUNEFARM_OPS_GEMM_CUDA_GEMM_KERNEL_CUH_
#define TUNEFARM_OPS_GEMM_CUDA_GEMM_KERNEL_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#ifndef TF_PARAM_BLOCK_M
#define TF_PARAM_BLOCK_M 128
#endif
#ifndef TF_PARAM_BLOCK_N
#define TF_PARAM_BLOCK_N 128
#endif
#ifndef TF_PARAM_BLOCK_K
#define TF_PARAM_BLOCK_K 8
#endif
#ifndef TF_PARAM_THREAD_M
#define TF_PARAM_THREAD_M 8
#endif
#ifndef TF_PARAM_THREAD_N
#define TF_PARAM_THREAD_N 8
#endif
#ifndef TF_PARAM_VEC_WIDTH
#define TF_PARAM_VEC_WIDTH 4
#endif
#ifndef TF_PARAM_STAGES
#define TF_PARAM_STAGES 2
#endif

namespace tf_gemm {

constexpr int kBM = TF_PARAM_BLOCK_M;
constexpr int kBN = TF_PARAM_BLOCK_N;
constexpr int kBK = TF_PARAM_BLOCK_K;
constexpr int kTM = TF_PARAM_THREAD_M;
constexpr int kTN = TF_PARAM_THREAD_N;
constexpr int kVec = TF_PARAM_VEC_WIDTH;
constexpr int kStages = TF_PARAM_STAGES;

static_assert(kBM > 0 && kBN > 0 && kBK > 0 && kTM > 0 && kTN > 0,
              "gemm: block_m, block_n, block_k, thread_m, thread_n must be positive");
static_assert(kVec == 1 || kVec == 2 || kVec == 4, "gemm: vec_width must be 1, 2 or 4");
static_assert(kStages == 1 || kStages == 2, "gemm: stages must be 1 or 2");
static_assert(kBM % kTM == 0, "gemm: block_m must be a multiple of thread_m");
static_assert(kBN % kTN == 0, "gemm: block_n must be a multiple of thread_n");
static_assert(kBK % kVec == 0, "gemm: block_k must be a multiple of vec_width (A tile loads)");
static_assert(kBN % kVec == 0, "gemm: block_n must be a multiple of vec_width (B tile loads)");

// Register-tile groups: 4 contiguous rows/columns when the tile allows.
constexpr int kGM = kTM >= 4 ? 4 : kTM;
constexpr int kGN = kTN >= 4 ? 4 : kTN;
static_assert(kTM % kGM == 0 && kTN % kGN == 0,
              "gemm: thread_m and thread_n must be 1, 2 or a multiple of 4");
constexpr int kThreadsX = kBN / kTN;  // threads along n
constexpr int kThreadsY = kBM / kTM;  // threads along m
constexpr int kThreads = kThreadsX * kThreadsY;
static_assert(kThreads <= 1024,
              "gemm: (block_m/thread_m)*(block_n/thread_n) threads per block exceed "
              "the CUDA limit of 1024");
static_assert(kThreads >= 32,
              "gemm: fewer than 32 threads per block ((block_m/thread_m)*(block_n/thread_n) < 32)");

constexpr int kPadA = 4;
constexpr int kLdA = kBM + kPadA;  // As row stride (floats)
constexpr int kLdB = kBN;
constexpr int kStageFloats = kBK * kLdA + kBK * kLdB;
constexpr size_t kSmemBytes = sizeof(float) * kStages * kStageFloats;
// Hopper's opt-in maximum per block (227 KiB); the launch checks the device's.
static_assert(kSmemBytes <= 232448,
              "gemm: shared memory stages*block_k*(block_m+4+block_n)*4 bytes exceed the "
              "227 KiB per-block limit of sm_90");

constexpr int kALoads = kBM * kBK / kVec;  // vector loads per A tile
constexpr int kBLoads = kBK * kBN / kVec;
constexpr int kAPerThread = (kALoads + kThreads - 1) / kThreads;
constexpr int kBPerThread = (kBLoads + kThreads - 1) / kThreads;

template <int N>
struct Vec;
template <>
struct Vec<1> { using T = float; };
template <>
struct Vec<2> { using T = float2; };
template <>
struct Vec<4> { using T = float4; };
using VecT = typename Vec<kVec>::T;

__device__ __forceinline__ float Lane(const float& v, int) { return v; }
__device__ __forceinline__ float Lane(const float2& v, int i) { return i == 0 ? v.x : v.y; }
__device__ __forceinline__ float Lane(const float4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

template <int N>
__device__ __forceinline__ void CopyVec(float* dst, const float* src) {
  if constexpr (N == 4) {
    *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(src);
  } else if constexpr (N == 2) {
    *reinterpret_cast<float2*>(dst) = *reinterpret_cast<const float2*>(src);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) dst[i] = src[i];
  }
}

// Requires m % BLOCK_M == 0, n % BLOCK_N == 0, k % BLOCK_K == 0 and
// 16-byte-aligned rows (the host checks before launching).
__global__ void __launch_bounds__(kThreads)
    GemmKernel(const float* __restrict__ A, const float* __restrict__ B,
               float* __restrict__ C, int m, int n, int k) {
  extern __shared__ float4 smem_raw[];
  float* smem = reinterpret_cast<float*>(smem_raw);
  const int tid = threadIdx.x;
  const int tx = tid % kThreadsX;
  const int ty = tid / kThreadsX;
  const int m0 = blockIdx.y * kBM;
  const int n0 = blockIdx.x * kBN;
  const float* a_tile = A + static_cast<int64_t>(m0) * k;
  const float* b_tile = B + n0;

  VecT a_reg[kAPerThread];
  VecT b_reg[kBPerThread];

  auto load_global = [&](int k0) {
#pragma unroll
    for (int i = 0; i < kAPerThread; ++i) {
      const int e = tid + i * kThreads;
      if (kALoads % kThreads == 0 || e < kALoads) {
        const int row = e / (kBK / kVec);
        const int col = (e % (kBK / kVec)) * kVec;
        a_reg[i] = *reinterpret_cast<const VecT*>(a_tile + static_cast<int64_t>(row) * k + k0 + col);
      }
    }
#pragma unroll
    for (int i = 0; i < kBPerThread; ++i) {
      const int e = tid + i * kThreads;
      if (kBLoads % kThreads == 0 || e < kBLoads) {
        const int row = e / (kBN / kVec);
        const int col = (e % (kBN / kVec)) * kVec;
        b_reg[i] = *reinterpret_cast<const VecT*>(b_tile + static_cast<int64_t>(k0 + row) * n + col);
      }
    }
  };
  auto store_shared = [&](int stage) {
    float* as = smem + stage * kStageFloats;
    float* bs = as + kBK * kLdA;
#pragma unroll
    for (int i = 0; i < kAPerThread; ++i) {
      const int e = tid + i * kThreads;
      if (kALoads % kThreads == 0 || e < kALoads) {
        const int row = e / (kBK / kVec);
        const int col = (e % (kBK / kVec)) * kVec;
#pragma unroll
        for (int v = 0; v < kVec; ++v) as[(col + v) * kLdA + row] = Lane(a_reg[i], v);
      }
    }
#pragma unroll
    for (int i = 0; i < kBPerThread; ++i) {
      const int e = tid + i * kThreads;
      if (kBLoads % kThreads == 0 || e < kBLoads) {
        const int row = e / (kBN / kVec);
        const int col = (e % (kBN / kVec)) * kVec;
        *reinterpret_cast<VecT*>(bs + row * kLdB + col) = b_reg[i];
      }
    }
  };

  float acc[kTM][kTN];
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int j = 0; j < kTN; ++j) acc[i][j] = 0.f;

  auto compute = [&](int stage) {
    const float* as = smem + stage * kStageFloats;
    const float* bs = as + kBK * kLdA;
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      float a_frag[kTM], b_frag[kTN];
#pragma unroll
      for (int p = 0; p < kTM / kGM; ++p)
        CopyVec<kGM>(&a_frag[p * kGM], as + kk * kLdA + p * kThreadsY * kGM + ty * kGM);
#pragma unroll
      for (int q = 0; q < kTN / kGN; ++q)
        CopyVec<kGN>(&b_frag[q * kGN], bs + kk * kLdB + q * kThreadsX * kGN + tx * kGN);
#pragma unroll
      for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
    }
  };

  const int k_tiles = k / kBK;
  if constexpr (kStages == 1) {
    for (int t = 0; t < k_tiles; ++t) {
      load_global(t * kBK);
      store_shared(0);
      __syncthreads();
      compute(0);
      __syncthreads();
    }
  } else {
    load_global(0);
    store_shared(0);
    __syncthreads();
    for (int t = 0; t < k_tiles; ++t) {
      const bool more = t + 1 < k_tiles;
      if (more) load_global((t + 1) * kBK);  // in flight during compute
      compute(t & 1);
      if (more) store_shared((t + 1) & 1);
      __syncthreads();
    }
  }

#pragma unroll
  for (int p = 0; p < kTM / kGM; ++p) {
#pragma unroll
    for (int i = 0; i < kGM; ++i) {
      const int row = m0 + p * kThreadsY * kGM + ty * kGM + i;
      float* c_row = C + static_cast<int64_t>(row) * n + n0;
#pragma unroll
      for (int q = 0; q < kTN / kGN; ++q) {
        CopyVec<kGN>(c_row + q * kThreadsX * kGN + tx * kGN, &acc[p * kGM + i][q * kGN]);
      }
    }
  }
}

// Reference: fp64 accumulation of the same fp32 inputs, 16x16 shared tiles.
// Slow by design choices (simple, obviously right); it runs once per
// evaluation.
__global__ void ReferenceGemmKernel(const float* __restrict__ A, const float* __restrict__ B,
                                    float* __restrict__ C, int m, int n, int k) {
  __shared__ double as[16][17];
  __shared__ double bs[16][17];
  const int row = blockIdx.y * 16 + threadIdx.y;
  const int col = blockIdx.x * 16 + threadIdx.x;
  double acc = 0;
  for (int k0 = 0; k0 < k; k0 += 16) {
    const int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] =
        (row < m && ka < k) ? static_cast<double>(A[static_cast<int64_t>(row) * k + ka]) : 0.0;
    bs[threadIdx.y][threadIdx.x] =
        (kb < k && col < n) ? static_cast<double>(B[static_cast<int64_t>(kb) * n + col]) : 0.0;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) acc += as[threadIdx.y][kk] * bs[kk][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) C[static_cast<int64_t>(row) * n + col] = static_cast<float>(acc);
}

}  // namespace tf_gemm

#endif  // TUNEFARM_OPS_GEMM_CUDA_GEMM_KERNEL_CUH_
