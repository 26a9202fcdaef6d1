// The gradient reducer across real processes: world 2 x batch B equals world 1 x batch 2B, accumulation
// equals a bigger batch, bucket edge cases, and unused parameters (zero with find_unused_parameters,
// a clear error without it, never a hang); both all-reduce paths on one host (shared memory, the default,
// and Gloo with MGTRAIN_SHM_ALLREDUCE=0), more ranks than cores, and a killed rank failing the others in time.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>

#include "host/port_probe.hpp"
#include "process/run_capture.hpp"
#include "rank_processes.hpp"

using namespace mgtrain;
using mgtrain::test::RankRuns;
using mgtrain::test::run_ranks;
namespace fs = std::filesystem;

namespace {

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<float> values;
  float v;
  while (in.read(reinterpret_cast<char*>(&v), sizeof v)) values.push_back(v);
  return values;
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  REQUIRE_FALSE(a.empty());
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

std::string out_file(const std::string& name) {
  return (fs::temp_directory_path() / ("mgtrain-ddp-" + name + "-" + std::to_string(getpid()) + ".bin")).string();
}

// Shared-memory segments of the run on `port` still in /dev/shm (there should be none once it has started).
std::vector<std::string> leftover_segments(int port) {
  std::vector<std::string> found;
  const std::string prefix = "mgtrain-shm-" + std::to_string(port) + "-";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/dev/shm", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) found.push_back(name);
  }
  return found;
}

// The number after `label ` in rank 0's output, or -1.
int reported_number(const std::string& text, const std::string& label) {
  const auto at = text.find(label + " ");
  return at == std::string::npos ? -1 : std::atoi(text.c_str() + at + label.size() + 1);
}

// Final parameters of `world` ranks at per-rank `batch`, with extra worker flags; `backend` receives what
// rank 0 reports ("gloo+shm" or "gloo"), `shared_buckets` how many buckets live in shared memory.
std::vector<float> train(int world, int batch, std::vector<std::string> extra, const std::string& name,
                         const std::map<std::string, std::string>& env = {}, std::string* backend = nullptr,
                         int* shared_buckets = nullptr) {
  const std::string out = out_file(name);
  std::vector<std::string> args = {out, "--steps", "6", "--batch", std::to_string(batch)};
  args.insert(args.end(), extra.begin(), extra.end());
  RankRuns runs = run_ranks(world, args, env);
  INFO(runs.errors());
  REQUIRE(runs.all_ok());
  CHECK(leftover_segments(runs.port).empty());
  if (backend) {
    const std::string& text = runs.ranks[0].out;
    const auto at = text.find("backend ");
    *backend = at == std::string::npos ? "" : text.substr(at + 8, text.find('\n', at) - at - 8);
  }
  if (shared_buckets) *shared_buckets = reported_number(runs.ranks[0].out, "shared buckets");
  auto values = read_floats(out);
  fs::remove(out);
  return values;
}

}  // namespace

TEST_CASE("world 2 x batch B equals world 1 x batch 2B", "[ddp]") {
  auto reference = train(1, 8, {}, "w1");
  auto distributed = train(2, 4, {}, "w2");
  CHECK(max_abs_difference(reference, distributed) <= 1e-5);
  auto as_view = train(2, 4, {"--as-view"}, "w2view");
  CHECK(max_abs_difference(reference, as_view) <= 1e-5);
}

TEST_CASE("a training run actually changes the parameters", "[ddp]") {
  // Guards the comparisons above against a no-op: fewer steps must give different parameters.
  auto six = train(1, 8, {}, "six");
  const std::string out = out_file("two");
  RankRuns runs = run_ranks(1, {out, "--steps", "2", "--batch", "8"});
  REQUIRE(runs.all_ok());
  CHECK(max_abs_difference(six, read_floats(out)) > 1e-3);
  fs::remove(out);
}

TEST_CASE("2 accumulation micro-steps of B equal one step of 2B, with and without DDP", "[ddp][accumulation]") {
  auto big_batch = train(1, 8, {"--no-ddp"}, "acc-ref");
  auto accumulated = train(1, 4, {"--accum", "2", "--no-ddp"}, "acc-noddp");  // 2 micro-steps x 4 rows
  CHECK(max_abs_difference(big_batch, accumulated) <= 1e-5);
  auto accumulated_ddp = train(2, 4, {"--accum", "2"}, "acc-ddp");  // 2 ranks x 2 micro-steps x 4 rows
  auto reference_ddp = train(1, 16, {}, "acc-ddp-ref");
  CHECK(max_abs_difference(reference_ddp, accumulated) > 1e-3);  // a different batch gives different parameters
  CHECK(max_abs_difference(reference_ddp, accumulated_ddp) <= 1e-5);
}

