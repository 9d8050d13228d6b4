"""Shared test configuration: hypothesis profiles and optional-library helpers.

Profiles
--------
``dev`` (default): few examples per property, for quick edit-test loops.
``ci``: selected when the ``CI`` environment variable is set or with
``HYPOTHESIS_PROFILE=ci``; sized so the property tests explore thousands of
cases in total while the suite stays within a few minutes on 2 cores.
"""

from __future__ import annotations

import gc
import os
import re
import sys
from pathlib import Path

# Test modules import shared code (ctypes mirrors, fakes, corpora, strategies)
# by its module name from helpers/, the one folder of importable test code.
sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))

# jax truncates 64-bit types to 32 bits unless x64 is enabled before import;
# the round-trip tests need every dtype to survive bit for bit.
os.environ.setdefault("JAX_ENABLE_X64", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest
from hypothesis import HealthCheck, settings
from no_cuda_driver import pytest_pyfunc_call  # noqa: F401 -- the no_cuda_driver marker's hook

settings.register_profile(
    "dev",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)


def require(module: str, why: str):
    """``pytest.importorskip`` with a reason that says what the test needs the module for."""
    return pytest.importorskip(
        module, reason=f'{module} is not installed ({why}): pip install ".[interop]"'
    )


def require_torch():
    return require("torch", "needed as a DLPack producer/consumer (CPU tensors)")


def require_jax():
    require("jax", "needed as a DLPack consumer (CPU arrays)")
    import jax

    if not jax.config.jax_enable_x64:
        pytest.skip(
            "jax was imported before conftest could enable x64; 64-bit dtypes would be truncated"
        )
    return jax


def require_ml_dtypes():
    return require("ml_dtypes", "provides NumPy bfloat16/float8 dtypes")


def run_python(code: str, *, timeout: float = 120, env: dict | None = None):
    """Runs ``code`` in a fresh interpreter and returns the CompletedProcess.

    Tests of paths that could crash the interpreter (a segfault, an abort) go
    through this, so a regression fails one test instead of ending the run.
    The child sees the same ``sys.path`` as this process (the package under
    test may be found through PYTHONPATH).
    """
    import subprocess
    import sys

    child_env = dict(os.environ)
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    child_env.setdefault("PYTHONFAULTHANDLER", "1")
    if env:
        child_env.update(env)
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env,
        check=False,
    )


def assert_clean_exit(proc, what: str = "child") -> None:
    """Fails with the child's output when it did not exit with status 0."""
    assert proc.returncode == 0, (
        f"{what} exited with status {proc.returncode}\n"
        f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
    )


def run_scenario_in_child(test_file: str, name: str, *, env: dict | None = None) -> None:
    """Runs ``scenario_<name>()`` of the test module at ``test_file`` in a fresh child
    interpreter (none of this process's imports or threads), and fails on any unclean exit."""
    module = Path(test_file)
    code = (
        f"import sys; sys.path.insert(0, {str(module.parent)!r}); "
        f"import {module.stem} as t; t.scenario_{name}()"
    )
    assert_clean_exit(run_python(code, env=env, timeout=300), name)


def run_scenario_on_fake_driver(test_file: str, name: str, driver) -> None:
    """``run_scenario_in_child`` with the fake ``driver`` as the child's CUDA driver (its "device"
    memory faults on a host read, so a stray read fails this one test)."""
    run_scenario_in_child(test_file, name, env={"DLPACKARRAY_CUDA_DRIVER": str(driver)})


# pytest-xdist workers each collect the suite and must agree on every test id; an id
# made from a default repr ("<memoryview at 0x7f...>") differs per process and
# stops a parallel run at collection (first seen on the real-GPU machine's 14-worker run).
_ADDRESS_IN_ID = re.compile(r" at 0x[0-9a-fA-F]+")


def pytest_collection_modifyitems(config, items):
    unstable = [item.nodeid for item in items if _ADDRESS_IN_ID.search(item.nodeid)]
    if unstable:
        raise pytest.UsageError(
            "test ids hold memory addresses, which differ between processes "
            "(give the parametrize ids): " + ", ".join(unstable[:5])
        )


@pytest.fixture(scope="session")
def fake_driver(tmp_path_factory):
    """The fake CUDA driver (tests/helpers/fake_cuda), built once.  Every test loads it in
    a child interpreter of its own, so no two tests share its state.  Fails (never skips)
    when it cannot be built: it gates the CUDA tests of every CI run."""
    import fake_cuda

    return fake_cuda.build(tmp_path_factory.mktemp("fake_cuda"))


@pytest.fixture(autouse=True, scope="module")
def _set_aside_what_earlier_modules_left():
    """Sets aside, before each test module, every object still alive: the interop
    libraries (imported by the test modules, some only by a test), earlier modules'
    globals and fixtures, none of which a test here expects to be collected.
    ``gc.freeze()`` moves them to the permanent generation
    (https://docs.python.org/3/library/gc.html#gc.freeze), so each of the lifetime and
    leak tests' ``gc.collect()`` calls walks what this module has made instead of the
    whole heap (a fraction of a second each once torch, JAX and pyarrow are loaded; the
    suite makes over a thousand).  A cycle a test builds is collected as before: it is
    never frozen, and references from frozen objects count as outside references, as
    references from any live object do.  The collection first frees what earlier
    modules dropped, so nothing unreachable is kept."""
    gc.collect()
    gc.freeze()
