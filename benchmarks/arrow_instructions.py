"""Instructions per operation of each B9 route, counted by callgrind.

``python -m benchmarks.arrow_instructions [LABEL ...]`` runs each statement
``N`` times under ``valgrind --tool=callgrind`` and once more with the same
setup and no iteration; the difference divided by ``N`` is the route's cost in
instructions, which a loaded machine does not disturb (wall times there swing
by 2x between rounds).  Needs valgrind; the floor module is compiled as in
B9.  ``--json FILE`` writes the figures; ``--ours`` counts dlpackarray's
statements only (to compare two builds); ``--layouts`` counts each statement
in three heap layouts (see LAYOUTS) and reports the median; ``--icache``
counts instructions and simulated L1 instruction-cache misses per operation
instead (cachegrind, the whole process).

Each route lists ours, the user's alternative and the floor, then any
reference rows (printed under the route, each with ours over it).  The DLPack
import routes' floor is ``b9_floor.DLPackBufferWrap``: ``__dlpack__`` called
once from C, the capsule kept, the buffer protocol answered from the
DLTensor.  ``np.asarray`` reads a wrapper through the buffer protocol first,
so ``np.asarray(DLPackBufferWrap(pa_array))`` is that route's floor;
``np.from_dlpack(pa_array)`` (NumPy's own DLPack import, no wrapper) and
``pa_array.__dlpack__(...)`` (the producer alone) are reference rows, not
floors.  ``b9_floor.DLPackSpecWrap`` is the same wrapper doing what the DLPack
Python spec asks of a consumer that is not host-only (``__dlpack_device__``
first, then the capsule's name, major version, device and dtype checked): its
rows separate the spec's own cost from what dlpackarray adds beyond it.
``b9_floor.ArrowSpecWrap`` is the Arrow capsules' counterpart: the checks the C
data interface leaves to a consumer that reads a primitive column as an array
(format, buffer and child counts, offset and length, nulls), the struct moved
into the object, the buffer protocol answered.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

N = 2000
SETUP = """
import importlib.util
import numpy as np, pyarrow as pa
if {polars}:
    import polars as pl
