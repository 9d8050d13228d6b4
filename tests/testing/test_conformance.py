"""dlpackarray.testing: every broken producer of the corpus fails exactly its rule,
DLPackArray and NumPy pass every rule, and the report / CLI behave as documented."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conform_corpus import CORPUS, NEEDS, Made
from conftest import assert_clean_exit, require, run_python

import dlpackarray
from dlpackarray.testing import (
    RULES,
    ConformanceReport,
    assert_conforms,
    check_conformance,
    report_from_json,
)


def _failed(report: ConformanceReport) -> set[str]:
    return {r.rule.id for r in report.failures()}


def _ids():
    seen: dict[str, int] = {}
    out = []
    for rule, _ in CORPUS:
        seen[rule] = seen.get(rule, 0) + 1
        out.append(f"{rule}-{seen[rule]}")
    return out


def test_corpus_size_and_rule_coverage():
    assert len(CORPUS) >= 40
    assert {rule for rule, _ in CORPUS} <= set(RULES)


@pytest.mark.parametrize(("rule", "factory"), CORPUS, ids=_ids())
def test_broken_producer_fails_exactly_its_rule(rule, factory):
    for prefix, module in NEEDS.items():
        if rule.startswith(prefix):
            require(module, f"the {prefix} rules' producer")
    report = check_conformance(factory())
    assert _failed(report) == {rule}, str(report)
    assert report.ok == (RULES[rule].level == "should")


def test_made_baseline_conforms():
    # The corpus's baseline producer (no bug switched on) passes every rule it reaches.
    report = check_conformance(Made())
    assert _failed(report) == set(), str(report)
    read_only = check_conformance(Made(readonly=True))
    assert _failed(read_only) == set(), str(read_only)
    cuda = check_conformance(Made(cuda=True))
    assert _failed(cuda) == set(), str(cuda)
    assert any(
        r.rule.id == "dlpack.stream.cuda-zero-rejected" for r in cuda.results if r.status == "pass"
    )


def _passed(report: ConformanceReport) -> set[str]:
    return {r.rule.id for r in report.results if r.status == "pass"}


STREAM_RULES = {
    2: {
        "dlpack.stream.cuda-legal-accepted",
        "dlpack.stream.cuda-zero-rejected",
        "dlpack.stream.below-minus-one-rejected",
        "dlpack.stream.refusal-error-type",
    },
    10: {
        "dlpack.stream.rocm-legal-accepted",
        "dlpack.stream.rocm-reserved-rejected",
        "dlpack.stream.below-minus-one-rejected",
        "dlpack.stream.refusal-error-type",
    },
}
STREAM_RULES[13] = STREAM_RULES[2]


@pytest.mark.parametrize(
    "make",
    [
        lambda: Made(home=(2, 0)),
        lambda: Made(home=(13, 0)),
        lambda: Made(home=(10, 0)),
        lambda: Made(cuda=True, cai_stream=0x5000),
        lambda: Made(home=(3, 0)),
    ],
    ids=["cuda", "cuda-managed", "rocm", "cuda-own-stream", "pinned"],
)
def test_made_device_baselines_pass_the_stream_table(make):
    # Every pretend device tensor (host memory; never read as device memory) that follows
    # the spec's stream table passes it; pinned memory is outside the table.
    obj = make()
    report = check_conformance(obj)
    assert _failed(report) == set(), str(report)
    expected = STREAM_RULES.get(obj._home()[0], set())
    stream_rules = {r for r in RULES if r.startswith("dlpack.stream.")}
    assert _passed(report) & stream_rules == expected, str(report)


def test_arrow_baselines_conform():
    # The corpus's Arrow wrappers with no bug switched on pass every rule they reach,
    # the pretend CUDA device array (a sync event handle behind sync_event) included.
    require("pyarrow", "the corpus's Arrow wrappers")
    from conform_corpus_arrow import ArrowArray, ArrowCudaArray

    for obj in (ArrowArray(), ArrowCudaArray()):
        report = check_conformance(obj)
        assert _failed(report) == set(), str(report)
    cuda = check_conformance(ArrowCudaArray())
    assert {
        "arrow.device-array.sync-event-handle",
        "arrow.device-array.device-agrees",
        "arrow.device-array.reserved-zero",
    } <= _passed(cuda)


def test_stream_table_on_the_fake_cuda_libraries(tmp_path):
    # The torch-like and CuPy-like producers of tests/helpers/cuda_fakes.py (each following its
    # library's stream rules) on the fake driver: the checker passes stream values only,
    # and reports the two libraries' known deviations.  CuPy's own stream (> 2, from its
    # __cuda_array_interface__) is one of the values tried.
    import fake_cuda

    driver = fake_cuda.build(tmp_path)
    code = (
        "import warnings, json\n"
        "from cuda_stream_scenarios import fake\n"
        "from cuda_fakes import FakeCupy, FakeTorch\n"
        "from dlpackarray.testing import check_conformance\n"
        "warnings.simplefilter('ignore')\n"
        "f = fake(); torch, cupy = FakeTorch(f), FakeCupy(f)\n"
        "def streams(obj):\n"
        "    r = check_conformance(obj, protocols=['dlpack'])\n"
        "    return {x.rule.id: x.status for x in r.results if '.stream.' in x.rule.id}\n"
        "out = {'torch': streams(torch.zeros(8)),\n"
        "       'pinned': streams(torch.zeros(8, device='cpu', pin_memory=True))}\n"
        "with cupy.cuda.Stream():\n"
        "    a = cupy.zeros(8)\n"
        "    out['cupy'] = streams(a)\n"
        "    out['cupy-stream'] = a.__cuda_array_interface__['stream']\n"
        "print(json.dumps(out))\n"
    )
    proc = run_python(code, env={"DLPACKARRAY_CUDA_DRIVER": str(driver)}, timeout=300)
    assert_clean_exit(proc)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    fails = {
        k: {r for r, s in v.items() if s == "fail"} for k, v in out.items() if k != "cupy-stream"
    }
    # torch 2.13 refuses stream=2 (per-thread default) with BufferError on CUDA tensors.
    assert fails["torch"] == {"dlpack.stream.cuda-legal-accepted"}
    assert out["torch"]["dlpack.stream.cuda-zero-rejected"] == "pass"
    # CuPy takes stream=0 as the legacy stream (with a warning) instead of refusing it.
    assert out["cupy-stream"] > 2
    assert fails["cupy"] == {"dlpack.stream.cuda-zero-rejected"}
    assert out["cupy"]["dlpack.stream.cuda-legal-accepted"] == "pass"
    # torch treats pinned memory as CPU memory: outside the spec's stream table.
    assert all(s == "not-applicable" for s in out["pinned"].values())


@pytest.mark.parametrize(
    "make",
    [
        lambda: dlpackarray.DLPackArray(np.arange(12, dtype=np.float32).reshape(3, 4)),
        lambda: dlpackarray.DLPackArray(np.arange(12, dtype=np.int64)[::-2]),
        lambda: dlpackarray.DLPackArray(np.frombuffer(b"abcdef", dtype=np.uint8)),
        lambda: dlpackarray.DLPackArray(np.zeros((0, 3), dtype=np.float64)),
        lambda: dlpackarray.DLPackArray(np.float32(1.5)),
    ],
    ids=["2d", "negative-strides", "read-only", "empty", "0-d"],
)
def test_dlpackarray_passes_every_rule(make):
    report = check_conformance(make())
    assert _failed(report) == set(), str(report)
    # Every protocol family DLPackArray offers was actually exercised.
    exercised = {r.rule.protocol for r in report.results if r.status == "pass"}
    assert {"dlpack", "array_interface", "arrow", "exchange"} <= exercised
    # ... and so were the probes that run in a forked child.
    if hasattr(os, "fork"):
        assert {"dlpack.deleter.without-gil", "arrow.release.once-consumed"} <= _passed(report)
    assert {
        "arrow.requested-schema.own",
        "arrow.release.marks-released",
        "arrow.device-array.device-agrees",
        "arrow.device-array.reserved-zero",
        "arrow.device-stream.device-type",
    } <= _passed(report)


def _numpy_refuses_a_device_with_buffererror() -> bool:
    """What the installed NumPy raises for a dl_device it cannot export to:
    BufferError from NumPy 2.4 on, ValueError before."""
    try:
        np.arange(1.0).__dlpack__(max_version=(1, 0), dl_device=(2, 0))
    except BufferError:
        return True
    except ValueError:
        return False
    raise AssertionError("NumPy exported host data to a CUDA device")


def test_numpy_passes_every_rule():
    """The checker's verdict on NumPy is what the installed NumPy does: every
    rule, except that NumPy before 2.4 refuses an unsupported dl_device with
    ValueError where the DLPack spec asks for BufferError."""
    expected = (
        set()
        if _numpy_refuses_a_device_with_buffererror()
        else {"dlpack.dl-device.unsupported-buffererror"}
    )
    assert _failed(check_conformance(np.arange(6.0).reshape(2, 3))) == expected


def test_dlpackarray_passes_every_rule_whatever_numpy_it_wraps():
    """A DLPackArray over a NumPy array conforms with any NumPy: it answers
    the protocol requests itself."""
    assert (
        _failed(check_conformance(dlpackarray.DLPackArray(np.arange(6.0).reshape(2, 3)))) == set()
    )


def test_report_api():
    report = check_conformance(Made(version=(2, 0)))
    assert not report.ok
    (bad,) = report.failures()
    assert bad.rule.id == "dlpack.version.major" and bad.status == "fail"
    assert bad.reference == RULES["dlpack.version.major"].reference
    assert "dlpack.version.major" in str(report) and "NOT CONFORMANT" in str(report)
    data = json.loads(report.to_json())
    assert data["ok"] is False and len(data["results"]) == len(RULES)
    again = report_from_json(report.to_json())
    assert [(r.rule.id, r.status) for r in again.results] == [
        (r.rule.id, r.status) for r in report.results
    ]
    with pytest.raises(AssertionError, match="dlpack.version.major"):
        assert_conforms(Made(version=(2, 0)))
    assert assert_conforms(Made()).ok


def test_rules_are_well_formed():
    for rule_id, rule in RULES.items():
        assert rule.id == rule_id and rule.level in ("must", "should")
        assert rule.reference.startswith(
            ("DLPack", "Array API", "Arrow", "Python", "PEP", "NumPy", "CUDA")
        )
        assert "§" in rule.reference and "(https://" in rule.reference
        assert rule.statement and "\n" not in rule.statement


def test_protocols_filter():
    report = check_conformance(Made(version=(2, 0)), protocols=["array_interface"])
    assert report.ok
    assert all(r.status == "not-applicable" for r in report.results if r.rule.protocol == "dlpack")
    with pytest.raises(ValueError, match="unknown protocol"):
        check_conformance(Made(), protocols=["nope"])


def _env():
    # The children import dlpackarray and conform_corpus from where this process does.
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "dlpackarray", "conform", *args],
        capture_output=True,
        text=True,
        check=False,
        env=_env(),
    )


def test_cli_exit_status_and_json():
    # A subject that conforms with any NumPy (NumPy's own arrays do from 2.4).
    good = _cli("__import__('dlpackarray').DLPackArray(np.arange(4.0))", "--json")
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["ok"] is True
    bad = _cli("__import__('conform_corpus').Made(version=(2, 0))")
    assert bad.returncode == 1, bad.stderr
    assert "dlpack.version.major" in bad.stdout


def test_isolate_reports_a_crash_instead_of_crashing():
    expr = "__import__('os').abort() or np.arange(3)"
    report = check_conformance(expr, isolate=True)
    assert not report.ok
    assert _failed(report) == {"process.no-crash"}
    ok = check_conformance("__import__('dlpackarray').DLPackArray(np.arange(3.0))", isolate=True)
    assert ok.ok and _failed(ok) == set()


def test_importable_without_numpy():
    code = (
        "import sys; sys.modules['numpy'] = None\n"
        "import dlpackarray.testing as t\n"
        "r = t.check_conformance(bytearray(b'abc'))\n"
        "assert r.ok, str(r)\n"
        "assert any(x.status == 'pass' for x in r.results if x.rule.protocol == 'buffer')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, env=_env()
    )
    assert proc.returncode == 0, proc.stderr
