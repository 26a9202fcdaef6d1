// Finds and loads libmgtrain_status_http.so, the status API's HTTP module (see status_http.hpp).
#include <dlfcn.h>

#include <mutex>

#include "contract/worker_binary.hpp"
#include "observe/status_http.hpp"
#include "util/error.hpp"

#ifndef MGTRAIN_STATUS_HTTP_INSTALL_DIR
#define MGTRAIN_STATUS_HTTP_INSTALL_DIR "../lib/mgtrain"
#endif

namespace mgtrain {

const StatusHttpModule& status_http_module() {
  static std::mutex mutex;
  static const StatusHttpModule* module = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (module) return *module;
  const std::string directory = executable_directory();
  const std::string name = "libmgtrain_status_http.so";
  std::string tried;
  for (const std::string& path : {directory + "/" + name, directory + "/" MGTRAIN_STATUS_HTTP_INSTALL_DIR "/" + name}) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      tried += "\n  " + path + ": " + (why ? why : "cannot be loaded");
      continue;
    }
    using Entry = const StatusHttpModule* (*)();
    void* symbol = dlsym(handle, "mgtrain_status_http_module_v2");
    if (!symbol) {
      tried += "\n  " + path + ": no mgtrain_status_http_module_v2 (a module of another mgtrain version?)";
      dlclose(handle);
      continue;
    }
    Entry entry = nullptr;
    static_assert(sizeof entry == sizeof symbol, "function pointer size");
    __builtin_memcpy(&entry, &symbol, sizeof entry);
    module = entry();  // the handle stays open for the life of the process
    return *module;
  }
  throw Error(
      "the status API's HTTP module is missing or broken; tried:" + tried +
      "\n(it is built and installed with mgtrain; it needs libcpp-httplib: apt-get install libcpp-httplib-dev)");
}

}  // namespace mgtrain
