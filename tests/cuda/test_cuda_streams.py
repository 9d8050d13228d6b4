"""CUDA stream semantics (docs/cuda.md "Stream rules") on the fake driver's
pending-work model, with torch-like and CuPy-like producers (tests/helpers/cuda_fakes.py).

Each scenario of tests/helpers/cuda_stream_scenarios.py runs in a child interpreter
whose DLPACKARRAY_CUDA_DRIVER names the freshly built fake driver; a kernel's
bytes land there only once its stream is synchronised or waited on, so a
missing synchronisation reads the old bytes and fails the scenario.
"""

from __future__ import annotations

import pathlib

import pytest
from conftest import assert_clean_exit, run_python

HELPERS = pathlib.Path(__file__).resolve().parents[1] / "helpers"


def run_scenario(name, driver):
    code = (
        f"import sys; sys.path.insert(0, {str(HELPERS)!r}); "
        f"import cuda_stream_scenarios as s; s.{name}()"
    )
    return run_python(code, env={"DLPACKARRAY_CUDA_DRIVER": str(driver)}, timeout=300)


@pytest.mark.parametrize(
    "name",
    [
        # 1: a consumer never sees a foreign producer's data before its work is done
        "torch_producer_wrapped_then_torch_consumer",
        "torch_producer_wrapped_then_cupy_consumer",
        "torch_producer_through_cuda_array_interface",
        "torch_producer_with_consumer_streams",
        "cupy_producer_wrapped_then_torch_consumer",
        "pinned_torch_tensor_to_numpy",
        "pinned_torch_tensor_with_a_stream",
        # 2: pinned and managed memory read by the host
        "pinned_and_managed_exports_to_the_host_wait",
        # 3: stream value 2 names the calling thread's stream
        "per_thread_stream_is_resolved_per_thread",
        "per_thread_consumer_stream_given_in_another_thread",
        # 7: a device copy's source lives until the copy is done
        "device_copy_keeps_its_source_alive",
        "arrow_device_copy_keeps_its_source_alive",
        # 9: nothing pending, no stream reported
        "cai_reports_no_stream_when_nothing_is_pending",
        # the class: random producers, memory kinds, import streams and consumers
        "random_routes_never_read_early",
        # docs/cuda.md's worked example, on the torch-like and CuPy-like fakes
        "docs_worked_example",
        # docs/cuda_streams.md's example, and that it fails without its synchronisation
        "docs_streams_page_example",
    ],
)
def test_stream_scenario(name, fake_driver):
    assert_clean_exit(run_scenario(name, fake_driver), name)
