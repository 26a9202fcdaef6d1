#!/usr/bin/env python3
# The torchrun compatibility suite (issue 23, docs/torchrun-compat.md): runs each case (compat_cases.py) under real
# torchrun 2.x from the torch venv, under mgtrain's torchrun personality (a `torchrun` link to mgtrain) and under
# `mgtrain launch` with the same flags, and compares exit codes, the workers' environment and command line,
# console lines, files written, error files, timing bounds and workers left running. A personality difference
# not in compat_deliberate.py fails the run (exit 1); `mgtrain launch`'s differences are printed for information.
# Exit 77 (ctest's SKIP_RETURN_CODE) when the venv has no torchrun. Standard library only.
import argparse
import fnmatch
import os
import re
import shutil
import signal
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compat_cases import GROUPS  # noqa: E402
from compat_compare import compare, fields  # noqa: E402
from compat_deliberate import DELIBERATE  # noqa: E402
from compat_run import LAUNCHERS, Tools, base_env, run_case  # noqa: E402

SKIP = 77
SHOWN_ITEMS = 8
WORKER_KEY = re.compile(r"^(a\S+\.r\S+) (.*)$")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mgtrain", help="the mgtrain binary (required to run cases)")
    parser.add_argument("--venv", help="the torch 2.x venv: bin/torchrun, bin/python (required to run cases)")
    parser.add_argument("--group", action="append", help="a group of cases (repeatable; default: all)")
    parser.add_argument("--case", default="*", help="only the cases whose name matches this glob")
    parser.add_argument("--no-launch", action="store_true", help="skip the informational `mgtrain launch` runs")
    parser.add_argument("--scratch", help="the folder for the runs (default: a temporary one, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--self-check", action="store_true",
                        help="run real torchrun in place of the personality: every case must come out `same` (shows "
                             "that the normalisation leaves no run-to-run noise)")
    parser.add_argument("--budget", type=float, help="seconds: start no case after this long (the rest fail)")
    parser.add_argument("--list", action="store_true", help="list the groups and cases")
    return parser.parse_args()


def selected_cases(args):
    groups = args.group or list(GROUPS)
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        sys.exit(f"torchrun_compat: unknown group {', '.join(unknown)}; groups: {', '.join(GROUPS)}")
    return [(g, case) for g in groups for case in GROUPS[g] if fnmatch.fnmatch(case.name, args.case)]


def print_differences(title, differences):
    if not differences:
        print(f"  {title}: same", flush=True)
        return
    status = "deliberate differences only"
    if any(d[1] == "different" for d in differences):
        status = "different" if "informational" in title else "DIFFERENT"
    print(f"  {title}: {status}")
    for field, kind, only_ref, only_other, reason in differences:
        print(f"    {field} [{kind}{': ' + reason if reason else ''}]")
        for sign, items in (("- torchrun:", only_ref), ("+ other:   ", only_other)):
            items = by_worker(items) if field in ("env", "worker_error_files", "program") else items
            for item in items[:SHOWN_ITEMS]:
                print(f"      {sign} {item}")
            if len(items) > SHOWN_ITEMS:
                print(f"      {sign} ... {len(items) - SHOWN_ITEMS} more")
    sys.stdout.flush()


def by_worker(items):
    """'a0.r0 X=1', 'a0.r1 X=1' shown as 'X=1  [a0.r0 a0.r1]'."""
    workers = {}
    for item in items:
        match = WORKER_KEY.match(item)
        key, rest = (match.group(1), match.group(2)) if match else ("", item)
        workers.setdefault(rest, []).append(key)
    return [f"{rest}  [{' '.join(keys)}]" if any(keys) else rest for rest, keys in workers.items()]


def verdict(differences, informational=False):
    if not differences:
        return "same"
    different = sorted({d[0] for d in differences if d[1] == "different"})
    deliberate = sorted({d[0] for d in differences if d[1] == "deliberate"})
    parts = []
    if different:
        parts.append(("different: " if informational else "DIFFERENT: ") + ",".join(different))
    if deliberate:
        parts.append("deliberate: " + ",".join(deliberate))
    return "; ".join(parts)


def run_one(group, case, tools, scratch, worker, launchers):
    case_dir = os.path.join(scratch, case.name)
    print(f"== {case.name} (group {group}){' - ' + case.note if case.note else ''}", flush=True)
    base_names = set(base_env(tools, case_dir, case))
    observed = {}
    for launcher in launchers:
        obs = run_case(case, launcher, tools, case_dir, worker)
        observed[launcher] = fields(case, obs, tools, base_names)
        elapsed = "" if obs["elapsed"] is None or not (case.bound or case.signal) else f", {obs['elapsed']:.1f} s to exit"
        notes = "".join(f"; {n}" for n in obs["notes"])
        print(f"  {launcher}: exit {observed[launcher]['exit']} after {obs['duration']:.1f} s{elapsed}{notes}",
              flush=True)
    results = {}
    for launcher in launchers[1:]:
        differences = compare(case.name, observed["torchrun"], observed[launcher], DELIBERATE)
        title = "personality" if launcher == "personality" else "mgtrain launch (informational)"
        print_differences(title, differences)
        results[launcher] = differences
    return results


def main():
    args = parse_args()
    cases = selected_cases(args)
    if args.list:
        for group, case in cases:
            print(f"{group:14} {case.name}")
        return 0
    if not args.mgtrain or not args.venv:
        print("torchrun_compat: --mgtrain and --venv are required to run cases", file=sys.stderr)
        return 2
    torchrun = os.path.join(args.venv, "bin", "torchrun")
    if not os.access(torchrun, os.X_OK):
        print(f"SKIP: no torch venv with bin/torchrun at {args.venv} (scripts/torch2-env.sh creates it)")
        return SKIP
    if not os.access(args.mgtrain, os.X_OK):
        print(f"torchrun_compat: {args.mgtrain} is not an executable mgtrain binary", file=sys.stderr)
        return 1
    if not cases:
        print(f"torchrun_compat: no case matches {args.case}", file=sys.stderr)
        return 1
    scratch = args.scratch or tempfile.mkdtemp(prefix="torchrun_compat.")
    os.makedirs(scratch, exist_ok=True)
    tools = Tools(os.path.abspath(args.mgtrain), os.path.abspath(args.venv), scratch, args.self_check)
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compat_worker.py")
    launchers = [launcher for launcher in LAUNCHERS if not (args.no_launch and launcher == "launch")]
    # SIGTERM (ctest, a user) ends the run through the finally blocks that kill the launchers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rows, began = [], time.monotonic()
    try:
        for group, case in cases:
            if args.budget and time.monotonic() - began > args.budget:
                rows.append((case.name, f"DIFFERENT: not run (over the {args.budget:.0f} s budget)", "not run"))
                continue
            results = run_one(group, case, tools, scratch, worker, launchers)
            rows.append((case.name, verdict(results["personality"]),
                         verdict(results["launch"], True) if "launch" in results else "not run"))
    finally:
        if not args.keep and not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)
        elif args.keep:
            print(f"runs kept in {scratch}")
    width, middle = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
    print("\n" + "summary: torchrun 2.x against the personality and `mgtrain launch` (informational)")
    print(f"{'case':{width}}  {'personality':{middle}}  mgtrain launch")
    for name, personality, launch in rows:
        print(f"{name:{width}}  {personality:{middle}}  {launch}")
    failed = [r[0] for r in rows if r[1].startswith("DIFFERENT")]
    print(f"{len(rows) - len(failed)} of {len(rows)} cases behave as torchrun's (deliberate differences allowed)"
          + (f"; different: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
