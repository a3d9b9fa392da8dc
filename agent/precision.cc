#include "agent/precision.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace tunefarm {
namespace {

// A file of raw float32 little-endian elements (this code runs on
// little-endian hosts only, as does every board kind tunefarm supports),
// mapped read-only: outputs run to hundreds of MB (softmax 8192^2: 256 MB),
// and every copy of them costs a round time. The mapping stays valid after
// the file is replaced or removed.
struct Floats {
  const float* values = nullptr;
  size_t count = 0;
  size_t bytes = 0;
  void* map = nullptr;
  size_t map_bytes = 0;
  Floats() = default;
  Floats(const Floats&) = delete;
  Floats& operator=(const Floats&) = delete;
  ~Floats() {
    if (map != nullptr) munmap(map, map_bytes);
  }
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
  out->count = out->bytes / sizeof(float);
  if (out->count > 0) {
    void* map = mmap(nullptr, out->bytes, PROT_READ, MAP_PRIVATE | MAP_POPULATE,
                     fd, 0);
    if (map == MAP_FAILED) {
      const int e = errno;
      close(fd);
      return absl::UnavailableError(
          absl::StrCat("cannot map ", path, ": ", std::strerror(e)));
    }
    out->map = map;
    out->map_bytes = out->bytes;
    out->values = static_cast<const float*>(map);
  }
  close(fd);
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

// The verdict counts of elements [begin, end).
struct Slice {
  int64_t mismatches = 0, nans = 0, ref_nans = 0;
  int64_t first_bad = -1;
  double max_abs = 0, max_rel = 0;
};
Slice JudgeSlice(const float* out, const float* ref, size_t begin, size_t end,
                 const v1::Tolerances& tol) {
  Slice s;
  for (size_t i = begin; i < end; ++i) {
    const double r = ref[i], o = out[i];
    if (!std::isfinite(r)) {
      ++s.ref_nans;
      continue;
    }
    if (!std::isfinite(o)) {
      ++s.nans;
      if (s.first_bad < 0) s.first_bad = static_cast<int64_t>(i);
      continue;
    }
    const double abs_err = std::fabs(o - r);
    s.max_abs = std::max(s.max_abs, abs_err);
    if (r != 0) s.max_rel = std::max(s.max_rel, abs_err / std::fabs(r));
    if (abs_err > tol.atol() + tol.rtol() * std::fabs(r)) {
      ++s.mismatches;
      if (s.first_bad < 0) s.first_bad = static_cast<int64_t>(i);
    }
  }
  return s;
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
  const float* ref = (*ref_floats)->values;
  const size_t n = (*ref_floats)->count;
  check.set_elements(static_cast<int64_t>(n));
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
                             " elements), reference has ", n,
                             " elements: output ",
                             out_bytes < ref_bytes ? "short" : "too long"));
  }
  const float* out = (*out_floats)->values;
  // Large outputs are judged in slices on several threads.
  const size_t threads = std::clamp<size_t>(
      std::min<size_t>(std::thread::hardware_concurrency(), 8), 1,
      std::max<size_t>(1, n / (1 << 20)));
  std::vector<Slice> slices(threads);
  std::vector<std::thread> workers;
  for (size_t t = 0; t < threads; ++t) {
    const size_t begin = n * t / threads, end = n * (t + 1) / threads;
    auto judge = [&, t, begin, end] {
      slices[t] = JudgeSlice(out, ref, begin, end, tol);
    };
    if (t + 1 == threads) {
      judge();
    } else {
      workers.emplace_back(judge);
    }
  }
  for (std::thread& w : workers) w.join();
  int64_t mismatches = 0, nans = 0, ref_nans = 0;
  int64_t first_bad = -1;
  double max_abs = 0, max_rel = 0;
  for (const Slice& sl : slices) {
    mismatches += sl.mismatches;
    nans += sl.nans;
    ref_nans += sl.ref_nans;
    if (first_bad < 0) first_bad = sl.first_bad;
    max_abs = std::max(max_abs, sl.max_abs);
    max_rel = std::max(max_rel, sl.max_rel);
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
      absl::StrAppend(&detail, nans, " of ", n,
                      " output elements are NaN/Inf (unwritten or invalid)");
    }
    if (mismatches > 0) {
      absl::StrAppend(&detail, detail.empty() ? "" : "; ", mismatches, " of ",
                      n, " elements outside atol=", tol.atol(),
                      " rtol=", tol.rtol(), " (max abs err ", max_abs,
                      ", max rel err ", max_rel, ")");
    }
    absl::StrAppend(&detail, "; first bad element ", first_bad);
    return Fail(check, detail);
  }
  check.set_passed(true);
  check.set_detail(
      absl::StrCat(n, " elements within atol=", tol.atol(),
                   " rtol=", tol.rtol(), " (max abs err ", max_abs, ")"));
  return check;
}

}  // namespace tunefarm
