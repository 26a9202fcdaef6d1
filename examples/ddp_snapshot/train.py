"""The DDP tutorial of pytorch/examples (distributed/ddp-tutorial-series/multigpu_torchrun.py: a Trainer that saves a
"snapshot" and loads it after a restart), with its snapshot kept in mgtrain's memory instead of a file, so that a
restart loses at most --snapshot-every steps and reads no disk (docs/checkpoints.md#python-workers).

    mgtrain launch --nproc 2 --max-restarts 3 -- python3 examples/ddp_snapshot/train.py --steps 400

Kill a rank (kill -9 <pid>): the launcher restarts the workers, and they go on from the newest snapshot both ranks
hold: "resumed from the snapshot in memory at step N". Each step's batch is a function of the step and the rank, so
a resumed run makes the same steps as an uninterrupted one and ends with the same parameters; the last line prints
their checksum. Runs on the CPU (gloo), or on GPUs (nccl) when there are any. --kill-at STEP makes rank 1 of the
first attempt kill itself after that step (for tests). Needs mgtrain_snapshot.py on PYTHONPATH
(share/mgtrain/python, or installed with the mgtrain wheel).
"""
import argparse
import gc
import hashlib
import os
import signal

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import mgtrain_snapshot


def batch(step, rank, size=32):
    """The batch rank `rank` trains on at `step`: the same whatever happened before."""
    generator = torch.Generator().manual_seed(step * 1000 + rank)
    inputs = torch.randn(size, 20, generator=generator)
    return inputs, inputs.sum(dim=1, keepdim=True) * 0.1


class Trainer:
    def __init__(self, model, optimizer, snapshot_every, device):
        self.rank = dist.get_rank()
        self.device = device
        self.model = model.to(device)
        self.optimizer = optimizer
        self.snapshot_every = snapshot_every
        self.step = 0
        # Collective. DDP ranks hold the same model and optimizer, so the newest step any rank holds will do: a rank
        # that lacks it (killed while saving, a node that replaced a lost one) gets the holder's copy.
        resumed = mgtrain_snapshot.load(shared=True)
        if resumed is not None:
            self.step, state = resumed
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            if self.rank == 0:
                print("resumed from the snapshot in memory at step %d" % self.step, flush=True)
        self.model = DDP(self.model, device_ids=[device.index] if device.type == "cuda" else None)

    def run_step(self):
        inputs, targets = batch(self.step, self.rank)
        self.optimizer.zero_grad()
        loss = F.mse_loss(self.model(inputs.to(self.device)), targets.to(self.device))
        loss.backward()
        self.optimizer.step()
        self.step += 1
        return loss.item()

    def save_snapshot(self):
        mgtrain_snapshot.save(self.step, {"model": self.model.module.state_dict(),
                                          "optimizer": self.optimizer.state_dict()})

    def train(self, steps, kill_at):
        while self.step < steps:
            loss = self.run_step()
            if self.step % self.snapshot_every == 0:
                self.save_snapshot()
            if self.rank == 0 and self.step % 100 == 0:
                print("step %d loss %.5f" % (self.step, loss), flush=True)
            if kill_at is not None and self.step == kill_at and self.rank == 1 and \
                    os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0":
                os.kill(os.getpid(), signal.SIGKILL)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--snapshot-every", type=int, default=10)
    parser.add_argument("--kill-at", type=int, default=None)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    trainer = Trainer(model, optimizer, args.snapshot_every, device)
    trainer.train(args.steps, args.kill_at)
    if trainer.rank == 0:
        digest = hashlib.sha256()
        for tensor in trainer.model.module.state_dict().values():
            digest.update(tensor.detach().cpu().numpy().tobytes())
        print("final step %d parameters sha256 %s" % (trainer.step, digest.hexdigest()), flush=True)
    dist.barrier()  # every rank done before the group goes: gloo's teardown can abort a rank still talking to it
    # DDP's reducer keeps gloo work (with tensors) alive; freed after the group, at the interpreter's exit, it can
    # abort the process ("terminate called without an active exception"). So it goes first.
    del trainer, model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
