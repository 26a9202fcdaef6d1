// Store rendezvous and collectives over c10d (see communicator.hpp).
#include "train/parallel/communicator.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#ifdef MGTRAIN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "train/parallel/shm_allreduce.hpp"
#include "util/error.hpp"
#include "util/fd.hpp"

namespace mgtrain {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// The local address the kernel would use to reach `host` (no packet is sent: UDP connect only routes).
// Gloo binds to it, which is right on multi-homed hosts and inside network namespaces.
std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) {
    throw UsageError(fmt::format("MASTER_ADDR {} does not resolve to an address", host));
  }
  std::string local;
  const Fd socket_fd(socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const int fd = socket_fd.get();
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    char text[INET6_ADDRSTRLEN] = {0};
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      const void* raw = addr.ss_family == AF_INET
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&addr)->sin_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr);
      if (inet_ntop(addr.ss_family, raw, text, sizeof text)) local = text;
    }
  }
  freeaddrinfo(found);
  if (local.empty()) throw UsageError(fmt::format("no route from this host to MASTER_ADDR {}", host));
  return local;
}

class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend_name() const override { return "none (world size 1)"; }
  bool single_process() const override { return true; }
  torch_compat::WorkHandle allreduce_sum_async(at::Tensor&) override { return {}; }
  void broadcast(std::vector<at::Tensor>&, int) override {}
  void barrier() override {}
};

// A collective on a GPU copy of a CPU tensor: the copy back to the CPU happens in wait(), so the caller decides when
// the host synchronises (the step vote is started before the step's work and read after backward).
class StagedWork final : public c10d::Work {
 public:
  StagedWork(torch_compat::WorkHandle inner, at::Tensor on_device, at::Tensor on_host)
      : inner_(std::move(inner)), on_device_(std::move(on_device)), on_host_(std::move(on_host)) {}

  bool wait(std::chrono::milliseconds timeout) override {
    if (!inner_) return true;
    inner_->wait(timeout);
    on_host_.copy_(on_device_);  // waits for the collective's result
    inner_.reset();
    return true;
  }

 private:
  torch_compat::WorkHandle inner_;
  at::Tensor on_device_, on_host_;
};

class ProcessGroupCommunicator final : public Communicator {
 public:
  // `shm`: the intra-node all-reduce for CPU float tensors when every rank is on this host, else nullptr.
  ProcessGroupCommunicator(c10::intrusive_ptr<c10d::Store> store,
                           c10::intrusive_ptr<torch_compat::CollectiveBackend> group, int rank, int world,
                           std::string name, std::unique_ptr<ShmAllreduce> shm = nullptr)
      : store_(std::move(store)),
        group_(std::move(group)),
        shm_(std::move(shm)),
        rank_(rank),
        world_(world),
        name_(std::move(name)) {}
  ~ProcessGroupCommunicator() override {
    shm_.reset();
    try {
      torch_compat::shutdown_backend(*group_);  // NCCL: communicators destroyed in order, not at static destruction
    } catch (const std::exception&) {
      // A failing peer can make shutdown throw; the process is ending and the failure was reported already.
    }
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend_name() const override { return shm_ ? name_ + "+shm" : name_; }

  torch_compat::WorkHandle allreduce_sum_async(at::Tensor& tensor) override {
    if (shm_ && ShmAllreduce::supports(tensor)) return shm_->allreduce_sum_async(tensor);
    if (needs_gpu_staging(
            tensor)) {  // NCCL takes CUDA tensors only: small CPU tensors (votes, eval sums) go through the GPU
      std::vector<at::Tensor> staged{tensor.to(at::kCUDA, /*non_blocking=*/true)};
      auto work = group_->allreduce(staged);
      return c10::make_intrusive<StagedWork>(std::move(work), staged[0], tensor);
    }
    std::vector<at::Tensor> tensors{tensor};
    return group_->allreduce(tensors);
  }

  at::Tensor allocate_reduce_buffer(std::int64_t numel, const at::TensorOptions& options) override {
    if (shm_ && ShmAllreduce::supports(at::empty({0}, options))) {
      if (at::Tensor shared = shm_->allocate_buffer(numel, c10::typeMetaToScalarType(options.dtype()));
          shared.defined())
        return shared;
    }
    return Communicator::allocate_reduce_buffer(numel, options);
  }

  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions options;
    options.rootRank = root;
    for (auto& t : tensors) {
      std::vector<at::Tensor> one{needs_gpu_staging(t) ? t.to(at::kCUDA) : t};
      group_->broadcast(one, options)->wait();
      if (rank_ != root && !one[0].is_same(t)) t.copy_(one[0]);  // the root's tensor is what it sent
    }
  }

  void barrier() override { group_->barrier()->wait(); }

 private:
  bool needs_gpu_staging(const at::Tensor& tensor) const { return name_ == "nccl" && !tensor.is_cuda(); }

