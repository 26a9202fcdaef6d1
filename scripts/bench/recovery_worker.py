#!/usr/bin/env python3
"""The training program of scripts/bench/recovery.sh: the same Python DDP job under `mgtrain launch` and torchrun.

Reads the torchrun environment contract (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: `init_process_group("gloo")`
with env://), which both launchers set. A small MLP (784-HIDDEN-HIDDEN-10, SGD with momentum) on synthetic batches
drawn from a generator seeded by (step, rank), so every run makes the same steps. Global rank 0 saves a checkpoint
(model, optimizer, step) every --ckpt-every steps into --ckpt-dir (written to a temporary name, then renamed); on
start every rank loads the newest one and goes on from its step. A run that starts from step 0 trains up to --steps;
one that resumed from a checkpoint trains --steps-after-resume more and exits 0 (so a benchmark round ends by itself
once the recovery has been measured).

Every event is one line appended to --events (O_APPEND, one write per line, so ranks on every node can share the
file), stamped with time.time() (the machine's wall clock, the same for every namespace and both launchers):
  <unix time> node=<BENCH_NODE> pid=<pid> rank=<RANK> restart=<TORCHELASTIC_RESTART_COUNT> <event> key=value ...
events: start (the interpreter's start, before `import torch`: t0=), joined (init_process_group done), resumed
(step=, load_s=: the checkpoint's step, 0 without one, and the seconds to load it), step (step=, loss=), saved (step=,
save_s=), done.

Under mgtrain (MGTRAIN_HEARTBEAT_FILE set: --status-port or --hang-timeout) it also writes mgtrain's heartbeat line
after every step, {"step": N, "loss": L, "time": T, "start": S} with S the step it resumed from
(docs/diagnosis.md#the-progress-file), so the rendezvous host can time the recovery and count the steps lost. One
pwrite per step, as share/mgtrain/python/mgtrain_progress.py does (which writes no "start"); without the variable
(torchrun) nothing is written.
"""
import time

T0 = time.time()

import argparse  # noqa: E402
import glob  # noqa: E402
import os  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402


class Events:
    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.prefix = "node=%s pid=%d rank=%s restart=%s" % (
            os.environ.get("BENCH_NODE", "?"), os.getpid(), os.environ.get("RANK", "?"),
            os.environ.get("TORCHELASTIC_RESTART_COUNT", "?"))

    def __call__(self, event, **fields):
        extra = "".join(" %s=%s" % item for item in fields.items())
        os.write(self.fd, ("%.6f %s %s%s\n" % (time.time(), self.prefix, event, extra)).encode())


class Heartbeat:
    """mgtrain's progress file, when the launcher gives one."""
    LINE_BYTES = 96

    def __init__(self):
        path = os.environ.get("MGTRAIN_HEARTBEAT_FILE")
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644) if path else None

    def __call__(self, step, loss, start):
        if self.fd is None:
            return
        line = b'{"step":%d,"loss":%.6f,"time":%.6f,"start":%d}' % (step, loss, time.time(), start)
        try:
            os.pwrite(self.fd, line.ljust(self.LINE_BYTES - 1)[: self.LINE_BYTES - 1] + b"\n", 0)
        except OSError:
            pass


def newest_checkpoint(directory):
    found = sorted(glob.glob(os.path.join(directory, "step-*.pt")))
    return found[-1] if found else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", required=True)
    parser.add_argument("--ckpt-dir", required=True)
    parser.add_argument("--ckpt-every", type=int, default=50)
    parser.add_argument("--steps", type=int, default=100000)
    parser.add_argument("--steps-after-resume", type=int, default=100)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()

    events = Events(args.events)
    events("start", t0="%.6f" % T0)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    events("joined", world=world)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    start = 0
    started = time.time()
    path = newest_checkpoint(args.ckpt_dir)
    if path:
        state = torch.load(path, map_location="cpu")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = int(state["step"])
    events("resumed", step=start, load_s="%.4f" % (time.time() - started), checkpoint=os.path.basename(path or "-"))
    ddp = DistributedDataParallel(model)
    heartbeat = Heartbeat()
    heartbeat(start, 0.0, start)
    last = start + args.steps_after_resume if start > 0 else args.steps
    generator = torch.Generator()
    loss_fn = nn.CrossEntropyLoss()
    for step in range(start + 1, last + 1):
        generator.manual_seed(step * 1000 + rank)
        x = torch.randn(args.batch, 784, generator=generator)
        y = torch.randint(0, 10, (args.batch,), generator=generator)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x), y)
        loss.backward()
        optimizer.step()
        value = loss.item()
        events("step", step=step, loss="%.4f" % value)
        heartbeat(step, value, start)
        if rank == 0 and step % args.ckpt_every == 0:
            saving = time.time()
            final = os.path.join(args.ckpt_dir, "step-%09d.pt" % step)
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
                       final + ".tmp")
            os.replace(final + ".tmp", final)
            for old in sorted(glob.glob(os.path.join(args.ckpt_dir, "step-*.pt")))[:-2]:
                os.unlink(old)
            events("saved", step=step, save_s="%.4f" % (time.time() - saving))
    dist.destroy_process_group()
    events("done", world=world)


if __name__ == "__main__":
    main()
