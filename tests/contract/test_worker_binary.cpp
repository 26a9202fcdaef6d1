// Where the launcher finds mgtrain-worker (contract/worker_binary.hpp): the trainer wheel's worker in the same Python
// environment as the launcher's bin/ (a venv, `pip install --user`, /usr/local's dist-packages), one per Python
// version found, and an explicit path that is not executable refused with its name.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "contract/worker_binary.hpp"
#include "support/temp_dir.hpp"
#include "util/error.hpp"

using namespace mgtrain;
using mgtrain::testing::TempDir;
namespace fs = std::filesystem;

namespace {

std::string put_worker(const fs::path& prefix, const std::string& site, mode_t mode = 0755) {
  const fs::path folder = prefix / "lib" / site / "mgtrain_trainer/bin";
  fs::create_directories(folder);
  const std::string path = (folder / "mgtrain-worker").string();
  std::ofstream(path) << "#!/bin/sh\n";
  chmod(path.c_str(), mode);
  return path;
}

}  // namespace

TEST_CASE("the trainer wheel's worker is found from the launcher's bin/", "[worker_binary]") {
  TempDir prefix("mgtrain-wheel-prefix");
  fs::create_directories(prefix.path() + "/bin");
  const std::string bin = prefix.path() + "/bin";
  CHECK(wheel_workers(bin).empty());

  const std::string venv = put_worker(prefix.path(), "python3.11/site-packages");
  REQUIRE(wheel_workers(bin) == std::vector<std::string>{bin + "/../lib/python3.11/site-packages/mgtrain_trainer/bin/"
                                                               "mgtrain-worker"});
  CHECK(fs::equivalent(wheel_workers(bin).front(), venv));

  put_worker(prefix.path(), "python3.12/dist-packages");        // Debian's /usr/local layout, another Python
  put_worker(prefix.path(), "python3.13/site-packages", 0644);  // not executable: not a candidate
  put_worker(prefix.path(), "python2.7/site-packages");         // not Python 3
  const std::vector<std::string> both = wheel_workers(bin);
  REQUIRE(both.size() == 2);
  CHECK(both[0].find("python3.11/site-packages") != std::string::npos);
  CHECK(both[1].find("python3.12/dist-packages") != std::string::npos);
}

TEST_CASE("a configured worker that is not executable is refused with its path", "[worker_binary]") {
  TempDir dir("mgtrain-worker-path");
  const std::string missing = dir.path() + "/no-such-worker";
  try {
    find_worker_binary(missing);
    FAIL("no error");
  } catch (const UsageError& error) {
    CHECK_THAT(error.what(), Catch::Contains(missing) && Catch::Contains("--worker"));
  }
  const std::string plain = dir.path() + "/plain";
  std::ofstream(plain) << "x";
  chmod(plain.c_str(), 0755);
  CHECK(find_worker_binary(plain) == plain);
}
