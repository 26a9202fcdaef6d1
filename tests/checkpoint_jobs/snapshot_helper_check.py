"""share/mgtrain/python/mgtrain_snapshot.py on a store of its own (a memfd made here, as the launcher makes one), run by
test_snapshot_resume with the torch 2.x venv's Python: an empty store, two saves and the newer loaded, a save cut
short (the slot left "being written") leaving the previous one, a damaged snapshot skipped with its reason, a store
that is not one refused, a replica (MGTRAIN_SNAPSHOT_REPLICAS) taken by load(shared=True) only. Prints "snapshot helper: ok" and exits 0, else names the first failed check and exits 1.
    python snapshot_helper_check.py HELPER_DIR
"""
import contextlib
import io
import os
import struct
import sys

sys.path.insert(0, sys.argv[1])
fd = os.memfd_create("test-store")
os.environ["MGTRAIN_SNAPSHOT_FD"] = str(fd)
os.environ["RANK"] = "0"
import torch  # noqa: E402

import mgtrain_snapshot as snapshot  # noqa: E402


def check(ok, what):
    if not ok:
        print("snapshot helper: FAILED: " + what)
        sys.exit(1)


def state(value):
    return {"weights": torch.full((1000,), float(value)), "step_count": int(value), "betas": (0.9, 0.999)}


def loaded():
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        got = snapshot.load()
    return got, errors.getvalue()


check(snapshot.available(), "available() without a store")
got, _ = loaded()
check(got is None, "an empty store gave %r" % (got,))
check(snapshot.save(10, state(10)) and snapshot.save(20, state(20)), "save() returned False")
got, warnings = loaded()
check(got is not None and got[0] == 20 and got[1]["step_count"] == 20 and bool((got[1]["weights"] == 20).all()),
      "load() after saves of 10 and 20: %r" % (got and got[0],))
check(got[1]["betas"] == (0.9, 0.999) and warnings == "", "the state or the warnings: %r %r" % (got[1]["betas"], warnings))

# A save of step 30 cut short: its slot stays "being written" (state 1), so step 20 is the newest.
check(snapshot.save(30, state(30)), "save(30)")
store = snapshot._the_store()
newest = max((store._entry(i) for i in range(2)), key=lambda e: e["generation"])
check(newest["step"] == 30, "the newest slot holds step %d" % newest["step"])
store._set(newest["index"], "<I", 0, 1)
got, warnings = loaded()
check(got is not None and got[0] == 20 and warnings == "", "after a save cut short: %r %r" % (got and got[0], warnings))

# Step 40 goes into the slot the cut save left; then one byte of it is flipped: skipped, step 20 used.
check(snapshot.save(40, state(40)), "save(40)")
entry = next(store._entry(i) for i in range(2) if store._entry(i)["step"] == 40)
check(entry["index"] == newest["index"], "step 40 did not reuse the slot of the cut save")
store.map[entry["offset"] + entry["bytes"] - 1] ^= 0x01
got, warnings = loaded()
check(got is not None and got[0] == 20, "after damage: %r" % (got and got[0],))
check("mgtrain: warning: skipping damaged snapshot: the snapshot store of rank 0 (MGTRAIN_SNAPSHOT_FD=%d), slot %d "
      "(step 40): checksum mismatch" % (fd, entry["index"]) in warnings, "the warning: %r" % warnings)

# Snapshots written by another rank (the ranks moved between nodes): load() does not take them, and says why;
# load(shared=True) does.
os.environ["RANK"] = "1"
got, warnings = loaded()
check(got is None, "rank 1 took rank 0's snapshot: %r" % (got and got[0],))
check("holds the snapshots of rank 0, not of rank 1 (the ranks moved between nodes): not used" in warnings,
      "the warning: %r" % warnings)
got = snapshot.load(shared=True)
check(got is not None and got[0] == 20, "load(shared=True) as rank 1: %r" % (got and got[0],))
os.environ["RANK"] = "0"

# A replica of another node's rank (its launcher's store, MGTRAIN_SNAPSHOT_REPLICAS) newer than this rank's own:
# load(shared=True) takes it, load() (a state of its own) does not.
replica_fd = os.memfd_create("replica")
buffer = io.BytesIO()
torch.save(state(50), buffer)
os.environ["RANK"] = "3"
snapshot.Store(replica_fd, "replica").write(50, buffer.getbuffer())
os.environ["RANK"] = "0"
os.environ["MGTRAIN_SNAPSHOT_REPLICAS"] = "3:%d" % replica_fd
snapshot._replicas = None  # read once per process: as a worker started with it
got = snapshot.load(shared=True)
check(got is not None and got[0] == 50 and got[1]["step_count"] == 50, "load(shared=True) with a replica: %r" % (got and got[0],))
got, _ = loaded()
check(got is not None and got[0] == 20, "load() with a replica: %r" % (got and got[0],))
snapshot._replicas = None
os.environ["MGTRAIN_SNAPSHOT_REPLICAS"] = "3:x"
try:
    snapshot.load(shared=True)
    check(False, "a malformed MGTRAIN_SNAPSHOT_REPLICAS was taken")
except snapshot.SnapshotError as error:
    check("'3:x' is not rank:descriptor" in str(error), "the refusal: %s" % error)
del os.environ["MGTRAIN_SNAPSHOT_REPLICAS"]
snapshot._replicas = None

# Not a store: refused, naming it.
other = os.memfd_create("other")
os.write(other, b"x" * 5000)
try:
    snapshot.Store(other, "other")
    check(False, "a file of 5000 x was taken for a store")
except snapshot.SnapshotError as error:
    check("other: not a snapshot store" in str(error), "the refusal: %s" % error)
print("snapshot helper: ok")
