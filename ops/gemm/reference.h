// GEMM problem and reference shared by every backend of ops/gemm: the seeded
// inputs (tf_harness::FillInputs, salts 1 and 2) and C = A·B computed in
// double precision. Row-major A (m×k), B (k×n), C (m×n).
#ifndef TUNEFARM_OPS_GEMM_REFERENCE_H_
#define TUNEFARM_OPS_GEMM_REFERENCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "harness.h"

namespace gemm {

struct Shape {
  int64_t m = 0, n = 0, k = 0;
};

inline bool ReadShape(const tf_harness::Workload& w, Shape* s,
                      std::string* error) {
  s->m = w.Dim("m");
  s->n = w.Dim("n");
  s->k = w.Dim("k");
  if (s->m < 1 || s->n < 1 || s->k < 1 || s->m > 65536 || s->n > 65536 ||
      s->k > 65536) {
    *error = "workload " + w.name + ": dims m, n, k must be in [1, 65536]";
    return false;
  }
  if (w.dtype != "fp32") {
    *error = "workload " + w.name + ": dtype " + w.dtype +
             " unsupported (fp32 only)";
    return false;
  }
  return true;
}

inline void MakeInputs(const Shape& s, uint64_t seed, std::vector<float>* a,
                       std::vector<float>* b) {
  a->resize(static_cast<size_t>(s.m * s.k));
  b->resize(static_cast<size_t>(s.k * s.n));
  tf_harness::FillInputs(seed, 1, a->data(), a->size());
  tf_harness::FillInputs(seed, 2, b->data(), b->size());
}

inline std::vector<float> Reference(const Shape& s, uint64_t seed) {
  std::vector<float> a, b;
  MakeInputs(s, seed, &a, &b);
  std::vector<double> c(static_cast<size_t>(s.m * s.n), 0.0);
  for (int64_t i = 0; i < s.m; ++i) {
    double* crow = &c[static_cast<size_t>(i * s.n)];
    for (int64_t p = 0; p < s.k; ++p) {
      const double aip = a[static_cast<size_t>(i * s.k + p)];
      const float* brow = &b[static_cast<size_t>(p * s.n)];
      for (int64_t j = 0; j < s.n; ++j) crow[j] += aip * brow[j];
    }
  }
  return std::vector<float>(c.begin(), c.end());
}

}  // namespace gemm

#endif  // TUNEFARM_OPS_GEMM_REFERENCE_H_
