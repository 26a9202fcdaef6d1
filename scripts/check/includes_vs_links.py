#!/usr/bin/env python3
# Checks that the arrows are true: every file in lib/<folder> (and apps/<app>) includes only headers of its own
# folder and of the libraries its target names directly in LINKS (target_link_libraries for the apps), and that
# ARCHITECTURE.md's "Allowed arrows" block lists exactly those LINKS (util left out: everything links it).
# The build alone cannot see a missing direct link: links pass through (launch links supervise, which links
# output, so launch.cpp could include output/ headers without naming output). Reads CMake files and sources as
# text, needs no build. Run by ctest (label unit); scripts/check/self_test.py plants violations to see it fail.
# Usage: scripts/check/includes_vs_links.py [repository root, default: this script's ../..]
import os
import re
import sys

SOURCE_EXTENSIONS = (".cpp", ".hpp", ".h", ".cc", ".hpp.in")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
ARROW = "─►"


def strip_cmake_comments(text):
    """The CMake text with `# ...` comments blanked (line numbers kept)."""
    return "\n".join(re.sub(r"#.*", "", line) for line in text.split("\n"))


def cmake_calls(text, command):
    """(line, [arguments]) of every call of `command` in CMake text (comments stripped)."""
    text = strip_cmake_comments(text)
    for match in re.finditer(r"(?<![\w(])" + re.escape(command) + r"\s*\(", text):
        depth, end = 1, match.end()
        while depth and end < len(text):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        line = text.count("\n", 0, match.start()) + 1
        yield line, text[match.end():end - 1].split()


class Target:
    def __init__(self, name, folder, cmake_file, line):
        self.name, self.folder, self.cmake_file, self.line = name, folder, cmake_file, line
        self.links = []  # our targets named directly, in order

    def where(self):
        return f"{self.cmake_file}:{self.line}"


def read_targets(root):
    """Every library of lib/ (mgtrain_library, mgtrain_torch_library) and every app of apps/, by target name."""
    targets = {}
    for directory, _, files in sorted(os.walk(os.path.join(root, "lib"))):
        if "CMakeLists.txt" not in files:
            continue
        path = os.path.join(directory, "CMakeLists.txt")
        relative = os.path.relpath(path, root)
        text = open(path, encoding="utf-8").read()
        for command, prefix in (("mgtrain_library", ""), ("mgtrain_torch_library", "train/")):
            for line, args in cmake_calls(text, command):
                if len(args) < 2 or args[0].startswith("${"):
                    continue  # the functions' own forwarding calls
                target = Target(args[0], prefix + args[1], relative, line)
                links, section = [], None
                for arg in args[2:]:
                    if arg in ("SOURCES", "LINKS"):
                        section = arg
                    elif section == "LINKS":
                        links.append(arg)
                if command == "mgtrain_torch_library":
                    links.append("mgtrain_train_torch")  # the function adds it (the shared PCH)
                target.links = links
                targets[target.name] = target
    apps_dir = os.path.join(root, "apps")
    for app in sorted(os.listdir(apps_dir)) if os.path.isdir(apps_dir) else []:
        path = os.path.join(apps_dir, app, "CMakeLists.txt")
        if not os.path.isfile(path):
            continue
        relative = os.path.relpath(path, root)
        text = open(path, encoding="utf-8").read()
        for line, args in cmake_calls(text, "add_executable"):
            if args:
                targets[args[0]] = Target(args[0], "apps/" + app, relative, line)
        for _, args in cmake_calls(text, "target_link_libraries"):
            if args and args[0] in targets:
                targets[args[0]].links += [a for a in args[1:] if a not in ("PRIVATE", "PUBLIC", "INTERFACE")]
    return targets


def included_folder(header, folders):
    """The library folder a quoted include path names (longest match: train/data before train), or None."""
    best = None
    for folder in folders:
        if header.startswith(folder + "/") and (best is None or len(folder) > len(best)):
            best = folder
    return best


