# Turns one launcher's observation of a case (compat_run.run_case) into comparable fields, normalised so that
# only what a script could rely on remains (paths, uuids, run ids and free ports replaced by placeholders), and
# compares two launchers field by field, marking the differences compat_deliberate.py allows.
import collections
import fnmatch
import json
import os
import re

from compat_run import WORKER

MARK = "wline:"
# The worker contract: compared by value after normalisation; `present` ones only for being set.
CONTRACT = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
            "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
            "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS", "TORCHELASTIC_ERROR_FILE",
            "TORCHELASTIC_SIGNALS_TO_HANDLE", "CUDA_VISIBLE_DEVICES"]
PRESENT_ONLY = {"TORCHELASTIC_ERROR_FILE"}
LOG_NAMES = ("stdout.log", "stderr.log", "filtered_stdout.log", "filtered_stderr.log")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
MGTRAIN_RUN_ID = re.compile(r"\b\d{8}-\d{6}-[0-9a-f]{4}\b")


class Normaliser:
    def __init__(self, obs, tools):
        ports = obs["ports"]
        self.pairs = [(cwd, "<cwd>") for cwd in obs["cwds"]] + [(obs["kind_dir"], "<dir>"), (tools.venv, "<venv>")]
        self.ports = {str(ports[0]): "<port>", str(ports[1]): "<port2>"}

    def text(self, value):
        for path, name in self.pairs:
            value = value.replace(path, name)
        value = UUID.sub("<uuid>", value)
        return MGTRAIN_RUN_ID.sub("<run-id>", value)

    def port(self, value):
        if value in self.ports:
            return self.ports[value]
        return "<free port>" if value.isdigit() else value


def worker_key(dump):
    env = dump.get("env", {})
    return f"a{env.get('TORCHELASTIC_RESTART_COUNT', '?')}.r{env.get('RANK', '?')}"


def error_summary(path, norm):
    """An error file as what a reader of it relies on: its key paths, the message's first line, errorCode."""
    if not path or not os.path.exists(path):
        return "absent"
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        return f"unreadable ({e.__class__.__name__})"
    keys = []

    def walk(node, prefix, depth):
        if isinstance(node, dict) and depth < 3:
            for key in sorted(node):
                keys.append(prefix + key)
                walk(node[key], prefix + key + ".", depth + 1)

    walk(data, "", 0)
    message = data.get("message") if isinstance(data, dict) else None
    text, code = "", None
    if isinstance(message, dict):
        text = str(message.get("message", "")).splitlines()[0] if message.get("message") else ""
        code = message.get("errorCode")
    elif isinstance(message, str):
        text = message.splitlines()[0] if message else ""
    return f"keys={','.join(keys)} message={norm.text(text)!r} errorCode={code}"


def marker_lines(texts, norm):
    """The workers' marked lines, sorted. Workers that share the launcher's stdout (torchrun without --tee) can write
    into each other's line on a busy machine ("... got SIGINTwline: rank=1 ..."): a line is cut before every mark
    after its first, so that each worker line counts once whatever the machine's load."""
    lines = []
    for text in texts:
        for line in text.splitlines():
            starts = [match.start() for match in re.finditer(re.escape(MARK), line)]
            if not starts:
                continue
            cuts = [0] + starts[1:] + [len(line)]
            lines.extend(norm.text(line[a:b]) for a, b in zip(cuts, cuts[1:]))
    return sorted(lines)


