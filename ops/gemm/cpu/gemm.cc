// ops/gemm cpu backend: fp32 C = A·B with cache blocking (MC×KC panels of A,
// KC×NC panels of B, both packed) and an MR×NR register micro-kernel, the
// loop structure of BLIS/GotoBLAS. Every parameter is a compile-time
// constant from the generated tf_params.h (TF_PARAM_*), so the compiler sees
// fixed trip counts and vectorises the micro-kernel for the tile it got.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "../reference.h"
#include "harness.h"

#ifndef TF_PARAM_MC
#error "tf_params.h missing: build this file through tunefarm's BuildVariant"
#endif

constexpr int kMc = TF_PARAM_MC;
constexpr int kNc = TF_PARAM_NC;
constexpr int kKc = TF_PARAM_KC;
constexpr int kMr = TF_PARAM_MR;
constexpr int kNr = TF_PARAM_NR;
constexpr int kThreads = TF_PARAM_THREADS;
static_assert(kMc % kMr == 0, "mc must be a multiple of mr");
static_assert(kNc % kNr == 0, "nc must be a multiple of nr");

#define TF_DO_PRAGMA(x) _Pragma(#x)
#define TF_UNROLL(n) TF_DO_PRAGMA(GCC unroll n)

namespace {

gemm::Shape g_shape;
std::vector<float> g_a, g_b, g_c;

// Packs rows [i0, i0+mh) × cols [p0, p0+kd) of A into MR-row slivers:
// sliver s, step p holds A[i0+s*MR+r][p0+p] for r < MR (zero past the edge).
void PackA(const float* a, int64_t lda, int64_t i0, int64_t mh, int64_t p0,
           int64_t kd, float* out) {
  for (int64_t s = 0; s < mh; s += kMr) {
    for (int64_t p = 0; p < kd; ++p) {
      for (int r = 0; r < kMr; ++r) {
        *out++ = s + r < mh ? a[(i0 + s + r) * lda + p0 + p] : 0.0f;
      }
    }
  }
}

// Packs rows [p0, p0+kd) × cols [j0, j0+nw) of B into NR-column slivers.
void PackB(const float* b, int64_t ldb, int64_t p0, int64_t kd, int64_t j0,
           int64_t nw, float* out) {
  for (int64_t s = 0; s < nw; s += kNr) {
    for (int64_t p = 0; p < kd; ++p) {
      const float* row = b + (p0 + p) * ldb + j0 + s;
      for (int c = 0; c < kNr; ++c) *out++ = s + c < nw ? row[c] : 0.0f;
    }
  }
}

// acc[MR][NR] += Ap(MR×kd) · Bp(kd×NR), then adds the valid part to C.
inline void MicroKernel(int64_t kd, const float* __restrict ap,
                        const float* __restrict bp, float* c, int64_t ldc,
                        int mh, int nw) {
  float acc[kMr][kNr] = {};
  TF_UNROLL(TF_PARAM_UNROLL)
  for (int64_t p = 0; p < kd; ++p) {
    for (int r = 0; r < kMr; ++r) {
      const float av = ap[p * kMr + r];
      for (int q = 0; q < kNr; ++q) acc[r][q] += av * bp[p * kNr + q];
    }
  }
  for (int r = 0; r < mh; ++r) {
    for (int q = 0; q < nw; ++q) c[r * ldc + q] += acc[r][q];
  }
}

void Gemm() {
  const int64_t m = g_shape.m, n = g_shape.n, k = g_shape.k;
  std::memset(g_c.data(), 0, g_c.size() * sizeof(float));
  static std::vector<float> bpack;
  bpack.resize(static_cast<size_t>(kKc) * kNc);
  static std::vector<std::vector<float>> apacks(kThreads);
  for (int64_t j0 = 0; j0 < n; j0 += kNc) {
    const int64_t nw = std::min<int64_t>(kNc, n - j0);
    for (int64_t p0 = 0; p0 < k; p0 += kKc) {
      const int64_t kd = std::min<int64_t>(kKc, k - p0);
      PackB(g_b.data(), n, p0, kd, j0, nw, bpack.data());
      const int64_t blocks = (m + kMc - 1) / kMc;
#pragma omp parallel for num_threads(kThreads) schedule(static)
      for (int64_t blk = 0; blk < blocks; ++blk) {
        std::vector<float>& apack = apacks[omp_get_thread_num()];
        apack.resize(static_cast<size_t>(kMc) * kKc);
        const int64_t i0 = blk * kMc;
        const int64_t mh = std::min<int64_t>(kMc, m - i0);
        PackA(g_a.data(), k, i0, mh, p0, kd, apack.data());
        for (int64_t js = 0; js < nw; js += kNr) {
          for (int64_t is = 0; is < mh; is += kMr) {
            MicroKernel(kd, apack.data() + is * kd, bpack.data() + js * kd,
                        &g_c[(i0 + is) * n + j0 + js], n,
                        static_cast<int>(std::min<int64_t>(kMr, mh - is)),
                        static_cast<int>(std::min<int64_t>(kNr, nw - js)));
          }
        }
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  tf_harness::Operator op;
  op.name = "gemm";
  op.check = [](const tf_harness::Workload& w, std::string* error) {
    return gemm::ReadShape(w, &g_shape, error);
  };
  op.reference = [](const tf_harness::Workload&, uint64_t seed,
                    std::vector<float>* ref, std::string*) {
    *ref = gemm::Reference(g_shape, seed);
    return true;
  };
  op.prepare = [](const tf_harness::Workload&, uint64_t seed, std::string*) {
    gemm::MakeInputs(g_shape, seed, &g_a, &g_b);
    g_c.assign(static_cast<size_t>(g_shape.m * g_shape.n), 0.0f);
    return true;
  };
  op.run = [] { Gemm(); };
  op.output = [] { return &g_c; };
  op.describe = [](const tf_harness::Workload&) {
    const double flops = 2.0 * g_shape.m * g_shape.n * g_shape.k;
    const double bytes = 4.0 * (g_shape.m * g_shape.k + g_shape.k * g_shape.n +
                                g_shape.m * g_shape.n);
    return "flops," + std::to_string(flops) + "\nbytes," +
           std::to_string(bytes) + "\n";
  };
  return tf_harness::Main(argc, argv, op);
}
