#include "agent/variant_build.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "agent/process_runner.h"
#include "common/digest.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace tunefarm {
namespace {

namespace fs = std::filesystem;

// The build pool: at most one compiler per host core at once, however many
// boards and leases ahead ask (each waits its turn, still cancellable).
class CompilerSlots {
 public:
  static CompilerSlots& Get() {
    static CompilerSlots* slots = new CompilerSlots();
    return *slots;
  }
  // False when `cancel` fired while waiting.
  bool Acquire(const std::atomic<bool>& cancel) {
    std::unique_lock<std::mutex> lock(mu_);
    while (free_ <= 0) {
      if (cancel.load()) return false;
      cv_.wait_for(lock, std::chrono::milliseconds(20));
    }
    --free_;
    return true;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++free_;
    }
    cv_.notify_one();
  }

 private:
  CompilerSlots() : free_(std::max(1u, std::thread::hardware_concurrency())) {}
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
};

constexpr char kHeaderName[] = "tf_params.h";
constexpr char kBinaryName[] = "variant";
constexpr char kResultName[] = "result";
constexpr char kLogName[] = "build.log";
constexpr size_t kMaxDepFiles = 1024;
constexpr uintmax_t kMaxDepBytes = 64 << 20;

bool IsIdentChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
}

bool IsCName(absl::string_view s) {
  if (s.empty() || absl::ascii_isdigit(static_cast<unsigned char>(s[0]))) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), IsIdentChar);
}

// `compiler` resolved the way execvp would (PATH when it has no slash), then
// through symlinks, so `c++` -> g++-12 and a different g++ earlier in PATH
// are told apart. NOT_FOUND when it resolves to no executable file.
absl::StatusOr<std::string> ResolveCompiler(const std::string& compiler) {
  const std::string found = FindExecutable(compiler);
  std::error_code ec;
  const fs::path real = found.empty() ? fs::path() : fs::canonical(found, ec);
  if (!found.empty() && !ec) return real.string();
  return absl::NotFoundError(
      absl::StrCat("compiler \"", compiler, "\" is not an executable file"));
}

// The compiler's identity for the cache key: its resolved path and the whole
// output of `<compiler> --version` (stdout then stderr: nvcc's build line and
// a vendor's patch level come after the first line). Memoised per resolved
// file (device, inode, size, mtime), so a compiler replaced in place
// (package upgrades rename a new file over the old) is asked again.
absl::StatusOr<std::string> CompilerIdentity(const std::string& compiler,
                                             const std::string& scratch_dir,
                                             const std::atomic<bool>& cancel) {
  absl::StatusOr<std::string> resolved = ResolveCompiler(compiler);
  if (!resolved.ok()) {
    return absl::FailedPreconditionError(resolved.status().message());
  }
  struct stat st {};
  if (stat(resolved->c_str(), &st) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("compiler \"", compiler, "\" (", *resolved,
                     "): ", std::strerror(errno)));
  }
  const std::string memo_key =
      absl::StrCat(*resolved, "|", st.st_dev, "|", st.st_ino, "|", st.st_size,
                   "|", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
  static std::mutex mu;
  static auto* cache = new std::map<std::string, std::string>();
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache->find(memo_key);
    if (it != cache->end()) return it->second;
  }
  ProcessSpec spec;
  spec.argv = {*resolved, "--version"};
  spec.stdout_path = absl::StrCat(scratch_dir, "/version.stdout");
  spec.stderr_path = absl::StrCat(scratch_dir, "/version.stderr");
  spec.timeout = absl::Seconds(60);
  spec.cancel = &cancel;
  absl::StatusOr<ProcessResult> r = RunProcess(spec);
  if (!r.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "compiler \"", compiler, "\" cannot be run: ", r.status().message()));
  }
  if (r->cancelled) return absl::CancelledError("build cancelled");
  if (r->timed_out || r->term_signal != 0 || r->exit_code != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "compiler \"", compiler, "\" --version failed (exit ", r->exit_code,
        ", signal ", r->term_signal, "): ", r->stderr_tail));
  }
  TF_ASSIGN_OR_RETURN(std::string out, ReadFile(spec.stdout_path));
  absl::StatusOr<std::string> err = ReadFile(spec.stderr_path);
  if (absl::StripAsciiWhitespace(out).empty() &&
      (!err.ok() || absl::StripAsciiWhitespace(*err).empty())) {
    return absl::FailedPreconditionError(
        absl::StrCat("compiler \"", compiler, "\" --version printed nothing"));
  }
  std::string identity = absl::StrCat("path:", *resolved, "\nstdout:", out,
                                      "\nstderr:", err.ok() ? *err : "");
  std::lock_guard<std::mutex> lock(mu);
  (*cache)[memo_key] = identity;
  return identity;
}

