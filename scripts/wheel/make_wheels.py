#!/usr/bin/env python3
"""Builds mgtrain's two wheels from a Release build (docs/install.md); run through scripts/wheel.sh, which provides
the tools (scripts/wheel/tools.txt) and the build.

  mgtrain          the launcher, torch-free: bin/mgtrain and bin/mgtrain-plot (binaries, no Python shim),
                   <prefix>/lib/mgtrain (the status API's HTTP module and every library the binaries need beyond the
                   manylinux policy), the importable helpers mgtrain_progress and mgtrain_snapshot, and a small module
                   `mgtrain` holding the example configs (python -m mgtrain: where things are).
  mgtrain-trainer  the LibTorch side: mgtrain_trainer/bin/mgtrain-worker (found by the launcher, no launch.worker),
                   the static libraries, headers and CMake package (python -m mgtrain_trainer prints the prefix for
                   find_package(mgtrain)); requires exactly the torch it was built against and loads torch's libraries
                   from the installed torch package (RUNPATH $ORIGIN/../../torch/lib), never carrying them.

The libraries beyond the policy are copied next to the binaries here (RUNPATH $ORIGIN-relative), not by `auditwheel
repair`: for a binary in <name>.data/scripts, repair puts a Python shim in its place (auditwheel issue 340), which
would cost the launcher its start-up. `auditwheel show --json` then checks each wheel (no library left outside it
but torch's) and names the manylinux tag, which the wheel gets.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent.parent
SUMMARY = {
    "mgtrain": "A native drop-in for torchrun: launcher, supervisor and multi-node rendezvous in one binary",
    "mgtrain-trainer": "mgtrain's LibTorch DDP trainer: the worker binary and the C++ library to build your own",
}


class WheelError(Exception):
    pass


def run(argv, with_stderr=False):
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        said = (result.stdout + result.stderr).strip()
        raise WheelError(f"{' '.join(map(str, argv))} exited with {result.returncode}:\n{said}")
    return result.stdout + result.stderr if with_stderr else result.stdout


def cmake_cache(build):
    cache = {}
    path = build / "CMakeCache.txt"
    if not path.is_file():
        raise WheelError(f"{build} is not a configured build (no CMakeCache.txt): run scripts/build.sh first")
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z_0-9]+):[A-Z]+=(.*)$", line)
        if match:
            cache[match.group(1)] = match.group(2)
    return cache


def needed_libraries(elf):
    """soname -> resolved path of every library `elf` loads (ldd: its RUNPATH and the system's search)."""
    out = run(["ldd", str(elf)])
    libraries = {}
    for line in out.splitlines():
        match = re.match(r"^\s*(\S+) => (.*?)(?: \(0x[0-9a-f]+\))?$", line)
        if not match:
            continue
        if match.group(2) == "not found":
            raise WheelError(f"{elf} needs {match.group(1)}, which is not found on this machine")
        libraries[match.group(1)] = Path(match.group(2))
    return libraries


class Bundler:
    """Copies the libraries binaries need beyond the manylinux whitelist into one folder of the wheel and points each
    binary's RUNPATH at it ($ORIGIN-relative). Libraries under `provided` (the torch package's site-packages) are
    left out and reached by a RUNPATH entry relative to the installed site-packages instead."""

    def __init__(self, folder, whitelist, patchelf, provided=None):
        self.folder = folder
        self.whitelist = whitelist
        self.patchelf = patchelf
        self.provided = provided  # (site-packages of the build's torch, where the wheel's own package lies in it)
        self.copied = {}  # soname -> source path
        self.left = {}  # soname -> path of the libraries left to the torch package

    def _outside(self, path):
        return self.provided is not None and str(path).startswith(str(self.provided[0]) + "/")

    def _collect(self, elf, runpath_dirs):
        for soname, path in needed_libraries(elf).items():
            if soname in self.whitelist or soname.startswith("ld-linux") or soname == "linux-vdso.so.1":
                continue
            if self._outside(path):
                self.left[soname] = path
                runpath_dirs.add(os.path.relpath(path.resolve().parent, self.provided[0]))
                continue
            if soname not in self.copied:
                self.copied[soname] = path.resolve()
                target = self.folder / soname
                shutil.copy2(path.resolve(), target)
                os.chmod(target, 0o755)
                self._collect(target, set())
                run([self.patchelf, "--set-rpath", "$ORIGIN", str(target)])

    def bundle(self, elf, installed_dir=None, seen_in_wheel=False):
        """Bundles what `elf` needs and sets its RUNPATH. `installed_dir`: where the binary will lie once installed,
        as a folder of the wheel tree (a binary of <name>.data/scripts lies in the prefix's bin/); default: where it
        is in the tree. `seen_in_wheel`: a second entry for the folder as the binary sees it inside the wheel."""
        torch_dirs = set()
        self._collect(elf, torch_dirs)
        here = installed_dir if installed_dir is not None else elf.parent
        entries = [origin(os.path.relpath(self.folder, here))]
        if seen_in_wheel and here != elf.parent:
            entries.append(origin(os.path.relpath(self.folder, elf.parent)))
        if torch_dirs:
            site = os.path.relpath(self.provided[1], here)  # site-packages from the binary, as installed
            entries += [origin(os.path.normpath(os.path.join(site, folder))) for folder in sorted(torch_dirs)]
        run([self.patchelf, "--set-rpath", ":".join(entries), str(elf)])


def origin(relative):
    """A RUNPATH entry for a folder `relative` to the binary's."""
    return "$ORIGIN" if relative == "." else "$ORIGIN/" + relative


def policy_whitelist(auditwheel_python, policy="manylinux_2_28"):
    """The libraries a wheel may assume on the system (auditwheel's own policy file): those of manylinux_2_28, the
    oldest policy of the glibc 2.28+ machines the wheels are for; every newer policy allows the same."""
    folder = run([auditwheel_python, "-c", "import auditwheel, os; print(os.path.dirname(auditwheel.__file__))"])
    policies = json.loads((Path(folder.strip()) / "policy" / "manylinux-policy.json").read_text())
    return set(next(p["lib_whitelist"] for p in policies if p["name"] == policy))


def licence_files(sources):
    """Debian's copyright file of each bundled library's package (dpkg -S), for the wheel's licenses folder."""
    files = {}
    for path in sources:
        try:
            owner = run(["dpkg", "-S", str(path)]).split(":")[0]
        except (WheelError, FileNotFoundError):
            continue
        copyright_file = Path("/usr/share/doc") / owner / "copyright"
        if copyright_file.is_file():
            files[f"{owner}.copyright"] = copyright_file
    return files


def metadata(name, version, requires, readme):
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {name}",
        f"Version: {version}",
        f"Summary: {SUMMARY[name]}",
        "License: BSD-3-Clause",
        "Requires-Python: >=3.9",
        "Classifier: Programming Language :: C++",
        "Classifier: Operating System :: POSIX :: Linux",
        "Classifier: Topic :: Scientific/Engineering :: Artificial Intelligence",
    ]
    lines += [f"Requires-Dist: {r}" for r in requires]
    lines += ["Description-Content-Type: text/markdown", "", readme]
    return "\n".join(lines)


