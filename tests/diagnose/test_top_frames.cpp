// top_frames: the failure report's lines read out of stacks.txt texts as dump_stacks writes them (faulthandler's
// and eu-stack's formats, captured from real dumps).
#include <catch2/catch.hpp>

#include "diagnose/top_frames.hpp"

using namespace mgtrain::diagnose;

namespace {
const char* kPythonAndNative = R"(# mgtrain stacks of rank 3 (pid 2419), python, taken 2026-11-27T16:40:00.000Z

== Python (faulthandler; most recent call first) ==
Thread 0x00007fe991ed16c0 (most recent call first):
  File "/tmp/st/t.py", line 4 in <lambda>
  File "/usr/lib/python3.11/threading.py", line 975 in run
  File "/usr/lib/python3.11/threading.py", line 1038 in _bootstrap_inner
  File "/usr/lib/python3.11/threading.py", line 995 in _bootstrap

Current thread 0x00007fe99218c040 (most recent call first):
  File "/work/job/train.py", line 3 in stuck_here
  File "/work/job/train.py", line 6 in <module>

== native (eu-stack) ==
PID 2419 - process
TID 2419:
#0  0x00007fe99225c545 clock_nanosleep@GLIBC_2.2.5
#1  0x00000000005d64b4
#2  0x000000000053acbc PyObject_Vectorcall
)";

const char* kNativeOnly = R"(# mgtrain stacks of rank 0 (pid 700), native, taken 2026-11-27T16:40:00.000Z

== native (eu-stack) ==
PID 700 - process
TID 702:
#0  0x00007f0c2a1d5f3e __futex_abstimed_wait_common
#1  0x00007f0c2a1d8a41 pthread_cond_wait@@GLIBC_2.3.2
TID 700:
#0  0x00007faf5d437503 clock_nanosleep@GLIBC_2.2.5
#1  0x00007faf5d43be53 __nanosleep
#2  0x0000563d133744af
#3  0x0000563d13373f81 mgtrain::train::run_epoch(mgtrain::train::TrainingRun&)
#4  0x0000563d13370558 main

== notes ==
rank 0 (pid 700): some native frames could not be unwound (eu-stack exit 1)
)";
}  // namespace

TEST_CASE("top_frames: Python frames first, the signalled thread first, innermost first", "[top_frames]") {
  auto lines = top_frames(kPythonAndNative);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "stuck_here (train.py:3) < <module> (train.py:6)");
  CHECK(lines[1] == "<lambda> (t.py:4) < run (threading.py:975) < _bootstrap_inner (threading.py:1038)");
  CHECK(top_frames(kPythonAndNative, 1, 1) == std::vector<std::string>{"stuck_here (train.py:3)"});
}

TEST_CASE("top_frames: native frames when there are no Python ones, main thread first, unnamed frames skipped",
          "[top_frames]") {
  auto lines = top_frames(kNativeOnly, 3);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "mgtrain::train::run_epoch < main");  // past the waiting layer, without arguments
  CHECK(lines[1] == "__futex_abstimed_wait_common < pthread_cond_wait@@GLIBC_2.3.2");  // nothing but waiting
}

TEST_CASE("top_frames: a real trainer's main thread waiting in a collective", "[top_frames]") {
  const std::string stacks = R"(== native (eu-stack) ==
PID 5944 - process
TID 5944:
#0  0x00007fb50d0a3f16 __futex_abstimed_wait_common
#1  0x00007fb50d0a65d8 pthread_cond_wait@@GLIBC_2.3.2
#2  0x00007fb50cea741d std::condition_variable::wait(std::unique_lock<std::mutex>&)
#3  0x00007fb52efe9d9b c10d::Work::wait(std::chrono::duration<long, std::ratio<1l, 1000l> >)
#4  0x000055785bd88ad2 mgtrain::GradientReducer::finish_backward()
#5  0x000055785bd2ad29 mgtrain::(anonymous namespace)::TrainingRun::run_epoch()
#6  0x000055785bd2d46f mgtrain::run_training(mgtrain::Config const&, mgtrain::WorkerIdentity const&)
TID 6484:
#0  0x00007fb50d126cae epoll_pwait
#1  0x00007fb53a41e4aa uv__io_poll
#2  0x00007fb53a41015f uv_run
)";
  auto lines = top_frames(stacks);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "c10d::Work::wait < mgtrain::GradientReducer::finish_backward < mgtrain::TrainingRun::run_epoch");
  CHECK(lines[1] == "uv__io_poll < uv_run");
}

