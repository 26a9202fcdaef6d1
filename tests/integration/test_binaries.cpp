// The real binaries as subprocesses: `mgtrain config ...`, `mgtrain env`, exit codes, the launcher's
// freedom from LibTorch, and `cmake --install` producing a usable prefix.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "process/run_capture.hpp"
#include "support/temp_dir.hpp"

using namespace mgtrain;
namespace fs = std::filesystem;

namespace {

const std::string kMgtrain = std::string(MGTRAIN_BIN_DIR) + "/mgtrain";
const std::string kSource = MGTRAIN_SOURCE_DIR;

CapturedRun run_mgtrain(std::vector<std::string> args, CaptureOptions options = {}) {
  args.insert(args.begin(), kMgtrain);
  return run_and_capture(args, options);
}

// A fresh empty directory under the build tree's temp area.

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

}  // namespace

TEST_CASE("config show prints the merged config with overrides", "[binary][config]") {
  auto run = run_mgtrain(
      {"config", "show", kSource + "/configs/fashion_mnist_cnn.yaml", "--set", "train.batch_size=32", "optim.lr=0.2"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("  batch_size: 32\n") != std::string::npos);
  CHECK(run.out.find("  lr: 0.2\n") != std::string::npos);
  CHECK(run.out.find("  type: cnn\n") != std::string::npos);
  CHECK(run.err.empty());
}

TEST_CASE("a misspelled key exits 2 naming line, column and the suggestion", "[binary][config]") {
  const testing::TempDir temp_dir("mgtrain-test-typo");
  fs::path dir = temp_dir.path();
  write_file(dir / "bad.yaml", "train:\n  epochs: 2\n\n  batch_sise: 32\n");
  auto run = run_mgtrain({"config", "show", (dir / "bad.yaml").string()});
  CHECK(run.exit_code == 2);
  CHECK(run.out.empty());
  CHECK(run.err == "mgtrain: error: " + (dir / "bad.yaml").string() +
                       ":4:3: train.batch_sise: unknown key (did you mean train.batch_size?)\n");
}

TEST_CASE("environment variables and flags reach the config through the binary", "[binary][config]") {
  CaptureOptions options;
  options.set_env = {{"MGTRAIN_TRAIN_EPOCHS", "7"}};
  auto run = run_mgtrain({"config", "show", "--show-origin"}, options);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("epochs: 7  # environment MGTRAIN_TRAIN_EPOCHS") != std::string::npos);
}

TEST_CASE("config validate reports OK or the first problem", "[binary][config]") {
  auto ok = run_mgtrain({"config", "validate", kSource + "/configs/fashion_mnist_mlp.yaml"});
  CHECK(ok.exit_code == 0);
  CHECK(ok.out.find(": OK") != std::string::npos);
  auto missing = run_mgtrain({"config", "validate", "does-not-exist.yaml"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err == "mgtrain: error: does-not-exist.yaml: cannot read the config file: No such file or directory\n");
}

TEST_CASE("every shipped config validates", "[binary][config]") {
  int count = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kSource + "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    ++count;
    auto run = run_mgtrain({"config", "validate", entry.path().string()});
    INFO(entry.path().string() << ": " << run.err);
    CHECK(run.exit_code == 0);
  }
  CHECK(count >= 2);
}

