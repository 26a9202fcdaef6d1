#!/usr/bin/env python3
# clang-tidy over the given sources with a build folder's compile commands, JOBS at once, and a cache of clean
# results: a source whose translation unit is unchanged since clang-tidy last found nothing in it is not checked again.
# The key of a source is a hash of clang-tidy's version, .clang-tidy, the source's compile command (the clone's and
# the build folder's paths taken out, so another clone of the same commit hits) and the content of every file the
# compiler read for it (ninja's record of the object's dependencies). Only clean results are kept (an empty file
# named by the key under MGTRAIN_TIDY_CACHE, default ~/.cache/mgtrain/tidy); a source with findings is checked every
# time, and so is one whose dependencies ninja does not know (not built yet). Called by tidy.sh.
# Usage: scripts/check/tidy_run.py BUILD_DIR COMPILE_COMMANDS_DIR SOURCE...   (exit 1: findings)
import concurrent.futures
import hashlib
import json
import os
import re
import subprocess
import sys


def file_digest(path, memo):
    if path not in memo:
        try:
            with open(path, "rb") as f:
                memo[path] = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            memo[path] = None
    return memo[path]


def ninja_dependencies(build):
    """{object path (relative to the build folder): [dependency paths as ninja recorded them]}."""
    try:
        text = subprocess.run(["ninja", "-C", build, "-t", "deps"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    deps, current = {}, None
    for line in text.splitlines():
        if line and not line.startswith(" "):
            current = line.split(":", 1)[0]
            deps[current] = [] if "(VALID)" in line else None  # STALE: the object is out of date
        elif line.strip() and current is not None and deps[current] is not None:
            deps[current].append(line.strip())
    return deps


def main():
    build, commands_dir, sources = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3:]
    root = os.getcwd()
    jobs = int(os.environ.get("JOBS") or os.cpu_count() or 1)
    cache = os.environ.get("MGTRAIN_TIDY_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "mgtrain", "tidy")
    os.makedirs(cache, exist_ok=True)
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, text=True).stdout
    config = open(".clang-tidy", "rb").read() if os.path.exists(".clang-tidy") else b""
    commands = {}
    for entry in json.load(open(os.path.join(commands_dir, "compile_commands.json"))):
        commands[os.path.realpath(entry["file"])] = entry["command"]
    deps = ninja_dependencies(build)
    memo = {}

    def key_of(source):
        command = commands.get(os.path.realpath(source))
        match = re.search(r"\s-o\s+(\S+)", command or "")
        recorded = deps.get(match.group(1)) if match else None
        if not recorded:
            return None
        h = hashlib.sha256()
        h.update(version.encode())
        h.update(config)
        h.update(command.replace(build, "<build>").replace(root, "<root>").encode())
        h.update(source.encode())
        h.update((file_digest(source, memo) or "").encode())
        for dep in sorted(recorded):
            digest = file_digest(os.path.join(build, dep), memo)
            if digest is None:
                return None
            h.update(dep.replace(build, "<build>").replace(root, "<root>").encode())
            h.update(digest.encode())
        return h.hexdigest()

    def check(source):
        key = key_of(source)
        if key and os.path.exists(os.path.join(cache, key)):
            return source, "", True
        run = subprocess.run(["clang-tidy", "-p", commands_dir, "--quiet", "--extra-arg=-Wno-unknown-warning-option",
                              source], capture_output=True, text=True)
        output = run.stdout + run.stderr
        findings = [line for line in output.splitlines()
                    if re.search(r"(warning|error): ", line) and "warnings generated" not in line]
        if not findings and run.returncode == 0 and key:
            open(os.path.join(cache, key), "w").close()
        return source, output if findings or run.returncode != 0 else "", False

    failed, cached = [], 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for source, output, hit in pool.map(check, sources):
            cached += hit
            if output:
                failed.append(source)
                lines = output.splitlines()
                marks = [index for index, line in enumerate(lines)
                         if re.search(r"(warning|error): ", line) and "warnings generated" not in line]
                if not marks:  # clang-tidy failed without a finding: show what it said
                    print(f"{source}: clang-tidy failed:\n{output}")
                for index in marks:
                    print("\n".join(lines[index:index + 4]))
    if failed:
        print(f"tidy.sh: clang-tidy found the above in {len(failed)} of {len(sources)} files", file=sys.stderr)
        return 1
    print(f"tidy.sh: {len(sources)} files, no findings ({cached} unchanged since a clean check: cached in {cache})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
