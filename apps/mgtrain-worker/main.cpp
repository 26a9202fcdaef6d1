// Entry point of `mgtrain-worker`, the stock worker: one process per rank, the built-in models and data sets only.
// A worker of your own is the same main() with register_model/register_data calls before run_worker
// (docs/trainer.md#bring-your-own-model; examples/custom_model).
#include "mgtrain/trainer.hpp"

int main(int argc, char** argv) { return mgtrain::run_worker(argc, argv); }
