#!/usr/bin/env python3
# Shows that the repository checks can fail: copies the repository's sources (no build trees, no .git) to a
# temporary directory, checks that the copy passes, then plants one violation at a time and expects the check to
# exit 1 with a message naming the file, the line and what is wrong (printed, so a failing run shows the message).
# Usage: scripts/check/self_test.py includes|comments|names [repository root, default: this script's ../..]
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = {"includes": "includes_vs_links.py", "comments": "comment_paths.py", "names": "run_folder_names.py"}


def run_check(check, root):
    result = subprocess.run([sys.executable, os.path.join(HERE, CHECKS[check]), root], capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr


def edit(root, relative, change):
    """Applies change(text) -> text to one file of the copy and returns a function that restores it."""
    path = os.path.join(root, relative)
    original = open(path, encoding="utf-8").read()
    open(path, "w", encoding="utf-8").write(change(original))
    return lambda: open(path, "w", encoding="utf-8").write(original)


def insert_line(number, line):
    """A change inserting `line` so that it becomes line `number` (1-based)."""
    def change(text):
        lines = text.split("\n")
        return "\n".join(lines[:number - 1] + [line] + lines[number - 1:])
    return change


def replace(old, new):
    def change(text):
        if old not in text:
            raise AssertionError(f"self_test: the text to replace is gone: {old!r} (update the planted case)")
        return text.replace(old, new, 1)
    return change


# (what is planted, [(file, change)], texts the message must contain)
CASES = {
    "includes": [
        ("an include of a folder the library does not link",
         [("lib/output/line_prefix.cpp", insert_line(2, '#include "observe/run_record.hpp"'))],
         ["lib/output/line_prefix.cpp:2:", "(folder observe)", "mgtrain_output", "does not link mgtrain_observe"]),
        ("an app including a folder it does not link",
         [("apps/mgtrain-plot/main.cpp", insert_line(2, '#include "config/config.hpp"'))],
         ["apps/mgtrain-plot/main.cpp:2:", "(folder config)", "mgtrain-plot", "target_link_libraries"]),
        ("a link no file uses",
         [("lib/output/CMakeLists.txt", replace("LINKS mgtrain_contract", "LINKS mgtrain_host mgtrain_contract"))],
         ["lib/output/CMakeLists.txt:", "mgtrain_output links mgtrain_host, but no file in lib/output includes host/"]),
        ("an arrow missing from ARCHITECTURE.md",
         [("ARCHITECTURE.md", replace("supervise           ─► process checkpoint diagnose elastic output", "supervise           ─► process checkpoint diagnose output"))],
         ["ARCHITECTURE.md:", "supervise ─► differs from the LINKS of mgtrain_supervise", "missing elastic"]),
    ],
    "comments": [
        ("a C++ comment naming a moved file",
         [("lib/util/fd.hpp", insert_line(2, "// The descriptors of core/old_place.hpp."))],
         ["lib/util/fd.hpp:2:", "core/old_place.hpp", "does not exist"]),
        ("a rooted path in a CMake comment",
         [("lib/CMakeLists.txt", insert_line(2, "# See lib/nowhere/README.md."))],
         ["lib/CMakeLists.txt:2:", "lib/nowhere/README.md"]),
        ("a shell comment naming a lib file without extension",
         [("scripts/test.sh", insert_line(3, "# the stage list lives in util/no_such_file"))],
         ["scripts/test.sh:3:", "util/no_such_file"]),
    ],
    "names": [
        ("a run-folder file name spelled outside contract/log_layout",
         [("lib/observe/run_history.cpp", insert_line(2, 'const char* kPlanted = "run.json";'))],
         ["lib/observe/run_history.cpp:2:", '"run.json" is a run-folder name', "lib/contract/log_layout.hpp"]),
        ("a word-like name joined to a path",
         [("apps/mgtrain/status_command.cpp", insert_line(2, 'auto planted = std::filesystem::path("x") / "heartbeat";'))],
         ["apps/mgtrain/status_command.cpp:2:", '"heartbeat" is a run-folder name']),
    ],
}

# Text that must not fail: placeholders, patterns, phrases, code (not comments).
HARMLESS = {
    "includes": [],
    "names": [("lib/util/fd.hpp", insert_line(2, 'const char* kWord = "heartbeat"; /* "run.json" */ // "stacks.txt"'))],
    "comments": [("lib/util/fd.hpp", insert_line(2, "// tests/<folder>/test_x.cpp, file_timer_{table,pipe}, "
                                                    "util/worker_binary.*, BUNDLE/check.sh, read/write, "
                                                    "train/loss, https://example.com/a/b.cpp"))],
}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in CHECKS:
        print(f"usage: {sys.argv[0]} {'|'.join(CHECKS)} [repository root]", file=sys.stderr)
        return 2
    check = sys.argv[1]
    source = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", ".."))
    failures = 0
    with tempfile.TemporaryDirectory(prefix="mgtrain-check-") as scratch:
        root = os.path.join(scratch, "repo")
        shutil.copytree(source, root, symlinks=True,
                        ignore=lambda d, names: [n for n in names if n in (".git", "__pycache__") or
                                                 (n.startswith("build") and os.path.samefile(d, source))])
        code, output = run_check(check, root)
        if code != 0:
            print(f"self_test {check}: the unchanged copy fails the check (fix the repository first):\n{output}")
            return 1
        restores = [edit(root, f, change) for f, change in HARMLESS[check]]
        code, output = run_check(check, root)
        for restore in restores:
            restore()
        if code != 0:
            print(f"self_test {check}: FAILED: placeholders and phrases were taken for paths:\n{output}")
            failures += 1
        for what, edits, expected in CASES[check]:
            restores = [edit(root, f, change) for f, change in edits]
            code, output = run_check(check, root)
            for restore in restores:
                restore()
            missing = [text for text in expected if text not in output]
            if code == 1 and not missing:
                print(f"self_test {check}: planted {what}: failed as expected:\n  " +
                      "\n  ".join(line for line in output.splitlines() if line))
            else:
                print(f"self_test {check}: FAILED: planted {what}: exit {code}, message lacks {missing}:\n{output}")
                failures += 1
    print(f"self_test {check}: {'all planted violations caught' if not failures else f'{failures} case(s) failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