  c10::intrusive_ptr<c10d::Store> store_;  // kept alive: rank 0 hosts the server inside it
  c10::intrusive_ptr<torch_compat::CollectiveBackend> group_;
  std::unique_ptr<ShmAllreduce> shm_;  // destroyed first: its thread stops before the group goes
  int rank_, world_;
  std::string name_;
};

c10::intrusive_ptr<c10d::TCPStore> open_store(const WorkerIdentity& id, const DdpConfig& ddp) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(id.master_port);
  options.isServer = id.rank == 0 && !id.agent_hosts_store;  // under torchrun's static rendezvous its agent hosts it
  options.numWorkers = static_cast<std::size_t>(id.world_size);
  options.waitWorkers = false;  // the arrival barrier below waits, and says who is missing
  options.timeout = to_ms(ddp.connect_timeout_s);
  try {
    return c10::make_intrusive<c10d::TCPStore>(id.master_addr, options);
  } catch (const std::exception& e) {
    if (id.rank == 0) {
      throw Error(
          fmt::format("rank 0 cannot host the rendezvous store on {}:{}: {} (is the port in use? pick another "
                      "with --master-port, or 0 for a free one)",
                      id.master_addr, id.master_port, first_line(e.what())));
    }
    throw Error(
        fmt::format("rank {} cannot reach the rendezvous store at {}:{} within {} s: {} (is rank 0 running, and "
                    "are MASTER_ADDR/MASTER_PORT right and reachable from this host?)",
                    id.rank, id.master_addr, id.master_port, ddp.connect_timeout_s, first_line(e.what())));
  }
}

// The prefix of this attempt's keys in the store. The restart count only where torchrun's agent serves the store, which
// outlives a restart of the workers (as torch's own workers prefix theirs, "/worker/attempt_N"). Otherwise rank 0
// hosts a store of this attempt alone, and the ranks' restart counts need not agree: under torchrun a node that
// replaced a lost one starts counting at 0 while the others are at 3, and with the count in the keys neither side's
// ranks would ever see the other's.
std::string attempt_prefix(const WorkerIdentity& id) {
  return fmt::format("mgtrain/{}", id.agent_hosts_store ? id.restart_count : 0);
}

