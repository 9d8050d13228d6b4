# Cross-compiling for 64-bit Arm Linux (aarch64) on an x86-64 Linux host with Debian's
# g++-aarch64-linux-gnu (docs/install.rst, "Linux aarch64"; .ci/aarch64 uses it):
#   pip wheel . -C cmake.define.CMAKE_TOOLCHAIN_FILE=$PWD/cmake/toolchain-aarch64-linux-gnu.cmake \
#     -C cmake.define.Python_INCLUDE_DIR=<the target CPython's headers>
# with _PYTHON_HOST_PLATFORM=linux-aarch64 (the wheel's platform tag) and
# SETUPTOOLS_EXT_SUFFIX=.cpython-311-aarch64-linux-gnu.so (the modules' names) in the
# environment.  The host Python (same minor version as the target) only runs Cython; the
# extension modules are compiled against the target's headers, whose pyconfig.h describes
# aarch64.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(_dla_triple aarch64-linux-gnu)
set(CMAKE_CXX_COMPILER ${_dla_triple}-g++)
set(CMAKE_C_COMPILER ${_dla_triple}-gcc)
# binutils of the target (strip for the release wheel, gcc-ar for link-time optimisation).
set(CMAKE_STRIP ${_dla_triple}-strip CACHE FILEPATH "")
# Libraries and headers of the target only from the cross toolchain's sysroot; programs
# (cython, ninja) from the host.
set(CMAKE_FIND_ROOT_PATH /usr/${_dla_triple})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
