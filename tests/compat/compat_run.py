# Runs one case of the torchrun compatibility suite under one launcher (real torchrun, mgtrain's torchrun
# personality, or `mgtrain launch`) and records what a script around it could observe: exit codes, the launcher's
# stdout/stderr, the workers' dumps (compat_worker.py), files in the working directory and the log directory,
# the launcher's error file, the time from a signal (or a worker's failure) to the launcher's exit, and workers
# left running after it.
import json
import os
import shutil
import signal
import socket
import subprocess
import time

WORKER = "compat_worker.py"
LAUNCHERS = ("torchrun", "personality", "launch")


class Case:
    """One command line and what to do while it runs.

    args: the launcher's arguments, or one list per agent (agents started together, each in its own directory).
    Placeholders: {worker} (compat_worker.py in the working directory), {logs} (a log directory), {port} and
    {port2} (free TCP ports), {python} (the venv's python). signal: a signal name sent to the first agent once
    `ready` workers have written their ready files. timeout: seconds each launcher may run. bound: (low, high) seconds from the signal, or from the first
    worker failure, to the launcher's exit. launcher_error_file: the launcher runs with TORCHELASTIC_ERROR_FILE set.
    """

    def __init__(self, name, args, *, env=None, signal=None, ready=0, bound=None, timeout=45.0,
                 launcher_error_file=False, note=""):
        self.name = name
        self.agents = args if args and isinstance(args[0], list) else [args]
        self.env = env or {}
        self.signal = signal
        self.ready = ready
        self.bound = bound
        self.timeout = timeout
        self.launcher_error_file = launcher_error_file
        self.note = note


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Tools:
    """Where the launchers are: the venv's torchrun, a `torchrun` link to mgtrain (argv[0] = torchrun), mgtrain.
    self_check: the venv's torchrun stands in for the personality too."""

    def __init__(self, mgtrain, venv, scratch, self_check=False):
        self.venv = venv
        self.self_check = self_check
        self.mgtrain = mgtrain
        link_dir = os.path.join(scratch, "bin")
        os.makedirs(link_dir, exist_ok=True)
        self.personality = os.path.join(link_dir, "torchrun")
        if not os.path.lexists(self.personality):
            os.symlink(mgtrain, self.personality)
        self.python = os.path.join(venv, "bin", "python")

    def command(self, launcher):
        if launcher == "torchrun" or (launcher == "personality" and self.self_check):
            return [os.path.join(self.venv, "bin", "torchrun")]
        if launcher == "personality":
            return [self.personality]
        return [self.mgtrain, "launch"]


def base_env(tools, kind_dir, case):
    """A clean environment: the venv first on PATH (both launchers start the same python), nothing inherited that
    a launcher reads (PET_*, TORCHELASTIC_*, MGTRAIN_*, OMP_NUM_THREADS)."""
    env = {
        "PATH": os.path.join(tools.venv, "bin") + ":/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "TMPDIR": os.path.join(kind_dir, "tmp"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "COMPAT_OUT": os.path.join(kind_dir, "out"),
    }
    if case.launcher_error_file:
        env["TORCHELASTIC_ERROR_FILE"] = os.path.join(kind_dir, "launcher_error.json")
    env.update(case.env)
    return env


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def read_dumps(out_dir):
    dumps = []
    for name in sorted(os.listdir(out_dir)):
        if name.startswith("env.") and name.endswith(".json"):
            try:
                with open(os.path.join(out_dir, name)) as f:
                    dumps.append(json.load(f))
            except (OSError, ValueError):
                dumps.append({"env": {}, "broken": name})
    return dumps


def failure_times(out_dir):
    times = []
    for name in os.listdir(out_dir):
        if name.startswith("failed."):
            with open(os.path.join(out_dir, name)) as f:
                times.append(float(f.read() or 0))
    return times


