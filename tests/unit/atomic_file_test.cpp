// ftcore/atomic_file.h: a file or folder is the old one or the complete new
// one, a failed write leaves no .tmp behind, and errors name the path and
// the system's reason.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "ftcore/atomic_file.h"
#include "test_support.h"

namespace fs = std::filesystem;
using ftcore::testing::TempDir;

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST(AtomicFile, WritesTheFileAndLeavesNoTemporary) {
  TempDir dir;
  ftcore::write_file_atomically(dir / "a.json", "{}\n");
  ftcore::write_file_atomically(dir / "a.json", "{\"again\": 1}\n");
  EXPECT_EQ(read_text(dir / "a.json"), "{\"again\": 1}\n");
  EXPECT_FALSE(fs::exists(dir / "a.json.tmp"));
}

TEST(AtomicFile, AnUncommittedFileLeavesTheOldOneAndNoTemporary) {
  TempDir dir;
  ftcore::write_file_atomically(dir / "a.txt", "old");
  {
    ftcore::AtomicFile file(dir / "a.txt");
    file.write("new, but never committed");
  }
  EXPECT_EQ(read_text(dir / "a.txt"), "old");
  EXPECT_FALSE(fs::exists(dir / "a.txt.tmp"));
}

TEST(AtomicFile, AnErrorNamesThePathAndTheReason) {
  TempDir dir;
  const fs::path path = dir / "missing-folder" / "a.txt";
  try {
    ftcore::write_file_atomically(path, "x");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path.string() + ".tmp"), std::string::npos) << message;
    EXPECT_NE(message.find("No such file or directory"), std::string::npos) << message;
  }
}

// A write that runs out of room (here RLIMIT_FSIZE, as a full disk would)
// reports the system's reason and removes its partial .tmp.
TEST(AtomicFile, AFailedWriteRemovesItsPartialTemporary) {
  TempDir dir;
  const fs::path path = dir / "big.bin";
  const std::string contents(1 << 20, 'x');  // allocated before the fork
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // the write then fails with EFBIG instead of killing the process
    rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      ftcore::write_file_atomically(path, contents);
    } catch (const std::runtime_error& e) {
      const std::string message = e.what();
      const bool named = message.find(path.string() + ".tmp") != std::string::npos &&
                         message.find("File too large") != std::string::npos;
      ::_exit(named ? 0 : 2);
    }
    ::_exit(3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: the message lacks the path or the reason; 3: no error";
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(dir / "big.bin.tmp"));
}

TEST(AtomicFolder, SwapsANewFolderIntoPlace) {
  TempDir dir;
  const fs::path out = dir / "model";
  ftcore::write_folder_atomically(out, [](const fs::path& tmp) {
    EXPECT_EQ(tmp.filename(), "model.tmp");
    ftcore::write_file_atomically(tmp / "config.json", "1");
  });
  ftcore::write_folder_atomically(out, [](const fs::path& tmp) {
    ftcore::write_file_atomically(tmp / "config.json", "2");
    fs::create_directories(tmp / "sub");
    std::ofstream(tmp / "sub" / "copied.txt") << "copied, not written atomically";
  });
  EXPECT_EQ(read_text(out / "config.json"), "2");
  EXPECT_TRUE(fs::exists(out / "sub" / "copied.txt"));
  EXPECT_FALSE(fs::exists(dir / "model.tmp"));
  EXPECT_FALSE(fs::exists(dir / "model.old"));
}

TEST(AtomicFolder, ATrailingSlashNamesTheSameFolder) {
  TempDir dir;
  ftcore::write_folder_atomically(dir.path() / "model" / "", [](const fs::path& tmp) {
    EXPECT_EQ(tmp.filename(), "model.tmp");
    ftcore::write_file_atomically(tmp / "config.json", "1");
  });
  EXPECT_EQ(read_text(dir / "model" / "config.json"), "1");
  EXPECT_FALSE(fs::exists(dir / "model.tmp"));
}

TEST(AtomicFolder, AFailedFillKeepsTheOldFolderAndRemovesTheTemporary) {
  TempDir dir;
  const fs::path out = dir / "model";
  ftcore::write_folder_atomically(out, [](const fs::path& tmp) { ftcore::write_file_atomically(tmp / "a", "old"); });
  EXPECT_THROW(ftcore::write_folder_atomically(out,
                                               [](const fs::path& tmp) {
                                                 ftcore::write_file_atomically(tmp / "a", "new");
                                                 throw std::runtime_error("out of memory, say");
                                               }),
               std::runtime_error);
  EXPECT_EQ(read_text(out / "a"), "old");
  EXPECT_FALSE(fs::exists(dir / "model.tmp"));
}
