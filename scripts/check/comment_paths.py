#!/usr/bin/env python3
# Checks that comments name only repository paths that exist: in lib/, apps/, tests/, scripts/ and every CMake file,
# a comment naming `lib/...`, `apps/...`, `tests/...`, `scripts/...`, `docs/...`, `configs/...`, `third_party/...`,
# a `folder/file.ext` (relative to lib/, to the commenting file's folder, to its top folder or to the root), or
# a lib folder's file without extension (`util/atomic_file`), fails when no such file or folder is there: comments that still point at moved or deleted files mislead
# the next reader. Placeholders (`tests/<folder>`, `file_timer_{table,pipe}`, `worker_binary.*`, `BUNDLE/check.sh`)
# are not paths.
# Paths of other projects (torch/csrc/..., sys/prctl.h) are recognised by their first folder (EXTERNAL below).
# Reads files as text, needs no build. Run by ctest (label unit); scripts/check/self_test.py plants a stale path.
# Usage: scripts/check/comment_paths.py [repository root, default: this script's ../..]
import glob
import os
import re
import sys

ROOTED = ("lib", "apps", "tests", "scripts", "docs", "configs", "third_party")
SCANNED = ("lib", "apps", "tests", "scripts")
CPP_EXTENSIONS = (".cpp", ".hpp", ".h", ".cc", ".hpp.in")
HASH_EXTENSIONS = (".sh", ".py", ".cmake", ".sbatch", ".yaml", ".yml")
# File extensions that make `a/b.ext` a path worth checking.
PATH_EXTENSIONS = ("cpp", "hpp", "h", "cc", "in", "sh", "py", "cmake", "txt", "md", "yaml", "yml", "sbatch", "json")
# First folders of paths in other projects and on the system, which comments may name.
EXTERNAL = {"torch", "c10", "ATen", "c10d", "gloo", "sys", "linux", "asm", "bits", "nlohmann", "fmt", "yaml-cpp",
            "CLI", "catch2", "nvidia", "cuda", "src", "include", "usr", "proc", "dev", "etc", "tmp", "run", "var",
            "site-packages", "build", "build-asan", "build-debian", "build-torch2", "caffe2", "tensorboard", "google"}
PATH = re.compile(r"(?<![\w./${}<>*-])([A-Za-z_][\w+-]*(?:/[\w.+-]+)+/?|(?:" + "|".join(ROOTED) + r")/)")
PLACEHOLDER_NEXT = set("*<{$[…")


def cpp_comments(lines):
    """(line number, comment text) for every // and /* */ comment of C++ source lines (strings skipped)."""
    in_block, raw_end = False, None
    for number, line in enumerate(lines, 1):
        i, text = 0, []
        while i < len(line):
            if raw_end is not None:  # inside a raw string literal R"delim( ... )delim"
                end = line.find(raw_end, i)
                if end < 0:
                    break
                i, raw_end = end + len(raw_end), None
            elif in_block:
                end = line.find("*/", i)
                text.append(line[i:] if end < 0 else line[i:end])
                if end < 0:
                    break
                i, in_block = end + 2, False
            elif line.startswith("//", i):
                text.append(line[i + 2:])
                break
            elif line.startswith("/*", i):
                in_block, i = True, i + 2
            elif line.startswith('R"', i) and (i == 0 or not (line[i - 1].isalnum() or line[i - 1] == "_")):
                open_paren = line.find("(", i)
                raw_end, i = ")" + line[i + 2:open_paren] + '"', open_paren + 1
            elif line[i] in "\"'":
                quote, i = line[i], i + 1
                while i < len(line) and line[i] != quote:
                    i += 2 if line[i] == "\\" else 1
                i += 1
            else:
                i += 1
        if text:
            yield number, " ".join(text)


def hash_comments(lines):
    """(line number, comment text) for `#` comments of shell, Python, CMake and YAML lines (quotes skipped)."""
    for number, line in enumerate(lines, 1):
        if number == 1 and line.startswith("#!"):
            continue
        quote, i = None, 0
        while i < len(line):
            c = line[i]
            if quote:
                if c == "\\" and quote == '"':
                    i += 1
                elif c == quote:
                    quote = None
            elif c in "\"'":
                quote = c
            elif c == "#" and (i == 0 or line[i - 1] in " \t;(") and not line.startswith("#include", i):
                yield number, line[i + 1:]
                break
            i += 1