def run_case(case, launcher, tools, case_dir, source_worker):
    """Runs `case` under `launcher` in case_dir/launcher; returns the observation (a dict)."""
    kind_dir = os.path.join(case_dir, launcher)
    shutil.rmtree(kind_dir, ignore_errors=True)
    for sub in ("out", "tmp", "logs"):
        os.makedirs(os.path.join(kind_dir, sub))
    env = base_env(tools, kind_dir, case)
    ports = (free_port(), free_port())
    values = {"worker": WORKER, "logs": os.path.join(kind_dir, "logs"), "python": tools.python,
              "port": str(ports[0]), "port2": str(ports[1])}
    procs, cwds = [], []
    try:
        for index, args in enumerate(case.agents):
            cwd = os.path.join(kind_dir, f"node{index}" if len(case.agents) > 1 else "cwd")
            os.makedirs(cwd)
            shutil.copy(source_worker, os.path.join(cwd, WORKER))
            argv = tools.command(launcher) + [substitute(a, values) for a in args]
            with open(os.path.join(kind_dir, f"stdout.{index}"), "wb") as out, \
                    open(os.path.join(kind_dir, f"stderr.{index}"), "wb") as err:
                procs.append(subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err,
                                              stdin=subprocess.DEVNULL, start_new_session=True))
            cwds.append(cwd)
        start = time.time()
        signal_time, notes = act(case, procs, env["COMPAT_OUT"], start + case.timeout)
        exit_times = wait_all(procs, start + case.timeout)
        dumps = read_dumps(env["COMPAT_OUT"])
        time.sleep(0.3)
        orphans = sorted(d.get("pid", 0) for d in dumps if d.get("pid") and alive(d["pid"]))
    finally:
        stop_all(procs, kind_dir)
    out_dir = env["COMPAT_OUT"]
    timed_out = any(t is None for t in exit_times)
    failures = failure_times(out_dir)
    reference = signal_time if signal_time is not None else (min(failures) if failures else start)
    end = max(t for t in exit_times if t is not None) if not timed_out else None
    return {
        "launcher": launcher,
        "kind_dir": kind_dir,
        "ports": ports,
        "cwds": cwds,
        "exit": ["timeout" if t is None else p.returncode for p, t in zip(procs, exit_times)],
        "elapsed": None if end is None else end - reference,
        "duration": (end or time.time()) - start,
        "stdout": [read_text(os.path.join(kind_dir, f"stdout.{i}")) for i in range(len(procs))],
        "stderr": [read_text(os.path.join(kind_dir, f"stderr.{i}")) for i in range(len(procs))],
        "dumps": dumps,
        "orphans": orphans,
        "notes": notes,
    }


def substitute(arg, values):
    """The placeholders of Case's arguments ({worker}, {logs}, ...); anything else, e.g. ${rank}, stays."""
    for key, value in values.items():
        arg = arg.replace("{" + key + "}", value)
    return arg


def act(case, procs, out_dir, deadline):
    """The case's action: its signal to the first agent once `ready` workers are up. (signal time, notes)"""
    if not case.signal:
        return None, []
    notes = []
    while time.time() < deadline and all(p.poll() is None for p in procs):
        if sum(name.startswith("ready.") for name in os.listdir(out_dir)) >= case.ready:
            break
        time.sleep(0.05)
    else:
        notes.append("the workers were not all ready before the signal")
    time.sleep(0.5)
    signal_time = time.time()
    if procs[0].poll() is None:
        os.kill(procs[0].pid, getattr(signal, "SIG" + case.signal))
    return signal_time, notes


def wait_all(procs, deadline):
    """Each launcher's exit time (None: still running at the deadline)."""
    exit_times = [None] * len(procs)
    while time.time() < deadline and any(t is None for t in exit_times):
        for i, p in enumerate(procs):
            if exit_times[i] is None and p.poll() is not None:
                exit_times[i] = time.time()
        time.sleep(0.02)
    return exit_times


def stop_all(procs, kind_dir):
    """Kills what is left: each launcher's process group and every worker that wrote a dump."""
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.wait()
    for dump in read_dumps(os.path.join(kind_dir, "out")):
        if dump.get("pid") and alive(dump["pid"]):
            try:
                os.kill(dump["pid"], signal.SIGKILL)
            except OSError:
                pass


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")