// Header-like files: what an include dir contributes to a build.
bool IsHeader(const fs::path& p) {
  static const char* const kExt[] = {".h",   ".hh",  ".hpp", ".hxx",
                                     ".inc", ".inl", ".cuh"};
  const std::string ext = p.extension().string();
  return std::any_of(std::begin(kExt), std::end(kExt),
                     [&](const char* e) { return ext == e; });
}

// Regular files under `dir` (recursive: headers only), sorted, bounded.
absl::Status ListFiles(const std::string& dir, bool recursive,
                       std::vector<std::string>* out) {
  std::error_code ec;
  std::vector<std::string> found;
  auto visit = [&](const fs::directory_entry& e) {
    if (e.is_regular_file(ec) && !e.is_symlink(ec) &&
        (!recursive || IsHeader(e.path()))) {
      found.push_back(e.path().string());
    }
  };
  if (recursive) {
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      visit(*it);
    }
  } else {
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      visit(*it);
    }
  }
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot list ", dir, ": ", ec.message()));
  }
  std::sort(found.begin(), found.end());
  out->insert(out->end(), found.begin(), found.end());
  if (out->size() > kMaxDepFiles) {
    return absl::FailedPreconditionError(
        absl::StrCat("more than ", kMaxDepFiles, " files to hash under ", dir,
                     "; point extra_include_dirs at a smaller folder"));
  }
  return absl::OkStatus();
}

// One lock per key, so concurrent builds of one variant build once.
std::shared_ptr<std::mutex> KeyLock(const std::string& key) {
  static std::mutex mu;
  static auto* locks = new std::map<std::string, std::shared_ptr<std::mutex>>();
  std::lock_guard<std::mutex> lock(mu);
  std::shared_ptr<std::mutex>& m = (*locks)[key];
  if (!m) m = std::make_shared<std::mutex>();
  return m;
}

// Reads a finished cache entry; NOT_FOUND when there is none (or a broken
// one, which is then rebuilt).
absl::StatusOr<BuildResult> ReadEntry(const std::string& entry_dir,
                                      const std::string& key) {
  absl::StatusOr<std::string> result = ReadFile(entry_dir + "/" + kResultName);
  if (!result.ok()) return absl::NotFoundError("no cache entry");
  BuildResult out;
  out.key = key;
  out.cache_hit = true;
  absl::StatusOr<std::string> log = ReadFile(entry_dir + "/" + kLogName);
  if (log.ok()) {
    out.log_tail = log->size() > 4096 ? log->substr(log->size() - 4096) : *log;
  }
  const absl::string_view verdict = absl::StripAsciiWhitespace(*result);
  if (verdict == "ok") {
    out.ok = true;
    out.binary = entry_dir + "/" + kBinaryName;
    if (access(out.binary.c_str(), X_OK) != 0) {
      return absl::NotFoundError("cache entry lacks its binary");
    }
  } else if (verdict != "failed") {
    return absl::NotFoundError("cache entry has an unknown result");
  }
  return out;
}

std::string UniqueSuffix() {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat(getpid(), "_", counter.fetch_add(1), "_",
                      absl::ToUnixNanos(absl::Now()));
}

}  // namespace

absl::StatusOr<std::string> ParamsHeader(const ParamMap& params) {
  std::map<std::string, const v1::ParamValue*> sorted;
  for (const auto& [name, value] : params) sorted[name] = &value;
  std::string out =
      "// Generated by tunefarm (agent/variant_build): this variant's "
      "parameters.\n#pragma once\n";
  for (const auto& [name, value] : sorted) {
    if (!IsCName(name) || name.size() > 64) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter name \"", absl::CHexEscape(name.substr(0, 64)),
          "\" is not a C identifier; it cannot become a compile-time "
          "constant"));
    }
    std::string text;
    switch (value->kind_case()) {
      case v1::ParamValue::kIntValue: {
        const int64_t v = value->int_value();
        if (v == INT64_MIN) {
          text = "(-9223372036854775807LL - 1)";
        } else {
          text = v < 0 ? absl::StrCat("(", v, "LL)") : absl::StrCat(v);
        }
        break;
      }
      case v1::ParamValue::kDoubleValue: {
        const double v = value->double_value();
        if (!std::isfinite(v)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "parameter ", name, ": ", v, " is not a finite number"));
        }
        text = absl::StrFormat("%.17g", v);
        if (text.find_first_of(".eE") == std::string::npos) text += ".0";
        if (v < 0) text = absl::StrCat("(", text, ")");
        break;
      }
      case v1::ParamValue::kBoolValue:
        text = value->bool_value() ? "1" : "0";
        break;
      case v1::ParamValue::kStringValue: {
        const std::string& s = value->string_value();
        if (s.empty() || s.size() > 128 ||
            !std::all_of(s.begin(), s.end(), IsIdentChar)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "parameter ", name, ": string value \"",
              absl::CHexEscape(s.substr(0, 64)),
              "\" is not an identifier ([A-Za-z0-9_]+); refusing to put it in "
              "generated code"));
        }
        text = s;
        break;
      }
      case v1::ParamValue::KIND_NOT_SET:
        return absl::InvalidArgumentError(
            absl::StrCat("parameter ", name, " has no value"));
    }
    absl::StrAppend(&out, "#define TF_PARAM_", absl::AsciiStrToUpper(name), " ",
                    text, "\n");
  }
  return out;
}

