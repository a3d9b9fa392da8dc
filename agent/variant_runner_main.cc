// tunefarm-variant-runner: the persistent runner a board starts once and
// feeds variants to (agent/variant_runner.h). It reads requests from fd 3
// (a socket to the board), loads each variant's shared object once
// (dlopen), and calls its entry point `tf_variant_main(argc, argv)` (the
// operator program's main, renamed at build time; ops/common/harness.h) with
// the stage's argv, in the stage's folder, with stdout/stderr sent to the
// stage's log files. A variant that crashes or hangs takes this process
// down (or the board kills it): that is the isolation boundary, and the
// board starts a fresh runner.
//
// Exits when the board closes the socket, or (PR_SET_PDEATHSIG, set by the
// board before exec) when the board's thread that started it ends.
//
// The runner exports `tf_runner_slot` (below) to the variants it loads.
//
// `tunefarm-variant-runner --exec VARIANT.so ARGS...` instead runs one stage
// of a shared-object variant as a process of its own (argv[0] of the stage
// is the shared object) and exits with its code: how a profiler that needs
// a process (ncu) runs a variant built for the runner.
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "agent/variant_runner.h"

namespace {

constexpr int kControlFd = 3;
using Main = int (*)(int, char**);

bool Reply(const std::string& kind, const std::string& value) {
  return tunefarm::runner_wire::WriteFrame(kControlFd, {kind, value});
}

int OpenLog(const std::string& path) {
  return open(path.empty() ? "/dev/null" : path.c_str(),
              O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

// The entry point of `lib`, or null with *error set.
Main Load(const std::string& lib, std::string* error) {
  void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    *error = "cannot load " + lib + ": " + (e != nullptr ? e : "dlopen failed");
    return nullptr;
  }
  void* sym = dlsym(handle, "tf_variant_main");
  // A source that did not declare the C entry has a C++-mangled one.
  if (sym == nullptr) sym = dlsym(handle, "_Z15tf_variant_mainiPPc");
  if (sym == nullptr) {
    *error = "cannot load " + lib +
             ": no tf_variant_main (is it built from a harness program with "
             "-Dmain=tf_variant_main?)";
  }
  return reinterpret_cast<Main>(sym);
}

}  // namespace

// A process-lifetime pointer slot per key, for state a variant's harness
// keeps across the stages this runner runs (ops/common/cuda_harness.cuh:
// device memory, when the device last ran timed work). Variants find it with
// dlsym(RTLD_DEFAULT); the runner is single-threaded.
extern "C" __attribute__((visibility("default"))) void** tf_runner_slot(
    const char* key) {
  static auto* slots = new std::map<std::string, void*>;
  return &(*slots)[key == nullptr ? "" : key];
}

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--exec") == 0) {
    std::string error;
    Main entry = Load(argv[2], &error);
    if (entry == nullptr) {
      std::fprintf(stderr, "tunefarm-variant-runner: %s\n", error.c_str());
      return 127;
    }
    return entry(argc - 2, argv + 2);
  }
  signal(SIGPIPE, SIG_IGN);
  if (getppid() == 1) return 0;  // the board died before PDEATHSIG was armed
  const int saved_out = dup(1), saved_err = dup(2);
  std::map<std::string, Main> loaded;
  std::vector<std::string> req;
  while (tunefarm::runner_wire::ReadFrame(kControlFd, &req)) {
    if (req.size() < 5) {
      if (!Reply("error", "malformed request")) return 1;
      continue;
    }
    const std::string& lib = req[0];
    auto it = loaded.find(lib);
    if (it == loaded.end()) {
      std::string error;
      Main entry = Load(lib, &error);
      if (entry == nullptr) {
        if (!Reply("error", error)) return 1;
        continue;
      }
      it = loaded.emplace(lib, entry).first;
    }
    if (!req[1].empty() && chdir(req[1].c_str()) != 0) {
      if (!Reply("error", "cannot chdir to " + req[1] + ": " +
                              std::strerror(errno)))
        return 1;
      continue;
    }
    const int out = OpenLog(req[2]);
    const int err = OpenLog(req[3]);
    if (out < 0 || err < 0) {
      const std::string why = std::strerror(errno);
      if (out >= 0) close(out);
      if (err >= 0) close(err);
      if (!Reply("error", "cannot open the stage's log files: " + why)) {
        return 1;
      }
      continue;
    }
    std::vector<char*> argv;
    for (size_t i = 4; i < req.size(); ++i) argv.push_back(req[i].data());
    argv.push_back(nullptr);
    std::fflush(nullptr);
    dup2(out, 1);
    dup2(err, 2);
    close(out);
    close(err);
    const int code = it->second(static_cast<int>(argv.size() - 1), argv.data());
    std::fflush(nullptr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    if (!Reply("exit", std::to_string(code))) return 1;
  }
  return 0;
}
