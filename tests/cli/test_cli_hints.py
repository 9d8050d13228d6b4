"""Install hints of the command line: PyPI names from one table, GPU packages only with a GPU.

Every ``pip install`` the tool prints names the distribution pip knows (``apache-tvm-ffi``,
not the import name ``tvm_ffi``), and a package that only works with an NVIDIA GPU is
suggested only where a CUDA driver is present.
"""

from __future__ import annotations

import os
import sys

import pytest
from hidden_modules import run_dlpackarray

from dlpackarray.cli import inspect as _inspect
from dlpackarray.cli import packages, selfcheck
from dlpackarray.cli.matrix_cells import CONSUMERS, PRODUCERS

MISSING_DRIVER = os.path.join(os.sep, "nonexistent-dlpackarray-test", "libcuda.so.1")


def run_module(*args: str, hide: tuple[str, ...] = (), env: dict | None = None, tmp=None):
    """``python -m dlpackarray ARGS`` in a child whose import system cannot see ``hide``."""
    return run_dlpackarray(*args, hide=hide, env=env, tmp=tmp)


# Import names whose distribution is named differently, as PyPI spells them.
RENAMED = {
    "tvm_ffi": "apache-tvm-ffi",
    "dlpack": "pydlpack",
    "PIL": "Pillow",
    "cupy": "cupy-cuda12x",
}


@pytest.mark.parametrize(("module", "dist"), sorted(RENAMED.items()))
def test_renamed_import_names_map_to_their_pypi_distribution(module, dist):
    """An import name that is not its distribution's name is installed by the latter."""
    assert packages.pypi_name(module) == dist
    assert packages.pypi_name(module + ".sub") == dist


def test_every_library_the_tool_mentions_is_in_the_one_table():
    """Every optional library a producer, consumer, self-check or inspect name needs has an
    entry, so no hint falls back to an import name by accident."""
    needed = {p.library for p in PRODUCERS} | {c.library for c in CONSUMERS}
    needed |= {name for name, _dist in selfcheck.LIBRARIES}
    needed |= {m.split(".")[0] for m in _inspect._MODULES.values()}
    stdlib = set(sys.stdlib_module_names) | {"", "dlpackarray"}
    assert sorted(needed - stdlib - set(packages.PYPI)) == []
    for module in ("torch", "jax", "pyarrow", "polars", "duckdb", "nanoarrow", "numba"):
        assert packages.pypi_name(module) == module
    assert packages.pypi_name("dask") == "dask" and packages.pypi_name("ray") == "ray"
    # The self-check reports versions by distribution name.
    assert dict(selfcheck.LIBRARIES)["tvm_ffi"] == "apache-tvm-ffi"


def test_gpu_packages_are_suggested_only_with_a_cuda_driver():
    """Without a CUDA driver, cupy is left out of the installs; with one it is named."""
    wanted = ["torch", "cupy", "tvm_ffi", "torch"]
    assert packages.install_names(wanted, cuda=False) == ["torch", "apache-tvm-ffi"]
    assert packages.install_names(wanted, cuda=True) == ["torch", "cupy-cuda12x", "apache-tvm-ffi"]


def test_driver_detection_reads_files_and_loads_nothing(monkeypatch, tmp_path):
    """DLPACKARRAY_CUDA_DRIVER decides when it names a path: present iff the file exists,
    and the check never loads the library (a plain text file would fail to load)."""
    monkeypatch.setenv("DLPACKARRAY_CUDA_DRIVER", MISSING_DRIVER)
    assert packages.cuda_driver_present() is False
    fake = tmp_path / "libcuda.so.1"
    fake.write_text("not a shared object: loading it would raise")
    monkeypatch.setenv("DLPACKARRAY_CUDA_DRIVER", str(fake))
    assert packages.cuda_driver_present() is True
    import dlpackarray._cuda as cuda

    assert cuda._driver_state()[0] is False or cuda._driver_state()[1] != str(fake)


def test_self_check_names_no_gpu_package_without_a_driver(tmp_path):
    """The closing line of the self-check on a machine without a CUDA driver: cupy is not
    suggested, and the line says why it is left out."""
    proc = run_module(
        hide=("cupy", "tvm_ffi"),
        env={"DLPACKARRAY_CUDA_DRIVER": MISSING_DRIVER},
        tmp=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert "cupy-cuda12x" not in last
    assert "apache-tvm-ffi" in last.split("pip install ", 1)[1].split()
    assert "cupy left out: no CUDA driver" in last


def test_self_check_names_cupy_where_a_driver_is_present(tmp_path):
    """Where a CUDA driver is present (a file the core would load), cupy is suggested by its
    wheel's PyPI name."""
    fake = tmp_path / "libcuda.so.1"
    fake.write_text("stands for a driver; never loaded by the hint")
    proc = run_module(hide=("cupy",), env={"DLPACKARRAY_CUDA_DRIVER": str(fake)}, tmp=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert "cupy-cuda12x" in last.split("pip install ", 1)[1].split()


def test_inspect_hint_for_a_missing_consumer_is_its_pypi_name(tmp_path):
    """inspect's "not installed" row says what pip installs: apache-tvm-ffi for tvm_ffi."""
    proc = run_module("inspect", "bytearray(8)", "--json", hide=("tvm_ffi",), tmp=tmp_path)
    assert proc.returncode == 0, proc.stderr
    import json

    rows = {r["consumer"]: r for r in json.loads(proc.stdout)["consumers"]}
    assert rows["tvm-ffi"]["status"] == "not installed"
    assert rows["tvm-ffi"]["reason"] == "pip install apache-tvm-ffi"
