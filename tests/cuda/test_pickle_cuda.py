"""Pickling CUDA data against the fake CUDA driver (tests/helpers/fake_cuda), on every CI run.

Each scenario of tests/helpers/fake_cuda/pickle_scenarios.py runs in a child interpreter
whose DLPACKARRAY_CUDA_DRIVER names the fake driver: device memory is mapped
PROT_NONE there, so a pickle that read it from the host would crash that child.
"""

from __future__ import annotations

import pathlib

import pytest
from conftest import assert_clean_exit, run_python

HELPERS = pathlib.Path(__file__).resolve().parents[1] / "helpers"


def run(name, driver, **env):
    code = (
        f"import sys; sys.path.insert(0, {str(HELPERS / 'fake_cuda')!r}); "
        f"import pickle_scenarios; pickle_scenarios.{name}()"
    )
    proc = run_python(code, env={"DLPACKARRAY_CUDA_DRIVER": str(driver), **env}, timeout=300)
    assert_clean_exit(proc, name)


@pytest.mark.parametrize(
    "name",
    [
        "device_arrays_pickle_through_the_host_onto_their_device",
        "managed_memory_unpickles_as_host_memory",
        "no_allocation_is_leaked",
    ],
)
def test_pickle_cuda_scenario(name, fake_driver):
    run(name, fake_driver)


def test_unpickling_onto_a_missing_device(fake_driver, tmp_path):
    path = str(tmp_path / "device1.pickle")
    run("write_device_1_pickle", fake_driver, PICKLE_FILE=path)
    run("unpickling_onto_a_missing_device_is_a_clear_error", fake_driver, PICKLE_FILE=path)
