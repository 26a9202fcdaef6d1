// Public API of mgtrain's trainer, for a worker of your own (docs/trainer.md#bring-your-own-model):
//
//   #include <mgtrain/trainer.hpp>
//   int main(int argc, char** argv) {
//     mgtrain::register_model({...}, factory);   // mgtrain/registry.hpp
//     return mgtrain::run_worker(argc, argv);
//   }
//
// and `mgtrain launch --nproc 4 --worker ./my-worker my.yaml`. The worker then does everything mgtrain-worker does:
// DDP over Gloo or NCCL, checkpoints and resume, mixed precision, metrics, heartbeats for the launcher's hang and
// straggler detection, `--probe` and `--export-torchscript` (built-in models only).
#pragma once

#include "mgtrain/data.hpp"
#include "mgtrain/model.hpp"
#include "mgtrain/registry.hpp"
#include "mgtrain/version.hpp"

namespace mgtrain {

// The whole worker: call it from main() after registering, and return what it returns (an exit code:
// docs/exit-codes.md). It catches every error itself and prints one message; it may restart the process once
// (execve) to pick a better OpenBLAS kernel, so register in main(), not from a static initialiser's side effects
// that must run once.
int run_worker(int argc, char** argv);

}  // namespace mgtrain
