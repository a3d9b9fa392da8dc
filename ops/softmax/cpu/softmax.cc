// ops/softmax cpu backend: row softmax, fp32, three passes per row (max,
// sum of exponentials written to the output, scale). Memory-bound for long
// rows once the exponential is vectorised: the parameters choose the
// exponential (libm expf, which the compiler cannot vectorise, or a
// polynomial one it can), the number of independent SIMD lanes per pass, the
// loop unroll, and how rows are spread over threads. All are compile-time
// constants from tf_params.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../reference.h"
#include "harness.h"

#ifndef TF_PARAM_VEC
#error "tf_params.h missing: build this file through tunefarm's BuildVariant"
#endif

constexpr int kVec = TF_PARAM_VEC;
constexpr int kThreads = TF_PARAM_THREADS;
constexpr int kRowsPerTask = TF_PARAM_ROWS_PER_TASK;
#define TF_EXP_POLY 1
#define TF_EXP_LIBM 2
#define poly TF_EXP_POLY
#define libm TF_EXP_LIBM
constexpr int kExp = TF_PARAM_EXP_IMPL;
#undef poly
#undef libm

#define TF_DO_PRAGMA(x) _Pragma(#x)
#define TF_UNROLL(n) TF_DO_PRAGMA(GCC unroll n)

namespace {

softmax::Shape g_shape;
std::vector<float> g_x, g_y;

// exp(x) for x <= 0 (arguments are x - max): 2^n · p(r), r in [-ln2/2, ln2/2],
// degree-6 polynomial, relative error ~2e-7; flushes to 0 below -87.
inline float ExpPoly(float x) {
  x = std::max(x, -87.0f);
  const float n = std::nearbyint(x * 1.44269504088896341f);
  const float r = x - n * 0.693145751953125f - n * 1.42860682030941723e-6f;
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

inline float Exp(float x) {
  if constexpr (kExp == TF_EXP_POLY) {
    return ExpPoly(x);
  } else {
    return std::exp(x);
  }
}

void Row(const float* __restrict x, float* __restrict y, int64_t cols) {
  const int64_t body = cols / kVec * kVec;
  float mx[kVec];
  for (int l = 0; l < kVec; ++l) mx[l] = -INFINITY;
  TF_UNROLL(TF_PARAM_UNROLL)
  for (int64_t c = 0; c < body; c += kVec) {
    for (int l = 0; l < kVec; ++l) mx[l] = std::max(mx[l], x[c + l]);
  }
  float m = -INFINITY;
  for (int l = 0; l < kVec; ++l) m = std::max(m, mx[l]);
  for (int64_t c = body; c < cols; ++c) m = std::max(m, x[c]);

  float sum[kVec] = {};
  TF_UNROLL(TF_PARAM_UNROLL)
  for (int64_t c = 0; c < body; c += kVec) {
    for (int l = 0; l < kVec; ++l) {
      const float e = Exp(x[c + l] - m);
      y[c + l] = e;
      sum[l] += e;
    }
  }
  float s = 0;
  for (int l = 0; l < kVec; ++l) s += sum[l];
  for (int64_t c = body; c < cols; ++c) {
    y[c] = Exp(x[c] - m);
    s += y[c];
  }
  const float inv = 1.0f / s;
  TF_UNROLL(TF_PARAM_UNROLL)
  for (int64_t c = 0; c < cols; ++c) y[c] *= inv;
}

void Softmax() {
  const int64_t rows = g_shape.rows, cols = g_shape.cols;
#pragma omp parallel for num_threads(kThreads) schedule(dynamic, kRowsPerTask)
  for (int64_t r = 0; r < rows; ++r) Row(&g_x[r * cols], &g_y[r * cols], cols);
}

}  // namespace

int main(int argc, char** argv) {
  tf_harness::Operator op;
  op.name = "softmax";
  op.check = [](const tf_harness::Workload& w, std::string* error) {
    return softmax::ReadShape(w, &g_shape, error);
  };
  op.reference = [](const tf_harness::Workload&, uint64_t seed,
                    std::vector<float>* ref, std::string*) {
    *ref = softmax::Reference(g_shape, seed);
    return true;
  };
  op.prepare = [](const tf_harness::Workload&, uint64_t seed, std::string*) {
    softmax::MakeInput(g_shape, seed, &g_x);
    g_y.assign(g_x.size(), 0.0f);
    return true;
  };
  op.run = [] { Softmax(); };
  op.output = [] { return &g_y; };
  op.describe = [](const tf_harness::Workload&) {
    const double bytes = 8.0 * g_shape.rows * g_shape.cols;  // read x, write y
    return "bytes," + std::to_string(bytes) + "\n";
  };
  return tf_harness::Main(argc, argv, op);
}
