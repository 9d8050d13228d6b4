"""``python -m dlpackarray`` sub-commands: inspect, matrix, bench, and the self-check's hint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import require

from dlpackarray.cli import matrix as _matrix
from dlpackarray.cli import matrix_report as _matrix_report
from dlpackarray.cli import selfcheck as _report
from dlpackarray.cli.matrix_cells import CONSUMERS


def run_module(*args: str, env: dict | None = None, cwd: str | None = None):
    child_env = dict(os.environ)
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    child_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "dlpackarray", *args],
        capture_output=True,
        text=True,
        env=child_env,
        cwd=cwd,
        timeout=600,
    )


# -- the self-check's closing line ---------------------------------------------------------


def test_closing_line_names_the_installs_for_skipped_checks(tmp_path):
    # A fake, uninstalled world: find_spec sees a missing torch through a shadowing finder.
    (tmp_path / "sitecustomize.py").write_text(
        textwrap.dedent(
            """
            import importlib.util, sys
            class Hide:
                def find_spec(self, name, path=None, target=None):
                    if name.split(".")[0] in ("torch", "tvm_ffi"):
                        raise ModuleNotFoundError(name)
                    return None
            sys.meta_path.insert(0, Hide())
            _orig = importlib.util.find_spec
            def find_spec(name, package=None):
                if name.split(".")[0] in ("torch", "tvm_ffi"):
                    return None
                return _orig(name, package)
            importlib.util.find_spec = find_spec
            """
        )
    )
    proc = run_module(env={"PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("To run the skipped checks: pip install ")
    wanted = last.split("pip install ", 1)[1].split()
    assert "torch" in wanted and "apache-tvm-ffi" in wanted
    assert "numpy" not in wanted  # installed: its check ran


def test_next_steps_when_nothing_is_missing():
    report = {
        "libraries": [{"name": "numpy", "installed": True, "version": "2"}],
        "checks": [{"name": "numpy", "library": "numpy", "status": "pass", "detail": ""}],
    }
    assert _report.next_steps(report) == "Every check whose library can be installed ran."
    report["libraries"][0]["installed"] = False
    report["checks"][0]["status"] = "skip"
    assert _report.next_steps(report) == "To run the skipped checks: pip install numpy"


# -- inspect -------------------------------------------------------------------------------


def test_inspect_expression_json():
    require("numpy", "the inspected expression builds an ndarray")
    proc = run_module("inspect", "np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::-2]", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["type"] == "numpy.ndarray"
    assert report["protocols"][:3] == ["__dlpack__", "__array_struct__", "__array_interface__"]
    assert "buffer protocol" in report["protocols"]
    view = report["dlpackarray"]
    assert view["shape"] == [3, 2] and view["strides"] == [4, -2]
    assert view["dtype"] == "float32" and view["device"] == "cpu:0"
    assert view["readonly"] is False and view["nbytes"] == 24
    assert view["byte_extent"] == [-8, 36]
    rows = {r["consumer"]: r for r in report["consumers"]}
    assert set(rows) == {c.name for c in CONSUMERS}
    assert rows["numpy"]["status"] == "zero-copy"
    assert rows["memoryview"]["status"] == "zero-copy"
    # Not tried: torch aborts on negative strides; the reason says so.
    if rows["torch"]["status"] != "not installed":
        assert rows["torch"]["status"] == "refused"
        assert "negative strides" in rows["torch"]["reason"]


def test_inspect_npy_file_text(tmp_path):
    np = require("numpy", "writes the .npy file")
    path = tmp_path / "x.npy"
    np.save(path, np.arange(6, dtype=np.int16).reshape(2, 3))
    proc = run_module("inspect", str(path))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{path}: numpy.memmap"
    assert "shape (2, 3), strides (3, 1) (elements), dtype int16, device cpu:0" in proc.stdout
    # np.load(mmap_mode="r") is read-only, and the report says so.
    assert "read-only True, 12 bytes" in proc.stdout
    consumers = lines[lines.index("Consumers:") + 1 :]
    numpy_line = next(ln for ln in consumers if ln.split()[0] == "numpy")
    assert numpy_line.split()[1] == "zero-copy"


def test_inspect_refused_object_and_bad_expression():
    proc = run_module("inspect", "object()")
    assert proc.returncode == 1
    assert "DLPackArray refuses it: TypeError" in proc.stdout
    proc = run_module("inspect", "no_such_name + 1")
    assert proc.returncode == 2
    assert "cannot evaluate" in proc.stderr and "Traceback" not in proc.stderr


# -- matrix --------------------------------------------------------------------------------


def _tiny_matrix(tmp_path, *extra):
    return run_module(
        "matrix",
        "--producers",
        "numpy,memoryview",
        "--consumers",
        "numpy,memoryview",
        "--cases",
        "float32 1-D (contiguous),float32 read-only,bfloat16 1-D",
        *extra,
    )


def test_matrix_tiny_subset_json_and_write(tmp_path):
    require("numpy", "builds the reference arrays")
    require("ml_dtypes", "provides bfloat16")
    proc = _tiny_matrix(tmp_path, "--json", "--write", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    cells = {(c["producer"], c["consumer"], c["case"]): c for c in doc["cells"]}
    assert cells[("numpy", "numpy", "float32 1-D (contiguous)")]["status"] == "zero-copy"
    assert cells[("memoryview", "memoryview", "float32 read-only")]["status"] == "zero-copy"
    # NumPy's from_dlpack has no bfloat16; the refusal names numpy, not dlpackarray.
    bf = cells[("numpy", "numpy", "bfloat16 1-D")]
    assert bf["status"] == "refused" and bf["whose"] == "numpy"
    # memoryview has no bfloat16 format: not a cell.
    assert ("memoryview", "numpy", "bfloat16 1-D") not in cells
    assert doc["totals"] == _matrix_report.totals(doc["cells"])
    assert doc["cells"] == sorted(
        doc["cells"], key=lambda c: (c["consumer"], c["producer"], c["case"])
    )
    page = (tmp_path / "interop.md").read_text()
    assert page == _matrix_report.render_markdown(
        json.loads((tmp_path / "interop.json").read_text())
    )
    # A fresh run agrees with what was written: the check passes ...
    proc = _tiny_matrix(tmp_path, "--check", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "is up to date" in proc.stderr
    # ... and fails once the page is edited by hand or a cell changes.
    (tmp_path / "interop.md").write_text(page.replace("zero-copy", "zero copy", 1))
    proc = _tiny_matrix(tmp_path, "--check", str(tmp_path))
    assert proc.returncode == 1 and "edited by hand" in proc.stderr
    doc["cells"][0]["status"] = "copied"
    _matrix_report.write(doc, str(tmp_path))
    proc = _tiny_matrix(tmp_path, "--check", str(tmp_path))
    assert proc.returncode == 1 and "the matrix changed" in proc.stderr


def test_matrix_text_summary_and_progress(tmp_path):
    require("numpy", "builds the reference arrays")
    proc = run_module(
        "matrix", "--producers", "numpy", "--consumers", "numpy", "--cases", "int8 1-D"
    )
    assert proc.returncode == 0, proc.stderr
    table, closing = proc.stdout.strip().split("\n\nCrashed and refused cells:\n")
    header, *rows = table.splitlines()
    assert header.split() == ["consumer", *_matrix_report.STATUSES]
    assert rows[0].split() == ["numpy", "1", "0", "0", "0", "0"]
    assert rows[-1].split()[0] == "total"
    assert closing == "no cell crashed or was refused"
    assert "1/1 cells" in proc.stderr  # the progress bar


def test_matrix_unknown_name_is_a_usage_error():
    proc = run_module("matrix", "--producers", "no-such-producer")
    assert proc.returncode == 2
    assert "unknown producer(s) ['no-such-producer']" in proc.stderr


def test_a_crash_costs_one_cell(monkeypatch):
    """A worker that aborts in one cell: that cell is crashed, the others still run."""
    require("numpy", "builds the reference arrays")
    import dlpackarray.cli.matrix_cells as cells

    reported = []
    # The crash happens inside the worker process, through an environment hook.
    monkeypatch.setenv("DLPACKARRAY_MATRIX_ABORT_CASE", "int16 1-D")
    _matrix._run_group(
        [["numpy", "numpy", k] for k in ("int8 1-D", "int16 1-D", "int32 1-D")],
        reported.append,
    )
    by_case = {c["case"]: c for c in reported}
    assert set(by_case) == {"int8 1-D", "int16 1-D", "int32 1-D"}
    assert by_case["int16 1-D"]["status"] == "crashed"
    assert by_case["int16 1-D"]["whose"] == "numpy"
    assert "SIGABRT in consume" in by_case["int16 1-D"]["reason"]
    assert by_case["int8 1-D"]["status"] == by_case["int32 1-D"]["status"] == "zero-copy"
    assert cells.CASE_BY_NAME["int16 1-D"].dtype == "int16"


@pytest.mark.parametrize("name", ["numpy", "legacy capsule", "__array_interface__ only"])
def test_matrix_cell_in_process(name):
    require("numpy", "builds the reference arrays")
    cell = _matrix.run_cell(name, "numpy", "float32 F-order")
    assert cell["status"] == "zero-copy", cell


# -- bench ---------------------------------------------------------------------------------


def test_bench_outside_a_checkout_says_where_it_lives(tmp_path):
    import dlpackarray

    # Only the installed package on the path, as for a user of the wheel.
    only_package = os.path.dirname(os.path.dirname(dlpackarray.__file__))
    proc = run_module("bench", "--quick", cwd=str(tmp_path), env={"PYTHONPATH": only_package})
    assert proc.returncode == 2
    assert "ships with the source tree" in proc.stderr


def test_bench_quick_runs_the_smoke_suite_with_progress(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not os.path.isfile(os.path.join(root, "benchmarks", "run.py")):
        pytest.skip("no benchmarks/ next to the tests")
    require("numpy", "the benchmark cases use it")
    # From another folder, without --output: the results go to a new directory there,
    # whose name is printed, never into the source tree.
    path = os.pathsep.join([root, *(p for p in sys.path if p)])
    proc = run_module(
        "bench", "--quick", "--cases", "B1", "--name", "t", cwd=str(tmp_path),
        env={"PYTHONPATH": path},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    progress = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
    assert progress and all("s]" in ln for ln in progress)
    (made,) = tmp_path.iterdir()
    assert made.name.startswith("dlpackarray-bench-")
    assert f"results go to {made}" in proc.stdout
    assert (made / "t.json").is_file() and (made / "t.md").is_file()


# -- the command line's own surface -------------------------------------------------------


def test_version_prints_the_installed_version():
    import dlpackarray

    proc = run_module("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"dlpackarray {dlpackarray.__version__}"


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_every_command_with_one_line(flag):
    from dlpackarray.cli import main as _cli

    proc = run_module(flag)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for name in _cli.COMMANDS:
        described = [ln for ln in lines if ln.split()[:1] == [name]]
        assert len(described) == 1, f"{name} is not listed once in --help"
        assert len(described[0].split()) > 3, f"{name} has no description"
    assert "--version" in proc.stdout


def test_unknown_command_names_it_and_the_accepted_ones():
    from dlpackarray.cli import main as _cli

    proc = run_module("frobnicate")
    assert proc.returncode == 2
    assert "'frobnicate'" in proc.stderr
    assert all(name in proc.stderr for name in _cli.COMMANDS)


def _doc(*cells):
    keys = ("status", "consumer", "producer", "case", "reason", "see")
    return {"cells": [dict(zip(keys, c, strict=True)) for c in cells]}


def test_matrix_closing_report_lists_crashed_and_refused_cells_with_reasons():
    C, R = _matrix_report.CRASHED, _matrix_report.REFUSED
    known = (C, "torch", "numpy", "f32 neg", "SIGABRT", "torch-negative-strides")
    refused = [(R, "jax", f"p{i}", "int8", "BufferError: no", "") for i in range(7)]
    lines, unknown = _matrix_report.closing_report(
        _doc(known, *refused, (_matrix_report.ZERO_COPY, "jax", "numpy", "int8", "", ""))
    )
    assert not unknown
    text = "\n".join(lines)
    assert "crashed in torch (1): SIGABRT; known limitation: torch aborts" in text
    assert "docs/limitations.md#torch-negative-strides" in text
    assert "refused in jax (7): BufferError: no" in text
    assert "p0 [int8]" in text and "and 2 more" in text
    assert "zero-copy" not in text
    lines, unknown = _matrix_report.closing_report(
        _doc(known, (C, "jax", "numpy", "int8", "the process died with SIGSEGV", ""))
    )
    assert unknown and "NOT a known limitation" in "\n".join(lines)
    assert _matrix_report.closing_report(_doc())[0] == ["no cell crashed or was refused"]


def test_matrix_exits_non_zero_on_a_crash_that_is_not_a_known_limitation(monkeypatch, capsys):
    def fake_generate(**kwargs):
        cell = {
            "status": _matrix_report.CRASHED,
            "consumer": "numpy",
            "producer": "numpy",
            "case": "int8 1-D",
            "reason": "the process died with SIGSEGV in consume",
            "whose": "numpy",
        }
        cell["see"] = _matrix_report._limitation(cell) or ""
        return {"cells": [cell], "consumers": ["numpy"], "totals": _matrix_report.totals([cell])}

    monkeypatch.setattr(_matrix, "generate", fake_generate)
    assert _matrix.main(["--quick"]) == _matrix.UNKNOWN_CRASH_STATUS
    out = capsys.readouterr().out
    assert "crashed in numpy (1): the process died with SIGSEGV" in out
    assert "NOT a known limitation" in out


def test_bench_refuses_a_directory_that_holds_files_and_names_it(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    (tmp_path / "kept.json").write_text("{}")
    proc = run_module("bench", "--quick", "--output", str(tmp_path), cwd=root)
    assert proc.returncode == 2
    assert str(tmp_path) in proc.stderr and "a new or an empty directory" in proc.stderr
    assert (tmp_path / "kept.json").read_text() == "{}"


def test_bench_default_output_is_a_new_directory_under_the_current_one(tmp_path, monkeypatch):
    from dlpackarray.cli import main as _cli

    monkeypatch.chdir(tmp_path)
    first = _cli._bench_output(None)
    assert os.path.dirname(first) == str(tmp_path)
    assert os.path.basename(first).startswith("dlpackarray-bench-")
    os.makedirs(first)
    (open(os.path.join(first, "x"), "w")).close()
    second = _cli._bench_output(None)
    assert second != first and not os.path.exists(second)
