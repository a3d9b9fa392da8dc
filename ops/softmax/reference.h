// Row softmax problem and reference shared by every backend of ops/softmax:
// y[r][c] = exp(x[r][c] - max_r) / sum_c exp(x[r][c] - max_r), inputs seeded
// (tf_harness::FillInputs salt 1, scaled to [-8, 8]), reference in double.
#ifndef TUNEFARM_OPS_SOFTMAX_REFERENCE_H_
#define TUNEFARM_OPS_SOFTMAX_REFERENCE_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "harness.h"

namespace softmax {

struct Shape {
  int64_t rows = 0, cols = 0;
};

inline bool ReadShape(const tf_harness::Workload& w, Shape* s,
                      std::string* error) {
  s->rows = w.Dim("rows");
  s->cols = w.Dim("cols");
  if (s->rows < 1 || s->cols < 1 || s->rows > (1 << 24) ||
      s->cols > (1 << 24) || s->rows * s->cols > (int64_t{1} << 31)) {
    *error = "workload " + w.name +
             ": dims rows, cols must be >= 1, rows*cols <= 2^31";
    return false;
  }
  if (w.dtype != "fp32") {
    *error = "workload " + w.name + ": dtype " + w.dtype +
             " unsupported (fp32 only)";
    return false;
  }
  return true;
}

inline void MakeInput(const Shape& s, uint64_t seed, std::vector<float>* x) {
  x->resize(static_cast<size_t>(s.rows * s.cols));
  tf_harness::FillInputs(seed, 1, x->data(), x->size());
  for (float& v : *x) v *= 8.0f;
}

inline std::vector<float> Reference(const Shape& s, uint64_t seed) {
  std::vector<float> x;
  MakeInput(s, seed, &x);
  std::vector<float> y(x.size());
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* row = &x[static_cast<size_t>(r * s.cols)];
    double mx = row[0];
    for (int64_t c = 1; c < s.cols; ++c) mx = std::max<double>(mx, row[c]);
    double sum = 0;
    for (int64_t c = 0; c < s.cols; ++c) sum += std::exp(row[c] - mx);
    for (int64_t c = 0; c < s.cols; ++c) {
      y[static_cast<size_t>(r * s.cols + c)] =
          static_cast<float>(std::exp(row[c] - mx) / sum);
    }
  }
  return y;
}

}  // namespace softmax

#endif  // TUNEFARM_OPS_SOFTMAX_REFERENCE_H_
