"""Training run of a profile-guided build (CMakeLists.txt DLPACKARRAY_PGO, tools/pgo_wheel.sh).

Runs the exchanges users make most, each many times, against an instrumented install, so
that the final build lays those paths out together and moves what they never run (error
handling, other devices) out of their way.  Every route is first checked once for the
right values and for sharing the source's memory, so a training run is also a smoke test:
the exit status is non-zero when a route is wrong.

Needs NumPy; the Arrow routes run when pyarrow is installed and the torch routes when
torch is, otherwise they are reported as skipped.  Error paths are deliberately not
trained: the profile should mark them cold.

Usage: python tools/pgo_train.py [--rounds N] [--require ROUTE_GROUP ...]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import numpy as np

import dlpackarray
from dlpackarray import DLPackArray


class ArrowOnly:
    """Exposes only ``__arrow_c_array__``: DLPackArray's Arrow import."""

    def __init__(self, src):
        self.src = src

    def __arrow_c_array__(self, requested_schema=None):
        return self.src.__arrow_c_array__(requested_schema)


def _sources() -> list[np.ndarray]:
    """The layouts exchanged most: 1-D of common dtypes, 2-D C and Fortran order, a
    strided slice, a scalar."""
    rng = np.random.default_rng(0)
    out = [rng.standard_normal(n) for n in (1, 16, 1024)]
    out += [np.arange(256, dtype=dt) for dt in (np.float32, np.int64, np.int32, np.uint8)]
    out.append(np.arange(64) % 2 == 0)
    out.append(rng.standard_normal((32, 16)).astype(np.float32))
    out.append(np.asfortranarray(rng.standard_normal((16, 8))))
    out.append(np.arange(1024.0)[::4])
    out.append(np.array(3.5))
    return out


def _shares(result, source: np.ndarray) -> bool:
    r = np.asarray(result)
    return r.size == 0 or np.shares_memory(r, source)


def _numpy_routes() -> dict[str, Callable[[np.ndarray], object]]:
    return {
        "wrap": DLPackArray,
        "wrap a DLPackArray": lambda x: DLPackArray(DLPackArray(x)),
        "wrap a memoryview": lambda x: DLPackArray(memoryview(x)) if x.flags.c_contiguous else x,
        "dlpack versioned": lambda x: np.from_dlpack(DLPackArray(x)),
        "np.asarray": lambda x: np.asarray(DLPackArray(x)),
        "memoryview": lambda x: memoryview(DLPackArray(x)),
        "dlpackarray.from_dlpack": lambda x: dlpackarray.from_dlpack(x),
    }


def _check_and_run(name: str, route, sources, rounds: int, failures: list[str]) -> None:
    for x in sources:
        try:
            got = route(x)
            if isinstance(got, memoryview):
                got = np.asarray(got)
            if not np.array_equal(np.asarray(got), x) or not _shares(got, x):
                failures.append(f"{name}: wrong values or a copy for {x.dtype}{x.shape}")
        except Exception as e:  # noqa: BLE001 -- reported, the run goes on
            failures.append(f"{name}: {type(e).__name__}: {e} for {x.dtype}{x.shape}")
            return
    for _ in range(rounds):
        for x in sources:
            route(x)


def _producer_calls(sources, rounds: int) -> None:
    """The producer side alone, as consumers call it (capsules dropped unconsumed)."""
    arrays = [DLPackArray(x) for x in sources]
    for _ in range(rounds):
        for d in arrays:
            d.__dlpack_device__()
            d.__dlpack__(max_version=(1, 3))
            d.__dlpack__()
            d.__dlpack__(max_version=(1, 0), dl_device=None, copy=None)
            _ = d.__array_interface__
            _ = (d.shape, d.dtype, d.ndim, d.size)


def _arrow_routes(pa, failures: list[str], rounds: int) -> None:
    values = [np.arange(n, dtype=dt) for n in (1, 256, 4096) for dt in (np.float32, np.int64)]
    for name, route in {
        "pa.array(DLPackArray)": lambda x: pa.array(DLPackArray(x)).to_numpy(),
        "DLPackArray(pa_array)": lambda x: DLPackArray(pa.array(x)),
        "np.asarray(DLPackArray(pa_array))": lambda x: np.asarray(DLPackArray(pa.array(x))),
        "DLPackArray(arrow capsules)": lambda x: DLPackArray(ArrowOnly(pa.array(x))),
        "pa.chunked_array(DLPackArray)": lambda x: pa.chunked_array(DLPackArray(x)),
    }.items():
        for x in values:
            try:
                got = np.asarray(route(x))
                if not np.array_equal(got, x):
                    failures.append(f"{name}: wrong values for {x.dtype}{x.shape}")
            except Exception as e:  # noqa: BLE001
                failures.append(f"{name}: {type(e).__name__}: {e}")
                break
    ready = [(pa.array(x), DLPackArray(x), ArrowOnly(pa.array(x))) for x in values]
    for _ in range(rounds):
        for pa_array, d, arrow_only in ready:
            pa.array(d)
            DLPackArray(pa_array)
            np.asarray(DLPackArray(pa_array))
            DLPackArray(arrow_only)
    cells = np.arange(16 * 8 * 8, dtype=np.float32).reshape(16, 8, 8)
    try:
        fst = pa.FixedShapeTensorArray.from_numpy_ndarray(cells)
        if not np.array_equal(np.asarray(DLPackArray(fst)), cells):
            failures.append("fixed-shape tensor import: wrong values")
        exported = pa.array(DLPackArray(cells))
        if not np.array_equal(exported.to_numpy_ndarray(), cells):
            failures.append("fixed-shape tensor export: wrong values")
    except Exception as e:  # noqa: BLE001
        failures.append(f"fixed-shape tensor: {type(e).__name__}: {e}")
        return
    for _ in range(max(1, rounds // 4)):
        DLPackArray(fst)
        pa.array(DLPackArray(cells))


def _torch_routes(torch, failures: list[str], rounds: int) -> None:
    x = np.arange(1024, dtype=np.float32)
    t = torch.from_dlpack(DLPackArray(x))
    if not np.array_equal(t.numpy(), x) or t.data_ptr() != x.ctypes.data:
        failures.append("torch.from_dlpack(DLPackArray): wrong values or a copy")
    if np.asarray(DLPackArray(t)).ctypes.data != t.data_ptr():
        failures.append("DLPackArray(tensor): a copy")
    d = DLPackArray(x)
    for _ in range(rounds):
        torch.from_dlpack(d)
        DLPackArray(t)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--rounds", type=int, default=1000, help="repetitions of each route over every source"
    )
    p.add_argument(
        "--require",
        nargs="*",
        default=[],
        choices=["arrow", "torch"],
        help="fail instead of skipping when this group's library is missing",
    )
    args = p.parse_args(argv)
    failures: list[str] = []
    sources = _sources()
    ran = []
    for name, route in _numpy_routes().items():
        _check_and_run(name, route, sources, args.rounds, failures)
        ran.append(name)
    _producer_calls(sources, args.rounds)
    ran.append("producer calls")
    for group, module, run in (
        ("arrow", "pyarrow", _arrow_routes),
        ("torch", "torch", _torch_routes),
    ):
        try:
            lib = __import__(module)
        except ImportError:
            if group in args.require:
                failures.append(f"{group}: {module} is not installed")
            print(f"pgo_train: {group} routes skipped ({module} not installed)")
            continue
        run(lib, failures, args.rounds)
        ran.append(group)
    print(f"pgo_train: {args.rounds} rounds; trained: {', '.join(ran)}")
    for f in failures:
        print(f"pgo_train: FAILED {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
