"""Report training progress to mgtrain's launcher (docs/diagnosis.md). Stdlib only; does nothing without mgtrain.

    from mgtrain_progress import progress
    for step in range(steps):
        train_step()
        progress(step)          # or progress() to say "still going" without a step

With --hang-timeout, mgtrain declares a rank hung when its progress stops; with steps it also names the rank
that stopped first (the lowest step) as the root cause and says where it stopped. The launcher gives each
worker its progress file in MGTRAIN_HEARTBEAT_FILE; without it, progress() returns at once. A call writes at
most once per MIN_INTERVAL_S (one pwrite of a fixed-size line on a file kept open), so calling it every step
is cheap; write every step, or the last step reported before a hang is not the last one made.

Ranks in lock-step (DDP: each all-reduce waits for the slowest rank) all make steps at the same rate, so a slow
rank cannot be told by its steps. Pass the seconds the rank spent waiting for the others since the previous call,
and straggler detection compares the ranks' own work per step instead (docs/diagnosis.md):

        started = time.monotonic()
        dist.all_reduce(grads)
        progress(step, wait_s=time.monotonic() - started)
"""
import os
import time

MIN_INTERVAL_S = 0.01
LINE_BYTES = 96  # the heartbeat line with its padding and newline (room for the longest)

_path = os.environ.get("MGTRAIN_HEARTBEAT_FILE") or None
_fd = None
_last = None
_waited = None  # seconds waited in all, once a call passed wait_s


def progress(step=None, wait_s=None):
    """Reports progress: `step` (an int) is written as a decimal count; None only touches the file. `wait_s`: the
    seconds spent waiting for the other ranks since the previous call (added up even when a call does not write);
    once given, steps are written as a heartbeat line with the total wait."""
    global _fd, _last, _waited
    if _path is None:
        return
    if wait_s is not None:
        _waited = (_waited or 0.0) + max(0.0, float(wait_s))
    now = time.monotonic()
    if _last is not None and now - _last < MIN_INTERVAL_S:
        return
    _last = now
    try:
        if _fd is None:
            _fd = os.open(_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        if step is None:
            os.utime(_fd)
        elif _waited is None:
            # Fixed width, rewritten in place: the launcher never sees a shorter line's leftover tail.
            os.pwrite(_fd, b"%-20d\n" % int(step), 0)
        else:
            line = b'{"step":%d,"time":%.6f,"wait":%.6f}' % (int(step), time.time(), _waited)
            os.pwrite(_fd, line.ljust(LINE_BYTES - 1)[: LINE_BYTES - 1] + b"\n", 0)
    except OSError:
        pass  # progress reports never break training