// Every rank checks in; on timeout the error lists who arrived and who did not.
void wait_for_all_ranks(c10d::Store& store, const WorkerIdentity& id, double timeout_s) {
  char hostname[256] = {0};
  gethostname(hostname, sizeof hostname - 1);
  const std::string counter = attempt_prefix(id) + "/arrived";
  const std::string me = fmt::format("{}/{}", counter, id.rank);
  store.set(me, std::vector<std::uint8_t>(hostname, hostname + std::strlen(hostname)));
  store.add(counter, 1);
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  auto pause = std::chrono::milliseconds(1);
  while (store.add(counter, 0) < id.world_size) {
    if (Clock::now() > deadline) {
      std::string arrived, missing;
      for (int r = 0; r < id.world_size; ++r) {
        std::string& list = store.check({fmt::format("{}/{}", counter, r)}) ? arrived : missing;
        list += (list.empty() ? "" : ", ") + std::to_string(r);
      }
      throw Error(
          fmt::format("rendezvous at {}:{} timed out after {} s: ranks {} arrived, ranks {} did not "
                      "(raise ddp.connect_timeout_s if they are just slow to start)",
                      id.master_addr, id.master_port, timeout_s, arrived, missing));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

#ifdef MGTRAIN_WITH_CUDA
// NCCL refuses two ranks on one GPU deep inside its init ("Duplicate GPU detected"). Each rank counts itself on a
// store key named after its host and its current GPU's PCI address before the arrival barrier; after it, a count
// above 1 means this GPU is shared, and every rank on it says so and what to change.
std::string claim_gpu(c10d::Store& store, const WorkerIdentity& id) {
  char hostname[256] = {0};
  gethostname(hostname, sizeof hostname - 1);
  const c10::DeviceIndex index = c10::cuda::current_device();
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(index);
  const std::string gpu = fmt::format("{:04x}:{:02x}:{:02x}", prop->pciDomainID, prop->pciBusID, prop->pciDeviceID);
  const std::string key = fmt::format("{}/gpu/{}/{}", attempt_prefix(id), hostname, gpu);
  store.add(key, 1);
  return key;
}

void refuse_shared_gpu(c10d::Store& store, const std::string& key, const WorkerIdentity& id) {
  const std::int64_t sharing = store.add(key, 0);
  if (sharing <= 1) return;
  throw UsageError(
      fmt::format("rank {} (LOCAL_RANK {}): {} ranks would share one GPU ({}), which NCCL refuses: give each "
                  "worker its own GPU (--nproc at most the GPU count, --gpu-ids, or a CUDA_VISIBLE_DEVICES per "
                  "rank), or use ddp.backend: gloo to share it",
                  id.rank, id.local_rank, sharing, key.substr(key.rfind('/') + 1)));
}
#endif

}  // namespace

void Communicator::allreduce_sum(at::Tensor& tensor) {
  if (auto work = allreduce_sum_async(tensor)) work->wait();
}

at::Tensor Communicator::allocate_reduce_buffer(std::int64_t numel, const at::TensorOptions& options) {
  return at::zeros({numel}, options);
}

void Communicator::broadcast_coalesced(std::vector<at::Tensor>& tensors, int root) {
  if (world_size() == 1 || tensors.empty()) return;
  std::vector<at::ScalarType> dtypes;
  for (const auto& t : tensors)
    if (std::find(dtypes.begin(), dtypes.end(), t.scalar_type()) == dtypes.end()) dtypes.push_back(t.scalar_type());
  for (auto dtype : dtypes) {
    std::vector<at::Tensor> flat_parts;
    std::vector<at::Tensor*> members;
    for (auto& t : tensors) {
      if (t.scalar_type() != dtype) continue;
      flat_parts.push_back(t.detach().reshape({-1}));
      members.push_back(&t);
    }
    std::vector<at::Tensor> packed{at::cat(flat_parts)};
    broadcast(packed, root);
    std::int64_t offset = 0;
    at::NoGradGuard no_grad;
    for (auto* t : members) {
      const std::int64_t n = t->numel();
      t->detach().copy_(packed[0].narrow(0, offset, n).view(t->sizes()));
      offset += n;
    }
  }
}

at::Tensor broadcast_bytes(Communicator& comm, const at::Tensor& bytes, int root) {
  if (comm.world_size() == 1) return bytes;
  const bool mine = comm.rank() == root;
  std::vector<at::Tensor> length{at::tensor({mine ? bytes.numel() : std::int64_t{0}}, at::kLong)};
  comm.broadcast(length, root);
  const std::int64_t size = length[0].item<std::int64_t>();
  std::vector<at::Tensor> payload{mine ? bytes : at::empty({size}, at::kByte)};
  if (size > 0) comm.broadcast(payload, root);
  return payload[0];
}

std::unique_ptr<Communicator> connect_communicator(const WorkerIdentity& id, const DdpConfig& ddp,
                                                   const std::string& backend) {
  if (id.world_size == 1 && !ddp.force_process_group) return std::make_unique<SingleProcessCommunicator>();
  if (id.master_port <= 0) throw UsageError("MASTER_PORT is not set; a world size above 1 needs the store's port");
  auto store = open_store(id, ddp);
#ifdef MGTRAIN_WITH_CUDA
  const std::string gpu_key = backend == "nccl" ? claim_gpu(*store, id) : std::string();
  wait_for_all_ranks(*store, id, ddp.connect_timeout_s);
  if (!gpu_key.empty()) refuse_shared_gpu(*store, gpu_key, id);
#else
  wait_for_all_ranks(*store, id, ddp.connect_timeout_s);
#endif
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>(attempt_prefix(id) + "/pg", store);

  if (backend == "nccl") {
#ifdef MGTRAIN_WITH_CUDA
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = to_ms(ddp.timeout_s);
    auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, id.rank, id.world_size, options);
    return std::make_unique<ProcessGroupCommunicator>(store, group, id.rank, id.world_size, "nccl");
#else
    throw UsageError("ddp.backend: nccl needs a LibTorch with CUDA; this build is CPU-only (use gloo or auto)");
#endif
  }
  auto options = c10d::ProcessGroupGloo::Options::create(to_ms(ddp.timeout_s));
  if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(iface));
  } else {
    options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(local_address_towards(id.master_addr, id.master_port)));
  }
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  try {
    group = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, id.rank, id.world_size, options);
  } catch (const std::exception& e) {
    throw Error(fmt::format("rank {}: gloo could not connect to its peers: {}", id.rank, first_line(e.what())));
  }
  std::unique_ptr<ShmAllreduce> shm;
  // Sums go through shared memory when every rank runs on this machine: one node's ranks, or several nodes' on one
  // machine (ShmAllreduce::connect finds out; ranks on other machines answer that, and everyone uses gloo).
  if (!ddp.force_process_group) {
    const char* run_id = std::getenv("TORCHELASTIC_RUN_ID");
    const std::string tag = fmt::format("{}-{}", id.master_port, run_id && *run_id ? run_id : "run");
    auto attempt_store = c10::make_intrusive<c10d::PrefixStore>(attempt_prefix(id), store);
    shm = ShmAllreduce::connect(attempt_store, id.rank, id.world_size, tag, ddp.connect_timeout_s, ddp.timeout_s);
  }
  return std::make_unique<ProcessGroupCommunicator>(store, group, id.rank, id.world_size, "gloo", std::move(shm));
}

}  // namespace mgtrain
