"""python -m mgtrain [--cmake-prefix-path]: where the wheel put the launcher, its configs and (with the trainer
wheel) the CMake prefix of find_package(mgtrain)."""
import sys

import mgtrain


def main(argv):
    if argv == ["--cmake-prefix-path"]:
        try:
            print(mgtrain.cmake_prefix_path())
        except ModuleNotFoundError as error:
            print(f"python -m mgtrain: {error}", file=sys.stderr)
            return 1
        return 0
    if argv:
        print("usage: python -m mgtrain [--cmake-prefix-path]", file=sys.stderr)
        return 2
    print(f"mgtrain {mgtrain.__version__}")
    print(f"launcher: {mgtrain.binary()}")
    print(f"configs:  {mgtrain.configs_dir()}")
    try:
        print(f"cmake prefix path (find_package(mgtrain)): {mgtrain.cmake_prefix_path()}")
    except ModuleNotFoundError as error:
        print(f"trainer:  {error}")
    return 0


sys.exit(main(sys.argv[1:]))