from benchmarks.cases_arrow import ArrowOnly
from dlpackarray import DLPackArray
spec = importlib.util.spec_from_file_location("b9_floor", {floor_path!r})
F = importlib.util.module_from_spec(spec)
spec.loader.exec_module(F)
a = np.ones(256, dtype=np.float32)
d = DLPackArray(a)
p = F.Producer(a)
Producer = F.Producer
DLPackBufferWrap = F.DLPackBufferWrap
DLPackSpecWrap = F.DLPackSpecWrap
ArrowSpecWrap = F.ArrowSpecWrap
consume_arrow = F.consume_arrow
consume_arrow_device = F.consume_arrow_device
pa_array = pa.array(a)
arrow_only = ArrowOnly(pa_array)
x3 = np.ones((16, 8, 8), dtype=np.float32)
fst = pa.FixedShapeTensorArray.from_numpy_ndarray(x3)
TensorProducer = F.TensorProducer
"""
# route -> [(label, statement)]: ours first, then the alternative, then the
# floor, then any reference rows.
ROUTES = {
    "pa.array": [
        ("dlpackarray", "pa.array(d)"),
        ("numpy", "pa.array(a)"),
        ("floor", "pa.array(p)"),
    ],
    "pa.array (wrap + export)": [
        ("dlpackarray", "pa.array(DLPackArray(a))"),
        ("numpy", "pa.array(a)"),
        ("floor", "pa.array(Producer(a))"),
    ],
    "pl.Series": [
        ("dlpackarray", "pl.Series(d)"),
        ("numpy", "pl.Series(a)"),
        ("floor", "pl.Series(p)"),
    ],
    "pl.from_arrow": [
        ("dlpackarray", "pl.from_arrow(d)"),
        ("numpy", "pl.from_numpy(a)"),
        ("floor", "pl.from_arrow(p)"),
    ],
    "import (DLPack route)": [
        ("dlpackarray", "DLPackArray(pa_array)"),
        ("pyarrow", "pa_array.to_numpy(zero_copy_only=True)"),
        ("floor", "DLPackBufferWrap(pa_array)"),
        ("spec consumer floor", "DLPackSpecWrap(pa_array)"),
        ("pa_array.__dlpack__", "pa_array.__dlpack__(max_version=(1, 3))"),
    ],
    "import (Arrow capsules)": [
        ("dlpackarray", "DLPackArray(arrow_only)"),
        ("pyarrow", "pa_array.to_numpy(zero_copy_only=True)"),
        ("floor", "consume_arrow(arrow_only)"),
        ("spec consumer floor", "ArrowSpecWrap(arrow_only)"),
    ],
    "np.asarray(DLPackArray(pa_array))": [
        ("dlpackarray", "np.asarray(DLPackArray(pa_array))"),
        ("pyarrow", "pa_array.to_numpy(zero_copy_only=True)"),
        ("floor", "np.asarray(DLPackBufferWrap(pa_array))"),
        ("spec consumer floor", "np.asarray(DLPackSpecWrap(pa_array))"),
        ("np.from_dlpack(pa_array)", "np.from_dlpack(pa_array)"),
    ],
    "tensor import": [
        ("dlpackarray", "DLPackArray(fst)"),
        ("pyarrow", "fst.to_numpy_ndarray()"),
        ("floor", "consume_arrow(fst)"),
        ("device-aware floor", "consume_arrow_device(fst)"),
    ],
    "tensor export": [
        ("dlpackarray", "pa.array(DLPackArray(x3))"),
        ("pyarrow", "pa.FixedShapeTensorArray.from_numpy_ndarray(x3)"),
        ("floor", "pa.array(TensorProducer(x3))"),
    ],
    "tensor to numpy": [
        ("dlpackarray", "np.asarray(DLPackArray(fst))"),
        ("pyarrow", "fst.to_numpy_ndarray()"),
        ("floor", "consume_arrow(fst)"),
    ],
}


_cache: dict = {}


# Heap layouts: K small strings allocated before any import shift where the
# modules' interned attribute names land.  CPython's type attribute cache
# indexes (version tag, name address): two hot lookups whose entries collide
# miss on every call, adding ~330 instructions each, and which ones collide
# moves with the layout (and with any change to the code that allocates
# before them).  The median over layouts is the robust figure.
LAYOUTS = (0, 7, 29)


def _per_op(stmt: str, layouts=(0,)) -> list:
    out = []
    for pad in layouts:
        key = (stmt, pad)
        if key not in _cache:
            _cache[key] = (_count(stmt, N, pad) - _count(stmt, 0, pad)) / N
        out.append(_cache[key])
    return out


def _script(stmt: str, n: int, pad: int) -> str:
    from benchmarks.cases_arrow import floor_module

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # Built once, here: the children only load it.
    setup = SETUP.format(polars="pl." in stmt, floor_path=floor_module().__file__)
    return (
        f"_pad = ['%024d' % i for i in range({pad})]\n"
        f"import sys; sys.path.insert(0, {root!r})\n{setup}\n"
        f"for _ in range(200): {stmt}\n"  # warm: caches, first-use paths
        f"for _ in range({n}): {stmt}\n"
    )


def _icache(stmt: str, n: int) -> tuple[int, int]:
    """(instructions, L1 instruction-cache misses) of the whole process, from
    cachegrind's cache simulation (the host's L1i geometry)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=yes",
             f"--cachegrind-out-file={out}", sys.executable, "-c", _script(stmt, n, 0)],
            capture_output=True, text=True, check=True, env=env,
        )  # fmt: skip
        with open(out) as f:
            counts = read_cachegrind_summary(f)
    return counts["Ir"], counts["I1mr"]


def read_cachegrind_summary(lines) -> dict:
    """Event name -> total, from a cachegrind output file's ``events:`` and
    ``summary:`` lines."""
    events = summary = None
    for line in lines:
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:"):
            summary = [int(v) for v in line.split()[1:]]
    if events is None or summary is None or len(events) != len(summary):
        raise RuntimeError("no matching events and summary lines in cachegrind's output")
    return dict(zip(events, summary, strict=True))


