// BuildVariant: compiles one variant of an operator's sources with its
// parameters as compile-time constants, the way the cpu and cuda boards build
// every variant they evaluate.
//
// Parameters become a generated header, tf_params.h, passed to the compiler
// with `-include`:
//   #define TF_PARAM_<UPPER_NAME> <value>
// ints as decimal literals (negatives parenthesised), doubles as
// round-trippable literals, bools as 0/1, strings only when they are
// [A-Za-z0-9_]+ identifiers (emitted bare); any other string is refused,
// naming the parameter. Parameter text never reaches the compiler's argv, and
// the compiler runs through RunProcess (no shell).
//
// Cache: <cache_dir>/<key>/ holds the binary, the header, the compiler's log
// and a `result` file ("ok" or "failed"). The key is a SHA-256 over the
// compiler identity (its path resolved through PATH and symlinks, and the
// whole output of `<compiler> --version`), the flags, the
// include dirs, the generated header (so the parameters) and the content of
// every source, every other regular file in each source's folder (headers a
// source includes from its own folder) and every header (.h .hh .hpp .hxx
// .inc .inl .cuh) under the extra include dirs (shared harness headers), so
// editing another backend's sources does not invalidate this one's builds.
// Failed builds are cached as failed, so a re-lease of a known-bad variant is
// answered at once with the same compiler message; timed-out or cancelled
// builds are not cached (they say nothing about the variant). Entries are built
// in a private folder and renamed into place, so several processes may share
// one cache dir.
//
// Thread-safety: BuildVariant is safe to call from many threads; concurrent
// calls with the same key build once (the others wait and get a cache hit).
#ifndef TUNEFARM_AGENT_VARIANT_BUILD_H_
#define TUNEFARM_AGENT_VARIANT_BUILD_H_

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/params.h"

namespace tunefarm {

struct BuildRequest {
  std::string compiler;              // a path, or a name looked up in PATH
  std::vector<std::string> flags;    // passed after the sources
  std::vector<std::string> sources;  // absolute paths
  ParamMap params;
  std::string cache_dir;  // created when missing
  absl::Duration timeout = absl::Minutes(5);
  std::vector<std::string> extra_include_dirs;  // each passed as -I<dir>
};

struct BuildResult {
  bool ok = false;
  std::string binary;  // absolute path of the built program when ok
  bool cache_hit = false;
  std::string log_tail;       // the compiler's last ~4 KiB of stderr
  std::string key;            // the cache key (hex)
  absl::Duration build_time;  // wall time of this call
};

// ok=false with log_tail: the variant's fault (BUILD_FAILED: a compile
// error, a refused parameter, a timeout). A non-OK status: the board's
// fault (compiler missing or failing `--version`, unreadable source, cache
// dir not writable) or CANCELLED when `cancel` became true.
absl::StatusOr<BuildResult> BuildVariant(const BuildRequest& request,
                                         const std::atomic<bool>& cancel);

// The build key of `request` without its params: what every variant of one
// operator shares (the compiler's identity, flags, include folders, the
// sources and their folders' files). Output that depends only on this, the
// workload and the seed (a reference stage's) may be cached under it;
// `extra` (the workload, the seed) is hashed in too.
absl::StatusOr<std::string> SharedBuildKey(
    const BuildRequest& request, const std::vector<std::string>& extra,
    const std::atomic<bool>& cancel);

// The tf_params.h text for `params` (names sorted), or INVALID_ARGUMENT
// naming the parameter that cannot be a compile-time constant.
absl::StatusOr<std::string> ParamsHeader(const ParamMap& params);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_VARIANT_BUILD_H_
