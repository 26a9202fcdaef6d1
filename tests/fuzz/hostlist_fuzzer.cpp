// libFuzzer target for the SLURM hostlist expansion (lib/contract/hostlist.cpp): any input either expands to
// host names that hold no separator or bracket, or is refused with UsageError — no crash, no leak, no
// undefined behaviour, no runaway memory (the expansion limit is small here). tests/fuzz/CMakeLists.txt
// builds it with clang++ -fsanitize=fuzzer,address,undefined; ctest runs 20000 inputs from hostlist_corpus/.
#include <cstddef>
#include <cstdint>
#include <string>

#include "contract/hostlist.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto hosts = mgtrain::expand_hostlist(text, 4096);
    if (hosts.empty()) __builtin_trap();  // success means at least one host
    for (const auto& host : hosts) {
      if (host.empty() || host.find_first_of("[], \t\n\r\v\f") != std::string::npos) __builtin_trap();
    }
  } catch (const mgtrain::UsageError& e) {
    // Every refusal names the expression.
    if (std::string(e.what()).rfind("hostlist '", 0) != 0) __builtin_trap();
  }
  return 0;
}