def icache_per_op(stmt: str) -> tuple[float, float]:
    """Instructions and simulated L1i misses per operation of ``stmt``."""
    ir1, mr1 = _icache(stmt, N)
    ir0, mr0 = _icache(stmt, 0)
    return (ir1 - ir0) / N, (mr1 - mr0) / N


def _count(stmt: str, n: int, pad: int = 0) -> int:
    script = _script(stmt, n, pad)
    # Only the calling thread counts: OpenBLAS's and the allocators'
    # background threads spin for as long as the run lasts, which made the
    # process totals swing by 10% between runs; a fixed hash seed keeps dict
    # probes the same from run to run.
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--separate-threads=yes",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-c",
                script,
            ],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        with open(out + "-01") as f:
            for line in f:
                if line.startswith("totals:") or line.startswith("summary:"):
                    return int(line.split()[1])
    raise RuntimeError("no totals line in callgrind's output for the main thread")


def main(argv: list[str]) -> dict:
    out_file = None
    if "--json" in argv:
        i = argv.index("--json")
        out_file = argv[i + 1]
        argv = argv[:i] + argv[i + 2 :]
    if "--icache" in argv:
        # Wall time of a route grows faster than its instruction count once the
        # code it runs per call no longer fits the L1 instruction cache: a
        # straight-line path of a few thousand instructions is ~16 KB of code.
        routes = [a for a in argv if a != "--icache"]
        results = {}
        for route, stmts in ROUTES.items():
            if routes and route not in routes:
                continue
            for label, stmt in stmts:
                ir, misses = icache_per_op(stmt)
                results[stmt] = {"instructions": ir, "l1i_misses": misses}
                print(f"{route:34s} {label:22s} {ir:8.0f} instr  {misses:6.1f} L1i misses"
                      f"  {stmt}", flush=True)  # fmt: skip
        if out_file:
            with open(out_file, "w") as f:
                json.dump(results, f, indent=1)
        return results
    only_ours = "--ours" in argv
    layouts = LAYOUTS if "--layouts" in argv else (0,)
    argv = [a for a in argv if a not in ("--ours", "--layouts")]
    routes = {k: v for k, v in ROUTES.items() if not argv or k in argv}
    results: dict = {}
    for route, stmts in routes.items():
        row = {}
        for label, stmt in stmts:
            if only_ours and label != "dlpackarray":
                continue
            counts = _per_op(stmt, layouts)
            row[label] = {
                "stmt": stmt,
                "instructions": statistics.median(counts),
                "layouts": dict(zip(map(str, layouts), counts, strict=True)),
            }
        if only_ours:
            results[route] = row
            counts = row["dlpackarray"]["layouts"].values()
            print(
                f"{route:34s} ours {row['dlpackarray']['instructions']:8.0f}"
                f"  (layouts {min(counts):.0f}-{max(counts):.0f})",
                flush=True,
            )
            continue
        ours = row["dlpackarray"]["instructions"]
        alt = row[stmts[1][0]]["instructions"]
        fl = row["floor"]["instructions"]
        results[route] = row
        spread = ""
        if len(layouts) > 1:
            o, f = row["dlpackarray"]["layouts"].values(), row["floor"]["layouts"].values()
            spread = f"  (layouts: ours {min(o):.0f}-{max(o):.0f}, floor {min(f):.0f}-{max(f):.0f})"
        print(
            f"{route:34s} ours {ours:8.0f}  alternative {alt:8.0f}  floor {fl:8.0f}  "
            f"ours/floor {ours / fl:5.2f}  ours/alt {ours / alt:5.2f}  floor/alt {fl / alt:5.2f}"
            + spread,
            flush=True,
        )
        for label, _ in stmts[3:]:
            ref = row[label]["instructions"]
            print(f"{'':34s} {label:28s} {ref:8.0f}  ours/this {ours / ref:5.2f}", flush=True)
    if out_file:
        with open(out_file, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
