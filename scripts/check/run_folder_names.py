#!/usr/bin/env python3
# Checks that the names of a run folder's files and folders are spelled in one place: lib/contract/log_layout.hpp
# (as leveldb's filename.h: every on-disk name behind one function). The names are the ones that file appends to a
# path ("/stacks.txt", "/attempt_", ...) or holds as constants; a C++ string literal in lib/ or apps/ that is one of
# them, with or without its leading '/', fails the check, named by file and line (a plain word such as "heartbeat"
# only where it is joined to a path: after `/`). Prose that mentions a name inside a longer string (a message, a help
# text) is fine: only a literal that is exactly a name is code building a path.
# Reads files as text, needs no build. Run by ctest (label unit); scripts/check/self_test.py plants a literal.
# Usage: scripts/check/run_folder_names.py [repository root, default: this script's ../..]
import os
import re
import sys

LAYOUT = os.path.join("lib", "contract", "log_layout.hpp")
SCANNED = ("lib", "apps")
LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
# Literals of log_layout.hpp that are not names in a run folder (the temp folder's parts, variables, defaults).
NOT_RUN_FOLDER = {"TMPDIR", "/tmp", "/mgtrain-", "/runs", "runs", "MGTRAIN_LAUNCH_LOG_DIR", ".", ".txt"}


def layout_names(root):
    """The run-folder names log_layout.hpp spells: each literal, without a leading '/'."""
    names = set()
    with open(os.path.join(root, LAYOUT), encoding="utf-8") as f:
        for line in f:
            if line.lstrip().startswith("//"):
                continue
            for literal in LITERAL.findall(line):
                if literal and literal not in NOT_RUN_FOLDER:
                    names.add(literal.lstrip("/"))
    return {name for name in names if name}


def code_part(line, in_block):
    """The part of `line` outside comments, and whether a /* comment continues after it."""
    out, i = "", 0
    while i < len(line):
        if in_block:
            end = line.find("*/", i)
            if end < 0:
                return out, True
            in_block, i = False, end + 2
        elif line.startswith("//", i):
            break
        elif line.startswith("/*", i):
            in_block, i = True, i + 2
        elif line[i] == '"':
            match = LITERAL.match(line, i)
            end = match.end() if match else len(line)
            out += line[i:end]
            i = end
        else:
            out += line[i]
            i += 1
    return out, in_block


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    names = layout_names(root)
    if len(names) < 10:
        print(f"run_folder_names: found only {sorted(names)} in {LAYOUT}: has the file moved?", file=sys.stderr)
        return 2
    findings = []
    for top in SCANNED:
        for folder, _dirs, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                path = os.path.join(folder, name)
                relative = os.path.relpath(path, root)
                if not name.endswith((".cpp", ".hpp", ".h", ".cc")) or relative == LAYOUT:
                    continue
                in_block = False
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        code, in_block = code_part(line.rstrip("\n"), in_block)
                        for match in LITERAL.finditer(code):
                            literal = match.group(1)
                            if literal.lstrip("/") not in names:
                                continue
                            # A plain word ("heartbeat") is also a message or a column: a name only in a path.
                            word = re.fullmatch(r"[A-Za-z0-9]+", literal)
                            if word and not re.search(r"/\s*$", code[:match.start()]):
                                continue
                            findings.append(f'{relative}:{number}: "{literal}" is a run-folder name: use the '
                                            f"function of {LAYOUT} that builds it (or add one there)")
    for finding in findings:
        print(finding)
    if findings:
        print(f"run_folder_names: {len(findings)} run-folder name(s) spelled outside {LAYOUT}", file=sys.stderr)
        return 1
    print(f"run_folder_names: the {len(names)} names of {LAYOUT} are spelled nowhere else in lib/ and apps/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
