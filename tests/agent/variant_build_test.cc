// BuildVariant against the real system compiler: cache miss then hit, failed
// builds cached with the compiler's message, hostile parameters refused,
// parameters never on the compiler's command line, one build for concurrent
// requests of one key, dependency changes invalidating the key.
#include "agent/variant_build.h"

#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/process_runner.h"
#include "common/files.h"
#include "gtest/gtest.h"

namespace tunefarm {
namespace {

class VariantBuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = MakeTempDir("tf_variant_build_test");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    ASSERT_TRUE(MakeDirs(dir_ + "/src").ok());
    source_ = dir_ + "/src/prog.cc";
    ASSERT_TRUE(WriteFileAtomic(
                    source_,
                    "#include <cstdio>\n"
                    "#include \"local.h\"\n"
                    "#if TF_PARAM_BROKEN\n"
                    "this_is_not_cpp_tf_marker;\n"
                    "#endif\n"
                    "int main() { std::printf(\"%d %d\\n\", TF_PARAM_WIDTH, "
                    "LOCAL_VALUE); return 0; }\n")
                    .ok());
    ASSERT_TRUE(
        WriteFileAtomic(dir_ + "/src/local.h", "#define LOCAL_VALUE 7\n").ok());
  }
  void TearDown() override { (void)RemoveAll(dir_); }

  BuildRequest Request(int64_t width, bool broken = false) {
    BuildRequest r;
    r.compiler = "c++";
    r.flags = {"-O0"};
    r.sources = {source_};
    r.params["width"] = IntParam(width);
    r.params["broken"] = BoolParam(broken);
    r.cache_dir = dir_ + "/cache";
    r.timeout = absl::Seconds(60);
    return r;
  }

  std::string RunBinary(const std::string& binary) {
    ProcessSpec spec;
    spec.argv = {binary};
    spec.stdout_path = dir_ + "/run.out";
    spec.timeout = absl::Seconds(10);
    absl::StatusOr<ProcessResult> r = RunProcess(spec);
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exit_code, 0);
    absl::StatusOr<std::string> out = ReadFile(spec.stdout_path);
    return out.ok() ? *out : "";
  }

  std::string dir_, source_;
  std::atomic<bool> cancel_{false};
};

TEST_F(VariantBuildTest, MissThenHitAndParamsAreConstants) {
  absl::StatusOr<BuildResult> first = BuildVariant(Request(41), cancel_);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->ok) << first->log_tail;
  EXPECT_FALSE(first->cache_hit);
  EXPECT_EQ(RunBinary(first->binary), "41 7\n");

  absl::StatusOr<BuildResult> second = BuildVariant(Request(41), cancel_);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(second->ok);
  EXPECT_TRUE(second->cache_hit);
  EXPECT_EQ(second->key, first->key);
  EXPECT_EQ(second->binary, first->binary);

  absl::StatusOr<BuildResult> other = BuildVariant(Request(42), cancel_);
  ASSERT_TRUE(other.ok() && other->ok);
  EXPECT_FALSE(other->cache_hit);
  EXPECT_NE(other->key, first->key);
  EXPECT_EQ(RunBinary(other->binary), "42 7\n");
}

TEST_F(VariantBuildTest, HeaderBesideTheSourceIsPartOfTheKey) {
  absl::StatusOr<BuildResult> first = BuildVariant(Request(5), cancel_);
  ASSERT_TRUE(first.ok() && first->ok);
  ASSERT_TRUE(
      WriteFileAtomic(dir_ + "/src/local.h", "#define LOCAL_VALUE 8\n").ok());
  absl::StatusOr<BuildResult> second = BuildVariant(Request(5), cancel_);
  ASSERT_TRUE(second.ok() && second->ok);
  EXPECT_FALSE(second->cache_hit);
  EXPECT_NE(second->key, first->key);
  EXPECT_EQ(RunBinary(second->binary), "5 8\n");
}

