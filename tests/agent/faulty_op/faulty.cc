// The faulty test operator (see operator.yaml): y = x, computed `scale`
// times over (a slower variant with the same answer: a reference never
// depends on the variant's parameters), misbehaving
// per TF_PARAM_MODE.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "harness.h"

#define ok 1
#define segv 2
#define hang 3
#define wrong 4
#define broken 5
#define abort 6
#define garbage 7
#define exit 8
constexpr int kMode = TF_PARAM_MODE;
#undef ok
#undef segv
#undef hang
#undef wrong
#undef broken
#undef abort
#undef garbage
#undef exit

static_assert(kMode != 5, "faulty operator: mode=broken does not compile");

namespace {
int64_t g_n = 0;
std::vector<float> g_x, g_y;
}  // namespace

int main(int argc, char** argv) {
  tf_harness::Operator op;
  op.name = "faulty";
  op.check = [](const tf_harness::Workload& w, std::string* error) {
    g_n = w.Dim("n");
    if (g_n < 1 || g_n > (1 << 24)) {
      *error = "n out of range";
      return false;
    }
    return true;
  };
  op.reference = [](const tf_harness::Workload&, uint64_t seed,
                    std::vector<float>* ref, std::string*) {
    ref->resize(static_cast<size_t>(g_n));
    tf_harness::FillInputs(seed, 1, ref->data(), ref->size());
    return true;
  };
  op.prepare = [](const tf_harness::Workload&, uint64_t seed, std::string*) {
    if (const char* log = std::getenv("TF_FAULTY_ORDER_LOG")) {
      char cwd[4096];
      if (getcwd(cwd, sizeof(cwd)) != nullptr) {
        if (std::FILE* f = std::fopen(log, "a")) {
          std::fprintf(f, "%s\n", cwd);
          std::fclose(f);
        }
      }
    }
    g_x.resize(static_cast<size_t>(g_n));
    tf_harness::FillInputs(seed, 1, g_x.data(), g_x.size());
    g_y.assign(g_x.size(), 0.0f);
    return true;
  };
  op.run = [] {
    if (kMode == 2) std::raise(SIGSEGV);
    if (kMode == 3) {
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    for (int rep = 0; rep < TF_PARAM_SCALE; ++rep) {
      for (size_t i = 0; i < g_x.size(); ++i) g_y[i] = g_x[i];
    }
    if (kMode == 4) g_y[g_y.size() / 2] += 1.0f;
    if (kMode == 6) std::abort();
    if (kMode == 7) {
      const unsigned char junk[] = {0xff, 0x00, 0x7f, 0xc0, 0x80, 0x01};
      (void)!fwrite(junk, 1, sizeof(junk), stdout);
      for (size_t i = 0; i < g_y.size(); ++i) {
        const uint32_t bits = 0x7f800000u | static_cast<uint32_t>(i * 2654435761u);
        std::memcpy(&g_y[i], &bits, sizeof(bits));
      }
    }
    if (kMode == 8) std::exit(7);
  };
  op.output = [] { return &g_y; };
  return tf_harness::Main(argc, argv, op);
}
