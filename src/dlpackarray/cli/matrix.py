"""The interop matrix: every producer through ``DLPackArray`` into every consumer.

``python -m dlpackarray matrix [--quick] [--write DIR] [--check DIR]``

Cells run in worker processes, two at a time; a worker takes one consumer's cells at a
time and stays alive for the next consumer, so it imports each library once (importing
torch and JAX is most of a quick run's cost).  A worker announces each stage of a cell
before running it and reports the cell's result as soon as it has it; when a worker dies
(an abort inside a consumer) the cell it was in is recorded as ``crashed``, naming the
stage's library, and a fresh worker carries on with the remaining cells.  So an abort costs
one cell.

Classification uses facts that do not change between runs (no timings, addresses only
compared, never recorded), and the output is sorted, so the committed page can be checked
for staleness: ``--check DIR`` regenerates the cells and compares them with
``DIR/interop.json`` (the reasons too when the library versions are the ones recorded there,
the status and whose limitation otherwise), and ``DIR/interop.md`` with the page rendered
from that JSON.

This module runs the cells and builds the matrix document; the statuses, the known
limitations a cell matches and everything printed or written from the document are in
:mod:`dlpackarray.cli.matrix_report`.  ``python -m dlpackarray.cli.matrix`` is the worker
process itself.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from dlpackarray.cli.matrix_report import (
    COPIED,
    CRASHED,
    NA,
    REFUSED,
    WRONG,
    ZERO_COPY,
    _limitation,
    check,
    closing_report,
    summary_table,
    totals,
    write,
)

_MARK = "@@dla-matrix "
CELL_TIMEOUT_S = 120.0

#: Library import names as the page names them.
_LIBRARY_NAMES = {
    "torch": "torch",
    "jax": "jax",
    "jaxlib": "jax",
    "numpy": "numpy",
    "pyarrow": "pyarrow",
    "polars": "polars",
    "duckdb": "duckdb",
    "tvm_ffi": "tvm-ffi",
    "nanoarrow": "nanoarrow",
    "PIL": "Pillow",
    "dlpack": "pydlpack",
}


# -- worker side ----------------------------------------------------------------------------


#: Longest reason a cell records (the page's footnotes stay one readable line).
REASON_LIMIT = 160


def _clean(text: str, limit: int | None = REASON_LIMIT) -> str:
    """First line of a message, addresses masked (stable from run to run) and, past
    ``limit`` characters, cut between two words with " ..." after the last whole one (a
    first word longer than the limit is kept whole)."""
    line = (text.strip().splitlines() or [""])[0]
    line = re.sub(r"0x[0-9a-fA-F]+", "0x…", line)
    line = re.sub(r" at 0x…", "", line)
    if limit is None or len(line) <= limit:
        return line
    cut = line.rfind(" ", 0, limit - 3)
    if cut <= 0:
        cut = line.find(" ")
        if cut < 0:
            return line
    return line[:cut].rstrip() + " ..."


def _reason(exc: BaseException) -> str:
    return _clean(f"{type(exc).__name__}: {exc}")


def _origin(exc: BaseException) -> str | None:
    """Library of the innermost traceback frame outside this generator (None: C code)."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename.replace("\\", "/")
        tb = tb.tb_next
        # run_cell's own frame and the producers' and consumers' code sit between the
        # catch and the library that raised; they are the harness, not a library, though
        # their path names dlpackarray.  (Nothing in matrix_report.py runs inside a cell.)
        if path.endswith(("/cli/matrix.py", "/cli/matrix_cells.py")):
            continue
        if "/dlpackarray/" in path or path.startswith("dlpackarray/"):
            found = "dlpackarray"
            continue
        for module, name in _LIBRARY_NAMES.items():
            if f"/{module}/" in path:
                found = name
                break
    return found


