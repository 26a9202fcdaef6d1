// The worker's view of its process group: the c10d TCPStore rendezvous (rank 0 hosts it), an arrival
// barrier that names missing ranks instead of hanging, and the few collectives the trainer uses, over
// Gloo on CPU or NCCL on CUDA. World size 1 needs no store and no network.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "config/config.hpp"
#include "contract/worker_identity.hpp"
#include "train/torch/torch_compat.hpp"

namespace mgtrain {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend_name() const = 0;
  // No process group at all (world size 1 without ddp.force_process_group): collectives are skipped, not run.
  virtual bool single_process() const { return false; }
  // Sum over ranks, in place; the handle completes when `tensor` holds the result.
  virtual torch_compat::WorkHandle allreduce_sum_async(at::Tensor& tensor) = 0;
  void allreduce_sum(at::Tensor& tensor);
  // Collective (every rank, same order, same sizes): a zero-filled 1-D buffer that this communicator sums
  // fastest, for tensors reduced again and again such as gradient buckets. With the shared-memory path it
  // lives in shared memory and is summed without copies; otherwise it is ordinary memory.
  virtual at::Tensor allocate_reduce_buffer(std::int64_t numel, const at::TensorOptions& options);
  // Copies root's tensors into everyone's, in place.
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root) = 0;
  // The same in one message per dtype: tensors are packed into a flat buffer and unpacked in place.
  void broadcast_coalesced(std::vector<at::Tensor>& tensors, int root);
  virtual void barrier() = 0;
};

// Collective: root's bytes (a 1-D U8 CPU tensor there; ignored elsewhere) on every rank, as a 1-D U8 CPU tensor (NCCL:
// through the GPU, as every CPU tensor). Root gets its own tensor back, unchanged.
at::Tensor broadcast_bytes(Communicator& comm, const at::Tensor& bytes, int root);

// backend: "gloo" or "nccl" (already resolved from "auto"). Throws UsageError/Error with the address,
// the timeout and the ranks that arrived when the rendezvous fails.
std::unique_ptr<Communicator> connect_communicator(const WorkerIdentity& id, const DdpConfig& ddp,
                                                   const std::string& backend);

}  // namespace mgtrain
