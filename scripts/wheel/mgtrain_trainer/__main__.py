"""python -m mgtrain_trainer: prints the CMake prefix path of find_package(mgtrain)."""
import mgtrain_trainer

print(mgtrain_trainer.cmake_prefix_path)
