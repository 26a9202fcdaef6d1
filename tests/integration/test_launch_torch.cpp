// Drop-in compatibility with a real torch program (Debian's python3-torch, gloo backend):
// init_process_group + all_reduce under the launcher, and torch's @record error file in the report.
#include <catch2/catch.hpp>

#include <yaml-cpp/yaml.h>
#include <cstdlib>
#include <fstream>

#include "launch_fixture.hpp"

using namespace mgtrain;
using namespace mgtrain::testing;

namespace {

constexpr const char* kPython = "/usr/bin/python3";

bool torch_available() {
  static const bool available = std::system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") == 0;
  return available;
}

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

}  // namespace

// One launch (torch's import is the slow part): both ranks all_reduce over gloo, then rank 1 raises
// inside torch's @record, which must reach the failure report through TORCHELASTIC_ERROR_FILE.
TEST_CASE("a torch program does init_process_group(gloo) + all_reduce, and its @record error is reported", "[torch]") {
  if (!torch_available()) {
    WARN("skipped: /usr/bin/python3 cannot import torch (install Debian's python3-torch)");
    return;
  }
  TempDir dir;
  std::string program = write_file(dir / "allreduce.py", R"(
import os
import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

@record
def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    assert value.item() == world * (world + 1) / 2, value
    print(f"rank {rank} of {world}: sum {value.item():.0f}", flush=True)
    dist.barrier()  # every rank has printed before rank 1 fails
    dist.destroy_process_group()
    if rank == 1:
        raise ValueError("rank one is unhappy")

main()
)");
  LaunchOutcome outcome = launch_in_process(test_launch_config(dir, 2), {kPython, program});
  INFO(outcome.err);
  CHECK_THAT(outcome.out,
             Catch::Contains("[rank 0] rank 0 of 2: sum 3") && Catch::Contains("[rank 1] rank 1 of 2: sum 3"));
  CHECK(outcome.exit_code == 1);
  CHECK_THAT(outcome.err, Catch::Contains("rank       1 (local rank 1)"));
  CHECK_THAT(outcome.err, Catch::Contains("error      ValueError: rank one is unhappy"));
  CHECK_THAT(outcome.err, Catch::Contains("Traceback (most recent call last):"));
  YAML::Node report = YAML::Load(read_text(outcome.run_dir + "/failure.json"));
  CHECK(report["root_cause"]["global_rank"].as<int>() == 1);
  CHECK(report["root_cause"]["error_file"]["message"].as<std::string>() == "ValueError: rank one is unhappy");
  CHECK(report["root_cause"]["error_file"]["problem"].IsNull());
}
