#!/usr/bin/env python3
"""Python DDP reference for scripts/bench/time_to_accuracy.sh: mgtrain's default job (configs/fashion_mnist_cnn.yaml)
written the way a PyTorch user would, with the same model, initialisation, data, data order and hyper-parameters.

Run under torchrun (gloo, CPU; --device cuda: NCCL, a GPU a rank), e.g.
  OMP_NUM_THREADS=1 torchrun --standalone --nproc-per-node 2 scripts/bench/fmnist_reference.py \
      --eval-every-steps 200 --no-eval-at-epoch-end --target-accuracy 0.92
Works with torch 2.x and torch 1.13. The defaults are mgtrain's for that config; time_to_accuracy.sh passes the
values of `mgtrain config show` so the two cannot drift apart.

What it mirrors (the mgtrain source it follows in brackets):
- model: [conv3x3 (no bias) + BatchNorm2d + ReLU + MaxPool2d(2)] per channel count, Flatten, [Linear + ReLU] per fc
  width, Linear to 10 classes; torch's default init, drawn after torch.manual_seed(seed) in construction order
  (lib/train/models/cnn_model.cpp, layers.cpp);
- data: the IDX files (plain or .gz), pixels / 255 normalised by the training split's mean and population std over
  all pixels, applied through a 256-entry float32 table (lib/train/data/mnist_data.cpp, image_normalization.cpp);
- order: torch.utils.data.DistributedSampler, shuffle with seed + epoch, no drop_last (lib/train/data/
  distributed_sampler.cpp is the same algorithm); batches of --batch per rank, the last one short;
- step: cross-entropy (mean over the rank's batch), gradients averaged over ranks by DDP, rank 0's buffers
  broadcast before each forward (DDP's broadcast_buffers), SGD with momentum and weight decay on every parameter,
  the learning rate of step k (0-based) set before the optimizer step (lib/train/loop/trainer.cpp, lr_schedule.cpp);
- eval: every --eval-every-steps steps and at each epoch end (as train.eval_every_steps / train.eval_at_epoch_end),
  on the whole test split: rank r takes samples r, r + W, ... (no padding), batches of --batch, each rank with its
  own batch-norm statistics, then loss sum, correct and count are all-reduced.
Rank 0 prints one JSON line per eval, {"eval": {"step", "epoch", "when", "elapsed_s", "loss", "accuracy", "samples"}},
elapsed_s counted from the start of this process, and at the end {"summary": {...}}.
--target-accuracy A stops after the first eval with accuracy >= A (the benchmark's stopping point).
"""
import time

_T_IMPORT = time.monotonic()

import argparse
import gzip
import json
import math
import os
import statistics
import sys


