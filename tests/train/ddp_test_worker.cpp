// A test program for the gradient reducer: one rank of a small deterministic training run on a tiny
// model, started as several real processes by test_ddp.cpp. It writes its final parameters to a file
// so the test can compare runs with different world sizes, accumulation and bucket settings.
//
// usage: ddp_test_worker OUT_FILE [--steps K] [--batch B] [--accum A] [--bucket-mb X] [--first-bucket-mb X]
//                        [--model mlp|big|huge|tiny|unused] [--find-unused] [--as-view] [--no-ddp]
//                        [--timeout S] [--die-at-step K]
// --die-at-step: the last rank kills itself (SIGKILL) before step K's backward, while the other ranks'
// all-reduces of that step wait for it; the test checks they fail within --timeout (ddp.timeout_s).
// Rank and store come from RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT (absent: world size 1).
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include "core/config.hpp"
#include "core/config_loader.hpp"
#include "core/error.hpp"
#include "core/worker_identity.hpp"
#include "train/communicator.hpp"
#include "train/gradient_reducer.hpp"

using namespace mgtrain;

namespace {

struct Options {
  std::string out;
  int steps = 5, batch = 4, accum = 1;
  double bucket_mb = 25.0, first_bucket_mb = 1.0;
  std::string model = "mlp";
  bool find_unused = false, as_view = false, no_ddp = false;
  double timeout_s = 30;
  int die_at_step = -1;
};

// A stack of Linear layers; `unused` adds a layer that forward() skips.
struct TestNet : torch::nn::Module {
  std::vector<torch::nn::Linear> layers;
  torch::nn::Linear skipped{nullptr};
  TestNet(const std::vector<int64_t>& widths, bool with_unused) {
    for (std::size_t i = 0; i + 1 < widths.size(); ++i)
      layers.push_back(register_module("l" + std::to_string(i), torch::nn::Linear(widths[i], widths[i + 1])));
    if (with_unused) skipped = register_module("unused", torch::nn::Linear(widths.back(), widths.back()));
  }
  at::Tensor forward(at::Tensor x) {
    for (std::size_t i = 0; i < layers.size(); ++i) {
      x = layers[i]->forward(x);
      if (i + 1 < layers.size()) x = at::tanh(x);
    }
    return x;
  }
};

std::vector<int64_t> widths_for(const std::string& model) {
  if (model == "big") return {16, 1024, 300, 4};     // 1024x300 floats = 1.2 MB > a 1 MB cap
  if (model == "huge") return {16, 1024, 700, 4};    // 1024x700 floats = 2.9 MB > a 2 MiB shm slot
  if (model == "tiny") {
    std::vector<int64_t> w(40, 3);                   // 39 tiny layers
    w.front() = 16;
    w.back() = 4;
    return w;
  }
  return {16, 32, 32, 4};
}

}  // namespace

// How many gradient-bucket segments (zero-copy shared memory) this process has mapped.
int shared_bucket_mappings() {
  std::ifstream maps("/proc/self/maps");
  int count = 0;
  for (std::string line; std::getline(maps, line);) {
    const auto at = line.find("/mgtrain-shm-");
    if (at != std::string::npos && line.find("-b", at) != std::string::npos) ++count;
  }
  return count;
}

int main(int argc, char** argv) {
  try {
    Options o;
    std::vector<std::string> args(argv + 1, argv + argc);
    for (std::size_t i = 0; i < args.size(); ++i) {
      auto next = [&] { return args.at(++i); };
      if (args[i] == "--steps") o.steps = std::stoi(next());
      else if (args[i] == "--batch") o.batch = std::stoi(next());
      else if (args[i] == "--accum") o.accum = std::stoi(next());
      else if (args[i] == "--bucket-mb") o.bucket_mb = std::stod(next());
      else if (args[i] == "--first-bucket-mb") o.first_bucket_mb = std::stod(next());
      else if (args[i] == "--model") o.model = next();
      else if (args[i] == "--find-unused") o.find_unused = true;
      else if (args[i] == "--as-view") o.as_view = true;
      else if (args[i] == "--no-ddp") o.no_ddp = true;
      else if (args[i] == "--timeout") o.timeout_s = std::stod(next());
      else if (args[i] == "--die-at-step") o.die_at_step = std::stoi(next());
      else o.out = args[i];
    }
    const WorkerIdentity id = worker_identity_from_environment(current_environment());
    DdpConfig ddp;
    ddp.connect_timeout_s = 30;
    ddp.timeout_s = o.timeout_s;
    auto comm = connect_communicator(id, ddp, "gloo");

    torch::manual_seed(1234);
    auto net = std::make_shared<TestNet>(widths_for(o.model), o.model == "unused");
    std::vector<std::pair<std::string, at::Tensor>> named;
    std::vector<at::Tensor> params;
    for (auto& item : net->named_parameters()) {
      named.emplace_back(item.key(), item.value());
      params.push_back(item.value());
    }
    ReducerOptions ro;
    ro.bucket_cap_mb = o.bucket_mb;
    ro.first_bucket_mb = o.first_bucket_mb;
    ro.find_unused_parameters = o.find_unused;
    ro.gradient_as_bucket_view = o.as_view;
    std::unique_ptr<GradientReducer> reducer;
    if (!o.no_ddp) reducer = std::make_unique<GradientReducer>(named, *comm, ro);
    if (comm->rank() == 0 && reducer) std::printf("buckets %zu\n", reducer->bucket_count());
    if (comm->rank() == 0) std::printf("backend %s\n", comm->backend_name().c_str());
    if (comm->rank() == 0) std::printf("shared buckets %d\n", shared_bucket_mappings());
    std::fflush(stdout);
    torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.1).momentum(0.9));

    // The global batch of step s is the same on every world size: world * batch * accum rows from a seeded
    // generator. Each rank takes its rows; micro-step m of rank r takes the m-th slice of those.
    const int world = comm->world_size(), rank = comm->rank();
    for (int s = 0; s < o.steps; ++s) {
      at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(1000 + s));
      const int64_t global = static_cast<int64_t>(o.batch) * o.accum * world;
      at::Tensor x = at::randn({global, 16}, gen);
      at::Tensor y = at::randn({global, 4}, gen);
      const int64_t per_rank = global / world;
      const int64_t micro_rows = per_rank / o.accum;
      for (int m = 0; m < o.accum; ++m) {
        const int64_t start = rank * per_rank + m * micro_rows;
        if (reducer) reducer->begin_backward(m == o.accum - 1);
        at::Tensor out = net->forward(x.narrow(0, start, micro_rows));
        at::Tensor loss = (out - y.narrow(0, start, micro_rows)).pow(2).mean() / static_cast<double>(o.accum);
        if (s == o.die_at_step && rank == world - 1 && world > 1) {
          std::raise(SIGKILL);
        }
        loss.backward();
      }
      if (reducer) reducer->finish_backward();
      sgd.step();
      if (reducer) reducer->zero_grad(); else sgd.zero_grad();
    }
    comm->barrier();
    if (comm->rank() == 0 && !o.out.empty()) {
      std::ofstream out(o.out, std::ios::binary);
      for (auto& p : params) {
        at::Tensor c = p.detach().contiguous().to(at::kFloat);
        out.write(reinterpret_cast<const char*>(c.data_ptr<float>()), static_cast<std::streamsize>(c.numel() * sizeof(float)));
      }
    }
    return 0;
  } catch (const mgtrain::Error& e) {
    std::fprintf(stderr, "ddp_test_worker: error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_test_worker: internal error: %s\n", e.what());
    return 1;
  }
}
