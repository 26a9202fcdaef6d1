// Which OpenBLAS core type a CPU should run. Debian bookworm's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernels
// from the CPU model; a model newer than it knows gets its generic "Prescott" kernels, several times slower on
// matrix products. From the CPU's own feature flags (/proc/cpuinfo) the newest kernel family whose instructions the
// CPU has can be named instead, as OPENBLAS_CORETYPE, which OpenBLAS reads when it is loaded. Pure decisions here; the
// worker applies them (train/loop/blas_setup) and `mgtrain env` shows the result.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "util/environment.hpp"

namespace mgtrain {

struct CpuDescription {
  std::string model_name;       // "model name" of the first processor
  std::set<std::string> flags;  // its "flags"
};

// The first processor block of /proc/cpuinfo's text.
CpuDescription parse_cpuinfo(std::string_view text);

// The OpenBLAS core type (its spelling, e.g. "Cooperlake") of the newest x86-64 kernel family whose instructions
// the CPU has: Cooperlake (AVX-512 with BF16), SkylakeX (AVX-512 F/CD/BW/DQ/VL), Haswell (AVX2 + FMA),
// Sandybridge (AVX), Nehalem (SSE4.2), else Prescott.
std::string openblas_core_for(const CpuDescription& cpu);

// What the worker does about its OpenBLAS: nothing, or restart itself with OPENBLAS_CORETYPE set.
struct BlasCoreDecision {
  std::string coretype;  // for OPENBLAS_CORETYPE
  std::string reason;    // one line for the log
};

// `current_core` is openblas_get_corename() of the loaded OpenBLAS ("" when the BLAS is not OpenBLAS). A decision
// only when OpenBLAS fell back to its generic Prescott kernels, the CPU has a better family, and the environment
// sets no OPENBLAS_CORETYPE (the user's choice, or an earlier restart's) .
std::optional<BlasCoreDecision> decide_openblas_core(std::string_view current_core, const CpuDescription& cpu,
                                                     const EnvMap& environment);

// The variable an applied decision leaves for the restarted process (and `mgtrain env`): the core mgtrain chose.
inline constexpr const char* kBlasCoreChosenVariable = "MGTRAIN_OPENBLAS_CORETYPE_CHOSEN";

}  // namespace mgtrain
