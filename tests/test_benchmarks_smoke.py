"""Keeps the benchmark harness from rotting: a tiny smoke run must produce
complete, well-formed results.  Timings are never asserted."""

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

pytest.importorskip("numpy")
pytest.importorskip("torch")

from benchmarks import run as bench_run  # noqa: E402  (needs the path set up above)


def test_smoke_run_writes_every_output(tmp_path):
    # One overhead family with a target, the floor, the unsupported-safe B8
    # case, one small copy and one scaling point: every code path of the
    # harness and the report, in a few seconds.
    result = bench_run.main(
        [
            "--smoke",
            "--name",
            "t",
            "--out-dir",
            str(tmp_path),
            "--cases",
            "B1,B5,B8,B6/2d-transposed/1MB,B7/ndim/4",
        ]
    )
    families = {c["family"] for c in result["cases"]}
    assert families == {"B1", "B5", "B6", "B7", "B8"}
    for suffix in (".json", ".md", "_overhead.png", "_copies.png", "_scaling.png"):
        assert (tmp_path / f"t{suffix}").stat().st_size > 0, suffix
    on_disk = json.loads((tmp_path / "t.json").read_text())
    assert on_disk["meta"]["mode"] == "smoke"
    b1 = next(c for c in on_disk["cases"] if c["family"] == "B1")
    dla = b1["contenders"]["dlpackarray"]
    assert dla["n_samples"] == bench_run.Settings.smoke().repeats
    assert dla["q1_ns"] <= dla["median_ns"] <= dla["q3_ns"]
    assert b1["contenders"]["numpy"]["ratio_to_anchor"]["ratio"] == pytest.approx(1.0)
    assert b1["targets"][0]["status"] in ("met", "missed")
    copy = next(c for c in on_disk["cases"] if c["family"] == "B6")
    assert copy["unit"] == "GB/s" and copy["contenders"]["dlpackarray"]["gbps"] > 0
    # B8 either runs or records why not; it never ends the run.
    b8 = next(c for c in on_disk["cases"] if c["family"] == "B8")["contenders"]["dlpackarray"]
    assert "median_ns" in b8 or b8["unsupported"]
    md = (tmp_path / "t.md").read_text()
    assert "## Targets" in md and "B1/producer" in md


def test_unknown_case_is_rejected(tmp_path):
    with pytest.raises(SystemExit, match="unknown case"):
        bench_run.main(["--smoke", "--out-dir", str(tmp_path), "--cases", "B99"])


def test_smoke_mode_skips_large_sizes():
    selected = bench_run.select(bench_run.all_cases(), None, smoke=True)
    assert selected
    for case in selected:
        assert case.nbytes <= 64 << 20
        assert case.params.get("x", 0) <= 64 << 20 or case.params.get("series") == "ndim"
