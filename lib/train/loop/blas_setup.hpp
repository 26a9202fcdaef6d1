// The worker's BLAS (host/blas_core.hpp decides): restart once with the OpenBLAS core type the CPU's flags allow
// when the loaded OpenBLAS fell back to its generic kernels, and the BLAS facts `mgtrain env` shows.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace mgtrain {

// First thing in mgtrain-worker's main: returns when nothing is to be done (another BLAS, a CPU OpenBLAS knows,
// OPENBLAS_CORETYPE already set); otherwise sets OPENBLAS_CORETYPE and execs this program again with the same
// arguments (OpenBLAS reads the variable only when it is loaded). `announce`: one line saying so (rank 0 only).
// Tests: MGTRAIN_TEST_CPUINFO names a file read in place of /proc/cpuinfo, MGTRAIN_TEST_OPENBLAS_CORE the core the
// loaded OpenBLAS is taken to report.
void restart_with_better_blas_core(char** argv, bool announce);

// {"library", "core", "core_chosen_by", "threads", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE"} of the BLAS this
// process runs: the system's OpenBLAS (Debian's LibTorch) or the BLAS inside LibTorch (MKL in PyPI's wheel).
nlohmann::ordered_json blas_facts();

// `mgtrain-worker --probe`'s JSON object (train/torch/torch_facts.hpp) with "blas" added.
std::string probe_json_with_blas(std::string torch_facts);

}  // namespace mgtrain
