// The NCCL flight recorder's worker variables (names as torch 2.x reads them), the dumps found in a rank folder,
// and the on-demand request through torch's debug pipe (a real FIFO with a reader standing in for torch).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "diagnose/flight_recorder.hpp"
#include "diagnose/rank_diagnosis.hpp"
#include "support/temp_dir.hpp"
#include "util/fd.hpp"

using namespace mgtrain;
using namespace mgtrain::diagnose;

TEST_CASE("flight recorder variables: a trace buffer, dump on timeout, dumps and pipe in the rank folder",
          "[flight_recorder]") {
  const EnvMap added = flight_recorder_environment({{"PATH", "/usr/bin"}}, "/runs/r1/attempt_0/rank_3");
  CHECK(added == EnvMap{{"TORCH_NCCL_DUMP_ON_TIMEOUT", "1"},
                        {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "/runs/r1/attempt_0/rank_3/nccl_trace_rank_"},
                        {"TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "/runs/r1/attempt_0/rank_3/nccl_trace_rank_"}});
  // a relative rank folder becomes absolute: the worker may change its directory
  const EnvMap relative = flight_recorder_environment({}, "runs/r1/attempt_0/rank_0");
  CHECK(std::filesystem::path(relative.at("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")).is_absolute());
}

TEST_CASE("flight recorder variables: a setting the user made under either name is left alone", "[flight_recorder]") {
  const EnvMap user{
      {"TORCH_FR_BUFFER_SIZE", "0"}, {"TORCH_NCCL_DUMP_ON_TIMEOUT", "0"}, {"TORCH_FR_DUMP_TEMP_FILE", "/scratch/fr_"}};
  const EnvMap added = flight_recorder_environment(user, "/runs/r1/attempt_0/rank_0");
  CHECK(added == EnvMap{{"TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "/runs/r1/attempt_0/rank_0/nccl_trace_rank_"}});
  // The buffer size is never set (torch's default of 2000 entries; the old name makes newer torch warn).
  CHECK(flight_recorder_environment({}, "/r").count("TORCH_NCCL_TRACE_BUFFER_SIZE") == 0);
  CHECK(flight_recorder_environment({}, "/r").count("TORCH_FR_BUFFER_SIZE") == 0);
}

TEST_CASE("diagnostics environment: the Python hook's variables and the flight recorder's together",
          "[flight_recorder]") {
  const EnvMap added = diagnostics_environment({{"PYTHONPATH", "/u"}, {"TORCH_NCCL_DUMP_ON_TIMEOUT", "0"}}, "/run/hook",
                                               "/run/attempt_0/rank_1");
  CHECK(added.at("PYTHONPATH") == "/run/hook:/u");
  CHECK(added.at("MGTRAIN_FAULTHANDLER_FILE") == "/run/attempt_0/rank_1/faulthandler.txt");
  CHECK(added.at("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") == "/run/attempt_0/rank_1/nccl_trace_rank_");
  CHECK(added.count("TORCH_NCCL_DUMP_ON_TIMEOUT") == 0);  // the user's
  CHECK(added.size() == 6);
}

TEST_CASE("flight recorder dumps: the files torch names, not the pipe or other logs", "[flight_recorder]") {
  testing::TempDir dir("mgtrain-fr");
  for (const char* name : {"nccl_trace_rank_3", "nccl_trace_rank_3_20261127", "stdout.log", "stacks.txt"}) {
    std::ofstream(dir.path() + "/" + name) << "x";
  }
  REQUIRE(mkfifo((dir.path() + "/nccl_trace_rank_3.pipe").c_str(), 0600) == 0);
  CHECK(flight_recorder_files(dir.path()) ==
        std::vector<std::string>{dir.path() + "/nccl_trace_rank_3", dir.path() + "/nccl_trace_rank_3_20261127"});
  CHECK(flight_recorder_files(dir.path() + "/absent").empty());
}

TEST_CASE("flight recorder dumps gathered into one folder for torch's reader", "[flight_recorder]") {
  testing::TempDir dir("mgtrain-fr");
  for (int rank : {0, 1}) {
    std::filesystem::create_directories(dir / ("rank_" + std::to_string(rank)));
    std::ofstream(dir / ("rank_" + std::to_string(rank) + "/nccl_trace_rank_" + std::to_string(rank)))
        << "trace " << rank;
  }
  std::filesystem::create_directories(dir / "rank_2");  // a rank without a dump
  const auto copies = gather_flight_recorder_files({dir / "rank_0", dir / "rank_1", dir / "rank_2"}, dir / "fr");
  CHECK(copies == std::vector<std::string>{dir / "fr/nccl_trace_rank_0", dir / "fr/nccl_trace_rank_1"});
  std::ifstream in(dir / "fr/nccl_trace_rank_1");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "trace 1");
  CHECK(gather_flight_recorder_files({dir / "rank_2"}, dir / "none").empty());
  CHECK_FALSE(std::filesystem::exists(dir / "none"));  // no folder made for nothing
}

TEST_CASE("flight recorder request: one byte to each listening pipe, none and no hang without a reader",
          "[flight_recorder]") {
  testing::TempDir dir("mgtrain-fr");
  const std::string pipe = dir.path() + "/nccl_trace_rank_1.pipe";
  REQUIRE(mkfifo(pipe.c_str(), 0600) == 0);
  CHECK(request_flight_recorder_dump(dir.path()) == 0);              // nobody reads it: ENXIO at once
  Fd reader(open(pipe.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));  // torch's monitor thread holds it like this
  REQUIRE(reader);
  CHECK(request_flight_recorder_dump(dir.path()) == 1);
  char byte = 0;
  CHECK(read(reader.get(), &byte, 1) == 1);
  CHECK(byte == '1');
  std::ofstream(dir.path() + "/nccl_trace_rank_1") << "not a pipe";  // a dump file is never written to
  CHECK(request_flight_recorder_dump(dir.path()) == 1);
}
