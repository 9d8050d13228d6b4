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
from collections import Counter
from collections.abc import Sequence

from dlpackarray.cli.packages import install_names

ZERO_COPY = "zero-copy"
COPIED = "copied"
REFUSED = "refused"
CRASHED = "crashed"
WRONG = "wrong"
NA = "n/a"
STATUSES = (ZERO_COPY, COPIED, REFUSED, CRASHED, WRONG)

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

#: Known consumer limitations (docs/limitations.md targets), matched on finished cells.
LIMITATIONS = {
    "torch-negative-strides": "torch aborts on negative strides",
    "torch-read-only": "torch ignores READ_ONLY",
    "tvm-ffi-read-only": "tvm-ffi ignores READ_ONLY",
    "legacy-capsule-consumers": "legacy-capsule consumers refuse read-only data",
    "jax-unaligned": "JAX copies unaligned data",
}


def _limitation(cell: dict) -> str | None:
    c, case, st = cell["consumer"], cell["case"], cell["status"]
    if c == "torch" and case.endswith("negative strides") and st == CRASHED:
        return "torch-negative-strides"
    if c in ("torch", "tvm-ffi") and cell.get("readonly") and st == ZERO_COPY:
        return f"{c}-read-only"
    if st == REFUSED and "legacy" in cell["reason"] and cell["whose"] == c:
        return "legacy-capsule-consumers"
    if c == "jax" and case.endswith("unaligned") and st == COPIED:
        return "jax-unaligned"
    return None


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


def totals(cells: list) -> dict:
    counts = Counter(c["status"] for c in cells)
    return {s: counts.get(s, 0) for s in STATUSES}


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


# -- rendering -------------------------------------------------------------------------------

# Words and glyphs the documentation site's fonts have: an emoji renders as an empty box
# where no emoji font is installed (tests/docs/test_docs_glyphs.py).
_SYMBOL = {ZERO_COPY: "✓", COPIED: "C", REFUSED: "✗", CRASHED: "CRASH", WRONG: "!"}
_FAULTY = "FAIL"  # a summary cell's mark: one of its cells crashed or gave a wrong result


def _label(name: str) -> str:
    # Markdown would read __array_interface__ as bold.
    return f"`{name}`" if "_" in name else name


def render_markdown(doc: dict) -> str:
    """The documentation page (docs/interop.md) for a matrix document."""
    cells = doc["cells"]
    t = doc["totals"]
    by = {(c["consumer"], c["producer"], c["case"]): c for c in cells}
    lines = [
        "<!-- Generated by `python -m dlpackarray matrix --write docs`; do not edit. -->",
        "",
        "(interop-matrix)=",
        "# Interop matrix",
        "",
        "Every producer's object is wrapped in `DLPackArray` and handed to every consumer, "
        "each cell in a worker process that a crash cannot take the run down with. "
        "Symbols: ✓ zero-copy (pointer equality with the producer's memory), C copied, "
        f"✗ refused, {_SYMBOL[CRASHED]} crashed, ! wrong result ({_FAULTY} in the summary: "
        "a cell of that pair crashed or was wrong); a blank cell is a case the producer cannot "
        "express. Each failure names whose limitation it is; the known consumer "
        "limitations are explained in {ref}`known-limitations`. "
        "`interop.json` next to this page holds the same data.",
        "",
        f"**Totals: {t[ZERO_COPY]} zero-copy, {t[COPIED]} copied, {t[REFUSED]} refused, "
        f"{t[CRASHED]} crashed, {t[WRONG]} wrong** ({len(cells)} cells; "
        f"{doc['not_applicable']} producer/case pairs not expressible).",
        "",
        "Versions: "
        + ", ".join(f"{k} {v}" for k, v in doc["versions"].items() if v is not None)
        + ".",
        "",
        "## Summary (zero-copy / cells)",
        "",
        "| producer \\ consumer | " + " | ".join(doc["consumers"]) + " |",
        "|---|" + "---|" * len(doc["consumers"]),
    ]
    for p in doc["producers"]:
        row = []
        for c in doc["consumers"]:
            mine = [x for x in cells if x["producer"] == p and x["consumer"] == c]
            zc = sum(x["status"] == ZERO_COPY for x in mine)
            bad = sum(x["status"] in (CRASHED, WRONG) for x in mine)
            row.append(f"{zc}/{len(mine)}" + (f" {_FAULTY}" if bad else "") if mine else "")
        lines.append(f"| {_label(p)} | " + " | ".join(row) + " |")
    from dlpackarray.cli import matrix_cells as defs

    calls = {c.name: c.call for c in defs.CONSUMERS}
    for c in doc["consumers"]:
        lines += ["", f"## Into {c}: `{calls.get(c, c)}`", ""]
        lines.append("| case | " + " | ".join(_label(p) for p in doc["producers"]) + " |")
        lines.append("|---|" + "---|" * len(doc["producers"]))
        notes: dict = {}
        for k in doc["cases"]:
            row = []
            for p in doc["producers"]:
                cell = by.get((c, p, k))
                if cell is None:
                    row.append("")
                    continue
                mark = _SYMBOL[cell["status"]]
                if cell["status"] != ZERO_COPY or cell["see"]:
                    key = (cell["status"], cell["whose"], cell["reason"], cell["see"])
                    number = notes.setdefault(key, len(notes) + 1)
                    mark += f" {number}"
                row.append(mark)
            lines.append(f"| {k} | " + " | ".join(row) + " |")
        if notes:
            lines.append("")
            for (status, whose, reason, see), number in notes.items():
                text = f"{number}. {status}"
                if whose:
                    text += f" ({whose})"
                text += f": {reason.replace('|', '/')}"
                if see:
                    text += f" — see {{ref}}`{LIMITATIONS[see]} <{see}>`"
                lines.append(text)
    return "\n".join(lines) + "\n"


