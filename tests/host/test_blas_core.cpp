// The OpenBLAS core choice (host/blas_core.hpp): the CPU's flags from /proc/cpuinfo text, the kernel family they
// allow, when the worker acts; and the real worker with a fake CPU description (Debian's flavour, whose LibTorch
// calls the system OpenBLAS; the PyPI flavour's MKL has no core to choose, and those cases say so).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "host/blas_core.hpp"
#include "process/run_capture.hpp"
#include "support/temp_dir.hpp"
#include "util/file_io.hpp"

using namespace mgtrain;

namespace {

const std::string kWorker = std::string(MGTRAIN_BIN_DIR) + "/mgtrain-worker";

CpuDescription cpu_with(const std::string& flags) {
  return parse_cpuinfo("processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: " + flags + "\n\n");
}

const std::string kHaswellFlags = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma";
const std::string kAvx512Flags = kHaswellFlags + " avx512f avx512cd avx512bw avx512dq avx512vl";

}  // namespace

TEST_CASE("blas core: /proc/cpuinfo's first processor gives the model name and flags", "[blas]") {
  const CpuDescription cpu = parse_cpuinfo(
      "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
      "flags\t\t: fpu avx2 fma  avx512f\n\nprocessor\t: 1\nmodel name\t: other\nflags\t\t: amx_tile\n");
  CHECK(cpu.model_name == "Intel(R) Xeon(R) Platinum 8480+");
  CHECK(cpu.flags == std::set<std::string>{"fpu", "avx2", "fma", "avx512f"});
  CHECK(parse_cpuinfo("").flags.empty());
  CHECK(parse_cpuinfo("garbage without colons\n").model_name.empty());
}

TEST_CASE("blas core: the newest kernel family the CPU's instructions allow", "[blas]") {
  CHECK(openblas_core_for(cpu_with(kAvx512Flags + " avx512_bf16")) == "Cooperlake");
  CHECK(openblas_core_for(cpu_with(kAvx512Flags)) == "SkylakeX");
  CHECK(openblas_core_for(cpu_with(kHaswellFlags + " avx512f")) == "Haswell");  // AVX-512 F alone is not SkylakeX's set
  CHECK(openblas_core_for(cpu_with(kHaswellFlags)) == "Haswell");
  CHECK(openblas_core_for(cpu_with("sse4_2 avx fma")) == "Sandybridge");  // FMA without AVX2
  CHECK(openblas_core_for(cpu_with("sse4_2")) == "Nehalem");
  CHECK(openblas_core_for(cpu_with("sse sse2")) == "Prescott");
}

TEST_CASE("blas core: only a Prescott fallback on a better CPU, and never over OPENBLAS_CORETYPE", "[blas]") {
  const CpuDescription modern = cpu_with(kAvx512Flags + " avx512_bf16");
  const auto decision = decide_openblas_core("Prescott", modern, {});
  REQUIRE(decision);
  CHECK(decision->coretype == "Cooperlake");
  CHECK_THAT(decision->reason,
             Catch::Contains("Test CPU") && Catch::Contains("Cooperlake") && Catch::Contains("OPENBLAS_CORETYPE"));
  CHECK_FALSE(decide_openblas_core("Haswell", modern, {}));                                   // OpenBLAS knew the CPU
  CHECK_FALSE(decide_openblas_core("", modern, {}));                                          // not OpenBLAS
  CHECK_FALSE(decide_openblas_core("Prescott", modern, {{"OPENBLAS_CORETYPE", "Haswell"}}));  // the user's choice
  CHECK(decide_openblas_core("Prescott", modern, {{"OPENBLAS_CORETYPE", ""}}));               // empty: not a choice
  CHECK_FALSE(decide_openblas_core("Prescott", cpu_with("sse sse2"), {}));                    // really that old
}

