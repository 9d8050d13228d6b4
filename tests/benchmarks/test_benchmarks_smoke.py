"""Keeps the benchmark harness from rotting: a tiny smoke run must produce
complete, well-formed results.  Timings are never asserted."""

import json
import os
import sys

import pytest
from conftest import require

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

pytest.importorskip("numpy")
require("torch", "these tests exchange data with it")


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
    # No --build given: stated as such, with the measured package's folder.
    import dlpackarray

    where = os.path.dirname(dlpackarray.__file__)
    assert on_disk["meta"]["build"] == f"not stated, installed at {where}"
    assert f"- dlpackarray build: not stated, installed at {where}" in md


def test_the_build_note_is_recorded(tmp_path):
    result = bench_run.main(
        ["--smoke", "--name", "b", "--out-dir", str(tmp_path), "--no-plots", "--cases", "B1"]
        + ["--build", "profile-guided wheel"]
    )
    assert result["meta"]["build"].startswith("profile-guided wheel, installed at ")
    assert "- dlpackarray build: profile-guided wheel, installed at " in (
        (tmp_path / "b.md").read_text()
    )


def test_a_missing_contender_library_is_recorded_not_a_failed_case(tmp_path, monkeypatch):
    # pydlpack, tvm-ffi and pyarrow are other projects' contenders: where one
    # is not installed its row says so and dlpackarray is still measured.
    for module in ("dlpack", "tvm_ffi", "pyarrow"):
        monkeypatch.setitem(sys.modules, module, None)  # importing it raises ImportError
    result = bench_run.main(
        ["--smoke", "--name", "m", "--out-dir", str(tmp_path), "--no-plots"]
        + ["--cases", "B1,B2/into-numpy,B3/consume-torch"]
    )
    by_name = {c["name"]: c for c in result["cases"]}
    assert set(by_name) == {"B1/producer", "B2/into-numpy", "B3/consume-torch"}
    for case in by_name.values():
        assert "error" not in case, case
        assert "median_ns" in case["contenders"]["dlpackarray"], case["name"]
    b1 = by_name["B1/producer"]["contenders"]
    for label, module in (("pydlpack", "dlpack"), ("tvm-ffi", "tvm_ffi"), ("pyarrow", "pyarrow")):
        assert module in b1[label]["unsupported"], label
    b3 = by_name["B3/consume-torch"]["contenders"]
    assert "tvm_ffi" in b3["tvm_ffi.from_dlpack"]["unsupported"]


def test_unknown_case_is_rejected(tmp_path):
    with pytest.raises(SystemExit, match="unknown case"):
        bench_run.main(["--smoke", "--out-dir", str(tmp_path), "--cases", "B99"])


def test_smoke_mode_skips_large_sizes():
    selected = bench_run.select(bench_run.all_cases(), None, smoke=True)
    assert selected
    for case in selected:
        assert case.nbytes <= 64 << 20
        assert case.params.get("x", 0) <= 64 << 20 or case.params.get("series") == "ndim"


def test_per_operation_times_and_absolute_targets():
    # A statement that performs `ops` operations is reported per operation,
    # and an absolute target compares that per-operation median in ns.
    from benchmarks.harness import Case, Contender, Settings, Target, run_case

    case = Case(
        family="T",
        name="T/ops",
        title="per-op division",
        setup=lambda: {"f": lambda: sum(range(200))},
        contenders=[Contender("one", "f()"), Contender("per-1000", "f()", ops=1000)],
        anchor="one",
        targets=[
            Target("per-1000", "", "<=", 1e9, absolute=True),
            Target("one", "", "<=", 0.0, absolute=True),
        ],
    )
    rec = run_case(case, Settings.smoke(), log=lambda _: None)
    assert rec["contenders"]["per-1000"]["ops"] == 1000
    # Same statement: only the divisor differs (x1000, far above any noise).
    assert rec["contenders"]["per-1000"]["ratio_to_anchor"]["ratio"] < 0.01
    met, missed = rec["targets"]
    assert met["status"] == "met" and met["kind"] == "ns" and met["ref"] == "absolute"
    assert met["ratio"] == rec["contenders"]["per-1000"]["median_ns"]
    assert missed["status"] == "missed"


def test_required_case_setup_failure_ends_the_run():
    from benchmarks.harness import Case, Settings, run_case

    def broken():
        raise RuntimeError("cannot build")

    optional = Case("T", "T/optional", "t", broken, [], anchor="x")
    assert "setup failed" in run_case(optional, Settings.smoke(), log=lambda _: None)["error"]
    required = Case("T", "T/required", "t", broken, [], anchor="x", required=True)
    with pytest.raises(RuntimeError, match="cannot build"):
        run_case(required, Settings.smoke(), log=lambda _: None)


def test_b10_builds_our_c_and_cython_loops_and_b3_uses_torchs_table(tmp_path):
    # B10 compiles its loops at setup; dlpackarray's must build and run (the
    # case is `required`), other projects' may be recorded as unsupported.
    # B3's setup checks that dlpackarray consumes torch tensors through
    # torch's C exchange table.
    result = bench_run.main(
        ["--smoke", "--name", "c", "--out-dir", str(tmp_path), "--no-plots"]
        + ["--cases", "B10,B3/consume-torch"]
    )
    b10 = next(c for c in result["cases"] if c["family"] == "B10")
    assert "error" not in b10
    cs = b10["contenders"]
    for ours in (
        "dlpackarray C API (C)",
        "dlpackarray C API (Cython)",
        "dlpackarray exchange table",
    ):
        assert cs[ours]["ops"] == 1000 and cs[ours]["median_ns"] > 0, ours
    for other in ("torch exchange table", "tvm-ffi exchange table", "tvm-ffi C API"):
        assert "median_ns" in cs[other] or cs[other]["unsupported"], other
    assert b10["targets"][0]["ref"] == "absolute"
    assert b10["targets"][0]["status"] in ("met", "missed")
    b3 = next(c for c in result["cases"] if c["family"] == "B3")
    assert "error" not in b3 and "median_ns" in b3["contenders"]["dlpackarray"]
    assert "| B10/wrap-export-consume |" in (tmp_path / "c.md").read_text()


def test_a_family_does_not_select_another_family_with_the_same_prefix():
    chosen = bench_run.select(bench_run.all_cases(), "B1", smoke=True)
    assert chosen and {c.family for c in chosen} == {"B1"}
    assert {c.family for c in bench_run.select(bench_run.all_cases(), "B10", smoke=True)} == {"B10"}


def test_b12_pickle_cases_run(tmp_path):
    # B12's pickle cases (the Dask one starts a cluster; CI's full smoke run covers it).
    result = bench_run.main(
        ["--smoke", "--name", "p", "--out-dir", str(tmp_path), "--no-plots"]
        + ["--cases", "B12/pickle-out-of-band,B12/pickle-in-band"]
    )
    cases = {c["name"]: c for c in result["cases"]}
    assert set(cases) == {"B12/pickle-out-of-band/64MB", "B12/pickle-in-band/64MB"}
    for case in cases.values():
        assert "error" not in case
        assert all("median_ns" in e for e in case["contenders"].values()), case["contenders"]
        assert case["targets"][0]["status"] in ("met", "missed")
