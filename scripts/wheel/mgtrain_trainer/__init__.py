"""mgtrain's trainer, installed from its wheel: the worker binary the launcher finds on its own, and the CMake package
for a worker of one's own, as torch.utils.cmake_prefix_path gives torch's:

    cmake -DCMAKE_PREFIX_PATH="$(python -m mgtrain_trainer)" ...     # then find_package(mgtrain CONFIG REQUIRED)
"""
from pathlib import Path

__version__ = "@MGTRAIN_VERSION@"
torch_version = "@MGTRAIN_TORCH_VERSION@"  # the torch this wheel was built against and requires

_here = Path(__file__).resolve().parent
cmake_prefix_path = str(_here)
worker = str(_here / "bin" / "mgtrain-worker")
