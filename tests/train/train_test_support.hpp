// Helpers for the data and model tests: the temporary directory (support/temp_dir.hpp), file writers, and running
// scripts with Debian's Python torch (/usr/bin/python3) as a reference, with a reason to print when it is unavailable.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "process/run_capture.hpp"
#include "support/temp_dir.hpp"

namespace mgtrain::test {

using testing::TempDir;

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline constexpr const char* kReferencePython = "/usr/bin/python3";

// Empty when /usr/bin/python3 can import torch; otherwise why not (for a printed skip message).
inline std::string python_torch_unavailable_reason() {
  static const std::string reason = [] {
    if (!std::filesystem::exists(kReferencePython)) return std::string(kReferencePython) + " does not exist";
    const CapturedRun run = run_and_capture({kReferencePython, "-c", "import torch"}, CaptureOptions{});
    if (run.exit_code != 0)
      return std::string(kReferencePython) + " cannot import torch (Debian package python3-torch)";
    return std::string();
  }();
  return reason;
}

// Runs `script` with the reference Python (from a file, so that torch.jit.script can read the source); returns
// stdout, or nullopt and prints stderr when it fails.
inline std::optional<std::string> run_reference_python(const std::string& script,
                                                       const std::vector<std::string>& args = {}) {
  TempDir dir;
  const std::string script_path = dir / "reference.py";
  write_bytes(script_path, std::vector<uint8_t>(script.begin(), script.end()));
  std::vector<std::string> argv{kReferencePython, script_path};
  argv.insert(argv.end(), args.begin(), args.end());
  CaptureOptions options;
  options.timeout_s = 120;
  options.set_env.emplace("OMP_NUM_THREADS", "1");
  const CapturedRun run = run_and_capture(argv, options);
  if (run.exit_code != 0) {
    std::fprintf(stderr, "reference python failed (exit %d):\n%s\n", run.exit_code, run.err.c_str());
    return std::nullopt;
  }
  return run.out;
}

}  // namespace mgtrain::test