def _installed(module: str) -> bool:
    import importlib.util

    if not module:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def run_cell(producer_name: str, consumer_name: str, case_name: str, stage=lambda s: None):
    """Run one cell in this process; returns its result dict (``status`` may be ``n/a``)."""
    from dlpackarray.cli import matrix_cells as cells

    producer = cells.PRODUCER_BY_NAME[producer_name]
    consumer = cells.CONSUMER_BY_NAME[consumer_name]
    case = cells.CASE_BY_NAME[case_name]
    out: dict = {"producer": producer_name, "consumer": consumer_name, "case": case_name}

    def done(status, whose="", reason=""):
        out.update(status=status, whose=whose, reason=reason)
        return out

    for lib, who in ((producer.library, producer_name), (consumer.library, consumer_name)):
        if not _installed(lib):
            return done(NA, who, f"{lib} is not installed")
    needs_ml = case.dtype in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "int4")
    if not _installed("numpy") or (needs_ml and not _installed("ml_dtypes")):
        return done(NA, "", "the reference array needs numpy (and ml_dtypes)")
    stage("produce")
    try:
        ref = case.build()
        obj = producer.make(case, ref)
        try:
            src = cells.source_addr(producer_name, obj, ref)
        except Exception:
            src = None
    except cells.NotApplicable as exc:
        return done(NA, producer_name, str(exc))
    except Exception as exc:
        return done(NA, producer_name, _reason(exc))

    from dlpackarray import DLPackArray

    stage("wrap")
    try:
        a = DLPackArray(obj)
    except Exception as exc:
        whose = _origin(exc) or producer_name
        if "void/structured" in str(exc) or "cannot represent" in str(exc):
            # The producer's protocol describes the dtype only as raw bytes ('<V2') or as
            # an ambiguous typestr ('<f1': which float8?).
            whose = producer_name
        return done(REFUSED, whose, _reason(exc))
    first = a.data_ptr + a.byte_offset
    out["readonly"] = bool(a.readonly)
    # Memory the generator cannot align (Pillow's fresh bytes): JAX's copy-or-share then
    # depends on the heap, so the staleness check compares only accepted-or-not there.
    out["unstable"] = src is None and ref.size > 0 and consumer_name == "jax"
    stage("consume")
    if os.environ.get("DLPACKARRAY_MATRIX_ABORT_CASE") == case_name:
        os.abort()  # test hook: tests/cli/test_cli.py::test_a_crash_costs_one_cell
    try:
        result, addr, as_numpy = consumer.consume(a)
    except Exception as exc:
        whose = _origin(exc) or consumer_name
        if whose == "dlpackarray" and "legacy" in str(exc):
            whose = consumer_name  # the consumer asked for a flagless legacy capsule
        if "has no Arrow equivalent" in str(exc):
            whose = "dlpackarray"  # raised by the Arrow export inside the consumer
        return done(REFUSED, whose, _reason(exc))
    if tuple(a.shape) != tuple(ref.shape) and consumer.library not in (
        "pyarrow",
        "polars",
        "duckdb",
    ):
        shape = tuple(getattr(result, "shape", ()))
        if shape != tuple(ref.shape):
            return done(WRONG, "dlpackarray", f"shape {tuple(a.shape)} != {tuple(ref.shape)}")
    if as_numpy is not None and as_numpy.size and as_numpy.dtype == ref.dtype:
        if as_numpy.tobytes() != ref.tobytes():
            return done(WRONG, consumer_name, "values differ from the source")
    if ref.size == 0:
        return done(ZERO_COPY, "", "size 0: nothing to copy")
    if src is not None and first != src:
        return done(COPIED, "dlpackarray", "DLPackArray copied the data on import")
    if addr is None:
        if consumer.library in ("pyarrow", "polars", "duckdb") and _arrow_export_copies(a):
            return done(
                COPIED, "dlpackarray", "Arrow cannot describe this layout: exported as a copy"
            )
        return done(COPIED, consumer_name, "the consumer's result has its own memory layout")
    if addr != first:
        if consumer.library in ("pyarrow", "polars", "duckdb") and _arrow_export_copies(a):
            return done(
                COPIED, "dlpackarray", "Arrow cannot describe this layout: exported as a copy"
            )
        return done(COPIED, consumer_name, "the consumer copied the data")
    return done(ZERO_COPY, "", "same memory (pointer equality)")


def _arrow_export_copies(a) -> bool:
    try:
        a.__arrow_c_array__(copy=False)
    except BufferError:
        return True
    except Exception:
        return False
    return False