namespace {

// The worker's BLAS facts (`--probe`'s "blas") with these variables set; empty when the probe failed.
nlohmann::json probe_blas(const std::map<std::string, std::string>& env) {
  CaptureOptions options;
  options.set_env = env;
  options.unset_env = {"OPENBLAS_CORETYPE", "MGTRAIN_OPENBLAS_CORETYPE_CHOSEN"};
  if (env.count("OPENBLAS_CORETYPE") > 0) options.unset_env = {"MGTRAIN_OPENBLAS_CORETYPE_CHOSEN"};
  const CapturedRun run = run_and_capture({kWorker, "--probe"}, options);
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  return nlohmann::json::parse(run.out).at("blas");
}

bool this_cpu_has(const std::string& flags) {
  const auto text = try_read_file("/proc/cpuinfo");
  if (!text) return false;
  const CpuDescription here = parse_cpuinfo(*text);
  std::istringstream words(flags);
  for (std::string flag; words >> flag;) {
    if (here.flags.count(flag) == 0) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("blas core: the worker restarts itself with the core a fake CPU description allows", "[blas][worker]") {
  if (!std::filesystem::exists(kWorker)) {
    WARN("skipped: this build has no worker (" << kWorker << ")");
    return;
  }
  const nlohmann::json plain = probe_blas({});
  INFO(plain.dump());
  if (plain.at("core").is_null()) {
    WARN("skipped: this build's BLAS is " << plain.at("library").get<std::string>()
                                          << ", which has no core to choose (the Debian flavour's OpenBLAS has)");
    return;
  }
  CHECK_THAT(plain.at("library").get<std::string>(), Catch::StartsWith("OpenBLAS "));
  CHECK(plain.at("core_chosen_by") == "OpenBLAS (from the CPU model)");
  if (!this_cpu_has("avx2 fma")) {
    WARN("skipped: the restart case forces Haswell kernels, which this CPU (no AVX2/FMA) cannot run");
    return;
  }
  const testing::TempDir temp_dir("mgtrain-blas-restart");
  const std::filesystem::path dir = temp_dir.path();
  const std::string fake = (dir / "cpuinfo").string();
  std::ofstream(fake) << "processor\t: 0\nmodel name\t: Fake CPU 9000\nflags\t\t: " << kHaswellFlags << "\n\n";
  const std::map<std::string, std::string> fallback{{"MGTRAIN_TEST_OPENBLAS_CORE", "Prescott"},
                                                    {"MGTRAIN_TEST_CPUINFO", fake}};

  // The probe restarts quietly; the restarted process runs the chosen kernels.
  const nlohmann::json chosen = probe_blas(fallback);
  INFO(chosen.dump());
  CHECK(chosen.at("core") == "Haswell");
  CHECK(chosen.at("OPENBLAS_CORETYPE") == "Haswell");
  CHECK_THAT(chosen.at("core_chosen_by").get<std::string>(), Catch::StartsWith("mgtrain"));

  // The user's OPENBLAS_CORETYPE wins, fallback or not.
  auto users = fallback;
  users["OPENBLAS_CORETYPE"] = "Sandybridge";
  const nlohmann::json kept = probe_blas(users);
  CHECK(kept.at("core") == "Sandybridge");
  CHECK(kept.at("core_chosen_by") == "OPENBLAS_CORETYPE");

  // Training (rank 0, or no launcher): one line says so, once, not again after the restart.
  CaptureOptions options;
  options.set_env = fallback;
  options.unset_env = {"OPENBLAS_CORETYPE", "MGTRAIN_OPENBLAS_CORETYPE_CHOSEN", "RANK", "WORLD_SIZE", "LOCAL_RANK"};
  options.timeout_s = 120;
  const CapturedRun run = run_and_capture(
      {kWorker, "model.type=mlp", "model.hidden_sizes=16", "data.dataset=synthetic", "data.input_shape=1,4,4",
       "data.synthetic_samples=256", "train.epochs=1", "checkpoint.dir=", "launch.log_dir=" + (dir / "runs").string()},
      options);
  INFO(run.out << run.err);
  CHECK(run.exit_code == 0);
  const std::string line =
      "mgtrain: note: OpenBLAS does not know this CPU (Fake CPU 9000) and fell back to its "
      "generic Prescott kernels; using its Haswell kernels";
  const std::size_t first = run.err.find(line);
  CHECK(first != std::string::npos);
  CHECK(run.err.find(line, first + 1) == std::string::npos);
}
