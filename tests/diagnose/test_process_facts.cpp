// /proc facts for the stack dump: signal masks, process state, program kind, Yama's ptrace rules; and the Python
// hook's variables.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "diagnose/process_facts.hpp"
#include "diagnose/python_hook.hpp"
#include "diagnose/stack_dump.hpp"
#include "support/temp_dir.hpp"
#include "util/file_io.hpp"

using namespace mgtrain;
using namespace mgtrain::diagnose;

TEST_CASE("signal masks: bit N-1 of the hex mask is signal N", "[process_facts]") {
  CHECK(mask_has_signal("0000000000000001", 1));
  CHECK_FALSE(mask_has_signal("0000000000000001", 2));
  CHECK(mask_has_signal("0000008000000000", 40));  // SIGRTMIN+6 with glibc
  CHECK_FALSE(mask_has_signal("0000004000000000", 40));
  CHECK(mask_has_signal("0000000180004a02", 2));  // a Python interpreter's SigCgt: SIGINT
  CHECK_FALSE(mask_has_signal("", 1));
  CHECK_FALSE(mask_has_signal("ff", 9));
  CHECK_FALSE(mask_has_signal("ff", 0));
}

TEST_CASE("process state: running or stopped, nothing once gone", "[process_facts]") {
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  REQUIRE(child > 0);
  kill(child, SIGSTOP);
  for (int i = 0; i < 200 && !is_stopped_state(process_state(child).value_or('?')); ++i) usleep(5000);
  CHECK(is_stopped_state(process_state(child).value_or('?')));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  CHECK_FALSE(process_state(child).has_value());
  CHECK(process_state(getpid()).has_value());
  CHECK_FALSE(catches_signal(getpid(), stack_signal()));
}

TEST_CASE("program kind from the executable's name", "[process_facts]") {
  CHECK(program_kind_of_executable("/usr/bin/python3.11") == ProgramKind::python);
  CHECK(program_kind_of_executable("/opt/venv/bin/python") == ProgramKind::python);
  CHECK(program_kind_of_executable("/opt/mgtrain/bin/mgtrain-worker") == ProgramKind::native);
  CHECK(program_kind_of_executable("/usr/bin/bash") == ProgramKind::native);
}

TEST_CASE("ptrace permission: Yama's scopes", "[process_facts]") {
  CHECK(ptrace_obstacle("0\n", false).empty());
  CHECK(ptrace_obstacle("", false).empty());
  CHECK(ptrace_obstacle("1\n", false).find("ptrace_scope is 1") != std::string::npos);
  CHECK(ptrace_obstacle("1\n", true).empty());
  CHECK(ptrace_obstacle("2\n", false).find("CAP_SYS_PTRACE") != std::string::npos);
  CHECK(ptrace_obstacle("3\n", true).find("ptrace_scope is 3") != std::string::npos);
}

TEST_CASE("Python hook variables: the hook first on PYTHONPATH, the user's kept after it", "[python_hook]") {
  const EnvMap added = python_hook_environment({{"PYTHONPATH", "/home/u/lib:/home/u/more"}}, "/runs/r/.python",
                                               "/runs/r/attempt_0/rank_2");
  CHECK(added.at("PYTHONPATH") == "/runs/r/.python:/home/u/lib:/home/u/more");
  CHECK(added.at(kHookDirVariable) == "/runs/r/.python");
  CHECK(added.at(kStacksFileVariable) == "/runs/r/attempt_0/rank_2/faulthandler.txt");
  CHECK(added.at(kStacksSignalVariable) == std::to_string(SIGRTMIN + 6));
  CHECK(python_hook_environment({}, "/h", "/r").at("PYTHONPATH") == "/h");
  CHECK(python_hook_environment({{"PYTHONPATH", ""}}, "/h", "/r").at("PYTHONPATH") == "/h");
  // the signal is none of those mgtrain forwards to workers or that end them
  for (int taken : {SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGQUIT, SIGABRT}) CHECK(stack_signal() != taken);
}

TEST_CASE("Python hook file: written where asked, and find_program", "[python_hook]") {
  testing::TempDir dir("mgtrain-hook");
  const std::string folder = write_python_hook(dir.path() + "/hook");
  CHECK(read_file(folder + "/sitecustomize.py") == python_hook_source());
  CHECK(python_hook_source().find("faulthandler.register(") != std::string::npos);
  CHECK(find_program("sh", "/nonexistent:/bin:/usr/bin").find("/sh") != std::string::npos);
  CHECK(find_program("no-such-program-xyz", "/bin:/usr/bin").empty());
  CHECK(find_program("/bin/sh", "").empty() == !std::filesystem::exists("/bin/sh"));
  CHECK(find_program("", "/bin").empty());
}
