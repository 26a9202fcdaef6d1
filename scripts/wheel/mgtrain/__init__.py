"""mgtrain, installed from its wheel. The launcher is the binary `mgtrain` in the environment's bin/ (no Python runs
when you type it); this module only says where the installation put things: `python -m mgtrain`."""
import importlib.metadata
import importlib.util
from pathlib import Path

__version__ = "@MGTRAIN_VERSION@"


def _installed(relative):
    """The installed path of one of this distribution's files, from its RECORD (every install scheme alike)."""
    for file in importlib.metadata.files("mgtrain") or []:
        if file.as_posix().endswith(relative):
            return Path(file.locate()).resolve()
    raise FileNotFoundError(f"the mgtrain distribution has no installed {relative}")


def binary():
    """The launcher binary, bin/mgtrain."""
    return _installed("bin/mgtrain")


def configs_dir():
    """The example configs (configs/ of the source tree)."""
    return Path(__file__).resolve().parent / "configs"


def cmake_prefix_path():
    """The CMake prefix for find_package(mgtrain), from the trainer wheel (pip install mgtrain-trainer)."""
    if importlib.util.find_spec("mgtrain_trainer") is None:
        raise ModuleNotFoundError("the trainer wheel is not installed (pip install mgtrain-trainer)")
    import mgtrain_trainer

    return mgtrain_trainer.cmake_prefix_path