def process_start_monotonic():
    """time.monotonic() at this process's start (from /proc: 10 ms resolution), or at this module's import."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        started_after_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        age = uptime - started_after_boot
        return _T_IMPORT - age if 0 <= age < 60 else _T_IMPORT
    except (OSError, ValueError, IndexError):
        return _T_IMPORT


T0 = process_start_monotonic()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset  # noqa: E402


class UsageError(Exception):
    pass


def int_list(text):
    try:
        values = [int(v) for v in text.strip("[] ").split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("expected integers separated by commas, got %r" % text)
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("expected positive integers separated by commas, got %r" % text)
    return values


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist", help="directory of the IDX files (data.path)")
    p.add_argument("--channels", type=int_list, default=[32, 64], help="model.channels")
    p.add_argument("--fc", type=int_list, default=[128], help="model.fc_sizes")
    p.add_argument("--epochs", type=int, default=10, help="train.epochs")
    p.add_argument("--max-steps", type=int, default=0, help="train.max_steps (0: all epochs)")
    p.add_argument("--batch", type=int, default=64, help="train.batch_size, per rank")
    p.add_argument("--seed", type=int, default=42, help="train.seed")
    p.add_argument("--lr", type=float, default=0.05, help="optim.lr")
    p.add_argument("--momentum", type=float, default=0.9, help="optim.momentum")
    p.add_argument("--weight-decay", type=float, default=0.0005, help="optim.weight_decay")
    p.add_argument("--schedule", choices=["cosine", "linear", "constant"], default="cosine", help="optim.schedule")
    p.add_argument("--warmup-steps", type=int, default=100, help="optim.warmup_steps")
    p.add_argument("--min-lr", type=float, default=0.0, help="optim.min_lr")
    p.add_argument("--eval-every-steps", type=int, default=0, help="train.eval_every_steps (0: never by steps)")
    p.add_argument("--no-eval-at-epoch-end", dest="eval_at_epoch_end", action="store_false",
                   help="train.eval_at_epoch_end: false")
    p.add_argument("--target-accuracy", type=float, default=0.0,
                   help="stop after the first eval at or above this accuracy (0: train to the end)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="train.device: cpu (gloo) or cuda (the GPU LOCAL_RANK, NCCL; batches in pinned memory)")
    args = p.parse_args()
    for name in ("epochs", "batch"):
        if getattr(args, name) < 1:
            p.error("--%s: %d must be at least 1" % (name, getattr(args, name)))
    for name in ("max_steps", "seed", "warmup_steps", "eval_every_steps"):
        if getattr(args, name) < 0:
            p.error("--%s: %d must not be negative" % (name.replace("_", "-"), getattr(args, name)))
    if not 0.0 <= args.target_accuracy <= 1.0:
        p.error("--target-accuracy: %g is outside [0, 1]" % args.target_accuracy)
    if args.lr <= 0 or args.momentum < 0 or args.weight_decay < 0 or args.min_lr < 0:
        p.error("--lr must be positive; --momentum, --weight-decay and --min-lr must not be negative")
    return args


# --- data ---------------------------------------------------------------------------------------------------------

def read_idx(directory, name, dims):
    """An IDX file of unsigned bytes with `dims` dimensions (plain or .gz, like mgtrain's find_data_file)."""
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        if not os.path.exists(path + ".gz"):
            raise UsageError("%s: no such file (nor %s.gz); Debian: apt-get install dataset-fashion-mnist" % (path, path))
        path += ".gz"
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    header = 4 + 4 * dims
    magic = 0x800 + dims
    if len(raw) < header or int.from_bytes(raw[:4], "big") != magic:
        raise UsageError("%s: not an IDX file of unsigned bytes with %d dimensions (magic 0x%08x)" % (path, dims, magic))
    shape = [int.from_bytes(raw[4 + 4 * d:8 + 4 * d], "big") for d in range(dims)]
    if len(raw) - header != int(np.prod(shape)):
        raise UsageError("%s: %d data bytes, the header promises %s" % (path, len(raw) - header, "x".join(map(str, shape))))
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


def normalisation_table(train_images):
    """float32 value of each byte: (v/255 - mean) / std with the training split's statistics, summed over a byte
    histogram in the same order and precision as lib/train/data/image_normalization.cpp."""
    histogram = np.bincount(train_images.reshape(-1), minlength=256)
    count = total = total_sq = 0.0
    for v in range(256):
        x, n = v / 255.0, float(histogram[v])
        count += n
        total += n * x
        total_sq += n * x * x
    mean = total / count
    var = total_sq / count - mean * mean
    std = math.sqrt(var) if var > 1e-12 else 1.0
    table = np.array([(v / 255.0 - mean) / std for v in range(256)], dtype=np.float64).astype(np.float32)
    return table, mean, std


def load_split(directory, prefix, table):
    images = read_idx(directory, prefix + "-images-idx3-ubyte", 3)
    labels = read_idx(directory, prefix + "-labels-idx1-ubyte", 1)
    if labels.shape[0] != images.shape[0]:
        raise UsageError("%s: %d labels for %d images" % (directory, labels.shape[0], images.shape[0]))
    x = torch.from_numpy(table[images][:, None, :, :].copy())
    y = torch.from_numpy(labels.astype(np.int64))
    return x, y


# --- model --------------------------------------------------------------------------------------------------------

class Cnn(nn.Module):
    """The names (features.0.weight, ...) and construction order are mgtrain's, so seed 42 draws the same weights."""

    def __init__(self, channels, fc_sizes, height=28, width=28, classes=10):
        super().__init__()
        blocks, c = [], 1
        for out in channels:
            blocks += [nn.Conv2d(c, out, 3, 1, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU(), nn.MaxPool2d(2)]
            c, height, width = out, height // 2, width // 2
        self.features = nn.Sequential(*blocks)
        head, flat = [nn.Flatten()], c * height * width
        for fc in fc_sizes:
            head += [nn.Linear(flat, fc), nn.ReLU()]
            flat = fc
        head.append(nn.Linear(flat, classes))
        self.classifier = nn.Sequential(*head)

    def forward(self, x):
        return self.classifier(self.features(x))


def learning_rate(args, step, total_steps):
    """lib/train/loop/lr_schedule.cpp's LrSchedule::at, step 0-based."""
    peak, warmup = args.lr, args.warmup_steps
    if step < warmup:
        return peak * (step + 1) / warmup
    floor_lr = min(args.min_lr, peak)
    decay_steps = max(max(total_steps, 1) - warmup, 1)
    progress = min(max((step - warmup) / decay_steps, 0.0), 1.0)
    if args.schedule == "cosine":
        return floor_lr + (peak - floor_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))
    if args.schedule == "linear":
        return peak - (peak - floor_lr) * progress
    return peak


def evaluate(model, test_x, test_y, batch, rank, world, device):
    model.eval()
    shard = torch.arange(rank, test_x.shape[0], world)
    loss_sum = correct = count = 0.0
    with torch.no_grad():
        for start in range(0, shard.numel(), batch):
            index = shard[start:start + batch]
            logits = model(test_x[index].to(device, non_blocking=True))
            targets = test_y[index].to(device, non_blocking=True)
            n = float(targets.numel())
            loss_sum += F.cross_entropy(logits, targets).item() * n
            correct += logits.argmax(-1).eq(targets).sum().item()
            count += n
    totals = torch.tensor([loss_sum, correct, count], dtype=torch.float64, device=device)
    if world > 1:
        dist.all_reduce(totals)
    model.train()
    loss_sum, correct, count = totals.tolist()
    return {"loss": loss_sum / count, "accuracy": correct / count, "samples": int(count)}


class Run:
    """One rank's training: the loop of lib/train/loop/trainer.cpp (steps, periodic and epoch-end evals, the end)."""

    def __init__(self, args, rank, world):
        self.args, self.rank, self.world = args, rank, world
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.device = torch.device("cuda", local_rank) if args.device == "cuda" else torch.device("cpu")
        train_images = read_idx(args.data, "train-images-idx3-ubyte", 3)
        table, self.mean, self.std = normalisation_table(train_images)
        train_x, train_y = load_split(args.data, "train", table)
        self.test_x, self.test_y = load_split(args.data, "t10k", table)
        dataset = TensorDataset(train_x, train_y)
        self.sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=args.seed,
                                          drop_last=False)
        self.loader = DataLoader(dataset, batch_size=args.batch, sampler=self.sampler, drop_last=False,
                                 pin_memory=self.device.type == "cuda")
        self.steps_per_epoch = len(self.loader)
        self.total_steps = args.max_steps if args.max_steps > 0 else self.steps_per_epoch * args.epochs

        torch.manual_seed(args.seed)
        self.model = Cnn(args.channels, args.fc, train_x.shape[2], train_x.shape[3], max(10, int(train_y.max()) + 1))
        self.model.to(self.device)
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        self.ddp = DistributedDataParallel(self.model, device_ids=device_ids) if world > 1 else self.model
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=learning_rate(args, 0, self.total_steps),
                                         momentum=args.momentum, weight_decay=args.weight_decay)
        self.step, self.epoch, self.evaluated_at = 0, 0, -1
        self.last_eval, self.reached_at = None, None
        self.step_times = []

    def eval(self, when):
        result = evaluate(self.model, self.test_x, self.test_y, self.args.batch, self.rank, self.world, self.device)
        self.last_eval, self.evaluated_at = result, self.step
        elapsed = time.monotonic() - T0
        if self.rank == 0:
            row = {"step": self.step, "epoch": self.epoch + 1, "when": when, "elapsed_s": round(elapsed, 3)}
            row.update(result)
            print(json.dumps({"eval": row}), flush=True)
        target = self.args.target_accuracy
        if target > 0 and result["accuracy"] >= target and self.reached_at is None:
            self.reached_at = elapsed
        return self.reached_at is not None  # every rank sees the same all-reduced accuracy: all stop together

    def train_step(self, x, y):
        start = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        loss = F.cross_entropy(self.ddp(x), y)
        loss.backward()
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate(self.args, self.step, self.total_steps)
        self.optimizer.step()
        self.step += 1
        self.step_times.append(time.perf_counter() - start)
        return loss.item()

    def run(self):
        every = self.args.eval_every_steps
        while self.step < self.total_steps:
            self.sampler.set_epoch(self.epoch)
            done_in_epoch = 0
            for x, y in self.loader:
                if self.step >= self.total_steps:
                    break
                self.train_step(x, y)
                done_in_epoch += 1
                if every > 0 and self.step % every == 0 and self.eval("periodic"):
                    return
                if done_in_epoch == self.steps_per_epoch and self.args.eval_at_epoch_end and self.eval("epoch end"):
                    return
            self.epoch += 1
        if self.args.eval_at_epoch_end and self.evaluated_at != self.step:
            self.eval("end")

    def summary(self):
        timed = self.step_times[min(10, max(self.total_steps // 5, 1)):] or self.step_times or [float("nan")]
        s = {"steps": self.step, "epochs": self.step / self.steps_per_epoch, "wall_s": round(time.monotonic() - T0, 3),
             "step_time_ms": statistics.median(timed) * 1000.0, "world_size": self.world,
             "torch": torch.__version__, "normalisation": {"mean": self.mean, "std": self.std}}
        if self.last_eval is not None:
            s["eval"] = self.last_eval
        if self.args.target_accuracy > 0:
            s["target_accuracy"] = self.args.target_accuracy
            s["time_to_target_s"] = None if self.reached_at is None else round(self.reached_at, 3)
        return s


def main():
    args = parse_args()
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise UsageError("--device cuda: torch %s sees no GPU" % torch.__version__)
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if distributed:
        dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1
    try:
        run = Run(args, rank, world)
        if rank == 0:
            print("fmnist_reference: torch %s, world %d, %d steps (%d per epoch), normalised with mean %.4f std %.4f"
                  % (torch.__version__, world, run.total_steps, run.steps_per_epoch, run.mean, run.std),
                  file=sys.stderr, flush=True)
        run.run()
        if rank == 0:
            print(json.dumps({"summary": run.summary()}), flush=True)
    finally:
        if distributed:
            dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except UsageError as e:
        print("fmnist_reference: error: %s" % e, file=sys.stderr)
        sys.exit(2)