TEST_CASE("config init writes a loadable file and never overwrites without --force", "[binary][config]") {
  const testing::TempDir temp_dir("mgtrain-test-init");
  fs::path dir = temp_dir.path();
  const std::string path = (dir / "new.yaml").string();
  auto run = run_mgtrain({"config", "init", path, "--nproc", "3", "--model", "mlp", "--yes"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  auto show = run_mgtrain({"config", "show", path});
  REQUIRE(show.exit_code == 0);
  CHECK(show.out.find("  nproc: 3\n") != std::string::npos);
  CHECK(show.out.find("  type: mlp\n") != std::string::npos);
  auto again = run_mgtrain({"config", "init", path, "--yes"});
  CHECK(again.exit_code == 2);
  CHECK(again.err.find("already exists") != std::string::npos);
  CHECK(run_mgtrain({"config", "init", path, "--yes", "--force"}).exit_code == 0);
  auto bad = run_mgtrain({"config", "init", (dir / "other.yaml").string(), "--nproc", "zero", "--yes"});
  CHECK(bad.exit_code == 2);
  CHECK_FALSE(fs::exists(dir / "other.yaml"));
}

TEST_CASE("usage errors exit 2 and --help/--version exit 0", "[binary][cli]") {
  CHECK(run_mgtrain({"launch", "--nprc", "2", "x.yaml"}).exit_code == 2);
  CHECK(run_mgtrain({}).exit_code == 2);
  auto help = run_mgtrain({"--help"});
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("Examples:") != std::string::npos);
  auto version = run_mgtrain({"--version"});
  CHECK(version.exit_code == 0);
  CHECK(version.out.rfind("mgtrain ", 0) == 0);
}

// The worker is not built with -DMGTRAIN_BUILD_WORKER=OFF; tests that need it say so and stop.
bool worker_built() {
  if (fs::exists(std::string(MGTRAIN_BIN_DIR) + "/mgtrain-worker")) return true;
  WARN("skipped: mgtrain-worker is not built (configured with -DMGTRAIN_BUILD_WORKER=OFF)");
  return false;
}

TEST_CASE("mgtrain env reports torch facts from the worker", "[binary][env]") {
  if (!worker_built()) return;
  auto run = run_mgtrain({"env", "--json"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
#ifdef MGTRAIN_TEST_TORCH_VERSION
  CHECK(run.out.find("\"libtorch_version\": \"" MGTRAIN_TEST_TORCH_VERSION) != std::string::npos);
  // The LibTorch 2.x flavour (PyPI's CUDA wheel) is built with CUDA, Debian's 1.13 is not.
  CHECK(run.out.find("\"built_with_cuda\": " MGTRAIN_TEST_BUILT_WITH_CUDA) != std::string::npos);
  // A CUDA LibTorch without a GPU: train.device auto is the CPU, which env notes (the worker says nothing per run).
  CHECK((run.out.find("train.device auto trains on the CPU with gloo here") != std::string::npos) ==
        (std::string(MGTRAIN_TEST_BUILT_WITH_CUDA) == "true"));
#endif
  CHECK(run.out.find("\"cuda_available\": false") != std::string::npos);
  CHECK(run.out.find("\"hostname\"") != std::string::npos);
  CHECK(run.out.find("\"cpu_cores_usable\"") != std::string::npos);
  CHECK(run.out.find("127.0.0.1") != std::string::npos);
  // Valid JSON, checked by a real parser where Python is present.
  if (access("/usr/bin/python3", X_OK) == 0) {
    const testing::TempDir temp_dir("mgtrain-test-env-json");
    fs::path dir = temp_dir.path();
    write_file(dir / "env.json", run.out);
    auto parsed = run_and_capture(
        {"/usr/bin/python3", "-c", "import json,sys; json.load(open(sys.argv[1]))", (dir / "env.json").string()});
    CHECK(parsed.exit_code == 0);
  }
}

TEST_CASE("the launcher does not link LibTorch, the worker does", "[binary][architecture]") {
  if (!worker_built()) return;
  auto launcher = run_and_capture({"ldd", kMgtrain});
  REQUIRE(launcher.exit_code == 0);
  CHECK(launcher.out.find("libtorch") == std::string::npos);
  CHECK(launcher.out.find("libc10") == std::string::npos);
  auto worker = run_and_capture({"ldd", std::string(MGTRAIN_BIN_DIR) + "/mgtrain-worker"});
  REQUIRE(worker.exit_code == 0);
  CHECK(worker.out.find("libtorch") != std::string::npos);
}

// The heavy or optional libraries stay out of the launcher: cairo lives in mgtrain-plot, cpp-httplib and OpenSSL/brotli
// in the dlopen'ed status module, and xxHash and nlohmann::json are used header-only (ARCHITECTURE.md).
TEST_CASE("the launcher links no cairo, httplib, OpenSSL, brotli, xxhash or nlohmann library",
          "[binary][architecture]") {
  auto launcher = run_and_capture({"ldd", kMgtrain});
  INFO(launcher.out << launcher.err);
  REQUIRE(launcher.exit_code == 0);
  for (const char* library :
       {"libtorch", "libc10", "libcairo", "httplib", "libssl", "libcrypto", "libbrotli", "libxxhash", "libnlohmann"}) {
    INFO(library);
    CHECK(launcher.out.find(library) == std::string::npos);
  }
}

TEST_CASE("cmake --install produces a usable prefix", "[binary][install]") {
  if (!worker_built()) return;
  const testing::TempDir temp_prefix("mgtrain-test-prefix");
  fs::path prefix = temp_prefix.path();
  auto install = run_and_capture(
      {"cmake", "--install", fs::path(MGTRAIN_BIN_DIR).parent_path().string(), "--prefix", prefix.string()});
  INFO(install.out << install.err);
  REQUIRE(install.exit_code == 0);
  CHECK(fs::exists(prefix / "bin/mgtrain"));
  CHECK(fs::exists(prefix / "bin/mgtrain-worker"));
  CHECK(fs::exists(prefix / "share/mgtrain/configs/fashion_mnist_cnn.yaml"));
  // The torchrun personality's link, inside the prefix given at install time (it was once made where the build was
  // configured to install, /usr/local/bin, whatever --prefix said).
  CHECK(fs::is_symlink(prefix / "bin/torchrun"));
  CHECK(fs::read_symlink(prefix / "bin/torchrun") == "mgtrain");
  CHECK(install.out.find((prefix / "bin/torchrun").string()) != std::string::npos);
  auto as_torchrun = run_and_capture({(prefix / "bin/torchrun").string(), "--no-python", "--nproc-per-node", "1",
                                      "--log-dir", (prefix / "runs").string(), "/bin/sh", "-c", "exit 3"});
  CHECK(as_torchrun.exit_code == 1);                                       // torchrun's code for a failed worker
  CHECK(fs::exists(prefix / "share/mgtrain/python/mgtrain_progress.py"));  // docs/diagnosis.md
  // The installed launcher finds the installed worker next to itself.
  auto env = run_and_capture({(prefix / "bin/mgtrain").string(), "env"});
  CHECK(env.out.find((prefix / "bin/mgtrain-worker").string()) != std::string::npos);
}

TEST_CASE("launching the same run id again keeps the earlier launch's logs", "[binary][launch]") {
  const testing::TempDir temp_dir("mgtrain-test-relaunch");
  fs::path dir = temp_dir.path();
  for (const char* word : {"first", "second"}) {
    auto run = run_mgtrain({"launch", "--nproc", "1", "--log-dir", dir.string(), "--run-id", "same", "--", "sh", "-c",
                            std::string("echo ") + word});
    REQUIRE(run.exit_code == 0);
  }
  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  CHECK(read(dir / "same/attempt_0/rank_0/stdout.log") == "second\n");
  CHECK(read(dir / "same/earlier/1/attempt_0/rank_0/stdout.log") == "first\n");
  CHECK(fs::exists(dir / "same/earlier/1/config.yaml"));
}