def summary_table(doc: dict) -> str:
    """Plain-text totals per consumer, for the terminal."""
    from dlpackarray.cli.matrix_cells import CONSUMER_BY_NAME

    header = f"{'consumer':<12}" + "".join(f"{s:>11}" for s in STATUSES)
    lines = [header]
    missing = doc.get("not_installed", {}).get("consumers", [])
    for c in doc["consumers"]:
        if c in missing:
            # No cell ran: zeros would read as "ran and never worked".
            hint = " ".join(install_names([CONSUMER_BY_NAME[c].library]))
            lines.append(f"{c:<12}{'not installed':>11} (pip install {hint})")
            continue
        mine = totals([x for x in doc["cells"] if x["consumer"] == c])
        lines.append(f"{c:<12}" + "".join(f"{mine[s]:>11}" for s in STATUSES))
    t = doc["totals"]
    lines.append(f"{'total':<12}" + "".join(f"{t[s]:>11}" for s in STATUSES))
    producers = doc.get("not_installed", {}).get("producers", [])
    if producers:
        from dlpackarray.cli.matrix_cells import PRODUCER_BY_NAME

        hint = " ".join(install_names([PRODUCER_BY_NAME[p].library for p in producers]))
        lines.append(f"producers not installed: {', '.join(producers)} (pip install {hint})")
    return "\n".join(lines)


#: Exit status of ``matrix`` when a cell crashed for a reason not in LIMITATIONS.
UNKNOWN_CRASH_STATUS = 3
_LISTED_PER_REASON = 5


def closing_report(doc: dict) -> tuple[list[str], bool]:
    """The crashed and refused cells, grouped by consumer and reason, each group with its
    documented reason (the known limitation it matches, docs/limitations.md) or the
    consumer's own error; and whether a crash matched no known limitation.  Every crashed
    cell is listed; a refusal group longer than a few cells is summarised."""
    groups: dict[tuple, list[str]] = {}
    for cell in doc["cells"]:
        if cell["status"] in (CRASHED, REFUSED):
            key = (cell["status"], cell["consumer"], cell["reason"], cell["see"])
            groups.setdefault(key, []).append(f"{cell['producer']} [{cell['case']}]")
    lines = []
    unknown_crash = False
    for (status, consumer, reason, see), where in sorted(groups.items()):
        if see:
            why = f"known limitation: {LIMITATIONS[see]} (docs/limitations.md#{see})"
        elif status == CRASHED:
            why = "NOT a known limitation: please report it"
            unknown_crash = True
        else:
            why = "the consumer's refusal, as it words it"
        lines.append(f"{status} in {consumer} ({len(where)}): {reason}; {why}")
        if status == CRASHED:
            # Crashes are rare and each one matters: every cell, one per line.
            lines += [f"    {cell}" for cell in where]
            continue
        shown = ", ".join(where[:_LISTED_PER_REASON])
        if len(where) > _LISTED_PER_REASON:
            shown += f", and {len(where) - _LISTED_PER_REASON} more (--json lists every cell)"
        lines.append(f"    {shown}")
    if not lines:
        lines.append("no cell crashed or was refused")
    return lines, unknown_crash


def _comparable(cells: list, with_reasons: bool) -> list:
    keys = ("producer", "consumer", "case", "status", "whose") + (
        ("reason", "see") if with_reasons else ()
    )
    rows = []
    for c in cells:
        row = dict(c)
        if row.get("unstable") and row["status"] in (ZERO_COPY, COPIED):
            row.update(status="accepted", whose="", reason="", see="")
        rows.append(tuple(row.get(k, "") for k in keys))
    return sorted(rows)


def check(doc: dict, folder: str) -> list[str]:
    """Differences between a fresh matrix and the committed ``folder/interop.{json,md}``."""
    problems = []
    try:
        with open(os.path.join(folder, "interop.json")) as f:
            committed = json.load(f)
        with open(os.path.join(folder, "interop.md")) as f:
            page = f.read()
    except (OSError, ValueError) as exc:
        return [f"cannot read the committed matrix: {exc}"]
    if render_markdown(committed) != page:
        problems.append("interop.md is not the page rendered from interop.json (edited by hand?)")
    same_versions = committed.get("versions") == doc["versions"]
    old = _comparable(committed.get("cells", []), same_versions)
    new = _comparable(doc["cells"], same_versions)
    if old != new:
        gone = sorted(set(old) - set(new))
        came = sorted(set(new) - set(old))
        problems.append(
            f"the matrix changed: {len(gone)} committed cells differ from {len(came)} fresh ones"
        )
        problems += [f"  committed: {x}" for x in gone[:10]]
        problems += [f"  now:       {x}" for x in came[:10]]
    return problems


def write(doc: dict, folder: str) -> list[str]:
    os.makedirs(folder, exist_ok=True)
    paths = [os.path.join(folder, "interop.json"), os.path.join(folder, "interop.md")]
    with open(paths[0], "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False, ensure_ascii=False)
        f.write("\n")
    with open(paths[1], "w") as f:
        f.write(render_markdown(doc))
    return paths


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
