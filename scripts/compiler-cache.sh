# Sourced by the build scripts (build.sh, build-torch2.sh, test-sanitizers.sh): compile through ccache when it is
# installed (scripts/install-deps.sh installs it), so a rebuild of files compiled before, in this clone or another
# one of the same commit, costs a cache lookup instead of a compile. The cache is ccache's own (~/.cache/ccache).
#   CCACHE_BASEDIR: paths under the clone are hashed relative to the build folder, so two clones share entries.
#   CCACHE_NOHASHDIR: the build folder's absolute path does not enter the hash (debug info aside, it is unused).
#   CCACHE_SLOPPINESS: the worker's precompiled header (lib/train/torch/pch.hpp) is cacheable.
# Sets compiler_cache_args, the CMake arguments to pass when configuring a folder (empty without ccache, or with
# MGTRAIN_CCACHE=0), and exports CMake's CMAKE_<LANG>_COMPILER_LAUNCHER variables for the projects the tests
# configure themselves (the installed package's consumer). A folder configured before keeps its launcher setting.
compiler_cache_args=()
if [[ ${MGTRAIN_CCACHE:-1} != 0 ]] && command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(pwd)}
  export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
  compiler_cache_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
