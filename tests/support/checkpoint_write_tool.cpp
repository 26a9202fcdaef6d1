// checkpoint_write_tool DIR STEP MEGABYTES: writes the test checkpoint of STEP (tests/support/checkpoint_test_data.hpp,
// about MEGABYTES MiB) into DIR through the core API as the trainer will (ignore SIGXFSZ, mkdir -p, write, update
// `latest`, prune to keep_last 2) and prints how long the write took. Used by the kill/disk-error tests
// (tests/checkpoint_jobs/test_checkpoint_processes.cpp) and by scripts/bench/checkpoint_write.sh.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "checkpoint/checkpoint_directory.hpp"
#include "checkpoint/checkpoint_file.hpp"
#include "support/checkpoint_test_data.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: checkpoint_write_tool DIR STEP MEGABYTES\n");
    return mgtrain::exit_code::kUsage;
  }
  try {
    mgtrain::ignore_file_size_signal();
    const std::string dir = argv[1];
    char* end = nullptr;
    const long long step = std::strtoll(argv[2], &end, 10);
    if (*end != '\0' || step < 0) throw mgtrain::UsageError(std::string("STEP: not a step: ") + argv[2]);
    const double megabytes = std::strtod(argv[3], &end);
    if (*end != '\0' || !(megabytes >= 0)) throw mgtrain::UsageError(std::string("MEGABYTES: not a size: ") + argv[3]);

    mgtrain::create_checkpoint_directory(dir);
    const mgtrain::testing::TestCheckpoint checkpoint = mgtrain::testing::make_test_checkpoint(step, megabytes);
    const std::string name = mgtrain::checkpoint_file_name(step);
    const std::string path = dir + "/" + name;

    const auto start = std::chrono::steady_clock::now();
    mgtrain::write_checkpoint_file(path, checkpoint.metadata, checkpoint.records);
    mgtrain::update_latest_pointer(dir, name);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    mgtrain::prune_checkpoints(dir, 2);
    const mgtrain::CheckpointFile written = mgtrain::read_checkpoint_file(path);
    std::printf("checkpoint_write_tool: wrote %s: %llu bytes in %.6f s, %.1f MB/s\n", path.c_str(),
                static_cast<unsigned long long>(written.file_size()), seconds,
                static_cast<double>(written.file_size()) / 1e6 / seconds);
    return 0;
  } catch (const mgtrain::Error& e) {
    std::fprintf(stderr, "checkpoint_write_tool: error: %s\n", e.what());
    return e.exit_code();
  }
}
