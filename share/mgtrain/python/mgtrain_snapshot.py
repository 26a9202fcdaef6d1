"""Keep a training state in mgtrain's snapshot store, where a worker's crash cannot reach it (docs/checkpoints.md).

    import mgtrain_snapshot

    resumed = mgtrain_snapshot.load()          # after a restart: (step, state) of the newest snapshot, else None
    if resumed:
        step, state = resumed
        model.load_state_dict(state["model"]); optimizer.load_state_dict(state["optimizer"])
    ...
    if step % 50 == 0:
        mgtrain_snapshot.save(step, {"model": model.state_dict(), "optimizer": optimizer.state_dict()})

`mgtrain launch` keeps one store per local rank in its own memory (a memfd it hands each worker it starts, named by
MGTRAIN_SNAPSHOT_FD) for as long as it runs, so a worker killed with SIGKILL, mid-step or mid-save, leaves its last
complete snapshot to the worker that replaces it. Two slots: a save goes into the one not holding the newest
snapshot and counts only once it is complete, so a save cut short leaves the previous one. A snapshot is what
torch.save writes (any state_dict: tensors on any device, numbers, lists, dicts), with a CRC-32; load() skips a
damaged one and says why on stderr. Snapshots live only as long as the launcher: keep saving files too.

With torch.distributed initialised, load() is collective: the ranks resume from the newest step every rank holds
(ranks of a DDP job save at the same steps), or None when there is none. load(shared=True), for states every rank
holds alike (a DDP model and its optimizer): the newest step any rank holds, sent to the ranks that lack it (a rank
killed while saving, a node that replaced a lost one). Without mgtrain (no MGTRAIN_SNAPSHOT_FD)
save() does nothing and returns False, and load() returns None. Stdlib plus torch.
"""
import io
import mmap
import os
import struct
import sys
import time
import zlib

# The store's layout (lib/checkpoint/snapshot_store.hpp): a 4096-byte header ("MGSNAP01", layout 1, 2 slots), a slot
# table at byte 64 (64 bytes a slot: state, generation, step, bytes, offset, capacity, written_ms), the images after.
_MAGIC = b"MGSNAP01"
_LAYOUT = 1
_SLOTS = 2
_HEADER = 4096
_TABLE = 64
_ENTRY = 64
_PAGE = 4096
_EMPTY, _WRITING, _COMPLETE = 0, 1, 2
# An image of this helper: "MGPYSNP2", the payload's length, its CRC-32, the global rank that wrote it (-1: unknown),
# then what torch.save wrote.
_IMAGE_MAGIC = b"MGPYSNP2"
_IMAGE_HEAD = struct.Struct("<8sQIi")


class SnapshotError(Exception):
    """The store is not a snapshot store, or cannot be used (the message says which and why)."""


def _warn(text):
    sys.stderr.write("mgtrain: warning: %s\n" % text)
    sys.stderr.flush()


def _note(text):
    sys.stderr.write("mgtrain: %s\n" % text)
    sys.stderr.flush()


def _round_up(n, to):
    return (n + to - 1) // to * to


