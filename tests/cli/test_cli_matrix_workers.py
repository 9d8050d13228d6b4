"""The interop matrix's worker processes: one per job, reused across consumers.

Importing the array libraries (torch and JAX above all) is most of what a matrix run costs,
so a worker process is started once per job and runs one consumer's cells after another;
only a crash starts a fresh one, and then the crash still costs one cell.
"""

from __future__ import annotations

import subprocess

import pytest
from conftest import require

from dlpackarray.cli import matrix as _matrix
from dlpackarray.cli import matrix_report as _matrix_report

CONSUMERS = ["numpy", "memoryview"]
CASES = ["int8 1-D", "int16 1-D", "int32 1-D"]


@pytest.fixture
def started(monkeypatch):
    """The worker processes the matrix starts, counted as it starts them."""
    count = []
    real = subprocess.Popen

    def popen(*args, **kwargs):
        count.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(_matrix.subprocess, "Popen", popen)
    return count


def _run(jobs: int) -> dict:
    return _matrix.generate(
        producers=["numpy", "memoryview"], consumers=CONSUMERS, cases=CASES, jobs=jobs
    )


def test_one_worker_per_job_runs_every_consumer(started):
    """Without a crash, each job's worker is started once, whatever the consumer count."""
    require("numpy", "builds the reference arrays")
    doc = _run(jobs=1)
    assert len(started) == 1
    assert len(doc["cells"]) == len(CONSUMERS) * 2 * len(CASES)
    assert doc["totals"][_matrix_report.ZERO_COPY] == len(doc["cells"])


def test_a_crash_costs_one_cell_and_one_fresh_worker(started, monkeypatch):
    """Each crashed cell (one per producer and consumer here) starts one fresh worker, which
    goes on with the remaining cells and the next consumer's; every other cell still runs."""
    require("numpy", "builds the reference arrays")
    monkeypatch.setenv("DLPACKARRAY_MATRIX_ABORT_CASE", "int16 1-D")
    doc = _run(jobs=1)
    crashed = [c for c in doc["cells"] if c["status"] == _matrix_report.CRASHED]
    assert len(crashed) == len(CONSUMERS) * 2
    assert all(c["case"] == "int16 1-D" and "SIGABRT" in c["reason"] for c in crashed)
    assert len(started) == 1 + len(crashed)
    fine = [c for c in doc["cells"] if c["case"] != "int16 1-D"]
    assert len(fine) == len(CONSUMERS) * 2 * 2
    assert all(c["status"] == _matrix_report.ZERO_COPY for c in fine)
