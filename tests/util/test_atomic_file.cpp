// AtomicFileWriter: temp file beside the target, commit = rename, no commit = nothing left, errors name the path.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/directory_listing.hpp"
#include "support/temp_dir.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using Catch::Matchers::Contains;
using mgtrain::testing::names_in;
using mgtrain::testing::read_all;
namespace fs = std::filesystem;

namespace {}  // namespace

TEST_CASE("atomic file: commit renames the temp file onto the final path", "[checkpoint][atomic]") {
  const testing::TempDir temp_dir("mgtrain-atomic-commit");
  const fs::path dir = temp_dir.path();
  const std::string path = (dir / "out.bin").string();
  std::ofstream(path) << "old content";
  {
    AtomicFileWriter writer(path);
    CHECK(writer.temp_path() == (dir / (".out.bin.tmp." + std::to_string(getpid()))).string());
    CHECK(fs::exists(writer.temp_path()));
    writer.write("hello, ", 7);
    writer.write("world", 5);
    writer.pwrite_at(0, "H", 1);
    CHECK(writer.bytes_written() == 12);
    CHECK(read_all(path) == "old content");  // untouched until commit
    std::vector<std::string> stages;
    writer.set_commit_stage_callback([&](std::string_view stage) { stages.emplace_back(stage); });
    writer.commit();
    CHECK(stages == std::vector<std::string>{"before-fsync", "before-rename", "before-dir-fsync"});
  }
  CHECK(read_all(path) == "Hello, world");
  CHECK(names_in(dir) == std::vector<std::string>{"out.bin"});
  CHECK((fs::status(path).permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read));
}

TEST_CASE("atomic file: without commit the temp file is removed and the old file stays", "[checkpoint][atomic]") {
  const testing::TempDir temp_dir("mgtrain-atomic-abandon");
  const fs::path dir = temp_dir.path();
  const std::string path = (dir / "out.bin").string();
  std::ofstream(path) << "old content";
  {
    AtomicFileWriter writer(path);
    writer.write("partial", 7);
  }
  CHECK(read_all(path) == "old content");
  CHECK(names_in(dir) == std::vector<std::string>{"out.bin"});
}

TEST_CASE("atomic file: large writes and the small-file helper", "[checkpoint][atomic]") {
  const testing::TempDir temp_dir("mgtrain-atomic-large");
  const fs::path dir = temp_dir.path();
  std::string big(48 << 20, 'x');
  for (std::size_t i = 0; i < big.size(); i += 997) big[i] = static_cast<char>(i);
  {
    AtomicFileWriter writer((dir / "big").string());
    writer.write(big.data(), big.size());
    writer.commit();
  }
  CHECK(read_all(dir / "big") == big);
  write_file_atomically((dir / "latest").string(), "name\n");
  write_file_atomically((dir / "latest").string(), "other\n");
  CHECK(read_all(dir / "latest") == "other\n");
  CHECK(names_in(dir) == std::vector<std::string>{"big", "latest"});
}

TEST_CASE("atomic file: failures name the path and the errno text", "[checkpoint][atomic]") {
  const testing::TempDir temp_dir("mgtrain-atomic-errors");
  const fs::path dir = temp_dir.path();
  SECTION("missing directory") {
    const std::string path = (dir / "missing" / "out.bin").string();
    CHECK_THROWS_WITH(AtomicFileWriter(path), Contains("create " + (dir / "missing").string() + "/.out.bin.tmp.") &&
                                                  Contains("No such file or directory"));
  }
  SECTION("a file in the way of the directory") {
    std::ofstream((dir / "file").string()) << "x";
    CHECK_THROWS_WITH(AtomicFileWriter((dir / "file" / "out.bin").string()), Contains("Not a directory"));
  }
  SECTION("a directory as the target") {
    CHECK_THROWS_WITH(AtomicFileWriter(dir.string() + "/"), Contains("not a file path"));
    fs::create_directory(dir / "sub");
    AtomicFileWriter writer((dir / "sub").string());
    writer.write("x", 1);
    CHECK_THROWS_WITH(writer.commit(),
                      Contains("rename ") && Contains((dir / "sub").string()) && Contains("Is a directory"));
  }
  SECTION("RLIMIT_FSIZE gives EFBIG (File too large) instead of killing the process") {
    ignore_file_size_signal();
    struct rlimit saved {};
    REQUIRE(getrlimit(RLIMIT_FSIZE, &saved) == 0);
    struct rlimit limited = saved;
    limited.rlim_cur = 64 * 1024;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &limited) == 0);
    std::string message;
    int error_number = 0;
    try {
      AtomicFileWriter writer((dir / "big").string());
      const std::vector<char> bytes(1 << 20, 'x');
      writer.write(bytes.data(), bytes.size());
      writer.commit();
    } catch (const SystemError& e) {
      message = e.what();
      error_number = e.error_number();
    }
    REQUIRE(setrlimit(RLIMIT_FSIZE, &saved) == 0);
    CHECK(error_number == EFBIG);
    CHECK_THAT(message, Contains("write " + (dir / ".big.tmp.").string()) && Contains("File too large"));
    CHECK(names_in(dir).empty());
  }
}
