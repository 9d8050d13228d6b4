"""Runs every case of the adversarial corpus (cases.py) in a worker process:
a crash or a hang fails that case only."""

from __future__ import annotations

import os
import sys

import build_ext
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cases import all_cases  # noqa: E402
from runner import Runner  # noqa: E402

CASES = all_cases()


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    # The lying buffer exporter is built once; a broken build fails every case.
    folder = build_ext.build(str(tmp_path_factory.mktemp("lying_buffer")))
    sys.path.insert(0, folder)
    r = Runner()
    yield r
    r.close()
    sys.path.remove(folder)


def _params():
    return [
        pytest.param(
            case_id,
            id=case_id,
            marks=[pytest.mark.xfail(strict=True, reason=case.defect)] if case.defect else [],
        )
        for case_id, case in CASES.items()
    ]


def test_corpus_size():
    assert len(CASES) >= 500
    # The Arrow importer is held to at least 1,000 malformed structs and protocol misuses.
    assert sum(case_id.startswith("arrow/") for case_id in CASES) >= 1000


@pytest.mark.parametrize("case_id", _params())
def test_case(runner, case_id):
    CASES[case_id].check(runner.run(case_id))
