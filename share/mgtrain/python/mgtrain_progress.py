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
"""
import os
import time

MIN_INTERVAL_S = 0.01

_path = os.environ.get("MGTRAIN_HEARTBEAT_FILE") or None
_fd = None
_last = None


def progress(step=None):
    """Reports progress: `step` (an int) is written as a decimal count; None only touches the file."""
    global _fd, _last
    if _path is None:
        return
    now = time.monotonic()
    if _last is not None and now - _last < MIN_INTERVAL_S:
        return
    _last = now
    try:
        if _fd is None:
            _fd = os.open(_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        if step is None:
            os.utime(_fd)
        else:
            # Fixed width, rewritten in place: the launcher never sees a shorter line's leftover tail.
            os.pwrite(_fd, b"%-20d\n" % int(step), 0)
    except OSError:
        pass  # progress reports never break training
