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
//
// ddp_test_worker OUT_PREFIX --sync-bn [--rows R0,R1,...] [--no-sync]: SyncBatchNorm on the built-in cnn (for
// test_sync_batch_norm.cpp). Rank r takes R_r rows (default 8 each) of one seeded global batch; 3 training steps
// with a loss summed over the global batch, gradients all-reduced (summed); then evaluation mode. Writes float32
// files OUT_PREFIX.r<rank>.{outputs,input_grads,param_grads,buffers,eval} (first step's outputs and gradients, the
// buffers after the last step, the evaluation outputs). --no-sync leaves the BatchNorm layers per rank.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include "config/config.hpp"
#include "config/config_loader.hpp"
#include "contract/worker_identity.hpp"
#include "train/models/model.hpp"
#include "train/parallel/communicator.hpp"
#include "train/parallel/gradient_reducer.hpp"
#include "train/parallel/sync_batch_norm.hpp"
#include "util/error.hpp"

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
      layers.push_back(
          register_module(std::string("l").append(std::to_string(i)), torch::nn::Linear(widths[i], widths[i + 1])));
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
  if (model == "big") return {16, 1024, 300, 4};   // 1024x300 floats = 1.2 MB > a 1 MB cap
  if (model == "huge") return {16, 1024, 700, 4};  // 1024x700 floats = 2.9 MB > a 2 MiB shm slot
  if (model == "tiny") {
    std::vector<int64_t> w(40, 3);  // 39 tiny layers
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

void write_floats(const std::string& path, const std::vector<at::Tensor>& tensors) {
  std::ofstream out(path, std::ios::binary);
  for (const auto& t : tensors) {
    at::Tensor c = t.detach().contiguous().to(at::kFloat);
    out.write(reinterpret_cast<const char*>(c.data_ptr<float>()),
              static_cast<std::streamsize>(c.numel() * sizeof(float)));
  }
  if (!out) throw Error("cannot write " + path);
}

// The --sync-bn mode (see the usage above).
int run_sync_batch_norm_check(const std::vector<std::string>& args) {
  std::string prefix, rows_text;
  bool sync = true;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--rows")
      rows_text = args.at(++i);
    else if (args[i] == "--no-sync")
      sync = false;
    else if (args[i] != "--sync-bn")
      prefix = args[i];
  }
  const WorkerIdentity id = worker_identity_from_environment(current_environment());
  DdpConfig ddp;
  ddp.connect_timeout_s = 30;
  ddp.timeout_s = 20;
  auto comm = connect_communicator(id, ddp, "gloo");
  const int world = comm->world_size(), rank = comm->rank();
  std::vector<int64_t> rows(static_cast<std::size_t>(world), 8);
  if (!rows_text.empty()) {
    rows.clear();
    for (std::size_t at = 0; at <= rows_text.size();) {
      const std::size_t comma = std::min(rows_text.find(',', at), rows_text.size());
      rows.push_back(std::stoll(rows_text.substr(at, comma - at)));
      at = comma + 1;
    }
    if (static_cast<int>(rows.size()) != world) throw UsageError("--rows needs one count per rank");
  }
  int64_t global = 0, start = 0;
  for (int r = 0; r < world; ++r) {
    if (r < rank) start += rows[static_cast<std::size_t>(r)];
    global += rows[static_cast<std::size_t>(r)];
  }
  const int64_t mine = rows[static_cast<std::size_t>(rank)];

  ModelConfig config;
  config.type = ModelType::Cnn;
  config.channels = {4, 6};
  config.batch_norm = true;
  config.fc_sizes = {12};
  config.dropout = 0;
  torch::manual_seed(1234);
  auto model = build_model(config, ModelInput{{3, 8, 8}, 5});
  const int converted = sync ? convert_to_sync_batch_norm(*model, *comm) : 0;
  if (rank == 0) std::printf("converted %d\n", converted);
  std::fflush(stdout);
  model->train(true);
  std::vector<at::Tensor> params, buffers;
  for (auto& [name, p] : model->named_parameters()) params.push_back(p);
  for (auto& [name, b] : model->named_buffers()) buffers.push_back(b);

  at::Generator gen = at::detail::createCPUGenerator(77);
  const at::Tensor all_inputs = at::randn({global, 3, 8, 8}, gen) * 2.0 + 0.5;  // BatchNorm has a mean to remove
  const at::Tensor all_weights = at::randn({global, 5}, gen);
  const std::string base = prefix + ".r" + std::to_string(rank);
  for (int step = 0; step < 3; ++step) {
    at::Tensor x = all_inputs.narrow(0, start, mine).clone().requires_grad_(true);
    at::Tensor out = model->forward(x);
    // Summed over the global batch: the ranks' losses add up to the world-1 loss.
    at::Tensor loss = (out * all_weights.narrow(0, start, mine)).sum() / static_cast<double>(global);
    loss.backward();
    std::vector<at::Tensor> grads;
    for (auto& p : params) {
      at::Tensor g = p.grad().defined() ? p.grad().detach().clone() : at::zeros_like(p);
      comm->allreduce_sum(g);
      grads.push_back(g);
    }
    if (step == 0) {
      write_floats(base + ".outputs", {out});
      write_floats(base + ".input_grads", {x.grad()});
      write_floats(base + ".param_grads", grads);
    }
    at::NoGradGuard no_grad;
    for (std::size_t i = 0; i < params.size(); ++i) {
      params[i].sub_(grads[i] * 0.5);
      params[i].mutable_grad() = at::Tensor();
    }
  }
  write_floats(base + ".buffers", buffers);
  // Evaluation uses the running statistics and never communicates: the last rank runs extra forwards that no other
  // rank matches, which would hang or fail if evaluation all-reduced.
  model->train(false);
  at::NoGradGuard no_grad;
  if (rank == world - 1) {
    for (int extra = 0; extra < 3; ++extra) model->forward(all_inputs.narrow(0, 0, 2));
  }
  write_floats(base + ".eval", {model->forward(all_inputs.narrow(0, start, mine))});
  comm->barrier();
  return 0;
}

