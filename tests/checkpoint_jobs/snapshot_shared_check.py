"""mgtrain_snapshot.load() across ranks, run by test_snapshot_resume as `mgtrain launch --nproc 2 -- python THIS
HELPER_DIR` with the torch 2.x venv's Python (gloo on loopback): both ranks save step 10, only rank 0 saves step 20
(as if rank 1 was killed while saving it). load() gives both ranks step 10, each its own state; load(shared=True)
gives both step 20 with rank 0's state, sent to rank 1; with a replica of rank 1's step 30 on rank 0 (a lost node's
newest state), load() gives both step 30, rank 1 its own from the replica. Rank 0 prints "snapshot shared: ok" and every rank exits 0,
else the rank names the first failed check and exits 1.
"""
import io
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

# A node lost with rank 1's newest state: rank 0's launcher holds a replica of rank 1's snapshot of step 30 (a store
# of its own, MGTRAIN_SNAPSHOT_REPLICAS, as a buddy's launcher hands it to its local rank 0), rank 1 itself has only
# step 10. load() gives both step 30, rank 1 its own state from the replica; load(shared=True) is unchanged.
if rank == 0:
    snapshot.save(30, {"weights": torch.full((1000,), 30.0)})
    replica_fd = os.memfd_create("replica-of-rank-1")
    real_rank = snapshot._my_rank
    snapshot._my_rank = lambda: 1  # the image records the rank that wrote it: rank 1
    buffer = io.BytesIO()
    torch.save({"weights": torch.full((1000,), 31.0)}, buffer)
    snapshot.Store(replica_fd, "replica").write(30, buffer.getbuffer())
    snapshot._my_rank = real_rank
    os.environ["MGTRAIN_SNAPSHOT_REPLICAS"] = "1:%d" % replica_fd
snapshot._replicas = None
dist.barrier()
step, state = snapshot.load()
check(step == 30, "load() with rank 1's replica on rank 0: step %d, not 30" % step)
check(bool(torch.all(state["weights"] == 30.0 + rank)), "load() with a replica: not this rank's own state")
dist.barrier()
dist.destroy_process_group()
if rank == 0:
    print("snapshot shared: ok", flush=True)