TEST_CASE("top_frames: nothing from a dump with only notes, or from text that is no dump", "[top_frames]") {
  CHECK(top_frames("# mgtrain stacks of pid 9, native\n\n== notes ==\npid 9: no stacks: the process has ended\n")
            .empty());
  CHECK(top_frames("").empty());
  CHECK(top_frames("  File \"x.py\", line 1 in f\n#0  0x1 main\n").empty());  // frames outside any section
}

TEST_CASE("waits_in_collective: a main thread in a collective, and one elsewhere", "[top_frames]") {
  CHECK(waits_in_collective(
      "c10d::Work::wait < mgtrain::GradientReducer::finish_backward < mgtrain::TrainingRun::run_epoch"));
  CHECK(
      waits_in_collective("all_reduce (torch/distributed/distributed_c10d.py:2806) < wrapper "
                          "(torch/distributed/c10d_logger.py:81) < <module> (train.py:20)"));
  CHECK(waits_in_collective("barrier (torch/distributed/distributed_c10d.py:4159) < <module> (train.py:9)"));
  CHECK(waits_in_collective("gloo::transport::tcp::UnboundBuffer::waitRecv < gloo::allreduce"));
  CHECK_FALSE(waits_in_collective("stuck_here (train.py:23) < <module> (train.py:28)"));
  CHECK_FALSE(waits_in_collective(
      "mgtrain::(anonymous namespace)::test_hook_hang_here < mgtrain::TrainingRun::run_epoch < mgtrain::run_training"));
  CHECK_FALSE(waits_in_collective("mgtrain::BatchLoader::next < mgtrain::TrainingRun::run_epoch"));
  CHECK_FALSE(waits_in_collective(""));
}

TEST_CASE("ranks with identical top frames form one group, groups in the order of their lowest rank", "[top_frames]") {
  const std::vector<std::string> all_reduce = {"all_reduce (distributed_c10d.py:2501) < step (train.py:40)",
                                               "wait (threading.py:331)"};
  const std::vector<std::string> stuck = {"stuck_here (train.py:12) < step (train.py:40)"};
  std::vector<std::pair<int, std::vector<std::string>>> ranks;
  for (int rank = 31; rank >= 0; --rank) ranks.emplace_back(rank, rank == 7 ? stuck : all_reduce);
  ranks.emplace_back(32, std::vector<std::string>{});  // no frames (its dump failed)
  const std::vector<FrameGroup> groups = group_by_top_frames(ranks);
  REQUIRE(groups.size() == 3);
  CHECK(groups[0].ranks.size() == 31);
  CHECK(groups[0].ranks.front() == 0);
  CHECK(groups[0].frames == all_reduce);
  CHECK(groups[1].ranks == std::vector<int>{7});
  CHECK(groups[2].ranks == std::vector<int>{32});
  const std::vector<std::string> lines = frame_group_lines(groups, "  ");
  REQUIRE(lines.size() == 3);
  CHECK(
      lines[0] ==
      "ranks 0-6, 8-31 (31): all_reduce (distributed_c10d.py:2501) < step (train.py:40)\n    wait (threading.py:331)");
  CHECK(lines[1] == "rank 7 (1): stuck_here (train.py:12) < step (train.py:40)");
  CHECK(lines[2] == "rank 32 (1): (no frames)");
  CHECK(group_by_top_frames({}).empty());
}
