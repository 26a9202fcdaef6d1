#!/usr/bin/env python3
"""Bounded fuzz of mgtrain's input through the real binary (issue 22 item 5; docs/config.md, "Input limits").

Generates COMMANDS `mgtrain launch` command lines (every launch flag, read from `mgtrain launch --help`, with good,
bad, empty, bracketed, huge and boolean-with-value values, as `--flag=value` and `--flag value`; the program is
`true`, as launch has no dry-run mode) and CONFIGS malformed config files (truncations, deep nesting, several
documents, binary junk, huge scalars, tabs, alias bombs, special files) for `mgtrain config validate`, runs each with
a timeout and fails on any "internal error", any death by signal, any timeout and any exit code outside the
documented ones (docs/exit-codes.md). Deterministic for a seed; Python's standard library only.

Also ENVIRONMENTS command lines with one PET_* or MGTRAIN_* variable set to such a value.

Usage: input_fuzz.py MGTRAIN [--commands 1500] [--configs 300] [--environments 100] [--seed 1] [--timeout 20]
                     [--jobs 4] [--keep DIR]
Exit status: 0 when every case ended as documented, 1 otherwise (each failure printed with its command line).
"""
import argparse
import concurrent.futures
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# Exit codes a run may end with (docs/exit-codes.md). launch runs `true` (or, with -m/--run-path, `python3 ... true`,
# which exits 1 or 2), so a worker adds nothing else; 127: the program (python3) not found; 129: --exit-with-stdin
# saw stdin (/dev/null) close; 69: nodes that never met within the join timeout set below.
LAUNCH_CODES = {0, 1, 2, 69, 124, 127, 129}
VALIDATE_CODES = {0, 2}

HUGE = "a" * 100_000  # below Linux's 128 KiB limit for one argument

# Values every flag gets: empty, junk, numbers at and past the edges, YAML-looking text, brackets, booleans.
GENERIC_VALUES = [
    "", " ", "x", "-1", "0", "1", "99999999999999999999999", "1e309", "nan", "inf", "-inf", "0x10", "1.5",
    "[::1]", "[::1]:0", "[", "]", "{", "}", "[1, 2]", "{a: 1}", "[[[[[[[[[[", "'", '"', "*a", "&a x", "!!str x",
    "%YAML 1.2", "---", "a: b", "a\nb", "a\tb", "\x01", "\u00e9", "${run_id}", "${env:MGTRAIN_FUZZ_UNSET}", "$$", "-",
    "--", "--nproc", "true", "false", "yes", "off", "TRUE", HUGE, "1" * 5000, "[" * 5000,
]

# Good values of the flags that take one (others get GENERIC_VALUES only). None make a run wait: ports are 0, the
# rendezvous endpoints ask for a free port, nnodes stays 1.
GOOD_VALUES = {
    "--nproc": ["1", "2", "cpu", "auto"], "--nnodes": ["1", "1:1"], "--node-rank": ["0"],
    "--master-addr": ["127.0.0.1", "[::1]", "::1", "localhost"], "--master-port": ["0"],
    "--max-restarts": ["0", "2"], "--run-id": ["fuzz-run", "r.1"], "--tee": ["0", "3", "0:3"],
    "--redirect": ["0", "1", "0:2"], "--local-ranks-filter": ["0", "0,1"], "--tty": ["auto", "off", "on", "0"],
    "--gpu-ids": [""], "--grace-period": ["1", "0.5"], "--slurm": ["off", "auto"],
    "--heartbeat-timeout": ["0", "5"], "--python": ["python3"], "--role": ["trainer"], "--local-addr": ["[::1]", ""],
    "--shutdown-timeout": ["1"], "--rdzv-endpoint": ["[::1]:0", "127.0.0.1:0", ""],
    "--rdzv-backend": ["c10d", "static"], "--join-timeout": ["2"], "--last-call-timeout": ["0.5"],
    "--node-timeout": ["5"], "--node-heartbeat-interval": ["1"], "--status-port": ["0"],
    "--status-bind": ["127.0.0.1", "[::1]"], "--rdzv-conf": ["join_timeout=2", ""], "--monitor-interval": ["1"],
    "--start-method": ["spawn"], "--log-line-prefix-template": ["[${rank}]"],
}
BOOLEAN_VALUES = ["true", "false", "yes", "no", "on", "off", "1", "0", "TRUE", " yes"]
# Flags whose good values would reach other machines: each runs alone, with a remote shell that fails at once.
ALONE = {"--hosts", "--hostfile", "--remote-shell"}