class Store:
    """The snapshot store behind the descriptor `fd` (not closed here)."""

    def __init__(self, fd, name):
        self.fd = fd
        self.name = name
        self.map = None
        size = os.fstat(fd).st_size
        if size == 0:
            os.ftruncate(fd, _HEADER)
            self._remap()
            self.map[0:16] = _MAGIC + struct.pack("<II", _LAYOUT, _SLOTS)
            return
        if size < _HEADER:
            raise SnapshotError("%s: %d bytes, less than its %d-byte header (not a snapshot store)" % (name, size, _HEADER))
        self._remap()
        layout, slots = struct.unpack_from("<II", self.map, 8)
        if bytes(self.map[0:8]) != _MAGIC or layout != _LAYOUT or slots != _SLOTS:
            raise SnapshotError("%s: not a snapshot store of layout %d with %d slots" % (name, _LAYOUT, _SLOTS))

    def _remap(self):
        size = os.fstat(self.fd).st_size
        if self.map is not None and len(self.map) == size:
            return
        if self.map is not None:
            self.map.close()
        self.map = mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)

    def _entry(self, index):
        state, generation, step, nbytes, offset, capacity, written_ms = struct.unpack_from(
            "<I4xQqQQQq", self.map, _TABLE + index * _ENTRY)
        return {"index": index, "state": state, "generation": generation, "step": step, "bytes": nbytes,
                "offset": offset, "capacity": capacity, "written_ms": written_ms}

    def _set(self, index, fmt, at, *values):
        struct.pack_into(fmt, self.map, _TABLE + index * _ENTRY + at, *values)

    def write(self, step, payload):
        """Puts `payload` (bytes) into the slot not holding the newest complete snapshot, marked complete last."""
        self._remap()  # an earlier worker may have grown the store
        target, newest_generation = 0, 0
        for entry in map(self._entry, range(_SLOTS)):
            if entry["state"] == _COMPLETE and entry["generation"] >= newest_generation:
                newest_generation, target = entry["generation"], 1 - entry["index"]
        image = _IMAGE_HEAD.pack(_IMAGE_MAGIC, len(payload), zlib.crc32(payload), _my_rank())
        size = len(image) + len(payload)
        self._set(target, "<I", 0, _WRITING)
        entry = self._entry(target)
        if entry["capacity"] < size:  # a region of its own at the end of the store
            offset = _round_up(len(self.map), _PAGE)
            os.ftruncate(self.fd, offset + _round_up(size, _PAGE))
            self._remap()
            self._set(target, "<QQ", 32, offset, _round_up(size, _PAGE))
            entry = self._entry(target)
        at = entry["offset"]
        self.map[at:at + len(image)] = image
        self.map[at + len(image):at + size] = payload
        self._set(target, "<qQ", 16, step, size)
        self._set(target, "<q", 48, int(time.time() * 1000))
        self._set(target, "<Q", 8, newest_generation + 1)
        self._set(target, "<I", 0, _COMPLETE)

    def snapshots(self):
        """The complete snapshots whose image verifies, newest first, as (step, payload, the rank that wrote it); a
        damaged one is skipped with a warning naming it."""
        self._remap()
        found = []
        complete = [e for e in map(self._entry, range(_SLOTS)) if e["state"] == _COMPLETE]
        for entry in sorted(complete, key=lambda e: e["generation"], reverse=True):
            what = "%s, slot %d (step %d)" % (self.name, entry["index"], entry["step"])
            problem, payload, writer = self._verify(entry)
            if problem:
                _warn("skipping damaged snapshot: %s: %s" % (what, problem))
                continue
            found.append((entry["step"], payload, writer))
        return found

    def _verify(self, entry):
        at, size = entry["offset"], entry["bytes"]
        if at < _HEADER or at + size > len(self.map) or size > entry["capacity"] or size < _IMAGE_HEAD.size:
            return "its region [%d, +%d) is outside the store's %d bytes" % (at, size, len(self.map)), None, None
        magic, length, crc, writer = _IMAGE_HEAD.unpack_from(self.map, at)
        if magic != _IMAGE_MAGIC:
            return "not a snapshot of this mgtrain_snapshot.py (the built-in trainer's, or damaged)", None, None
        if length != size - _IMAGE_HEAD.size:
            return "its payload says %d bytes, the slot holds %d" % (length, size - _IMAGE_HEAD.size), None, None
        payload = self.map[at + _IMAGE_HEAD.size:at + size]
        computed = zlib.crc32(payload)
        if computed != crc:
            return "checksum mismatch: stored %08x, computed %08x (the snapshot is damaged)" % (crc, computed), None, None
        return None, payload, writer


_store = None
_opened = False


def _my_rank():
    """This worker's global rank: torch.distributed's once initialised, else RANK; -1 when neither says."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    text = os.environ.get("RANK", "")
    return int(text) if text.isdigit() else -1


def _the_store():
    """This worker's store, or None without mgtrain; opened once."""
    global _store, _opened
    if not _opened:
        _opened = True
        text = os.environ.get("MGTRAIN_SNAPSHOT_FD")
        if text:
            if not text.isdigit() or int(text) < 3:
                raise SnapshotError("MGTRAIN_SNAPSHOT_FD=%s: not a descriptor number (the launcher sets it)" % text)
            try:
                os.fstat(int(text))
            except OSError as error:
                raise SnapshotError("MGTRAIN_SNAPSHOT_FD=%s: no such open descriptor in this process (was the "
                                    "worker started by something other than mgtrain launch?): %s" % (text, error))
            rank = os.environ.get("RANK", "?")
            _store = Store(int(text), "the snapshot store of rank %s (MGTRAIN_SNAPSHOT_FD=%s)" % (rank, text))
    return _store


_replicas = None


def _replica_stores():
    """The replicas of another node's ranks' snapshots that this worker's launcher holds (local rank 0 only:
    MGTRAIN_SNAPSHOT_REPLICAS, "rank:fd,..."), opened once; load(shared=True) reads them."""
    global _replicas
    if _replicas is None:
        _replicas = []
        text = os.environ.get("MGTRAIN_SNAPSHOT_REPLICAS", "")
        for item in filter(None, text.split(",")):
            rank, _, fd = item.partition(":")
            if not (rank.isdigit() and fd.isdigit() and int(fd) >= 3):
                raise SnapshotError("MGTRAIN_SNAPSHOT_REPLICAS=%s: '%s' is not rank:descriptor (the launcher sets it)"
                                    % (text, item))
            _replicas.append(Store(int(fd), "the replica of rank %s's snapshots (MGTRAIN_SNAPSHOT_REPLICAS)" % rank))
    return _replicas


