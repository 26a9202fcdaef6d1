// The worker's BLAS: the OpenBLAS core restart and the facts (see blas_setup.hpp).
#include "train/loop/blas_setup.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include <ATen/Parallel.h>
#include <ATen/Version.h>

#include "host/blas_core.hpp"
#include "util/environment.hpp"
#include "util/file_io.hpp"
#include "util/log.hpp"

namespace mgtrain {
namespace {

// OpenBLAS's own query functions, when the loaded BLAS is OpenBLAS (Debian's LibTorch calls libblas.so.3).
template <typename Fn>
Fn openblas_function(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_DEFAULT, name));
}

std::string openblas_text(const char* name) {
  const auto fn = openblas_function<char* (*)()>(name);
  const char* text = fn != nullptr ? fn() : nullptr;
  return text != nullptr ? std::string(text) : std::string();
}

std::string variable(const EnvMap& environment, const std::string& name) {
  const auto it = environment.find(name);
  return it == environment.end() ? std::string() : it->second;
}

nlohmann::ordered_json variable_or_null(const EnvMap& environment, const std::string& name) {
  const auto it = environment.find(name);
  return it == environment.end() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(it->second);
}

}  // namespace

void restart_with_better_blas_core(char** argv, bool announce) {
  const EnvMap environment = current_environment();
  std::string core = variable(environment, "MGTRAIN_TEST_OPENBLAS_CORE");
  if (core.empty()) core = openblas_text("openblas_get_corename");
  if (core.empty()) return;  // not OpenBLAS
  std::string cpuinfo_path = variable(environment, "MGTRAIN_TEST_CPUINFO");
  if (cpuinfo_path.empty()) cpuinfo_path = "/proc/cpuinfo";
  const auto cpuinfo = try_read_file(cpuinfo_path);
  if (!cpuinfo) return;  // no flags to go by: leave OpenBLAS's choice
  const auto decision = decide_openblas_core(core, parse_cpuinfo(*cpuinfo), environment);
  if (!decision) return;
  if (announce) log::note("{}", decision->reason);
  ::setenv("OPENBLAS_CORETYPE", decision->coretype.c_str(), 1);
  ::setenv(kBlasCoreChosenVariable, decision->coretype.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  // Still here: run on with the generic kernels rather than not at all.
  log::warn("could not restart with OPENBLAS_CORETYPE={} ({}); going on with OpenBLAS's generic kernels",
            decision->coretype, std::strerror(errno));
}

nlohmann::ordered_json blas_facts() {
  const EnvMap environment = current_environment();
  nlohmann::ordered_json facts;
  const std::string config = openblas_text("openblas_get_config");
  if (!config.empty()) {
    const std::string core = openblas_text("openblas_get_corename");
    const std::string forced = variable(environment, "OPENBLAS_CORETYPE");
    std::string chosen_by = "OpenBLAS (from the CPU model)";
    if (!forced.empty()) {
      chosen_by = forced == variable(environment, kBlasCoreChosenVariable)
                      ? "mgtrain (OpenBLAS did not know the CPU; from its flags)"
                      : "OPENBLAS_CORETYPE";
    }
    const auto threads = openblas_function<int (*)()>("openblas_get_num_threads");
    facts["library"] = config;  // "OpenBLAS 0.3.21 ... DYNAMIC_ARCH ... Cooperlake MAX_THREADS=64"
    facts["core"] = core;
    facts["core_chosen_by"] = chosen_by;
    facts["threads"] = threads != nullptr ? threads() : at::get_num_threads();
  } else {
    const std::string build = at::show_config();
    const std::size_t key = build.find("BLAS_INFO=");
    const std::string info =
        key == std::string::npos ? "unknown" : build.substr(key + 10, build.find_first_of(", \n", key) - key - 10);
    facts["library"] = info == "mkl" ? "MKL (inside LibTorch)" : info + " (as LibTorch reports it)";
    facts["core"] = nullptr;
    facts["core_chosen_by"] = nullptr;
    facts["threads"] = at::get_num_threads();
  }
  facts["OMP_NUM_THREADS"] = variable_or_null(environment, "OMP_NUM_THREADS");
  facts["OPENBLAS_CORETYPE"] = variable_or_null(environment, "OPENBLAS_CORETYPE");
  return facts;
}

std::string probe_json_with_blas(std::string torch_facts) {
  const std::size_t end = torch_facts.rfind('}');
  if (end == std::string::npos) return torch_facts;
  return torch_facts.insert(end, ", \"blas\": " + blas_facts().dump());
}

}  // namespace mgtrain
