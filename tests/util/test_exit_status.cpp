// Exit statuses, signal names and the shell's 128+N convention.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <csignal>

#include "util/exit_status.hpp"

using namespace mgtrain;

TEST_CASE("exit codes and signals map to the launcher's exit code", "[exit]") {
  CHECK(ExitStatus::exited(0).success());
  CHECK(ExitStatus::exited(3).as_exit_code() == 3);
  CHECK(ExitStatus::killed_by(SIGSEGV).as_exit_code() == 139);
  CHECK(ExitStatus::killed_by(SIGKILL).as_exit_code() == 137);
  CHECK_FALSE(ExitStatus::killed_by(SIGTERM).success());
  CHECK(ExitStatus::exited(3).describe() == "exit code 3");
  CHECK(ExitStatus::killed_by(SIGSEGV).describe() == "signal SIGSEGV (11)");
}

TEST_CASE("signal names", "[exit]") {
  CHECK(signal_name(SIGINT) == "SIGINT");
  CHECK(signal_name(SIGUSR2) == "SIGUSR2");
  CHECK(signal_name(SIGRTMIN + 2) == "SIGRTMIN+2");
  CHECK(signal_name(200) == "signal 200");
}

TEST_CASE("wait statuses decode", "[exit]") {
  // Built the way the kernel encodes them: code << 8 for an exit, the signal number for a kill.
  CHECK(ExitStatus::from_wait_status(3 << 8).as_exit_code() == 3);
  ExitStatus killed = ExitStatus::from_wait_status(SIGABRT);
  CHECK(killed.signaled);
  CHECK(killed.value == SIGABRT);
}
