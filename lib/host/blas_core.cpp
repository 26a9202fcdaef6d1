// OpenBLAS core type from the CPU's feature flags (see blas_core.hpp).
#include "host/blas_core.hpp"

#include <algorithm>
#include <initializer_list>
#include <sstream>

#include <fmt/format.h>

#include "util/strings.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

bool has_all(const CpuDescription& cpu, std::initializer_list<const char*> flags) {
  return std::all_of(flags.begin(), flags.end(), [&](const char* f) { return cpu.flags.count(f) > 0; });
}

}  // namespace

CpuDescription parse_cpuinfo(std::string_view text) {
  CpuDescription cpu;
  for (const std::string& line : split_lines(text)) {
    if (trim(line).empty()) {
      if (!cpu.flags.empty() || !cpu.model_name.empty()) break;  // the end of the first processor's block
      continue;
    }
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (key == "model name") {
      cpu.model_name = value;
    } else if (key == "flags") {
      std::istringstream words{value};
      for (std::string flag; words >> flag;) cpu.flags.insert(flag);
    }
  }
  return cpu;
}

std::string openblas_core_for(const CpuDescription& cpu) {
  const bool avx512 = has_all(cpu, {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"});
  if (avx512 && has_all(cpu, {"avx512_bf16"})) return "Cooperlake";
  if (avx512) return "SkylakeX";
  if (has_all(cpu, {"avx2", "fma"})) return "Haswell";
  if (has_all(cpu, {"avx"})) return "Sandybridge";
  if (has_all(cpu, {"sse4_2"})) return "Nehalem";
  return "Prescott";
}

std::optional<BlasCoreDecision> decide_openblas_core(std::string_view current_core, const CpuDescription& cpu,
                                                     const EnvMap& environment) {
  if (current_core != "Prescott") return std::nullopt;  // not OpenBLAS, or it knew this CPU
  if (const auto set = environment.find("OPENBLAS_CORETYPE"); set != environment.end() && !set->second.empty()) {
    return std::nullopt;  // the user's choice (or our own, after the restart)
  }
  const std::string better = openblas_core_for(cpu);
  if (better == "Prescott") return std::nullopt;  // a CPU that old really is one
  const std::string model = cpu.model_name.empty() ? "model unknown" : cpu.model_name;
  return BlasCoreDecision{better, fmt::format("OpenBLAS does not know this CPU ({}) and fell back to its generic "
                                              "Prescott kernels; using its {} kernels, which the CPU's flags allow "
                                              "(OPENBLAS_CORETYPE chooses others)",
                                              model, better)};
}

}  // namespace mgtrain