def launch_flags(mgtrain):
    """(spellings, takes_value) of every `mgtrain launch` option, from its --help."""
    # One line per option: the help is wrapped to COLUMNS (else the terminal, else 80 columns).
    help_text = subprocess.run([mgtrain, "launch", "--help"], capture_output=True, text=True, check=True,
                               env=dict(os.environ, COLUMNS="1000")).stdout
    flags = []
    for line in help_text.splitlines():
        match = re.match(r"^  (-[^ ]+)(?: ([A-Z=]+))?", line)
        if not match or match.group(1) in ("-h,--help", "--set"):
            continue
        flags.append((match.group(1).split(","), bool(match.group(2))))
    return flags


def canonical(spellings):
    return next((s for s in spellings if s.startswith("--")), spellings[0]).replace("_", "-")


def flag_args(rng, spellings, takes_value, value):
    name = rng.choice(spellings)
    if value is None:
        return [name]
    return [f"{name}={value}"] if rng.random() < 0.5 or not takes_value else [name, value]


def generate_commands(rng, flags, count):
    """`count` argument lists for `mgtrain launch` (before the base flags and `-- true`)."""
    cases = []
    for spellings, takes_value in flags:  # every flag with every kind of value, in both forms
        name = canonical(spellings)
        values = GOOD_VALUES.get(name, []) + GENERIC_VALUES if takes_value else BOOLEAN_VALUES + GENERIC_VALUES + [None]
        for value in values:
            cases.append(flag_args(rng, spellings, takes_value, value))
    rng.shuffle(cases)
    cases = cases[:count]
    combinable = [f for f in flags if canonical(f[0]) not in ALONE]
    while len(cases) < count:  # then two to four flags at once
        args = []
        for spellings, takes_value in rng.sample(combinable, rng.randint(2, 4)):
            name = canonical(spellings)
            pool = GOOD_VALUES.get(name, ["1"]) if takes_value else BOOLEAN_VALUES + [None]
            value = rng.choice(pool) if rng.random() < 0.7 else rng.choice(GENERIC_VALUES)
            args += flag_args(rng, spellings, takes_value, value)
        cases.append(args)
    return cases


# Variables that set the same keys as flags (torchrun's PET_*, mgtrain's MGTRAIN_<SECTION>_<KEY>): a few cases each.
ENV_NAMES = ["PET_NNODES", "PET_NPROC_PER_NODE", "PET_STANDALONE", "PET_MASTER_ADDR", "PET_RDZV_ENDPOINT",
             "PET_MAX_RESTARTS", "PET_NO_PYTHON", "PET_RDZV_CONF", "MGTRAIN_LAUNCH_MASTER_ADDR", "MGTRAIN_LAUNCH_TEE",
             "MGTRAIN_TRAIN_EPOCHS", "MGTRAIN_MODEL_HIDDEN_SIZES", "MGTRAIN_LAUNCH_STANDALONE", "MGTRAIN_NOPE_X"]


def generate_environments(rng, count):
    """`count` (name, value) pairs for a command line of the base flags only."""
    return [(rng.choice(ENV_NAMES), rng.choice(GENERIC_VALUES[:-3] + BOOLEAN_VALUES)) for _ in range(count)]


VALID_CONFIG = """# a valid config
launch:
  nproc: 1
  master_addr: "[::1]"
model:
  type: mlp
  hidden_sizes: [32, 16]
train:
  epochs: 1
  batch_size: 8
optim:
  lr: 0.01
"""


def laughs(levels, width):
    text = "a0: &a0 [lol]\n"
    for level in range(1, levels):
        text += f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]\n"
    return text


