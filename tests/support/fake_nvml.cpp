// A stand-in for libnvidia-ml.so.1 for the NVML tests (tests/host/test_nvml_library.cpp): every entry point
// open_nvml binds, one GPU with fixed figures, and, like the real driver, a thread of its own started by nvmlInit_v2.
// That thread records whether it was born with SIGCHLD blocked (mgtrain_fake_nvml_thread_blocks_sigchld): a library
// thread with the launcher's signals unblocked would take the SIGCHLD the supervisor's signalfd waits for.
#include <pthread.h>
#include <signal.h>

#include <cstring>

extern "C" {

struct FakeMemory {
  unsigned long long total, free, used;
};
struct FakeUtilization {
  unsigned int gpu, memory;
};

// -1: no thread yet; 0: SIGCHLD unblocked in NVML's thread; 1: blocked.
__attribute__((visibility("default"))) int mgtrain_fake_nvml_thread_blocks_sigchld = -1;

static void* fake_thread(void*) {
  sigset_t mask;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  mgtrain_fake_nvml_thread_blocks_sigchld = sigismember(&mask, SIGCHLD) == 1 ? 1 : 0;
  return nullptr;
}

__attribute__((visibility("default"))) int nvmlInit_v2() {
  pthread_t thread;
  if (pthread_create(&thread, nullptr, fake_thread, nullptr) != 0) return 1;
  pthread_join(thread, nullptr);
  return 0;
}
__attribute__((visibility("default"))) int nvmlShutdown() { return 0; }
__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = 1;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned int, void** device) {
  static int the_gpu;
  *device = &the_gpu;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetName(void*, char* name, unsigned int size) {
  std::strncpy(name, "Fake GPU", size - 1);
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetUUID(void*, char* uuid, unsigned int size) {
  std::strncpy(uuid, "GPU-fake-0", size - 1);
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void*, FakeMemory* memory) {
  *memory = {80ULL << 30, 60ULL << 30, 20ULL << 30};
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetUtilizationRates(void*, FakeUtilization* rates) {
  *rates = {42, 7};
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetTemperature(void*, unsigned int, unsigned int* celsius) {
  *celsius = 55;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetPowerUsage(void*, unsigned int* milliwatts) {
  *milliwatts = 250000;
  return 0;
}
__attribute__((visibility("default"))) int nvmlSystemGetDriverVersion(char* version, unsigned int size) {
  std::strncpy(version, "999.1", size - 1);
  return 0;
}

}  // extern "C"
