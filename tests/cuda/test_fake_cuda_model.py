"""The fake CUDA driver's model (tests/helpers/fake_cuda/README.md), shown by its own
checks: each function of tests/helpers/fake_cuda/model_checks.py runs in a child
interpreter (a fault in the fake fails one test) against a fresh build."""

from __future__ import annotations

import pathlib

import pytest
from conftest import assert_clean_exit, run_python

HELPERS = pathlib.Path(__file__).resolve().parents[1] / "helpers"
CHECKS = [
    "contexts_are_per_thread_and_required",
    "events_and_streams_of_different_contexts",
    "pending_work_lands_only_when_waited_for",
    "legacy_stream_synchronises_with_blocking_streams",
    "per_thread_default_stream_differs_per_thread",
    "blocking_calls_hold_the_caller",
    "limits_on_copy_arguments",
    "error_names_are_the_real_ones",
    "pointer_queries",
    "work_on_freed_memory_is_an_async_error",
    "forked_child_cannot_use_the_driver",
]


@pytest.mark.parametrize("name", CHECKS)
def test_fake_driver_model(name, fake_driver):
    code = (
        f"import sys; sys.path.insert(0, {str(HELPERS / 'fake_cuda')!r}); "
        f"import model_checks; model_checks.{name}()"
    )
    proc = run_python(code, env={"DLPACKARRAY_CUDA_DRIVER": str(fake_driver)}, timeout=120)
    assert_clean_exit(proc, name)


def test_every_check_is_run():
    import ast

    tree = ast.parse((HELPERS / "fake_cuda" / "model_checks.py").read_text())
    public = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    helpers = {"fake", "push", "pop", "event", "in_thread", "copy2d"}
    assert sorted(set(public) - helpers) == sorted(CHECKS)
