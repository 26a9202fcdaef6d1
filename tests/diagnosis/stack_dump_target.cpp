// A native program for the stack-dump tests (tests/diagnosis/test_stacks.cpp): its main thread blocks in
// stuck_in_native_code() and a second thread in waiting_native_helper(), both named in its symbol table; it
// prints "ready" once both are there and exits by itself after argv[1] seconds (default 60), so a failed test
// leaves nothing behind for long.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {
std::chrono::steady_clock::time_point g_end;

// Different bodies (sleep lengths), so that the optimiser cannot fold the two functions into one symbol.
__attribute__((noinline)) void waiting_native_helper() {
  while (std::chrono::steady_clock::now() < g_end) usleep(30000);
  asm volatile("");  // not a tail call: the frame stays on the stack
}

__attribute__((noinline)) void stuck_in_native_code() {
  while (std::chrono::steady_clock::now() < g_end) usleep(20000);
  asm volatile("");
}
}  // namespace

int main(int argc, char** argv) {
  const int seconds = argc > 1 ? std::atoi(argv[1]) : 60;
  g_end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::thread helper(waiting_native_helper);
  usleep(50000);
  std::printf("ready\n");
  std::fflush(stdout);
  stuck_in_native_code();
  helper.join();
  std::printf("finished\n");
  return 0;
}