TEST_CASE("a parameter larger than the bucket cap and many tiny parameters", "[ddp][buckets]") {
  auto big_reference = train(1, 8, {"--model", "big"}, "big1");
  auto big = train(2, 4, {"--model", "big", "--bucket-mb", "1", "--first-bucket-mb", "1"}, "big2");
  CHECK(max_abs_difference(big_reference, big) <= 1e-5);
  auto tiny_reference = train(1, 8, {"--model", "tiny"}, "tiny1");
  auto tiny = train(2, 4, {"--model", "tiny", "--bucket-mb", "0.00001", "--first-bucket-mb", "0.00001"}, "tiny2");
  CHECK(max_abs_difference(tiny_reference, tiny) <= 1e-5);
  // With caps below every tensor's size each of the 39 weights and 39 biases gets its own bucket;
  // with the defaults they all fit in the first one.
  RankRuns own =
      run_ranks(1, {"", "--steps", "1", "--model", "tiny", "--bucket-mb", "0.00001", "--first-bucket-mb", "0.00001"});
  CHECK(own.ranks[0].out.find("buckets 78\n") != std::string::npos);
  RankRuns shared = run_ranks(1, {"", "--steps", "1", "--model", "tiny"});
  CHECK(shared.ranks[0].out.find("buckets 1\n") != std::string::npos);
}

TEST_CASE("unused parameters: zero with find_unused_parameters, a clear error without", "[ddp][unused]") {
  auto reference = train(1, 8, {"--model", "unused", "--find-unused"}, "unused1");
  auto distributed = train(2, 4, {"--model", "unused", "--find-unused"}, "unused2");
  CHECK(max_abs_difference(reference, distributed) <= 1e-5);

  const auto start = std::chrono::steady_clock::now();
  RankRuns failing = run_ranks(2, {out_file("unused-err"), "--model", "unused"});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& rank : failing.ranks) {
    CHECK(rank.exit_code == 2);
    CHECK(rank.err.find("parameter(s) received no gradient in this step") != std::string::npos);
    CHECK(rank.err.find("unused.weight") != std::string::npos);
    CHECK(rank.err.find("ddp.find_unused_parameters: true") != std::string::npos);
  }
  CHECK(seconds < 30);  // no hang until the collective timeout
}

TEST_CASE("one host: shared-memory all-reduce by default, Gloo with MGTRAIN_SHM_ALLREDUCE=0, the same result",
          "[ddp][shm]") {
  auto reference = train(1, 8, {}, "path1");
  std::string backend;
  int shared_buckets = -1;
  // The buckets live in shared memory and are summed in place (no copies).
  auto shm =
      train(2, 4, {"--bucket-mb", "0.001", "--first-bucket-mb", "0.001"}, "path-shm", {}, &backend, &shared_buckets);
  CHECK(backend == "gloo+shm");
  CHECK(shared_buckets > 1);
  CHECK(max_abs_difference(reference, shm) <= 1e-5);
  auto gloo = train(2, 4, {}, "path-gloo", {{"MGTRAIN_SHM_ALLREDUCE", "0"}}, &backend, &shared_buckets);
  CHECK(backend == "gloo");
  CHECK(shared_buckets == 0);
  CHECK(max_abs_difference(reference, gloo) <= 1e-5);
  // A 2.9 MB bucket is larger than a 2 MiB slot: it goes through in chunks.
  auto huge_reference = train(1, 8, {"--model", "huge"}, "huge1");
  auto huge = train(2, 4, {"--model", "huge"}, "huge2", {}, &backend);
  CHECK(backend == "gloo+shm");
  CHECK(max_abs_difference(huge_reference, huge) <= 1e-5);
}

TEST_CASE("world 3 and 4 on two cores equal world 1", "[ddp][shm]") {
  auto reference = train(1, 12, {}, "w1of12");
  std::string backend;
  CHECK(max_abs_difference(reference, train(3, 4, {}, "w3", {}, &backend)) <= 1e-5);
  CHECK(backend == "gloo+shm");
  CHECK(max_abs_difference(reference, train(4, 3, {"--accum", "1"}, "w4", {}, &backend)) <= 1e-5);
  CHECK(backend == "gloo+shm");
}

TEST_CASE("a rank killed mid-run fails the others at once (well before ddp.timeout_s) and leaves no segment behind",
          "[ddp][shm][kill]") {
  for (const std::string shm_setting : {"1", "0"}) {
    INFO("MGTRAIN_SHM_ALLREDUCE=" << shm_setting);
    const auto start = std::chrono::steady_clock::now();
    RankRuns runs = run_ranks(2, {out_file("killed"), "--steps", "6", "--timeout", "60", "--die-at-step", "2"},
                              {{"MGTRAIN_SHM_ALLREDUCE", shm_setting}});
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    INFO(runs.errors());
    CHECK(runs.ranks[1].signal == SIGKILL);
    CHECK(runs.ranks[0].exit_code != 0);
    CHECK_FALSE(runs.ranks[0].timed_out);
    if (shm_setting == "1") {  // noticed within ~100 ms, not after the timeout
      CHECK(runs.ranks[0].err.find("local rank 1 (pid ") != std::string::npos);
      CHECK(runs.ranks[0].err.find("exited before reaching operation") != std::string::npos);
    }
    CHECK(seconds < 30);
    CHECK(leftover_segments(runs.port).empty());
  }
}