def fields(case, obs, tools, base_env_names):
    """The observation as {field: str or list of str}."""
    norm = Normaliser(obs, tools)
    dumps = sorted(obs["dumps"], key=worker_key)
    result = {"exit": " ".join(str(code) for code in obs["exit"]),
              "workers": [worker_key(d) for d in dumps]}
    env_items, added, programs, error_files = [], set(), [], []
    for dump in dumps:
        key, env = worker_key(dump), dump.get("env", {})
        for name in CONTRACT:
            value = env.get(name)
            if value is None:
                shown = "<absent>"
            elif name in PRESENT_ONLY:
                shown = "<set>"
            elif name == "MASTER_PORT":
                shown = norm.port(value)
            else:
                shown = norm.text(value)
            env_items.append(f"{key} {name}={shown}")
        added.update(name for name in env if name not in base_env_names)
        exe = os.path.realpath(dump.get("executable", ""))
        programs.append(f"{key} argv={[norm.text(a) for a in dump.get('argv', [])]} __name__={dump.get('name')} "
                        f"python={norm.text(exe)} cwd={norm.text(dump.get('cwd', ''))}")
        error_files.append(f"{key} {error_summary(env.get('TORCHELASTIC_ERROR_FILE'), norm)}")
    result.update(env=env_items, env_added=sorted(added), program=programs, worker_error_files=error_files)
    result["stdout"] = marker_lines(obs["stdout"], norm)
    result["stderr"] = marker_lines(obs["stderr"], norm)
    result["stdout_other"] = [norm.text(line) for text in obs["stdout"] for line in text.splitlines()
                              if line.strip() and MARK not in line]
    if any("{logs}" in a for args in case.agents for a in args):
        result["log_files"] = log_files(os.path.join(obs["kind_dir"], "logs"), norm)
    result["cwd_files"] = cwd_files(obs["cwds"], norm)
    if case.launcher_error_file:
        result["launcher_error_file"] = error_summary(os.path.join(obs["kind_dir"], "launcher_error.json"), norm)
    if case.bound:
        result["timing"] = timing_verdict(case.bound, obs["elapsed"])
    result["orphans"] = f"{len(obs['orphans'])} workers running after the launcher exited"
    return result


def log_files(root, norm):
    """Every file under the log directory by name (how many), and the worker lines of its stdout/stderr logs."""
    counts, lines = collections.Counter(), []
    for folder, _dirs, files in os.walk(root):
        for name in files:
            counts[name] += 1
            if name in LOG_NAMES:
                with open(os.path.join(folder, name), errors="replace") as f:
                    lines.extend(f"{name}: {norm.text(line)}" for line in f.read().splitlines() if MARK in line)
    return [f"{name} x{count}" for name, count in sorted(counts.items())] + sorted(lines)


def cwd_files(cwds, norm):
    paths = set()
    for index, cwd in enumerate(cwds):
        prefix = f"node{index}/" if len(cwds) > 1 else ""
        for folder, _dirs, files in os.walk(cwd):
            for name in files:
                rel = os.path.relpath(os.path.join(folder, name), cwd)
                if rel != WORKER:
                    paths.add(prefix + norm.text(rel))
    return sorted(paths)


def timing_verdict(bound, elapsed):
    low, high = bound
    if elapsed is None:
        return "did not exit"
    if elapsed < low:
        return f"faster than {low} s"
    if elapsed > high:
        return f"slower than {high} s"
    return f"within {low}-{high} s"


def diff_items(a, b):
    """(only in a, only in b) for list fields; the two values for a scalar field."""
    if isinstance(a, list) and isinstance(b, list):
        ca, cb = collections.Counter(a), collections.Counter(b)
        return sorted((ca - cb).elements()), sorted((cb - ca).elements())
    return [str(a)], [str(b)]


PER_WORKER = ("env", "program", "worker_error_files")


def common_workers(field, value, workers):
    """A per-worker field without the workers only one launcher started (the field `workers` shows those)."""
    if field in PER_WORKER and isinstance(value, list):
        return [item for item in value if item.split(" ", 1)[0] in workers]
    if field == "env_added" and not workers:
        return []
    return value


def compare(case_name, ref, other, deliberate):
    """[(field, status, only_ref, only_other, reason)] for each field that differs: one `deliberate` entry with the
    differing items the deliberate-differences rows cover, one `different` entry with the others."""
    result = []
    workers = set(ref.get("workers", [])) & set(other.get("workers", []))
    for field in sorted(ref.keys() | other.keys()):
        a, b = ref.get(field, "<not observed>"), other.get(field, "<not observed>")
        a, b = common_workers(field, a, workers), common_workers(field, b, workers)
        if a == b:
            continue
        only_a, only_b = diff_items(a, b)
        rows = [row for row in deliberate if fnmatch.fnmatch(field, row.field) and fnmatch.fnmatch(case_name, row.case)]
        covered = {item: reason for item in only_a + only_b if (reason := covering_reason(item, rows))}
        reasons = "; ".join(dict.fromkeys(covered.values()))
        if covered:
            result.append((field, "deliberate", [i for i in only_a if i in covered], [i for i in only_b if i in covered],
                           reasons))
        if len(covered) < len(set(only_a + only_b)):
            result.append((field, "different", [i for i in only_a if i not in covered],
                           [i for i in only_b if i not in covered], None))
    return result


def covering_reason(item, rows):
    for row in rows:
        if row.items is None or re.search(row.items, item):
            return row.reason
    return None