// A private scratch folder under the cache, removed with this object.
struct ScratchDir {
  explicit ScratchDir(const std::string& cache_dir)
      : path(absl::StrCat(cache_dir, "/.tmp_", UniqueSuffix())) {}
  ~ScratchDir() { (void)RemoveAll(path); }
  absl::Status Create() const { return MakeDirs(path); }
  const std::string path;
};

// The cache key: everything that goes into the binary. `header` is the
// generated tf_params.h, or nullptr for the key every variant of one
// operator shares.
absl::StatusOr<std::string> InputsKey(const BuildRequest& request,
                                      const std::string* header,
                                      const std::vector<std::string>& extra,
                                      const std::string& scratch,
                                      const std::atomic<bool>& cancel) {
  absl::StatusOr<std::string> identity =
      CompilerIdentity(request.compiler, scratch, cancel);
  if (!identity.ok()) return identity.status();

  FieldHasher h;
  h.Add("compiler", request.compiler);
  h.Add("identity", *identity);
  for (const std::string& f : request.flags) h.Add("flag", f);
  for (const std::string& d : request.extra_include_dirs) h.Add("include", d);
  if (header != nullptr) h.Add("header", *header);
  for (const std::string& e : extra) h.Add("extra", e);
  std::vector<std::string> deps;
  for (const std::string& s : request.sources) {
    deps.push_back(s);
    TF_RETURN_IF_ERROR(
        ListFiles(fs::path(s).parent_path().string(), false, &deps));
  }
  for (const std::string& d : request.extra_include_dirs) {
    TF_RETURN_IF_ERROR(ListFiles(d, true, &deps));
  }
  uintmax_t dep_bytes = 0;
  for (const std::string& f : deps) {
    absl::StatusOr<std::string> content = ReadFile(f);
    if (!content.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot read build input ", f, ": ", content.status().message()));
    }
    dep_bytes += content->size();
    if (dep_bytes > kMaxDepBytes) {
      return absl::FailedPreconditionError(absl::StrCat(
          "build inputs exceed ", kMaxDepBytes, " bytes (at ", f, ")"));
    }
    h.Add("file", f);
    h.Add("content", *content);
  }
  return h.Hex().substr(0, 40);
}

