"""mgtrain_snapshot.load() across ranks, run by test_snapshot_resume as `mgtrain launch --nproc 2 -- python THIS
HELPER_DIR` with the torch 2.x venv's Python (gloo on loopback): both ranks save step 10, only rank 0 saves step 20
(as if rank 1 was killed while saving it). load() gives both ranks step 10, each its own state; load(shared=True)
gives both step 20 with rank 0's state, sent to rank 1. Rank 0 prints "snapshot shared: ok" and every rank exits 0,
else the rank names the first failed check and exits 1.
"""
import os
import sys

sys.path.insert(0, sys.argv[1])
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import mgtrain_snapshot as snapshot  # noqa: E402

dist.init_process_group("gloo")
rank = dist.get_rank()


def check(ok, what):
    if not ok:
        print("snapshot shared: rank %d FAILED: %s" % (rank, what), flush=True)
        sys.exit(1)


check(snapshot.available(), "no store: MGTRAIN_SNAPSHOT_FD=%s" % os.environ.get("MGTRAIN_SNAPSHOT_FD"))
check(snapshot.load(shared=True) is None, "a snapshot before any save")
snapshot.save(10, {"weights": torch.full((1000,), 10.0 + rank)})
if rank == 0:
    snapshot.save(20, {"weights": torch.full((1000,), 20.0)})
dist.barrier()
step, state = snapshot.load()
check(step == 10, "load(): step %d, not 10 (the newest every rank holds)" % step)
check(bool(torch.all(state["weights"] == 10.0 + rank)), "load(): not this rank's own state")
step, state = snapshot.load(shared=True)
check(step == 20, "load(shared=True): step %d, not 20 (the newest any rank holds)" % step)
check(bool(torch.all(state["weights"] == 20.0)), "load(shared=True): not rank 0's state")
dist.barrier()
dist.destroy_process_group()
if rank == 0:
    print("snapshot shared: ok", flush=True)
