#include "agent/precision.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace tunefarm {
namespace {

// A file of raw float32 little-endian elements (this code runs on
// little-endian hosts only, as does every board kind tunefarm supports),
// read straight into its array: outputs run to hundreds of MB (softmax
// 8192^2: 256 MB), and every copy of them costs a round time.
struct Floats {
  std::vector<float> values;
  size_t bytes = 0;
};
absl::StatusOr<std::shared_ptr<const Floats>> ReadFloats(
    const std::string& path, struct stat* st_out = nullptr) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return errno == ENOENT
               ? absl::NotFoundError(absl::StrCat("no such file: ", path))
               : absl::UnavailableError(absl::StrCat(
                     "cannot open ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot stat ", path, ": ", std::strerror(e)));
  }
  auto out = std::make_shared<Floats>();
  out->bytes = static_cast<size_t>(st.st_size);
  out->values.resize(out->bytes / sizeof(float));
  char* dst = reinterpret_cast<char*>(out->values.data());
  size_t want = out->values.size() * sizeof(float), done = 0;
  while (done < want) {
    const ssize_t n = read(fd, dst + done, want - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
  if (done != want) {
    return absl::UnavailableError(absl::StrCat("short read of ", path));
  }
  if (st_out != nullptr) *st_out = st;
  return std::shared_ptr<const Floats>(std::move(out));
}

// The reference of consecutive rounds is the same cached file: keep the
// last one read (by path, size and modification time) in memory.
absl::StatusOr<std::shared_ptr<const Floats>> ReadReference(
    const std::string& path) {
  static std::mutex* mu = new std::mutex;
  static std::string* last_path = new std::string;
  static struct stat* last_stat = new struct stat();
  static std::shared_ptr<const Floats>* last = new std::shared_ptr<const Floats>;
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    std::lock_guard<std::mutex> lock(*mu);
    if (*last != nullptr && *last_path == path &&
        last_stat->st_size == st.st_size &&
        last_stat->st_mtim.tv_sec == st.st_mtim.tv_sec &&
        last_stat->st_mtim.tv_nsec == st.st_mtim.tv_nsec &&
        last_stat->st_ino == st.st_ino) {
      return *last;
    }
  }
  struct stat read_stat;
  absl::StatusOr<std::shared_ptr<const Floats>> r = ReadFloats(path, &read_stat);
  if (r.ok()) {
    std::lock_guard<std::mutex> lock(*mu);
    *last_path = path;
    *last_stat = read_stat;
    *last = *r;
  }
  return r;
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
  absl::StatusOr<std::shared_ptr<const Floats>> ref_floats =
      ReadReference(reference_path);
  if (!ref_floats.ok()) {
    return Fail(check,
                absl::StrCat("reference output ", reference_path,
                             " unreadable: ", ref_floats.status().message()));
  }
  const size_t ref_bytes = (*ref_floats)->bytes;
  if (ref_bytes % sizeof(float) != 0 || ref_bytes == 0) {
    return Fail(check, absl::StrCat("reference output ", reference_path,
                                    " has ", ref_bytes,
                                    " bytes, not a non-empty float32 array"));
  }
  const std::vector<float>& ref = (*ref_floats)->values;
  check.set_elements(static_cast<int64_t>(ref.size()));
  absl::StatusOr<std::shared_ptr<const Floats>> out_floats =
      ReadFloats(output_path);
  if (!out_floats.ok()) {
    return Fail(check, absl::StrCat("output ", output_path,
                                    " missing or unreadable (never written?): ",
                                    out_floats.status().message()));
  }
  const size_t out_bytes = (*out_floats)->bytes;
  if (out_bytes != ref_bytes) {
    return Fail(check,
                absl::StrCat("output ", output_path, " has ", out_bytes,
                             " bytes (", out_bytes / sizeof(float),
                             " elements), reference has ", ref.size(),
                             " elements: output ",
                             out_bytes < ref_bytes ? "short" : "too long"));
  }
  const std::vector<float>& out = (*out_floats)->values;
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
