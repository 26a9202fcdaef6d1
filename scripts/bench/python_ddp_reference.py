#!/usr/bin/env python3
"""PyTorch's own DistributedDataParallel on the benchmark models, the reference mgtrain is measured against.

Run under torchrun (gloo, CPU), e.g.
  OMP_NUM_THREADS=1 torchrun --standalone --nproc_per_node 2 --monitor_interval 0.1 --redirects 9:1 --tee 9:1 \
      scripts/bench/python_ddp_reference.py --hidden 1024,1024 --batch 64 --steps 300

It mirrors configs/bench/*.yaml: an MLP (--hidden) or the Fashion-MNIST CNN (--cnn: configs/bench/cnn.yaml, mgtrain's
lib/train/models/cnn_model.cpp: conv3x3 without bias + BatchNorm2d + ReLU + MaxPool2d(2) per channel count, then
Linear + ReLU per fc width) on synthetic 1x28x28 inputs with 10 classes, SGD with momentum 0.9,
the usual TensorDataset + DistributedSampler + DataLoader input pipeline, DDP with default buckets.
Rank 0 prints one JSON line like mgtrain's summary: {"summary": {"samples_per_s": ..., "step_time_ms": ...}}.
--no-comm times the same step without DDP (no gradient all-reduce), for the overlap measurement.
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", default="1024,1024")
    parser.add_argument("--cnn", action="store_true", help="the CNN of configs/bench/cnn.yaml instead of the MLP")
    parser.add_argument("--channels", default="32,64")
    parser.add_argument("--fc", default="128")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--samples", type=int, default=60000)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--no-comm", action="store_true")
    args = parser.parse_args()

    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1

    torch.manual_seed(42)
    if args.cnn:
        layers, c, side = [], 1, 28
        for out in [int(x) for x in args.channels.split(",")]:
            layers += [nn.Conv2d(c, out, 3, 1, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU(), nn.MaxPool2d(2)]
            c, side = out, side // 2
        widths = [c * side * side] + [int(x) for x in args.fc.split(",")]
    else:
        layers = []
        widths = [784] + [int(h) for h in args.hidden.split(",")]
    layers.append(nn.Flatten())
    for a, b in zip(widths, widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    layers.append(nn.Linear(widths[-1], 10))
    model = nn.Sequential(*layers)
    if distributed and not args.no_comm:
        model = DistributedDataParallel(model)

    generator = torch.Generator().manual_seed(42)
    inputs = torch.randn(args.samples, 1, 28, 28, generator=generator)
    targets = torch.randint(0, 10, (args.samples,), generator=generator)
    dataset = TensorDataset(inputs, targets)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=42)
    loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler, drop_last=True)

    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    warmup = min(10, max(args.steps // 5, 1))
    step, epoch, times = 0, 0, []
    while step < args.steps:
        sampler.set_epoch(epoch)
        batches = iter(loader)
        while True:
            # A step is timed from fetching its batch to the end of the optimizer step, as in mgtrain.
            start = time.perf_counter()
            try:
                x, y = next(batches)
            except StopIteration:
                break
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            step += 1
            if step > warmup:
                times.append(time.perf_counter() - start)
            if step >= args.steps:
                break
        epoch += 1
    if distributed:
        dist.barrier()
    if rank == 0:
        print(json.dumps({"summary": {"steps": step, "world_size": world,
                                      "samples_per_s": len(times) * args.batch * world / sum(times),
                                      "step_time_ms": statistics.median(times) * 1000.0}}), flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
