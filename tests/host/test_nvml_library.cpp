// NVML through dlopen (host/nvml_library.hpp) against a stand-in library (tests/support/fake_nvml.cpp): the figures
// it reads, and that the threads NVML starts never take the launcher's signals.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>

#include "host/nvml_library.hpp"

using namespace mgtrain;

namespace {

// The stand-in's record of its thread's mask (-1: no thread started).
int fake_thread_blocks_sigchld() {
  void* handle = dlopen(MGTRAIN_FAKE_NVML, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(handle != nullptr);
  const auto* flag = static_cast<const int*>(dlsym(handle, "mgtrain_fake_nvml_thread_blocks_sigchld"));
  dlclose(handle);
  REQUIRE(flag != nullptr);
  return *flag;
}

}  // namespace

TEST_CASE("open_nvml reads every GPU's figures through NVML's entry points", "[nvml]") {
  const auto nvml = open_nvml(MGTRAIN_FAKE_NVML);
  REQUIRE(nvml);
  const std::vector<GpuSample> gpus = nvml->sample();
  REQUIRE(gpus.size() == 1);
  CHECK(gpus[0].index == 0);
  CHECK(gpus[0].name == "Fake GPU");
  CHECK(gpus[0].uuid == "GPU-fake-0");
  CHECK(gpus[0].memory_total_bytes == (80LL << 30));
  CHECK(gpus[0].memory_used_bytes == (20LL << 30));
  CHECK(gpus[0].utilization_percent == 42);
  CHECK(gpus[0].temperature_c == 55);
  CHECK(gpus[0].power_w == Approx(250.0));
  CHECK(nvml->driver_version() == "999.1");
}

TEST_CASE("the threads NVML starts are born with every signal blocked, whatever the caller's mask", "[nvml]") {
  // The launcher asks NVML for --gpu-ids auto before its supervisor blocks SIGCHLD: a driver thread made then with
  // SIGCHLD unblocked would take the workers' exits away from the supervisor's signalfd (a hang seen on an H200).
  sigset_t unblocked, saved;
  sigemptyset(&unblocked);
  sigaddset(&unblocked, SIGCHLD);
  REQUIRE(pthread_sigmask(SIG_UNBLOCK, &unblocked, &saved) == 0);
  const auto nvml = open_nvml(MGTRAIN_FAKE_NVML);
  REQUIRE(nvml);
  CHECK(fake_thread_blocks_sigchld() == 1);
  // ... and the caller's own mask is as it was.
  sigset_t now;
  pthread_sigmask(SIG_SETMASK, nullptr, &now);
  CHECK(sigismember(&now, SIGCHLD) == 0);
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
}