def _worker_main() -> int:
    """``python -m dlpackarray.cli.matrix``: runs groups of cells, one JSON list per line of
    stdin, cell by cell, and says ``done`` after each group; exits at the end of stdin."""

    def emit(kind: str, payload) -> None:
        sys.stdout.write(_MARK + json.dumps([kind, payload]) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        if not line.strip():
            continue
        for index, (p, c, k) in enumerate(json.loads(line)):
            emit("start", index)
            try:
                result = run_cell(p, c, k, stage=lambda s, i=index: emit("stage", [i, s]))
            except Exception as exc:  # a bug in the generator itself: still one cell only
                result = {
                    "producer": p,
                    "consumer": c,
                    "case": k,
                    "status": WRONG,
                    "whose": "dlpackarray",
                    "reason": "generator error: " + _reason(exc),
                }
            emit("result", [index, result])
        emit("done", None)
    return 0


# -- orchestration ------------------------------------------------------------------------


def _worker_env() -> dict:
    env = dict(os.environ)
    # The folder holding the dlpackarray package (this file is dlpackarray/cli/matrix.py).
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    # Every cell sees the same libraries the same way: CPU JAX with 64-bit types, one
    # BLAS thread (the machine is shared), no GPU probing.
    env.update(JAX_PLATFORMS="cpu", JAX_ENABLE_X64="1", OPENBLAS_NUM_THREADS="1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return env


def _crash_reason(returncode: int | None) -> str:
    if returncode is None:
        return f"no result after {CELL_TIMEOUT_S:.0f} s (killed)"
    if returncode < 0:
        try:
            return f"the process died with {signal.Signals(-returncode).name}"
        except ValueError:
            return f"the process died with signal {-returncode}"
    return f"the process exited with status {returncode}"


class _Worker:
    """A worker process and the lines it prints; it runs one group of cells at a time and
    stays alive for the next group (its imports are paid once), until it dies or is closed."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dlpackarray.cli.matrix"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=_worker_env(),
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, cells: list) -> bool:
        """Hands ``cells`` over; False when the worker is already gone."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(cells) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        return True

    def close(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(timeout=CELL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _run_group(cells: list, report, workers: list | None = None) -> None:
    """Runs ``cells`` in a worker, restarting after each crash.

    ``workers`` holds the caller's live worker (at most one) between groups: a group
    reuses it and leaves its worker there; without it the worker is closed at the end.
    """
    from dlpackarray.cli import matrix_cells as defs

    own = workers is None
    held: list = [] if workers is None else workers
    pending = list(cells)
    while pending:
        worker = held.pop() if held else _Worker()
        if not worker.send(pending):
            worker.close()
            worker = _Worker()
            if not worker.send(pending):
                worker.close()
                raise RuntimeError("a matrix worker could not be started")
        current, current_stage, finished = None, "produce", 0
        timed_out = done = False
        while True:
            try:
                line = worker.lines.get(timeout=CELL_TIMEOUT_S)
            except queue.Empty:
                worker.proc.kill()
                timed_out = True
                break
            if line is None:
                break
            if not line.startswith(_MARK):
                continue
            kind, payload = json.loads(line[len(_MARK) :])
            if kind == "start":
                current, current_stage = payload, "produce"
            elif kind == "stage":
                current_stage = payload[1]
            elif kind == "result":
                report(payload[1])
                finished = payload[0] + 1
                current = None
            elif kind == "done":
                done = True
                break
        if done:
            if own:
                worker.close()
            else:
                held.append(worker)
            return
        worker.proc.wait()
        if current is None and finished >= len(pending):
            return
        if current is None:  # died between cells: retry the rest
            current = finished
        p, c, k = pending[current]
        whose = {"produce": p, "wrap": "dlpackarray", "consume": c}[current_stage]
        if whose == p:
            whose = _LIBRARY_NAMES.get(defs.PRODUCER_BY_NAME[p].library, p)
        reason = _crash_reason(None if timed_out else worker.proc.returncode)
        report(
            {
                "producer": p,
                "consumer": c,
                "case": k,
                "status": CRASHED,
                "whose": whose,
                "reason": f"{reason} in {current_stage}",
            }
        )
        pending = pending[current + 1 :]


def _progress(done: int, total: int, start: float, stream) -> None:
    width = 30
    filled = width * done // max(total, 1)
    bar = "#" * filled + "." * (width - filled)
    text = f"[{bar}] {done}/{total} cells ({time.monotonic() - start:.0f} s)"
    if stream.isatty():
        stream.write("\r" + text + ("\n" if done == total else ""))
    else:
        stream.write(text + "\n")
    stream.flush()


def generate(
    quick: bool = False,
    producers: Sequence[str] | None = None,
    consumers: Sequence[str] | None = None,
    cases: Sequence[str] | None = None,
    jobs: int = 2,
    progress=None,
) -> dict:
    """Runs the matrix and returns its JSON document (cells sorted, ``n/a`` ones dropped)."""
    from dlpackarray.cli import matrix_cells as defs

    p_names = list(producers or [p.name for p in defs.PRODUCERS])
    c_names = list(consumers or [c.name for c in defs.CONSUMERS])
    k_names = list(cases or (defs.QUICK_CASES if quick else [k.name for k in defs.CASES]))
    if quick and not producers:
        p_names = list(defs.QUICK_PRODUCERS)
    for names, known, what in (
        (p_names, defs.PRODUCER_BY_NAME, "producer"),
        (c_names, defs.CONSUMER_BY_NAME, "consumer"),
        (k_names, defs.CASE_BY_NAME, "case"),
    ):
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"unknown {what}(s) {unknown}; known: {', '.join(known)}")
    groups = [[[p, c, k] for p in p_names for k in k_names] for c in c_names]
    total = sum(len(g) for g in groups)
    results: list = []
    lock = threading.Lock()
    start = time.monotonic()
    step = max(1, total // 20)

    def report(cell: dict) -> None:
        with lock:
            results.append(cell)
            if progress is not None and (len(results) % step == 0 or len(results) == total):
                _progress(len(results), total, start, progress)

    work: queue.Queue = queue.Queue()
    for g in groups:
        work.put(g)

    def runner() -> None:
        # One worker per runner, reused from group to group: each worker process imports
        # the producers' and consumers' libraries once (torch and JAX dominate a quick run);
        # a crash still costs one cell and one fresh worker.
        workers: list = []
        try:
            while True:
                try:
                    group = work.get_nowait()
                except queue.Empty:
                    return
                _run_group(group, report, workers)
        finally:
            for worker in workers:
                worker.close()

    threads = [threading.Thread(target=runner) for _ in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    kept = []
    for cell in results:
        if cell["status"] == NA:
            continue
        cell["see"] = _limitation(cell) or ""
        kept.append(cell)
    kept.sort(key=lambda c: (c["consumer"], c["producer"], c["case"]))
    order = {"producers": p_names, "consumers": c_names, "cases": k_names}
    # The workers run this interpreter with this package first on the path, so what is
    # importable here is what the cells could import.
    missing = {
        "producers": [n for n in p_names if not _installed(defs.PRODUCER_BY_NAME[n].library)],
        "consumers": [n for n in c_names if not _installed(defs.CONSUMER_BY_NAME[n].library)],
    }
    return {
        "generator": "python -m dlpackarray matrix" + (" --quick" if quick else ""),
        "versions": _versions(),
        **order,
        "not_installed": missing,
        "not_applicable": sum(1 for c in results if c["status"] == NA),
        "totals": totals(kept),
        "cells": kept,
    }


def _versions() -> dict:
    import importlib.metadata
    import platform

    out: dict[str, str | None] = {"python": platform.python_version()}
    for dist in (
        "dlpackarray",
        "numpy",
        "ml_dtypes",
        "torch",
        "jax",
        "jaxlib",
        "apache-tvm-ffi",
        "pyarrow",
        "polars",
        "duckdb",
        "nanoarrow",
        "pydlpack",
        "pillow",
    ):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


# -- the command ---------------------------------------------------------------------------

#: Exit status of ``matrix`` when a cell crashed for a reason that is not a known limitation
#: (``LIMITATIONS`` in matrix_report.py).
UNKNOWN_CRASH_STATUS = 3


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m dlpackarray matrix",
        description="Run every producer through DLPackArray into every consumer and "
        "classify each cell: zero-copy, copied, refused or crashed.  Ends with the crashed "
        "and refused cells and the reason for each.",
        epilog=f"Exit status: {UNKNOWN_CRASH_STATUS} when a cell crashed for a reason that is "
        "not a known limitation (docs/limitations.md), 1 when --check finds the committed "
        "matrix stale, 2 for a usage error, 0 otherwise.",
    )
    parser.add_argument("--quick", action="store_true", help="a few cases only (under a minute)")
    parser.add_argument("--write", metavar="DIR", help="write DIR/interop.json and interop.md")
    parser.add_argument(
        "--check",
        metavar="DIR",
        help="exit 1 when DIR/interop.json / interop.md are stale (see docs/interop.md)",
    )
    parser.add_argument("--json", action="store_true", help="print the matrix as JSON")
    parser.add_argument("--producers", help="comma-separated producer names")
    parser.add_argument("--consumers", help="comma-separated consumer names")
    parser.add_argument("--cases", help="comma-separated case names")
    parser.add_argument("--jobs", type=int, default=2, help="workers at a time (default 2)")
    args = parser.parse_args(argv)

    def split(s):
        return [x.strip() for x in s.split(",") if x.strip()] if s else None

    try:
        doc = generate(
            quick=args.quick,
            producers=split(args.producers),
            consumers=split(args.consumers),
            cases=split(args.cases),
            jobs=args.jobs,
            progress=None if args.json else sys.stderr,
        )
    except ValueError as exc:
        parser.error(str(exc))
    if args.json:
        print(json.dumps(doc, indent=1, ensure_ascii=False))
    else:
        print(summary_table(doc))
    closing, unknown_crash = closing_report(doc)
    print(
        "\nCrashed and refused cells:", *closing, sep="\n", file=sys.stderr if args.json else None
    )
    status = UNKNOWN_CRASH_STATUS if unknown_crash else 0
    if args.write:
        for path in write(doc, args.write):
            print(f"wrote {path}", file=sys.stderr)
    if args.check:
        problems = check(doc, args.check)
        for line in problems:
            print(line, file=sys.stderr)
        if problems:
            print(
                f"the committed matrix in {args.check} is stale: run "
                f"`python -m dlpackarray matrix --write {args.check}` and commit the result",
                file=sys.stderr,
            )
            status = status or 1
        else:
            print(f"{args.check}/interop.md is up to date", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(_worker_main())