int main(int argc, char** argv) {
  try {
    Options o;
    std::vector<std::string> args(argv + 1, argv + argc);
    if (std::find(args.begin(), args.end(), "--sync-bn") != args.end()) return run_sync_batch_norm_check(args);
    for (std::size_t i = 0; i < args.size(); ++i) {
      auto next = [&] { return args.at(++i); };
      if (args[i] == "--steps")
        o.steps = std::stoi(next());
      else if (args[i] == "--batch")
        o.batch = std::stoi(next());
      else if (args[i] == "--accum")
        o.accum = std::stoi(next());
      else if (args[i] == "--bucket-mb")
        o.bucket_mb = std::stod(next());
      else if (args[i] == "--first-bucket-mb")
        o.first_bucket_mb = std::stod(next());
      else if (args[i] == "--model")
        o.model = next();
      else if (args[i] == "--find-unused")
        o.find_unused = true;
      else if (args[i] == "--as-view")
        o.as_view = true;
      else if (args[i] == "--no-ddp")
        o.no_ddp = true;
      else if (args[i] == "--timeout")
        o.timeout_s = std::stod(next());
      else if (args[i] == "--die-at-step")
        o.die_at_step = std::stoi(next());
      else
        o.out = args[i];
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
      if (reducer)
        reducer->zero_grad();
      else
        sgd.zero_grad();
    }
    comm->barrier();
    if (comm->rank() == 0 && !o.out.empty()) {
      std::ofstream out(o.out, std::ios::binary);
      for (auto& p : params) {
        at::Tensor c = p.detach().contiguous().to(at::kFloat);
        out.write(reinterpret_cast<const char*>(c.data_ptr<float>()),
                  static_cast<std::streamsize>(c.numel() * sizeof(float)));
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