TEST_F(VariantBuildTest, FailedBuildIsCachedWithTheCompilerMessage) {
  absl::StatusOr<BuildResult> first = BuildVariant(Request(1, true), cancel_);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->ok);
  EXPECT_FALSE(first->cache_hit);
  EXPECT_TRUE(first->binary.empty());
  EXPECT_TRUE(absl::StrContains(first->log_tail, "this_is_not_cpp_tf_marker"))
      << first->log_tail;

  absl::StatusOr<BuildResult> again = BuildVariant(Request(1, true), cancel_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->ok);
  EXPECT_TRUE(again->cache_hit);
  EXPECT_TRUE(absl::StrContains(again->log_tail, "this_is_not_cpp_tf_marker"));
  EXPECT_TRUE(ReadFile(absl::StrCat(dir_, "/cache/", again->key, "/result"))
                  .value_or("") == "failed\n");
}

TEST_F(VariantBuildTest, HostileStringParameterIsRefusedByName) {
  for (std::string hostile :
       {std::string("x; rm -rf /"), std::string("a\n#include </etc/passwd>"),
        std::string("\"quoted\""), std::string("")}) {
    BuildRequest r = Request(1);
    r.params["layout"] = StringParam(hostile);
    absl::StatusOr<BuildResult> b = BuildVariant(r, cancel_);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_FALSE(b->ok);
    EXPECT_TRUE(absl::StrContains(b->log_tail, "parameter layout"))
        << b->log_tail;
  }
  BuildRequest r = Request(1);
  r.params["layout"] = StringParam("row_major");
  absl::StatusOr<BuildResult> b = BuildVariant(r, cancel_);
  ASSERT_TRUE(b.ok() && b->ok)
      << (b.ok() ? b->log_tail : b.status().ToString());
  absl::StatusOr<std::string> header =
      ReadFile(absl::StrCat(dir_, "/cache/", b->key, "/tf_params.h"));
  ASSERT_TRUE(header.ok());
  EXPECT_TRUE(
      absl::StrContains(*header, "#define TF_PARAM_LAYOUT row_major\n"));
}

TEST(ParamsHeaderTest, TypesAndNames) {
  ParamMap p;
  p["a_int"] = IntParam(-3);
  p["b_double"] = DoubleParam(2);
  p["c_bool"] = BoolParam(true);
  absl::StatusOr<std::string> h = ParamsHeader(p);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(absl::StrContains(*h, "#define TF_PARAM_A_INT (-3LL)\n")) << *h;
  EXPECT_TRUE(absl::StrContains(*h, "#define TF_PARAM_B_DOUBLE 2.0\n")) << *h;
  EXPECT_TRUE(absl::StrContains(*h, "#define TF_PARAM_C_BOOL 1\n")) << *h;
  ParamMap bad;
  bad["x y"] = IntParam(1);
  EXPECT_FALSE(ParamsHeader(bad).ok());
}

TEST_F(VariantBuildTest, ParametersNeverReachTheCompilerArgv) {
  // A compiler wrapper that records its argv, then compiles for real.
  const std::string wrapper = dir_ + "/cc_wrapper.sh";
  const std::string argv_log = dir_ + "/argv.log";
  ASSERT_TRUE(WriteFileAtomic(
                  wrapper, absl::StrCat("#!/bin/sh\n"
                                        "if [ \"$1\" = --version ]; then echo "
                                        "\"wrapper-cc 1.0\"; exit 0; fi\n"
                                        "for a in \"$@\"; do echo \"$a\" >> '",
                                        argv_log, "'; done\nexec c++ \"$@\"\n"))
                  .ok());
  ASSERT_EQ(chmod(wrapper.c_str(), 0755), 0);
  BuildRequest r = Request(918273);
  r.compiler = wrapper;
  absl::StatusOr<BuildResult> b = BuildVariant(r, cancel_);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(b->ok) << b->log_tail;
  absl::StatusOr<std::string> argv = ReadFile(argv_log);
  ASSERT_TRUE(argv.ok());
  EXPECT_FALSE(absl::StrContains(*argv, "918273")) << *argv;
  EXPECT_FALSE(absl::StrContains(*argv, "TF_PARAM")) << *argv;
  EXPECT_TRUE(absl::StrContains(*argv, "-include")) << *argv;
  EXPECT_EQ(RunBinary(b->binary), "918273 7\n");
}