def generate_configs(rng, count):
    """`count` (name, bytes) malformed configs; special files are added by the caller."""
    fixed = [
        ("deep_flow_64", ("[" * 64 + "]" * 64).encode()), ("deep_flow_65", ("[" * 65 + "]" * 65).encode()),
        ("deep_flow_10000", ("[" * 10000).encode()), ("deep_flow_1m", ("train:\n  x: " + "{a: " * 250000).encode()),
        ("deep_block_65", "".join(" " * (2 * i) + "a:\n" for i in range(65)).encode()),
        ("deep_dash", ("- " * 100000).encode()),
        ("multi_doc", (VALID_CONFIG + "---\nunknown: 1\n").encode()), ("empty_docs", b"---\n---\n---\n"),
        ("billion_laughs", laughs(10, 10).encode()),
        ("laughs_in_key", (laughs(9, 10) + "model:\n  hidden_sizes: *a8\n").encode()),
        ("alias_cycle", b"train: &a {epochs: *a}\n"), ("alias_undefined", b"train: *nothing\n"),
        ("many_values", ("x: [" + "1," * 200000 + "]\n").encode()),
        ("huge_scalar", ("launch:\n  python: " + "p" * (8 << 20) + "\n").encode()),
        ("huge_key", ("k" * (4 << 20) + ": 1\n").encode()),
        ("huge_override_like", ("train." + "k" * 1000 + ": 1\n").encode()),
        ("tabs", b"train:\n\tepochs: 1\n"), ("tab_value", b"train:\n  epochs:\t1\n"),
        ("nul", b"train:\n  epochs: 1\x00\n"), ("bom", b"\xef\xbb\xbftrain:\n  epochs: 1\n"),
        ("bad_utf8", b"train:\n  epochs: \xff\xfe\n"), ("bad_escape", b'launch:\n  python: "\\q"\n'),
        ("bad_unicode", b'launch:\n  python: "\\UFFFFFFFF"\n'), ("directive", b"%YAML 3.0\n---\ntrain: {}\n"),
        ("tag", b"train: !!binary AAAA\n"), ("merge_key", b"base: &b {epochs: 1}\ntrain:\n  <<: *b\n"),
        ("dup_key", b"train:\n  epochs: 1\n  epochs: 2\n"),
    ]
    configs = list(fixed)
    valid = VALID_CONFIG.encode()
    indicators = b"[]{}:-?,&*!|>'\"%@`#\t\n \x00"
    while len(configs) < count:
        kind = rng.randrange(5)
        if kind == 0:  # a truncation
            data = valid[: rng.randrange(len(valid))]
        elif kind == 1:  # indicators in random places
            data = bytearray(valid)
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.choice(indicators)
            data = bytes(data)
        elif kind == 2:  # binary junk
            data = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4096)))
        elif kind == 3:  # nesting around the limit, flow and block mixed
            depth = rng.randint(50, 80)
            block = rng.randint(0, depth)
            data = ("".join(" " * (2 * i) + "a:\n" for i in range(block)) + " " * (2 * block) + "[" * (depth - block)
                    + "1" + "]" * (depth - block) + "\n").encode()
        else:  # a valid config with a random line repeated, cut or duplicated as a document
            lines = valid.split(b"\n")
            i = rng.randrange(len(lines))
            lines.insert(i, rng.choice([b"---", b"...", lines[i] * rng.randint(2, 50), b"  " + lines[i], b"\t"]))
            data = b"\n".join(lines)
        configs.append((f"random_{len(configs)}", data))
    return configs[:count]