absl::StatusOr<BuildResult> BuildVariant(const BuildRequest& request,
                                         const std::atomic<bool>& cancel) {
  const absl::Time start = absl::Now();
  if (request.compiler.empty()) {
    return absl::InvalidArgumentError("BuildVariant: no compiler given");
  }
  if (request.sources.empty()) {
    return absl::InvalidArgumentError("BuildVariant: no sources given");
  }
  if (request.cache_dir.empty()) {
    return absl::InvalidArgumentError("BuildVariant: no cache_dir given");
  }
  for (const std::string& s : request.sources) {
    if (s.empty() || s[0] != '/') {
      return absl::InvalidArgumentError(absl::StrCat(
          "BuildVariant: source \"", s, "\" is not an absolute path"));
    }
  }
  TF_RETURN_IF_ERROR(MakeDirs(request.cache_dir));

  // A refused parameter is the variant's fault, answered without compiling.
  absl::StatusOr<std::string> header = ParamsHeader(request.params);
  if (!header.ok()) {
    BuildResult r;
    r.log_tail = std::string(header.status().message());
    r.build_time = absl::Now() - start;
    return r;
  }

  ScratchDir scratch_dir(request.cache_dir);
  TF_RETURN_IF_ERROR(scratch_dir.Create());
  const std::string& scratch = scratch_dir.path;

  TF_ASSIGN_OR_RETURN(const std::string key,
                      InputsKey(request, &*header, {}, scratch, cancel));
  const std::string entry_dir = absl::StrCat(request.cache_dir, "/", key);

  std::shared_ptr<std::mutex> key_lock = KeyLock(key);
  std::lock_guard<std::mutex> lock(*key_lock);
  if (absl::StatusOr<BuildResult> hit = ReadEntry(entry_dir, key); hit.ok()) {
    hit->build_time = absl::Now() - start;
    return hit;
  }

  // Build in the scratch folder, then rename it into place.
  const std::string build_dir = scratch + "/entry";
  TF_RETURN_IF_ERROR(MakeDirs(build_dir));
  TF_RETURN_IF_ERROR(WriteFileAtomic(build_dir + "/" + kHeaderName, *header));
  ProcessSpec spec;
  spec.argv = {request.compiler, "-include", build_dir + "/" + kHeaderName};
  for (const std::string& d : request.extra_include_dirs) {
    spec.argv.push_back(absl::StrCat("-I", d));
  }
  for (const std::string& s : request.sources) spec.argv.push_back(s);
  for (const std::string& f : request.flags) spec.argv.push_back(f);
  spec.argv.push_back("-o");
  spec.argv.push_back(build_dir + "/" + kBinaryName);
  spec.cwd = build_dir;
  spec.stdout_path = build_dir + "/build.stdout";
  spec.stderr_path = build_dir + "/" + kLogName;
  spec.timeout = request.timeout;
  spec.cancel = &cancel;
  if (!CompilerSlots::Get().Acquire(cancel)) {
    return absl::CancelledError("build cancelled while waiting for a core");
  }
  absl::StatusOr<ProcessResult> run = RunProcess(spec);
  CompilerSlots::Get().Release();
  if (!run.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("compiler \"", request.compiler,
                     "\" cannot be run: ", run.status().message()));
  }
  BuildResult out;
  out.key = key;
  out.log_tail = run->stderr_tail;
  if (run->cancelled) return absl::CancelledError("build cancelled");
  if (run->timed_out) {
    out.log_tail = absl::StrCat("build timed out after ",
                                absl::FormatDuration(request.timeout), "\n",
                                run->stderr_tail);
    out.build_time = absl::Now() - start;
    return out;  // not cached: a timeout may be the machine's load
  }
  out.ok = run->term_signal == 0 && run->exit_code == 0 &&
           access((build_dir + "/" + kBinaryName).c_str(), X_OK) == 0;
  if (!out.ok && run->term_signal != 0) {
    absl::StrAppend(&out.log_tail, "\ncompiler killed by ",
                    SignalName(run->term_signal));
  } else if (!out.ok && run->exit_code == 0) {
    absl::StrAppend(&out.log_tail, "\ncompiler exited 0 but wrote no binary");
  }
  if (!out.ok) {
    TF_RETURN_IF_ERROR(
        WriteFileAtomic(build_dir + "/" + kLogName, out.log_tail));
  }
  TF_RETURN_IF_ERROR(WriteFileAtomic(build_dir + "/" + kResultName,
                                     out.ok ? "ok\n" : "failed\n"));
  std::error_code ec;
  fs::rename(build_dir, entry_dir, ec);
  if (ec) {
    // Another process finished the same key first: use its entry.
    if (absl::StatusOr<BuildResult> hit = ReadEntry(entry_dir, key); hit.ok()) {
      hit->build_time = absl::Now() - start;
      return hit;
    }
    return absl::InternalError(absl::StrCat("cannot move build into cache at ",
                                            entry_dir, ": ", ec.message()));
  }
  if (out.ok) out.binary = entry_dir + "/" + kBinaryName;
  out.build_time = absl::Now() - start;
  return out;
}

absl::StatusOr<std::string> SharedBuildKey(
    const BuildRequest& request, const std::vector<std::string>& extra,
    const std::atomic<bool>& cancel) {
  if (request.compiler.empty() || request.sources.empty() ||
      request.cache_dir.empty()) {
    return absl::InvalidArgumentError(
        "SharedBuildKey: needs a compiler, sources and a cache_dir");
  }
  TF_RETURN_IF_ERROR(MakeDirs(request.cache_dir));
  ScratchDir scratch_dir(request.cache_dir);
  TF_RETURN_IF_ERROR(scratch_dir.Create());
  const std::string& scratch = scratch_dir.path;
  return InputsKey(request, nullptr, extra, scratch, cancel);
}

}  // namespace tunefarm