TEST_F(VariantBuildTest, ConcurrentRequestsOfOneKeyBuildOnce) {
  constexpr int kThreads = 4;
  std::vector<absl::StatusOr<BuildResult>> results(kThreads,
                                                   absl::UnknownError("unset"));
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back(
        [&, i] { results[i] = BuildVariant(Request(77), cancel_); });
  }
  for (std::thread& t : threads) t.join();
  int misses = 0;
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->ok);
    misses += r->cache_hit ? 0 : 1;
  }
  EXPECT_EQ(misses, 1);
}

// A fake compiler: prints `version` for --version, otherwise compiles with
// the real one. Written with WriteFileAtomic, as a package upgrade would.
void WriteFakeCompiler(const std::string& path, const std::string& version) {
  ASSERT_TRUE(
      WriteFileAtomic(path, absl::StrCat("#!/bin/sh\n"
                                         "if [ \"$1\" = --version ]; then\n"
                                         "cat <<'EOF'\n",
                                         version,
                                         "EOF\n"
                                         "exit 0\n"
                                         "fi\n"
                                         "exec c++ \"$@\"\n"))
          .ok());
  ASSERT_EQ(chmod(path.c_str(), 0755), 0);
}

TEST_F(VariantBuildTest, WholeVersionOutputIsPartOfTheKey) {
  const std::string fake = dir_ + "/fakecc";
  const std::string v1 =
      "nvcc: NVIDIA (R) Cuda compiler driver\n"
      "Built on Tue_Feb_27_16:19:38_PST_2024\n"
      "Build cuda_12.4.r12.4/compiler.33961263_0\n";
  std::string v2 = v1;
  v2.replace(v2.find("12.4.r12.4"), 10, "12.6.r12.6");
  BuildRequest r = Request(3);
  r.compiler = fake;

  WriteFakeCompiler(fake, v1);
  absl::StatusOr<BuildResult> a = BuildVariant(r, cancel_);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->ok) << a->log_tail;
  EXPECT_EQ(RunBinary(a->binary), "3 7\n");

  // Same first line, a later line differs: another compiler, another key.
  WriteFakeCompiler(fake, v2);
  absl::StatusOr<BuildResult> b = BuildVariant(r, cancel_);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(b->cache_hit);
  EXPECT_NE(b->key, a->key);

  // Rewritten with the first output again: the key is the output's, not the
  // file's, so the first entry is hit.
  WriteFakeCompiler(fake, v1);
  absl::StatusOr<BuildResult> c = BuildVariant(r, cancel_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->cache_hit);
  EXPECT_EQ(c->key, a->key);
}

TEST_F(VariantBuildTest, SameNamedCompilersInDifferentPlacesHaveDifferentKeys) {
  // `fakecc` by name, the same script in two folders: which one PATH finds
  // first is part of the key.
  const std::string version = "fakecc 1.0\n";
  ASSERT_TRUE(MakeDirs(dir_ + "/a").ok() && MakeDirs(dir_ + "/b").ok());
  WriteFakeCompiler(dir_ + "/a/fakecc", version);
  WriteFakeCompiler(dir_ + "/b/fakecc", version);
  const char* old_path = std::getenv("PATH");
  const std::string saved = old_path != nullptr ? old_path : "/usr/bin:/bin";
  BuildRequest r = Request(4);
  r.compiler = "fakecc";
  setenv("PATH", (dir_ + "/a:" + saved).c_str(), 1);
  absl::StatusOr<BuildResult> a = BuildVariant(r, cancel_);
  setenv("PATH", (dir_ + "/b:" + saved).c_str(), 1);
  absl::StatusOr<BuildResult> b = BuildVariant(r, cancel_);
  setenv("PATH", saved.c_str(), 1);
  ASSERT_TRUE(a.ok() && a->ok)
      << (a.ok() ? a->log_tail : a.status().ToString());
  ASSERT_TRUE(b.ok() && b->ok);
  EXPECT_FALSE(b->cache_hit);
  EXPECT_NE(a->key, b->key);
}

TEST_F(VariantBuildTest, MissingCompilerIsTheBoardsFault) {
  BuildRequest r = Request(1);
  r.compiler = dir_ + "/no-such-compiler";
  absl::StatusOr<BuildResult> b = BuildVariant(r, cancel_);
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(absl::StrContains(b.status().message(), "no-such-compiler"))
      << b.status();
}

}  // namespace
}  // namespace tunefarm