def write_dist_info(tree, name, version, requires, licences):
    distribution = name.replace("-", "_")
    info = tree / f"{distribution}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(metadata(name, version, requires, (SOURCE / "README.md").read_text()))
    (info / "WHEEL").write_text(
        "Wheel-Version: 1.0\nGenerator: mgtrain scripts/wheel/make_wheels.py\nRoot-Is-Purelib: false\n"
        "Tag: py3-none-linux_x86_64\n")
    licence_dir = info / "licenses"
    licence_dir.mkdir()
    shutil.copy2(SOURCE / "LICENSE", licence_dir / "LICENSE")
    for target, source in sorted(licences.items()):
        shutil.copy2(source, licence_dir / target)


def copy_package(name, tree, version, extra=None):
    package = tree / name
    shutil.copytree(HERE / name, package, ignore=shutil.ignore_patterns("__pycache__"))
    init = package / "__init__.py"
    text = init.read_text().replace("@MGTRAIN_VERSION@", version)
    for key, value in (extra or {}).items():
        text = text.replace(f"@{key}@", value)
    init.write_text(text)
    return package


def launcher_tree(stage, tree, version, bundler_args):
    data = tree / f"mgtrain-{version}.data"
    scripts, lib = data / "scripts", data / "data" / "lib" / "mgtrain"
    scripts.mkdir(parents=True)
    lib.mkdir(parents=True)
    for binary in ("mgtrain", "mgtrain-plot"):
        if (stage / "bin" / binary).is_file():
            shutil.copy2(stage / "bin" / binary, scripts / binary)
    for module in (stage / "lib" / "mgtrain").iterdir():
        shutil.copy2(module, lib / module.name)
    package = copy_package("mgtrain", tree, version)
    # The example configs inside the package (not <prefix>/share: pip's uninstall leaves a data scheme's emptied
    # nested folders behind).
    shutil.copytree(stage / "share" / "mgtrain" / "configs", package / "configs")
    for helper in ("mgtrain_progress.py", "mgtrain_snapshot.py"):
        shutil.copy2(stage / "share" / "mgtrain" / "python" / helper, tree / helper)
    bundler = Bundler(lib, **bundler_args)
    # bin/ and lib/mgtrain are both under the installation's prefix (the data and scripts paths of every scheme):
    # a binary of bin/ reaches them as $ORIGIN/../lib/mgtrain.
    # A second entry, the same folder as it lies in the wheel (<name>.data/scripts/../data/lib/mgtrain), lets
    # `auditwheel show` find the libraries inside the wheel; once installed it names no folder, and the loader
    # never gets to it (the first entry holds every library).
    for binary in sorted(scripts.iterdir()):
        bundler.bundle(binary, installed_dir=data / "data" / "bin", seen_in_wheel=True)
    for module in sorted(lib.iterdir()):
        if module.name.startswith("libmgtrain_"):
            bundler.bundle(module)
    return bundler.copied


