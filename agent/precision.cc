#include "agent/precision.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace tunefarm {
namespace {

// Raw float32 little-endian → floats (this code runs on little-endian hosts
// only, as does every board kind tunefarm supports).
std::vector<float> AsFloats(const std::string& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  if (!out.empty())
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

v1::PrecisionCheck Fail(v1::PrecisionCheck check, std::string detail) {
  check.set_passed(false);
  check.set_detail(std::move(detail));
  return check;
}

}  // namespace

v1::PrecisionCheck ComparePrecision(const std::string& output_path,
                                    const std::string& reference_path,
                                    const v1::Tolerances& tol) {
  v1::PrecisionCheck check;
  absl::StatusOr<std::string> ref_bytes = ReadFile(reference_path);
  if (!ref_bytes.ok()) {
    return Fail(check,
                absl::StrCat("reference output ", reference_path,
                             " unreadable: ", ref_bytes.status().message()));
  }
  if (ref_bytes->size() % sizeof(float) != 0 || ref_bytes->empty()) {
    return Fail(check, absl::StrCat("reference output ", reference_path,
                                    " has ", ref_bytes->size(),
                                    " bytes, not a non-empty float32 array"));
  }
  const std::vector<float> ref = AsFloats(*ref_bytes);
  check.set_elements(static_cast<int64_t>(ref.size()));
  absl::StatusOr<std::string> out_bytes = ReadFile(output_path);
  if (!out_bytes.ok()) {
    return Fail(check, absl::StrCat("output ", output_path,
                                    " missing or unreadable (never written?): ",
                                    out_bytes.status().message()));
  }
  if (out_bytes->size() != ref_bytes->size()) {
    return Fail(
        check,
        absl::StrCat(
            "output ", output_path, " has ", out_bytes->size(), " bytes (",
            out_bytes->size() / sizeof(float), " elements), reference has ",
            ref.size(), " elements: output ",
            out_bytes->size() < ref_bytes->size() ? "short" : "too long"));
  }
  const std::vector<float> out = AsFloats(*out_bytes);
  int64_t mismatches = 0, nans = 0, ref_nans = 0;
  int64_t first_bad = -1;
  double max_abs = 0, max_rel = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double r = ref[i], o = out[i];
    if (!std::isfinite(r)) {
      ++ref_nans;
      continue;
    }
    if (!std::isfinite(o)) {
      ++nans;
      if (first_bad < 0) first_bad = static_cast<int64_t>(i);
      continue;
    }
    const double abs_err = std::fabs(o - r);
    max_abs = std::max(max_abs, abs_err);
    if (r != 0) max_rel = std::max(max_rel, abs_err / std::fabs(r));
    if (abs_err > tol.atol() + tol.rtol() * std::fabs(r)) {
      ++mismatches;
      if (first_bad < 0) first_bad = static_cast<int64_t>(i);
    }
  }
  check.set_mismatches(mismatches);
  check.set_nan_count(nans);
  check.set_max_abs_err(max_abs);
  check.set_max_rel_err(max_rel);
  if (ref_nans > 0) {
    return Fail(check, absl::StrCat("reference has ", ref_nans,
                                    " NaN/Inf elements; cannot judge"));
  }
  if (nans > 0 || mismatches > 0) {
    std::string detail;
    if (nans > 0) {
      absl::StrAppend(&detail, nans, " of ", ref.size(),
                      " output elements are NaN/Inf (unwritten or invalid)");
    }
    if (mismatches > 0) {
      absl::StrAppend(&detail, detail.empty() ? "" : "; ", mismatches, " of ",
                      ref.size(), " elements outside atol=", tol.atol(),
                      " rtol=", tol.rtol(), " (max abs err ", max_abs,
                      ", max rel err ", max_rel, ")");
    }
    absl::StrAppend(&detail, "; first bad element ", first_bad);
    return Fail(check, detail);
  }
  check.set_passed(true);
  check.set_detail(
      absl::StrCat(ref.size(), " elements within atol=", tol.atol(),
                   " rtol=", tol.rtol(), " (max abs err ", max_abs, ")"));
  return check;
}

}  // namespace tunefarm