def comments_of(path, lines):
    name = os.path.basename(path)
    if name.endswith(CPP_EXTENSIONS):
        return cpp_comments(lines)
    if name == "CMakeLists.txt" or name.endswith(HASH_EXTENSIONS) or (lines and lines[0].startswith("#!")):
        return hash_comments(lines)
    return []


def files_to_scan(root):
    for top in SCANNED:
        for directory, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.endswith("_corpus"))
            for file in sorted(files):
                yield os.path.join(directory, file)
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "build")) and
                         os.path.join(directory, d) not in [os.path.join(root, t) for t in SCANNED])
        for file in sorted(files):
            if file == "CMakeLists.txt" or file.endswith(".cmake"):
                yield os.path.join(directory, file)


def exists(root, path, token):
    """Whether the comment's token names something in the repository, relative to any of the usual bases."""
    token = token.rstrip("/")
    first = token.split("/")[0]
    if first in ROOTED:  # lib/util/atomic_file names lib/util/atomic_file.{hpp,cpp}
        full = os.path.join(root, token)
        return os.path.exists(full) or bool(glob.glob(glob.escape(full) + ".*"))
    relative = os.path.relpath(path, root)
    bases = [root, os.path.join(root, "lib"), os.path.dirname(path), os.path.join(root, relative.split(os.sep)[0])]
    return any(os.path.exists(os.path.join(base, token)) for base in bases)


def is_library_file_name(root, parts):
    """Whether folder/name reads as a file of a lib folder without extension: util/atomic_file (a folder of sources),
    train/loop/trainer (lib/train holds folders only, so train/loss, a TensorBoard tag, is not one)."""
    for depth in range(1, len(parts)):
        folder = os.path.join(root, "lib", *parts[:depth])
        if not os.path.isdir(folder):
            return False
        if any(f.endswith(CPP_EXTENSIONS) for f in os.listdir(folder)):
            return depth == len(parts) - 1
    return False


def stale_paths(root, path, text):
    """The tokens of one comment that look like repository paths and name nothing there."""
    for match in PATH.finditer(text):
        token = match.group(1)
        after = text[match.end():match.end() + 1]
        if after in PLACEHOLDER_NEXT or re.search(r"[<>{}*$]", token):
            continue  # a placeholder or a pattern, not a path
        token = token.rstrip(".,:;)'`\"")
        first = token.split("/")[0]
        if first in EXTERNAL or "://" in text[max(0, match.start() - 3):match.start() + 3]:
            continue
        parts = token.rstrip("/").split("/")
        if any(re.fullmatch(r"[A-Z][A-Z0-9_]+", part) for part in parts):
            continue  # FOLDER/name.hpp, BUNDLE/check.sh: placeholders
        if first in ROOTED or re.search(r"\.(" + "|".join(PATH_EXTENSIONS) + r")$", parts[-1]):
            if not exists(root, path, token):
                yield token
        elif is_library_file_name(root, parts):
            base = os.path.join(root, "lib", token.rstrip("/"))
            if not os.path.exists(base) and not glob.glob(glob.escape(base) + ".*"):
                yield token
        # anything else (and/or, read/write) is a phrase, not a path


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    root = os.path.abspath(root)
    errors, scanned = [], 0
    for path in files_to_scan(root):
        try:
            lines = open(path, encoding="utf-8").read().split("\n")
        except (UnicodeDecodeError, OSError):
            continue  # binary files (fuzz seeds, images) have no comments
        scanned += 1
        for number, text in comments_of(path, lines):
            for token in stale_paths(root, path, text):
                errors.append(f"{os.path.relpath(path, root)}:{number}: the comment names {token}, which does not "
                              f"exist in the repository (moved or deleted?): point it at the current path")
    for error in errors:
        print(error, file=sys.stderr)
    if errors:
        print(f"comment_paths: {len(errors)} stale path(s) in comments", file=sys.stderr)
        return 1
    print(f"comment_paths: {scanned} files, every path named in a comment exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