def trainer_tree(stage, tree, version, torch_site, bundler_args):
    package = copy_package("mgtrain_trainer", tree, version, {"MGTRAIN_TORCH_VERSION": bundler_args.pop("torch")})
    for folder in ("bin", "lib", "include"):
        shutil.copytree(stage / folder, package / folder, symlinks=False)
    # Headers of the dependencies that are not on every machine nor in torch's wheel: gloo (c10d's Gloo process
    # group), fmt and yaml-cpp (their libraries are bundled below; the wheel's mgtrain_bundled.cmake makes
    # targets of them), as the build used them.
    for header in ("gloo", "fmt", "yaml-cpp"):
        source = Path(bundler_args.pop(f"{header}_include")) / header
        shutil.copytree(source, package / "include" / "bundled" / header)
    bundler = Bundler(package / "lib", provided=(torch_site, package.parent), **bundler_args)
    worker = package / "bin" / "mgtrain-worker"
    bundler.bundle(worker)
    for library, soname in (("fmt", "libfmt.so"), ("yaml-cpp", "libyaml-cpp.so")):
        if not any(name.startswith(soname) for name in bundler.copied):
            raise WheelError(f"the worker does not load {soname}*: the bundled {library} target would be empty")
    names = {lib: next(n for n in bundler.copied if n.startswith(f"lib{lib}.so")) for lib in ("fmt", "yaml-cpp")}
    (package / "lib" / "cmake" / "mgtrain" / "mgtrain_bundled.cmake").write_text(
        (HERE / "mgtrain_bundled.cmake.in").read_text()
        .replace("@FMT_LIBRARY@", names["fmt"]).replace("@YAML_CPP_LIBRARY@", names["yaml-cpp"]))
    return bundler


def pack_and_tag(tree, out, tools, whitelist, left_to_torch=None):
    """Packs `tree`, lets `auditwheel repair` name its manylinux tag (it must graft nothing: every library is bundled
    already; torch's, `left_to_torch`, are excluded as torchvision's wheels exclude them) and checks the result with
    `auditwheel show --json`. Returns the wheel and show's verdict."""
    provisional = tree.parent / "packed"
    shutil.rmtree(provisional, ignore_errors=True)
    provisional.mkdir()
    packed = run([tools["python"], "-m", "wheel", "pack", "--dest-dir", str(provisional), str(tree)])
    match = re.search(r"Repacking wheel as (\S+)\.\.\.", packed)
    if not match:
        raise WheelError(f"wheel pack said: {packed}")
    excluded = sorted(left_to_torch or {})
    repair = [tools["auditwheel"], "repair", "--wheel-dir", str(out)]
    for soname in excluded:
        repair += ["--exclude", soname]
    repaired = run(repair + [match.group(1)], with_stderr=True)
    match = re.search(r"Fixed-up wheel written to (\S+)", repaired)
    wheel = Path(match.group(1)) if match else None
    if wheel is None or not wheel.is_file():
        raise WheelError(f"auditwheel repair wrote no wheel: {repaired}")
    with zipfile.ZipFile(wheel) as archive:
        grafted = sorted({n.split("/")[0] for n in archive.namelist() if re.match(r"^[^/]+\.(libs|scripts)/", n)})
    if grafted:
        raise WheelError(f"auditwheel repair grafted {', '.join(grafted)} into {wheel.name}: a library the bundling "
                         "missed (scripts/wheel/make_wheels.py)")
    show = [tools["auditwheel"], "show", "--json", str(wheel)]
    if left_to_torch:  # find torch's libraries where the torch package has them, not in the system's folders
        show[2:2] = ["--ldpaths", ":".join(sorted({str(p.parent) for p in left_to_torch.values()}))]
    verdict = json.loads(run(show))
    # show lists what manylinux_2_5 would not allow; the wheels assume manylinux_2_28's libraries (libexpat ...).
    outside = set(verdict["external_libs"]) - whitelist - set(left_to_torch or {})
    if outside:
        raise WheelError(f"{wheel.name} needs libraries outside it: {', '.join(sorted(outside))}")
    return wheel, verdict


