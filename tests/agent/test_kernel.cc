// A deliberately misbehaving operator program for the sim board tests. It
// accepts the operator contract's flags plus `--mode M` (fixed in the test's
// manifest command) and behaves per mode at the run stage:
//   crash       run: SIGSEGV
//   hang        run: forks a grandchild (pid → DIR/grandchild.pid), both sleep
//   bad_timing  run: correct output, garbage timing
//   no_profile  run: ok; profile: exits 0, writes nothing
//   record      build: appends its argv to argv.log in the cwd, exits 3
// build and reference succeed otherwise; reference is 4 floats.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace {

void WriteFloats(const std::string& path) {
  const float v[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v), sizeof(v));
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode, stage, out;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--mode") == 0) mode = argv[i + 1];
    if (std::strcmp(argv[i], "--stage") == 0) stage = argv[i + 1];
    if (std::strcmp(argv[i], "--out") == 0) out = argv[i + 1];
  }
  if (mode == "record" && stage == "build") {
    std::ofstream log("argv.log", std::ios::app);
    for (int i = 0; i < argc; ++i) log << argv[i] << "\n";
    std::fprintf(stderr, "record mode: build refuses\n");
    return 2;  // the stage contract's refusal (3 would be an internal error)
  }
  if (stage == "build") return 0;
  if (stage == "reference") {
    WriteFloats(out + "/reference.bin");
    return 0;
  }
  if (stage == "run") {
    if (mode == "crash") {
      struct rlimit no_core = {0, 0};
      setrlimit(RLIMIT_CORE, &no_core);
      std::fprintf(stderr, "about to crash\n");
      std::fflush(stderr);
      raise(SIGSEGV);
      return 1;
    }
    if (mode == "hang") {
      pid_t pid = fork();
      if (pid == 0) {
        for (;;) pause();
      }
      std::ofstream(out + "/grandchild.pid") << pid << "\n";
      for (;;) pause();
    }
    WriteFloats(out + "/output.bin");
    std::ofstream t(out + "/timing_us.txt");
    if (mode == "bad_timing") {
      t << "12.5\nnot-a-number\n";
    } else {
      for (int i = 0; i < 23; ++i) t << 10.0 + i * 0.01 << "\n";
    }
    return 0;
  }
  if (stage == "profile") return 0;
  return 2;
}
