// common/files.h on a real temporary folder.
#include "common/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace tunefarm {
namespace {

class FindExecutableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = MakeTempDir("tf_files_test");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    const char* path = std::getenv("PATH");
    had_path_ = path != nullptr;
    if (had_path_) saved_path_ = path;
    ASSERT_TRUE(MakeDirs(dir_ + "/a").ok());
    ASSERT_TRUE(MakeDirs(dir_ + "/b").ok());
    ASSERT_TRUE(
        MakeDirs(dir_ + "/a/tf_dir").ok());  // a folder is not a program
    Write(dir_ + "/a/tf_plain", 0644);       // not executable
    Write(dir_ + "/b/tf_plain", 0755);
    Write(dir_ + "/b/tf_dir", 0755);
    Write(dir_ + "/a/tf_both", 0755);
    Write(dir_ + "/b/tf_both", 0755);
  }
  void TearDown() override {
    if (had_path_) {
      setenv("PATH", saved_path_.c_str(), 1);
    } else {
      unsetenv("PATH");
    }
    (void)RemoveAll(dir_);
  }
  static void Write(const std::string& path, mode_t mode) {
    ASSERT_TRUE(WriteFileAtomic(path, "#!/bin/sh\nexit 0\n").ok());
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
  }

  std::string dir_, saved_path_;
  bool had_path_ = false;
};

TEST_F(FindExecutableTest, FollowsPathOrderAsExecvpWould) {
  setenv("PATH", (dir_ + "/a:" + dir_ + "/b").c_str(), 1);
  EXPECT_EQ(FindExecutable("tf_both"), dir_ + "/a/tf_both");
  // Skips a non-executable file and a folder of the same name.
  EXPECT_EQ(FindExecutable("tf_plain"), dir_ + "/b/tf_plain");
  EXPECT_EQ(FindExecutable("tf_dir"), dir_ + "/b/tf_dir");
  EXPECT_EQ(FindExecutable("tf_missing"), "");
  EXPECT_EQ(FindExecutable(""), "");
}

TEST_F(FindExecutableTest, ANameWithASlashIsTakenAsIs) {
  setenv("PATH", "/nonexistent", 1);
  EXPECT_EQ(FindExecutable(dir_ + "/b/tf_plain"), dir_ + "/b/tf_plain");
  EXPECT_EQ(FindExecutable(dir_ + "/a/tf_plain"), "");  // not executable
  EXPECT_EQ(FindExecutable(dir_ + "/a/tf_dir"), "");    // a folder
}

TEST_F(FindExecutableTest, AnEmptyPathEntryIsTheCurrentFolder) {
  setenv("PATH", ("/nonexistent::" + dir_ + "/a").c_str(), 1);
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(chdir((dir_ + "/b").c_str()), 0);
  const std::string found = FindExecutable("tf_both");
  ASSERT_EQ(chdir(cwd), 0);
  EXPECT_EQ(found, "./tf_both");
}

TEST_F(FindExecutableTest, AnUnsetPathSearchesTheSystemFolders) {
  unsetenv("PATH");
  const std::string sh = FindExecutable("sh");
  EXPECT_TRUE(sh == "/usr/bin/sh" || sh == "/bin/sh") << sh;
}

}  // namespace
}  // namespace tunefarm
