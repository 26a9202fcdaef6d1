#!/usr/bin/env python3
# Checks the torchrun compatibility suite's own logic without running a launcher (ctest torchrun_compat_selftest):
# the groups registered in tests/CMakeLists.txt are the ones compat_cases.py defines, and the comparison reports a
# difference as `different`, as `deliberate` only where a compat_deliberate.py row covers every differing item,
# and splits a field whose items are partly covered. Usage: compat_selftest.py GROUP1,GROUP2,...
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compat_cases import GROUPS  # noqa: E402
from compat_compare import compare, marker_lines, timing_verdict  # noqa: E402
from compat_deliberate import Row  # noqa: E402

ROWS = [Row("sig*", "timing", None, "slow on purpose"), Row("*", "env_added", r"^MGTRAIN_", "own variables")]


def check(label, got, want, failures):
    if got != want:
        failures.append(f"{label}: got {got!r}, want {want!r}")


def main():
    failures = []
    registered = sys.argv[1].split(",") if len(sys.argv) > 1 else []
    check("groups in tests/CMakeLists.txt against compat_cases.py", registered, list(GROUPS), failures)
    names = [case.name for cases in GROUPS.values() for case in cases]
    check("case names are unique", sorted(set(names)), sorted(names), failures)
    ref = {"exit": "1", "workers": ["a0.r0"], "env": ["a0.r0 RANK=0"], "env_added": ["RANK"], "timing": "x"}
    check("equal fields", compare("c", ref, dict(ref), ROWS), [], failures)
    other = dict(ref, exit="143")
    check("a different exit code", [(d[0], d[1]) for d in compare("c", ref, other, ROWS)], [("exit", "different")],
          failures)
    other = dict(ref, timing="y")
    check("a timing row for sig* covers signal_term", [d[1] for d in compare("signal_term", ref, other, ROWS)],
          ["deliberate"], failures)
    check("but not env_nproc1", [d[1] for d in compare("env_nproc1", ref, other, ROWS)], ["different"], failures)
    other = dict(ref, env_added=["MGTRAIN_RUN_DIR", "NCCL_X", "RANK"])
    split = [(d[0], d[1], d[3]) for d in compare("c", ref, other, ROWS)]
    check("an item regex covers only its items", split,
          [("env_added", "deliberate", ["MGTRAIN_RUN_DIR"]), ("env_added", "different", ["NCCL_X"])], failures)
    other = dict(ref, workers=["a0.r0", "a0.r1"], env=["a0.r0 RANK=0", "a0.r1 RANK=1"])
    check("a missing worker shows once, under workers", [d[0] for d in compare("c", ref, other, ROWS)], ["workers"],
          failures)
    plain = type("Plain", (), {"text": staticmethod(lambda line: line)})()
    check("worker lines written into each other count once each",
          marker_lines(["wline: a got SIGINTwline: b got SIGINT\n\nx wline: c\n"], plain),
          ["wline: a got SIGINT", "wline: b got SIGINT", "x wline: c"], failures)
    check("timing verdicts", [timing_verdict((1, 5), t) for t in (0.5, 2, 9, None)],
          ["faster than 1 s", "within 1-5 s", "slower than 5 s", "did not exit"], failures)
    for failure in failures:
        print("FAILED:", failure)
    print(f"compat_selftest: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