def run_case(argv, timeout, cwd, env, allowed, extra_env):
    """(None when the run ended as documented, else why not; its exit code or None)."""
    start = time.monotonic()
    process = subprocess.Popen(argv, cwd=cwd, env=dict(env, **extra_env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return f"no end within {timeout} s (a hang)", None
    err_text = err.decode(errors="replace")
    code = process.returncode
    if code < 0:
        return f"killed by signal {-code}; stderr: {err_text[-500:]}", code
    if "internal error" in err_text:
        return f"internal error (exit {code}): {err_text[-500:]}", code
    if code not in allowed:
        return f"undocumented exit code {code}; stderr: {err_text[-500:]}", code
    if time.monotonic() - start > timeout / 2:
        return f"took {time.monotonic() - start:.1f} s", code
    return None, code


def shown(argv):
    return " ".join(repr(a) if len(a) < 80 else repr(a[:40] + f"...({len(a)} chars)") for a in argv)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mgtrain")
    parser.add_argument("--commands", type=int, default=1500)
    parser.add_argument("--configs", type=int, default=300)
    parser.add_argument("--environments", type=int, default=100, help="command lines with a variable set")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--keep", help="write the generated configs here (default: a temporary directory)")
    args = parser.parse_args()
    mgtrain = os.path.abspath(args.mgtrain)
    rng = random.Random(args.seed)
    started = time.monotonic()

    work = args.keep or tempfile.mkdtemp(prefix="mgtrain-input-fuzz-")
    os.makedirs(work, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MGTRAIN_", "PET_", "SLURM_", "TORCHELASTIC_"))}
    # Nothing may wait long: nodes that never come, a stop's grace period, agents on other hosts.
    env.update(MGTRAIN_LAUNCH_JOIN_TIMEOUT="2", MGTRAIN_LAUNCH_LAST_CALL_TIMEOUT="0.5", MGTRAIN_LAUNCH_GRACE_PERIOD="1",
               MGTRAIN_LAUNCH_REMOTE_SHELL="false {host}")

    cases = []  # (label, argv, allowed exit codes, extra environment)
    base = [mgtrain, "launch", "--log-dir", os.path.join(work, "runs")]
    for i, extra in enumerate(generate_commands(rng, launch_flags(mgtrain), args.commands)):
        argv = base + ["--nproc", "1", "--run-id", f"c{i}"] + extra + ["--", "true"]
        cases.append((f"command {i}", argv, LAUNCH_CODES, {}))
    for i, (name, value) in enumerate(generate_environments(rng, args.environments)):
        cases.append((f"environment {i} {name}={value[:40]!r}", base + ["--", "true"], LAUNCH_CODES, {name: value}))
    configs = generate_configs(rng, args.configs)
    for name, data in configs:
        path = os.path.join(work, name + ".yaml")
        with open(path, "wb") as f:
            f.write(data)
        cases.append((f"config {name}", [mgtrain, "config", "validate", path], VALIDATE_CODES, {}))
    fifo = os.path.join(work, "fifo.yaml")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    big = os.path.join(work, "17mib.yaml")
    with open(big, "wb") as f:
        f.truncate(17 << 20)
    for path in (fifo, "/dev/zero", work, big, os.path.join(work, "absent.yaml")):
        cases.append((f"config file {path}", [mgtrain, "config", "validate", path], VALIDATE_CODES, {}))
        cases.append((f"hostfile {path}", [mgtrain, "launch", "--hostfile", path, "--", "true"], LAUNCH_CODES, {}))

    failures = []
    codes = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_case, argv, args.timeout, work, env, allowed, extra_env): (label, argv)
                   for label, argv, allowed, extra_env in cases}
        for future in concurrent.futures.as_completed(futures):
            problem, code = future.result()
            codes[code] = codes.get(code, 0) + 1
            if problem:
                failures.append((futures[future], problem))
    for (label, argv), problem in sorted(failures):
        print(f"FAIL {label}: {problem}\n  {shown(argv[1:])}")
    commands = sum(1 for c in cases if c[0].startswith(("command ", "environment ")))
    print(f"input_fuzz: {commands} command lines ({args.environments} with a variable set), "
          f"{len(cases) - commands} config files, {len(failures)} failures "
          f"(internal errors, signal deaths, hangs, undocumented exit codes) in {time.monotonic() - started:.1f} s; "
          f"exit codes: {', '.join(f'{c}: {n}' for c, n in sorted(codes.items(), key=lambda i: str(i[0])))}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
