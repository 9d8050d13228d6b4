"""What to ``pip install`` for a missing library: the one table of import names to PyPI names.

Every install hint the command line prints (the self-check's closing line, ``inspect``'s
"not installed" consumers) goes through :func:`install_names`, so a module whose import
name is not its distribution name (``tvm_ffi`` comes from ``apache-tvm-ffi``, ``dlpack``
from ``pydlpack``, ``PIL`` from ``Pillow``) is named the way pip knows it.

Packages that only work with an NVIDIA GPU are suggested only where a CUDA driver is
present; the check for one only looks for the driver's files and loads nothing (loading
``libcuda`` starts the driver, and dlpackarray's core keeps whatever driver it loaded
first, see cpp/src/cuda_driver.cpp).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

#: Import name -> PyPI distribution name, for every library the command line mentions.
PYPI = {
    "numpy": "numpy",
    "ml_dtypes": "ml_dtypes",
    "torch": "torch",
    "jax": "jax",
    "jaxlib": "jaxlib",
    "cupy": "cupy-cuda12x",
    "pyarrow": "pyarrow",
    "polars": "polars",
    "duckdb": "duckdb",
    "nanoarrow": "nanoarrow",
    "tvm_ffi": "apache-tvm-ffi",
    "dlpack": "pydlpack",
    "PIL": "Pillow",
    "numba": "numba",
    "dask": "dask",
    "ray": "ray",
}

#: Import names whose packages need an NVIDIA GPU (and its driver) to be of any use.
NEEDS_CUDA = frozenset({"cupy"})

#: Where the NVIDIA kernel driver and its user-space library usually live (Linux, WSL).
_DRIVER_FILES = (
    "/proc/driver/nvidia/version",
    "/usr/lib/wsl/lib/libcuda.so.1",
)


def pypi_name(module: str) -> str:
    """The distribution that provides ``module`` (its top-level import name)."""
    top = module.split(".")[0]
    return PYPI.get(top, top)


def cuda_driver_present() -> bool:
    """Whether this machine has a CUDA driver, judged from files only (nothing is loaded).

    ``DLPACKARRAY_CUDA_DRIVER`` names the driver library dlpackarray's core would load
    (a path: it must exist); otherwise the NVIDIA kernel driver's ``/proc`` entry or a
    ``libcuda`` the dynamic linker knows of tells.
    """
    named = os.environ.get("DLPACKARRAY_CUDA_DRIVER")
    if named:
        return os.path.exists(named) if os.sep in named else _linker_knows(named)
    if any(os.path.exists(path) for path in _DRIVER_FILES):
        return True
    return _linker_knows("libcuda.so.1")


def _linker_knows(library: str) -> bool:
    """Whether the dynamic linker's cache lists ``library`` (read, not loaded)."""
    import ctypes.util

    stem = library.removeprefix("lib").split(".so")[0]
    try:
        return ctypes.util.find_library(stem) is not None
    except Exception:  # no ldconfig / gcc to ask: say no rather than guess
        return False


def install_names(modules: Iterable[str], cuda: bool | None = None) -> list[str]:
    """PyPI names to install for ``modules`` (in order, once each).

    GPU-only packages are left out unless a CUDA driver is present (``cuda``: override
    the detection).
    """
    modules = list(modules)
    if cuda is None and any(m.split(".")[0] in NEEDS_CUDA for m in modules):
        cuda = cuda_driver_present()
    out: list[str] = []
    for module in modules:
        if module.split(".")[0] in NEEDS_CUDA and not cuda:
            continue
        name = pypi_name(module)
        if name not in out:
            out.append(name)
    return out