def available():
    """Whether this worker has a snapshot store (it was started by mgtrain launch)."""
    return _the_store() is not None


def save(step, state):
    """Puts `state` (anything torch.save takes) into the store as the snapshot of `step` (an int). Returns False
    without a store. A store that cannot grow (a memory limit, ulimit -f) warns once and saves nothing more."""
    global _store
    store = _the_store()
    if store is None:
        return False
    import torch

    buffer = io.BytesIO()
    torch.save(state, buffer)
    try:
        store.write(int(step), buffer.getbuffer())
    except OSError as error:
        _warn("rank %s takes no more snapshots in memory: %s: %s" % (os.environ.get("RANK", "?"), store.name, error))
        _store = None
        return False
    return True


def load(agree=True, weights_only=True, shared=False):
    """The newest snapshot as (step, state), or None. With torch.distributed initialised and `agree`, collective:
    every rank loads the newest step that all ranks hold, or all get None; a rank's own snapshot counts as held when
    another node's launcher holds a replica of it (its node was lost), and the rank gets it from there. With `shared`
    (every rank saves the same
    state, as DDP ranks do their model and optimizer), the newest step any rank holds wins instead, and a rank that
    lacks it (killed while saving it, or on a node that replaced a lost one) gets the lowest holder's copy over the
    process group; the replicas this node's launcher holds of another node's ranks count too (a replica newer than
    every rank's own snapshot: its node was lost). `weights_only` is torch.load's (True: tensors, numbers, strings,
    lists, tuples and dicts only)."""
    import torch

    store = _the_store()
    held = store.snapshots() if store is not None else []
    rank = _my_rank()
    if shared:  # any rank's copy will do: the replicas too, newest first
        for replica in _replica_stores():
            held.extend(replica.snapshots())
        held.sort(key=lambda snapshot: -snapshot[0])
    elif rank >= 0:  # a state of its own: only what this rank wrote
        others = sorted({writer for _, _, writer in held if writer != rank})
        if others:
            _warn("%s holds the snapshots of rank %s, not of rank %d (the ranks moved between nodes): not used; "
                  "load(shared=True) uses them for a state every rank holds alike"
                  % (store.name, ", ".join(map(str, others)), rank))
            held = [snapshot for snapshot in held if snapshot[2] == rank]
    # Each rank's own state: the replicas of other ranks' snapshots this node holds, by the rank that wrote them.
    replicas = [] if shared else [s for replica in _replica_stores() for s in replica.snapshots() if s[2] >= 0]
    choice = held[0][0] if held else None
    payload = None
    dist = torch.distributed
    if agree and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        everyone = [None] * dist.get_world_size()
        offered = {}  # by the rank that wrote it: the steps of its replicas here
        for step, _, writer in replicas:
            offered.setdefault(writer, []).append(step)
        dist.all_gather_object(everyone, (sorted(step for step, _, _ in held), offered))
        replicated = [offers for _, offers in everyone]
        everyone = [steps for steps, _ in everyone]
        if shared:
            choice = max((max(steps) for steps in everyone if steps), default=None)
            if choice is None:
                return None
            holder = min(r for r, steps in enumerate(everyone) if choice in steps)
            if any(choice not in steps for steps in everyone):
                if rank == 0:
                    _note("resuming every rank from the snapshot of rank %d (step %d): sent to the ranks that lack it"
                          % (holder, choice))
                mine = [bytes(next(p for step, p, _ in held if step == choice))] if rank == holder else [None]
                dist.broadcast_object_list(mine, src=holder)
                payload = mine[0]
        else:  # a rank's step counts as held when its own store or another node's replica has it
            held_by = [set(steps).union(*(offers.get(r, []) for offers in replicated))
                       for r, steps in enumerate(everyone)]
            common = set(held_by[0]).intersection(*held_by[1:])
            choice = max(common) if common else None
            for lacking, steps in enumerate(everyone):  # the same order on every rank: one broadcast each
                if choice is None or choice in steps:
                    continue
                holder = min(h for h, offers in enumerate(replicated) if choice in offers.get(lacking, []))
                if rank == 0:
                    _note("resuming rank %d from its replica on rank %d's node (step %d)" % (lacking, holder, choice))
                box = [None]
                if rank == holder:
                    box = [bytes(next(p for step, p, writer in replicas if step == choice and writer == lacking))]
                dist.broadcast_object_list(box, src=holder)
                if rank == lacking:
                    payload = box[0]
    if choice is None:
        return None
    if payload is None:
        payload = next(p for step, p, _ in held if step == choice)
    try:
        state = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=weights_only)
    except TypeError:  # a torch without weights_only
        state = torch.load(io.BytesIO(payload), map_location="cpu")
    return choice, state