def tag_of(wheel):
    return wheel.name[:-len(".whl")].split("-")[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", required=True, type=Path, help="a Release build of the main flavour (build/)")
    parser.add_argument("--out", required=True, type=Path, help="where the wheels go (dist/)")
    parser.add_argument("--tools", required=True, type=Path, help="the venv of scripts/wheel/tools.txt")
    args = parser.parse_args()
    build, out = args.build.resolve(), args.out.resolve()
    tools = {"python": str(args.tools / "bin" / "python"), "auditwheel": str(args.tools / "bin" / "auditwheel"),
             "patchelf": str(args.tools / "bin" / "patchelf")}
    cache = cmake_cache(build)
    version = cache.get("CMAKE_PROJECT_VERSION", "")
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise WheelError(f"{build}/CMakeCache.txt has no project version (CMAKE_PROJECT_VERSION='{version}')")
    if (cache.get("CMAKE_INSTALL_BINDIR"), cache.get("CMAKE_INSTALL_LIBDIR")) != ("bin", "lib"):
        raise WheelError(f"{build} installs to {cache.get('CMAKE_INSTALL_BINDIR')}/ and "
                         f"{cache.get('CMAKE_INSTALL_LIBDIR')}/, but the wheels need bin/ and lib/ (the launcher "
                         "looks for its module at ../lib/mgtrain from bin/): configure a build with the defaults")
    torch_root = cache.get("MGTRAIN_TORCH_ROOT", "")
    if not torch_root or not (Path(torch_root) / "lib").is_dir():
        raise WheelError(f"{build} was not built against PyPI's torch (no MGTRAIN_TORCH_ROOT in its cache): the "
                         "trainer wheel must require a torch that pip can install; use the main flavour "
                         "(scripts/build.sh, MGTRAIN_FLAVOUR unset)")
    torch_site = Path(torch_root).resolve().parent
    torch_versions = [p.name[len("torch-"):-len(".dist-info")] for p in torch_site.glob("torch-*.dist-info")]
    if len(torch_versions) != 1:
        raise WheelError(f"cannot tell the torch version of {torch_site}: dist-info folders {torch_versions}")
    torch_version = torch_versions[0]

    work = build / "wheel-staging"
    shutil.rmtree(work, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    for component in ("launcher", "trainer"):
        run(["cmake", "--install", str(build), "--component", component, "--prefix", str(work / f"{component}-prefix")])
    whitelist = policy_whitelist(tools["python"])
    common = {"whitelist": whitelist, "patchelf": tools["patchelf"]}

    results = []
    launcher = work / "launcher-wheel"
    copied = launcher_tree(work / "launcher-prefix", launcher, version, dict(common))
    write_dist_info(launcher, "mgtrain", version, [], licence_files(copied.values()))
    results.append(pack_and_tag(launcher, out, tools, whitelist))

    trainer = work / "trainer-wheel"
    # gloo's headers as the build found them; fmt's and yaml-cpp's are Debian's (libfmt-dev, libyaml-cpp-dev), the
    # ones of the libraries the worker links and the wheel bundles.
    includes = {"gloo_include": cache.get("GLOO_INCLUDE_DIR") or "/usr/include", "fmt_include": "/usr/include",
                "yaml-cpp_include": "/usr/include"}
    bundler = trainer_tree(work / "trainer-prefix", trainer, version, torch_site,
                           dict(common, torch=torch_version, **includes))
    write_dist_info(trainer, "mgtrain-trainer", version, [f"mgtrain=={version}", f"torch=={torch_version}"],
                    licence_files(bundler.copied.values()))
    results.append(pack_and_tag(trainer, out, tools, whitelist, bundler.left))

    for wheel, show in results:
        size = wheel.stat().st_size / 1e6
        torch_libs = ", ".join(sorted(set(show["external_libs"]) - whitelist)) or "none"
        print(f"make_wheels: {wheel} ({size:.1f} MB, {tag_of(wheel)}; libraries from the torch package: "
              f"{torch_libs})")


if __name__ == "__main__":
    try:
        main()
    except WheelError as error:
        print(f"make_wheels: {error}", file=sys.stderr)
        sys.exit(1)