def check_includes(root, targets):
    """Messages for every include of a folder the including file's target does not link directly, and for every
    library of ours a target links but none of its files includes (an arrow the code does not have)."""
    by_folder = {t.folder: t for t in targets.values()}
    library_folders = [t.folder for t in targets.values() if not t.folder.startswith("apps/")]
    errors = []
    for folder, target in sorted(by_folder.items()):
        directory = os.path.join(root, folder if folder.startswith("apps/") else os.path.join("lib", folder))
        if not os.path.isdir(directory):
            errors.append(f"{target.where()}: {target.name}: folder {os.path.relpath(directory, root)} does not exist")
            continue
        linked = {targets[name].folder for name in target.links if name in targets}
        used = set()
        for file in sorted(os.listdir(directory)):
            path = os.path.join(directory, file)
            if not os.path.isfile(path) or not file.endswith(SOURCE_EXTENSIONS):
                continue
            for number, text in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                match = INCLUDE.match(text)
                if not match:
                    continue
                other = included_folder(match.group(1), library_folders)
                used.add(other)
                if other is None or other == folder or other in linked:
                    continue
                other_target = by_folder[other].name
                lists = "target_link_libraries" if folder.startswith("apps/") else "LINKS"
                errors.append(
                    f"{os.path.relpath(path, root)}:{number}: includes \"{match.group(1)}\" (folder {other}), but "
                    f"{target.name} ({target.where()}) does not link {other_target} directly: add {other_target} "
                    f"to its {lists} (and the arrow to ARCHITECTURE.md), or drop the include")
        for name in target.links:
            if name in targets and targets[name].folder not in used and not (
                    name == "mgtrain_train_torch" and target.folder.startswith("train/")):
                errors.append(f"{target.where()}: {target.name} links {name}, but no file in "
                              f"{os.path.relpath(directory, root)} includes {targets[name].folder}/: drop the link "
                              f"(and the arrow from ARCHITECTURE.md)")
    return errors


def diagram_arrows(root):
    """{folder: (line, [folders])} from the first code block of ARCHITECTURE.md's "## Allowed arrows": lines
    `X ─► Y Z (+ notes)`, a list going on in lines indented past the arrow; parentheses are notes."""
    path = os.path.join(root, "ARCHITECTURE.md")
    lines = open(path, encoding="utf-8").read().split("\n")
    arrows, in_section, in_block, last, arrow_column = {}, False, False, None, 0
    for number, line in enumerate(lines, 1):
        if line.startswith("## "):
            if in_section:
                break
            in_section = line.strip() == "## Allowed arrows"
            continue
        if not in_section:
            continue
        if line.startswith("```"):
            if in_block:
                break
            in_block = True
            continue
        if not in_block:
            continue
        if ARROW in line:
            left, right = line.split(ARROW, 1)
            last, arrow_column = left.strip(), len(left)
            arrows[last] = (number, re.sub(r"\([^)]*\)", " ", right).split())
        elif last and line.strip() and len(line) - len(line.lstrip()) > arrow_column:
            arrows[last][1].extend(re.sub(r"\([^)]*\)", " ", line).split())  # a continued list
        else:
            last = None
    return arrows


def check_diagram(root, targets):
    """Messages where the diagram's arrows differ from the LINKS lists (util, which every library links, left out)."""
    arrows = diagram_arrows(root)
    if not arrows:
        return ["ARCHITECTURE.md: no \"## Allowed arrows\" code block with `X ─► Y` lines"]
    errors = []
    for target in sorted(targets.values(), key=lambda t: t.folder):
        expected = [targets[n].folder for n in target.links if n in targets and targets[n].folder != "util"]
        if target.folder not in arrows:
            errors.append(f"ARCHITECTURE.md: \"Allowed arrows\" has no line `{target.folder} {ARROW} ...` "
                          f"for {target.name} ({target.where()}), which links: {' '.join(expected) or 'nothing of ours'}")
            continue
        line, shown = arrows.pop(target.folder)
        if sorted(shown) != sorted(expected):
            missing = sorted(set(expected) - set(shown))
            extra = sorted(set(shown) - set(expected))
            errors.append(f"ARCHITECTURE.md:{line}: {target.folder} {ARROW} differs from the LINKS of {target.name} "
                          f"({target.where()}): missing {' '.join(missing) or '-'}; not linked {' '.join(extra) or '-'}")
    for folder, (line, _) in sorted(arrows.items()):
        errors.append(f"ARCHITECTURE.md:{line}: `{folder} {ARROW}` names no library or app the CMake files define")
    return errors


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    root = os.path.abspath(root)
    targets = read_targets(root)
    if not targets:
        print(f"includes_vs_links: no mgtrain_library calls under {root}/lib", file=sys.stderr)
        return 2
    errors = check_includes(root, targets) + check_diagram(root, targets)
    for error in errors:
        print(error, file=sys.stderr)
    if errors:
        print(f"includes_vs_links: {len(errors)} problem(s)", file=sys.stderr)
        return 1
    print(f"includes_vs_links: {len(targets)} targets, every include of another folder is a direct link, "
          f"ARCHITECTURE.md's arrows match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
